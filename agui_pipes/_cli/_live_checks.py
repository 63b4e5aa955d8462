"""``verify URL``'s transport checks: recorded exchanges in, findings out.

Pure functions over :class:`~._live_exchange.Exchange` records, one per
transport rule group (``agui_pipes._protocol.transport_rules`` says what each
rule requires and why); the network part is ``_verify_live``'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from .._consumer.findings import Finding, Severity
from .._protocol.transport_rules import (
    BAD_BODY_JSON,
    BAD_BODY_STATUS,
    CACHE_CONTROL,
    CONTENT_TYPE,
    EVENT_ID_CONTINUITY,
    HTTP_STATUS,
    KEEPALIVE,
    NO_TRANSFORM,
    RESUME,
    UNCHECKED,
    X_ACCEL_BUFFERING,
)
from ._live_exchange import Exchange, Frame

__all__ = [
    "TERMINAL_TYPES",
    "bad_body_findings",
    "body_excerpt",
    "event_type",
    "id_findings",
    "keepalive_findings",
    "response_findings",
    "resume_findings",
    "unchecked",
]

TERMINAL_TYPES: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})
_EXCERPT: Final = 300


def unchecked(message: str) -> Finding:
    """A transport check that could not be made, and why (hygiene)."""
    return Finding(UNCHECKED, Severity.HYGIENE, message, None)


def body_excerpt(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return "an empty body"
    shown = text if len(text) <= _EXCERPT else text[: _EXCERPT - 3] + "..."
    return repr(shown)


def _payload(frame: Frame) -> Any:
    try:
        return json.loads(frame.payload)
    except ValueError:
        return None


def event_type(frame: Frame) -> str | None:
    """The frame's event ``type``, when its payload is a JSON object that has one."""
    payload = _payload(frame)
    if isinstance(payload, dict) and isinstance(payload.get("type"), str):
        found: str = payload["type"]
        return found
    return None


def response_findings(answer: Exchange) -> list[Finding]:
    """Status, content type and the buffering headers of the run's response."""
    if answer.status != 200:
        where = answer.headers.get("location")
        moved = f" to {where}" if where else ""
        return [
            Finding(
                HTTP_STATUS,
                Severity.ERROR,
                f"the run was answered {answer.status}{moved} (content-type "
                f"{answer.media_type or 'none'}), not 200 and an event stream: "
                f"{body_excerpt(answer.body)}",
                None,
            )
        ]
    found: list[Finding] = []
    if answer.media_type != "text/event-stream":
        found.append(
            Finding(
                CONTENT_TYPE,
                Severity.ERROR,
                f"the run is served as {answer.headers.get('content-type', 'no content type')!r}"
                ", not text/event-stream: an EventSource or fetch-event-source client "
                "refuses it, and proxies buffer a type they do not know to be a stream",
                None,
            )
        )
    cache = answer.headers.get("cache-control")
    directives = (
        set()
        if cache is None
        else {part.split("=", 1)[0].strip().lower() for part in cache.split(",")}
    )
    if not directives & {"no-cache", "no-store"}:
        said = (
            "no cache-control header"
            if cache is None
            else f"cache-control {cache!r} says neither no-cache nor no-store"
        )
        found.append(
            Finding(
                CACHE_CONTROL,
                Severity.WARNING,
                f"{said}: a cache or CDN in front of the agent may hold the stream or answer "
                "from a stored copy (send cache-control: no-cache, no-transform)",
                None,
            )
        )
    if "no-transform" not in directives:
        said = (
            "no cache-control header"
            if cache is None
            else f"cache-control {cache!r} lacks no-transform"
        )
        found.append(
            Finding(
                NO_TRANSFORM,
                Severity.HYGIENE,
                f"{said}: a proxy may compress the stream, which holds frames back until a "
                "block is full (add no-transform)",
                None,
            )
        )
    buffering = answer.headers.get("x-accel-buffering")
    if buffering is None or buffering.strip().lower() != "no":
        said = (
            "no x-accel-buffering header"
            if buffering is None
            else f"x-accel-buffering {buffering!r}"
        )
        found.append(
            Finding(
                X_ACCEL_BUFFERING,
                Severity.HYGIENE,
                f"{said}: an nginx in front of the agent buffers the stream "
                "(send x-accel-buffering: no)",
                None,
            )
        )
    return found


def keepalive_findings(answer: Exchange, within: float) -> list[Finding]:
    """The longest silence, when the stream lasted long enough to tell (over ``within``)."""
    if answer.duration <= within or answer.largest_gap <= within:
        return []
    after = answer.frames_before_gap
    where = "before the first frame" if after == 0 else f"after frame #{after - 1}"
    return [
        Finding(
            KEEPALIVE,
            Severity.WARNING,
            f"nothing arrived for {answer.largest_gap:.1f} s ({where}) in a stream of "
            f"{answer.duration:.1f} s, more than --keepalive-within {within:g} s: a proxy "
            "may drop the idle connection (send a comment line, `:`, during silences)",
            None,
        )
    ]


