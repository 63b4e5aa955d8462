"""``agui-pipes verify URL``: POST a run to a live endpoint, check its transport and its events.

The steps, all within ``--timeout`` seconds in total:

1. **The run.** POST the RunAgentInput (``--input FILE``, else a minimal one
   with the user message "Hello"), with ``--header`` lines on every request,
   and read the whole response: status, content type, buffering headers, the
   longest silence (keep-alive), the frames' ids. Its events go through the
   :class:`~agui_pipes._consumer.findings.FindingCollector`, as ``verify --all``
   reads a file.
2. **Resume**, when the frames carry agui-pipes ids: ``GET {url}runs/{runId}``
   with the ``Last-Event-ID`` of a middle frame must answer exactly the frames
   after it.
3. **A bad body** (JSON that is no RunAgentInput) must get a 4xx JSON error,
   not a 200 and a stream.
4. **Disconnect**: a second run, dropped after its first event, must end; seen
   through ``GET {url}runs/{runId}`` (polled until it shows RUN_FINISHED or
   RUN_ERROR) when the server has durable routes, else not checked (hygiene).

The report is ``verify --all``'s, the URL its input, in any ``--format``;
exit 0 accepted, 1 some finding rejects (an error or a warning), 2 a usage or
connection error (nothing to judge: no answer, an answer past ``--max-bytes``,
a run that did not end within ``--timeout``).
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlsplit, urlunsplit

import anyio

from .._consumer.findings import MALFORMED, Finding, FindingCollector, Severity
from .._protocol.transport_rules import BAD_BODY_STATUS, DISCONNECT, RESUME
from ._findings_report import REPORTERS, Located, Report
from ._limits import limits_of
from ._live_checks import (
    TERMINAL_TYPES,
    bad_body_findings,
    event_type,
    id_findings,
    keepalive_findings,
    response_findings,
    resume_findings,
    unchecked,
)
from ._live_exchange import Exchange, ExchangeFailed, Frame, Read, TooLarge, exchange, remaining

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_KEEPALIVE_WITHIN",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_TIMEOUT",
    "URL_OPTIONS",
    "is_url",
    "verify_url",
]

DEFAULT_TIMEOUT: Final = 60.0
DEFAULT_KEEPALIVE_WITHIN: Final = 20.0
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024

URL_OPTIONS: Final = {
    "run_input": "--input",
    "headers": "--header",
    "keepalive_within": "--keepalive-within",
    "timeout": "--timeout",
    "max_bytes": "--max-bytes",
}
"""The options that go with a URL only (argparse dest -> option), all None when not given."""

BAD_BODY: Final = b'{"threadId": 42, "runId": [], "messages": "not a list of messages"}'
"""Valid JSON that no RunAgentInput validation accepts."""

_PROTOBUF: Final = "application/vnd.ag-ui.event+proto"
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP header name (RFC 9110 5.1: a token)."""
_POLL: Final = 0.5
"""Seconds between two reads of a disconnected run's log while it has not ended."""


class LiveError(Exception):
    """Nothing to judge (exit 2): bad options, no answer, an answer past a bound."""


def is_url(text: str | None) -> bool:
    return text is not None and text.lower().startswith(("http://", "https://"))


@dataclass(frozen=True)
class _Options:
    url: str
    run_input: dict[str, Any]
    headers: dict[str, str]
    keepalive_within: float
    timeout: float
    max_bytes: int


def _parse_headers(lines: list[str] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines or []:
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _TOKEN.fullmatch(name):
            raise LiveError(
                f"--header {line!r}: expected 'Name: value' (a name of letters, "
                "digits and !#$%&'*+-.^_`|~)"
            )
        if not all(char == "\t" or " " <= char <= "~" for char in value):
            raise LiveError(f"--header {line!r}: a header value is printable ASCII")
        headers[name.lower()] = value
    return headers


def _load_input(path: str | None) -> dict[str, Any]:
    if path is None:
        token = secrets.token_hex(6)
        return {
            "threadId": f"verify-thread-{token}",
            "runId": f"verify-run-{token}",
            "state": {},
            "messages": [{"id": f"verify-msg-{token}", "role": "user", "content": "Hello"}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise LiveError(f"cannot read --input {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise LiveError(f"--input {path} is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise LiveError(
            f"--input {path} holds a JSON {type(document).__name__}; expected "
            "a RunAgentInput object"
        )
    return document


def _positive(value: float | int | None, default: float | int, option: str) -> float | int:
    if value is None:
        return default
    if value <= 0:
        raise LiveError(f"{option} must be positive, got {value:g}")
    return value


def _options(args: argparse.Namespace) -> _Options:
    for dest, option in (("explain", "--explain"), ("result", "--result")):
        if getattr(args, dest):
            raise LiveError(f"{option} goes with a file or standard input, not a URL")
    if args.input_format != "auto":
        raise LiveError(
            "--input-format goes with a file or standard input; a URL's answer "
            "is read as the server serves it"
        )
    return _Options(
        url=args.input,
        run_input=_load_input(args.run_input),
        headers=_parse_headers(args.headers),
        keepalive_within=float(
            _positive(args.keepalive_within, DEFAULT_KEEPALIVE_WITHIN, "--keepalive-within")
        ),
        timeout=float(_positive(args.timeout, DEFAULT_TIMEOUT, "--timeout")),
        max_bytes=int(_positive(args.max_bytes, DEFAULT_MAX_BYTES, "--max-bytes")),
    )


def verify_url(args: argparse.Namespace) -> int:
    """The ``verify`` handler for an http(s) input: the report on stdout, the exit status."""
    try:
        import httpx  # noqa: F401
    except ImportError:
        print(
            "agui-pipes verify: checking a URL needs httpx: pip install 'agui-pipes[http]'",
            file=sys.stderr,
        )
        return 2
    try:
        options = _options(args)
        report = anyio.run(_check, args, options)
    except LiveError as error:
        print(f"agui-pipes verify: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(REPORTERS[args.report_format](report))
    return 1 if report.rejected else 0


def runs_url(url: str, run_id: str) -> str:
    """``{url}runs/{runId}``: where a durable server resumes a run (its path made a folder)."""
    parts = urlsplit(url)
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return urlunsplit((parts.scheme, parts.netloc, f"{path}runs/{quote(run_id, safe='')}", "", ""))


class _Session:
    """One ``verify URL``: the client, the deadline, the options; each step a method."""

    def __init__(self, client: httpx.AsyncClient, options: _Options, deadline: float) -> None:
        self.client = client
        self.options = options
        self.deadline = deadline
        self.url = options.url

    async def send(
        self,
        method: str,
        url: str,
        *,
        read: Read,
        content: bytes | None = None,
        last_event_id: str | None = None,
    ) -> Exchange:
        headers = {"accept": "text/event-stream", **self.options.headers}
        if content is not None:
            headers.setdefault("content-type", "application/json")
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        try:
            return await exchange(
                self.client,
                method,
                url,
                headers=headers,
                content=content,
                read=read,
                deadline=self.deadline,
                max_bytes=self.options.max_bytes,
            )
        except TooLarge as error:
            raise LiveError(f"{method} {url}: {error}") from None

    def out_of_time(self, check: str) -> Finding:
        return unchecked(
            f"{check}: not checked, no time left within --timeout {self.options.timeout:g} s"
        )

    async def run(self) -> Exchange:
        body = json.dumps(self.options.run_input).encode()
        try:
            answer = await self.send("POST", self.url, read="stream", content=body)
        except ExchangeFailed as error:
            raise LiveError(f"cannot verify {self.url}: {error}") from None
        if answer.media_type == _PROTOBUF:
            raise LiveError(
                f"{self.url} answered in AG-UI's protobuf encoding ({_PROTOBUF}), "
                "which this check does not read, though it asked for "
                "text/event-stream"
            )
        if answer.timed_out:
            count = len(answer.frames)
            raise LiveError(
                f"{self.url}: the run did not end within --timeout {self.options.timeout:g} s "
                f"({count} frame{'s' if count != 1 else ''} by then); raise --timeout"
            )
        return answer

    async def resume(self, frames: list[Frame], run_id: str) -> tuple[list[Finding], bool | None]:
        """The resume probe; also whether the server has durable routes (None: unknown)."""
        with_ids = [index for index, frame in enumerate(frames) if frame.event_id]
        if len(with_ids) < 2:
            return [], None
        middle = with_ids[(len(with_ids) - 1) // 2]
        after = frames[middle].event_id
        assert after is not None
        url = runs_url(self.url, run_id)
        try:
            reply = await self.send("GET", url, read="stream", last_event_id=after)
        except ExchangeFailed as error:
            if remaining(self.deadline) == 0:
                return [self.out_of_time("resume")], None
            return [Finding(RESUME, Severity.WARNING, f"GET {url}: {error}", None)], None
        return resume_findings(frames[middle + 1 :], after, url, reply), reply.is_event_stream

    async def bad_body(self) -> list[Finding]:
        try:
            reply = await self.send("POST", self.url, read="answer", content=BAD_BODY)
        except ExchangeFailed as error:
            if remaining(self.deadline) == 0:
                return [self.out_of_time("bad body")]
            return [
                Finding(
                    BAD_BODY_STATUS,
                    Severity.WARNING,
                    f"a body that is not a RunAgentInput got no answer: {error}",
                    None,
                )
            ]
        return bad_body_findings(reply)

    async def disconnect(self, run_id: str, routes: bool | None) -> list[Finding]:
        if routes is None:
            probe = runs_url(self.url, run_id)
            try:
                head = await self.send("GET", probe, read="head")
            except ExchangeFailed as error:
                if remaining(self.deadline) == 0:
                    return [self.out_of_time("disconnect")]
                return [unchecked(f"disconnect: GET {probe} failed ({error}); not checked")]
            if not head.is_event_stream:
                return [
                    unchecked(
                        f"disconnect: GET {probe} answered {head.status} "
                        f"({head.media_type or 'no content type'}): the server has no durable "
                        "routes (resume, stop, history), so whether a run ends once its "
                        "client leaves cannot be seen from outside; not checked"
                    )
                ]
        elif not routes:
            return [
                unchecked(
                    "disconnect: the server has no durable routes (the resume probe "
                    "found none), so the run's end cannot be seen; not checked"
                )
            ]
        second_id = f"{run_id}-disconnect-{secrets.token_hex(4)}"
        body = json.dumps({**self.options.run_input, "runId": second_id}).encode()
        try:
            first = await self.send("POST", self.url, read="first", content=body)
        except ExchangeFailed as error:
            if remaining(self.deadline) == 0:
                return [self.out_of_time("disconnect")]
            return [unchecked(f"disconnect: the second run got no answer ({error}); not checked")]
        if first.status != 200 or not first.frames:
            return [
                unchecked(
                    f"disconnect: the second run was answered {first.status} with "
                    f"{len(first.frames)} frames; not checked"
                )
            ]
        return await self._ended(second_id, anyio.current_time())

    async def _ended(self, run_id: str, left_at: float) -> list[Finding]:
        """Poll the run's log until it shows the run's end, or the time is up."""
        url = runs_url(self.url, run_id)
        seen = 0
        while True:
            try:
                log = await self.send("GET", url, read="stream")
            except ExchangeFailed as error:
                if remaining(self.deadline) == 0:
                    break
                return [unchecked(f"disconnect: GET {url} failed ({error}); not checked")]
            if log.status != 200:
                return [
                    unchecked(
                        f"disconnect: GET {url} answered {log.status} for the "
                        "disconnected run; not checked"
                    )
                ]
            seen = len(log.frames)
            if any(event_type(frame) in TERMINAL_TYPES for frame in log.frames):
                return []
            if log.timed_out or remaining(self.deadline) <= _POLL:
                break
            await anyio.sleep(_POLL)
        waited = anyio.current_time() - left_at
        return [
            Finding(
                DISCONNECT,
                Severity.WARNING,
                f"run {run_id!r}, whose client left after its first event, had not ended "
                f"{waited:.1f} s later: GET {url} shows {seen} events, none RUN_FINISHED or "
                "RUN_ERROR",
                None,
            )
        ]


def _run_id(frames: list[Frame], run_input: Mapping[str, Any]) -> str:
    for frame in frames:
        try:
            payload = json.loads(frame.payload)
        except ValueError:
            continue
        if isinstance(payload, dict) and payload.get("type") == "RUN_STARTED":
            if isinstance(payload.get("runId"), str):
                found: str = payload["runId"]
                return found
            break
    asked = run_input.get("runId")
    return asked if isinstance(asked, str) else ""


def _event_findings(args: argparse.Namespace, answer: Exchange) -> list[Finding]:
    collector = FindingCollector(
        profile=args.profile, allow_truncated=args.allow_truncated, limits=limits_of(args)
    )
    for frame in answer.frames:
        collector.push(frame.payload)
    if answer.broken is not None:
        collector.findings.append(
            Finding(
                MALFORMED,
                Severity.ERROR,
                f"{answer.broken} (reading stopped after {len(answer.frames)} events)",
                len(answer.frames),
            )
        )
    return collector.finish()


async def _check(args: argparse.Namespace, options: _Options) -> Report:
    import httpx

    deadline = anyio.current_time() + options.timeout
    findings: list[Finding] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(options.timeout)) as client:
        session = _Session(client, options, deadline)
        answer = await session.run()
        findings += response_findings(answer)
        if answer.status == 200:
            findings += keepalive_findings(answer, options.keepalive_within)
            run_id = _run_id(answer.frames, options.run_input)
            id_problems, id_run = id_findings(answer.frames, run_id or None)
            findings += id_problems
            findings += _event_findings(args, answer)
            routes: bool | None = None
            if id_run is not None:
                resumed, routes = await session.resume(answer.frames, id_run)
                findings += resumed
            findings += await session.bad_body()
            findings += await session.disconnect(run_id, routes)
        else:
            findings += await session.bad_body()
    located = [Located(finding, None) for finding in findings]
    return Report(options.url, args.profile, len(answer.frames), located, transport=True)