def id_findings(frames: Sequence[Frame], run_id: str | None) -> tuple[list[Finding], str | None]:
    """The ids' continuity, and the run id they name (None: not agui-pipes ids, or none).

    Nothing is said when no frame carries an id: the server does not offer
    resume. When the first id is not agui-pipes' ``<epoch>.<generation>:<runId>:<seq>``,
    the server numbers frames its own way: not checked (hygiene).
    """
    from ..store import BadEventId, parse_event_id

    first = next((index for index, frame in enumerate(frames) if frame.event_id), None)
    if first is None:
        return [], None
    first_id = frames[first].event_id
    assert first_id is not None
    try:
        previous = parse_event_id(first_id)
    except BadEventId:
        return [
            unchecked(
                "frames carry ids, but not agui-pipes' <epoch>.<generation>:<runId>:<seq> "
                f"(the first is {first_id[:80]!r}): their continuity and resume are not checked"
            )
        ], None
    found: list[Finding] = []

    def finding(index: int, message: str) -> None:
        kind = event_type(frames[index])
        found.append(Finding(EVENT_ID_CONTINUITY, Severity.WARNING, message, index, kind))

    if first:
        finding(first, f"the first {first} frame(s) carry no id: line, later ones do")
    if run_id is not None and previous.run_id != run_id:
        finding(first, f"id {first_id!r} names run {previous.run_id!r}, not this run {run_id!r}")
    for index in range(first + 1, len(frames)):
        text = frames[index].event_id
        if text is None:
            finding(
                index,
                "no id: line, though the frames before carry ids (a client "
                "resuming after this frame would ask for it again)",
            )
            continue
        try:
            current = parse_event_id(text)
        except BadEventId as error:
            finding(index, str(error))
            continue
        if (current.epoch, current.generation, current.run_id) != (
            previous.epoch,
            previous.generation,
            previous.run_id,
        ):
            finding(
                index,
                f"id {text!r} changes the run, epoch or generation of the ids before it "
                f"({str(previous).rpartition(':')[0]})",
            )
        elif current.seq != previous.seq + 1:
            finding(
                index,
                f"id {text!r} follows sequence number {previous.seq}: expected "
                f"{previous.seq + 1} (a gap or a repeat)",
            )
        previous = current
    return found, previous.run_id


def _comparable(frame: Frame) -> tuple[str | None, Any]:
    payload = _payload(frame)
    return frame.event_id, frame.payload if payload is None else payload


def resume_findings(
    expected: Sequence[Frame], after: str, url: str, reply: Exchange
) -> list[Finding]:
    """The resume probe's answer: exactly ``expected`` (the frames after id ``after``)."""
    asked = f"GET {url} with Last-Event-ID {after!r}"
    if reply.status in (404, 405) or (reply.status == 200 and not reply.is_event_stream):
        return [
            unchecked(
                f"the frames carry ids, but {asked} answered {reply.status} "
                f"({reply.media_type or 'no content type'}): no resume route there, resume "
                "not probed"
            )
        ]
    if reply.status != 200:
        return [
            Finding(
                RESUME,
                Severity.WARNING,
                f"{asked} answered {reply.status}: {body_excerpt(reply.body)}",
                None,
            )
        ]
    problems: list[str] = []
    if not reply.complete:
        why = "the deadline" if reply.timed_out else (reply.cut or reply.broken or "reading")
        problems.append(f"the answer did not end (stopped by {why})")
    got = [_comparable(frame) for frame in reply.frames]
    want = [_comparable(frame) for frame in expected]
    if got != want:
        differs = next(
            (
                index
                for index, (one, other) in enumerate(zip(got, want, strict=False))
                if one != other
            ),
            min(len(got), len(want)),
        )
        problems.append(
            f"it gave {len(got)} frame(s) where {len(want)} followed that id; the first "
            f"difference is at frame {differs} of the answer (id "
            f"{got[differs][0] if differs < len(got) else 'none'!r}, expected "
            f"{want[differs][0] if differs < len(want) else 'none'!r})"
        )
    if not problems:
        return []
    return [Finding(RESUME, Severity.WARNING, f"{asked}: " + "; ".join(problems), None)]


def bad_body_findings(reply: Exchange) -> list[Finding]:
    """A body that is no RunAgentInput: a 4xx with a JSON error, not a stream."""
    if not 400 <= reply.status < 500:
        stream = " and a stream" if reply.is_event_stream else ""
        return [
            Finding(
                BAD_BODY_STATUS,
                Severity.WARNING,
                f"a body that is not a RunAgentInput was answered {reply.status}{stream} "
                f"({reply.media_type or 'no content type'}), not 4xx: the client cannot tell "
                "its request was wrong (answer 422 or 400 with a JSON error)",
                None,
            )
        ]
    media = reply.media_type
    if media == "application/json" or media.endswith("+json"):
        try:
            json.loads(reply.body)
        except ValueError:
            pass
        else:
            return []
    return [
        Finding(
            BAD_BODY_JSON,
            Severity.HYGIENE,
            f"the {reply.status} answer to a bad body is {media or 'untyped'}, "
            f"{body_excerpt(reply.body)}, not a JSON error saying what was wrong",
            None,
        )
    ]
