"""Recorded runs for the mock backend to replay: reading them, and playing them at pace.

A recording is either

* one events file, NDJSON or SSE (told apart by the first bytes), decoded
  with ``agui_pipes.codecs``; its pace is the events' own ``timestamp``
  fields (milliseconds), when they have them;
* a run directory written by ``agui-pipes mock --record`` (``_mock_record``):
  ``request.json`` (the body the client POSTed), ``events.ndjson`` (the
  payloads the upstream sent, one per line, as received) and ``timing.json``
  (``{"offsets": [...]}``, the seconds after the request at which each event
  arrived) — the pace the upstream really had;
* a directory of such run directories (what ``--record DIR`` fills), read in
  name order.

A run directory's request lets the mock match a request to the recording of
the same conversation (``ReplayBook.pick``); runs without one are served in
order.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from ag_ui.core import BaseEvent, RunAgentInput

from ...codecs import CodecError, DecodeError, NDJSONDecoder, SSEDecoder, decode

__all__ = [
    "EVENTS_FILE",
    "REQUEST_FILE",
    "TIMING_FILE",
    "Recording",
    "ReplayBook",
    "ReplayError",
    "conversation_key",
    "paced",
    "read_recordings",
]

REQUEST_FILE = "request.json"
EVENTS_FILE = "events.ndjson"
TIMING_FILE = "timing.json"


class ReplayError(Exception):
    """A recording cannot be read; the message names the file and the problem."""


@dataclass(frozen=True)
class Recording:
    """One recorded run: its events, when each came, and the request that started it."""

    name: str
    events: tuple[BaseEvent, ...]
    offsets: tuple[float, ...] | None
    """Seconds after the start at which each event is due (``None``: no pace recorded)."""
    request: dict[str, Any] | None = None


def _payloads(path: Path) -> list[str]:
    data = path.read_bytes()
    head = data.lstrip()[:6]
    sse = head.startswith((b"data:", b":", b"event:", b"id:", b"retry:"))
    decoder: SSEDecoder | NDJSONDecoder = SSEDecoder() if sse else NDJSONDecoder()
    try:
        return [*decoder.feed(data), *decoder.close()]
    except CodecError as exc:
        raise ReplayError(f"{path}: {exc}") from None


def _events(path: Path) -> list[BaseEvent]:
    events: list[BaseEvent] = []
    for index, payload in enumerate(_payloads(path)):
        try:
            decoded = decode(payload, index=index)
        except DecodeError as exc:
            raise ReplayError(f"{path}: event {index + 1}: {exc}") from None
        if decoded.event is not None:
            events.append(decoded.event)
    if not events:
        raise ReplayError(f"{path}: no AG-UI events in the file (NDJSON or SSE expected)")
    return events


def _stamped(events: Sequence[BaseEvent]) -> tuple[float, ...] | None:
    """Offsets from the events' ``timestamp`` (ms); unstamped events go with the last one."""
    stamps = [e.timestamp for e in events]
    first = next((s for s in stamps if s is not None), None)
    if first is None:
        return None
    offsets: list[float] = []
    last = 0.0
    for stamp in stamps:
        if stamp is not None:
            last = max(last, (stamp - first) / 1000)
        offsets.append(last)
    return tuple(offsets)


def _run_dir(path: Path) -> Recording:
    events = _events(path / EVENTS_FILE)
    request: dict[str, Any] | None = None
    offsets: tuple[float, ...] | None = None
    try:
        if (path / REQUEST_FILE).exists():
            request = json.loads((path / REQUEST_FILE).read_text("utf-8"))
        if (path / TIMING_FILE).exists():
            offsets = tuple(json.loads((path / TIMING_FILE).read_text("utf-8"))["offsets"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ReplayError(f"{path}: unreadable {REQUEST_FILE} or {TIMING_FILE}: {exc}") from None
    if offsets is not None and len(offsets) != len(events):
        raise ReplayError(f"{path / TIMING_FILE}: {len(offsets)} offsets for {len(events)} events")
    return Recording(path.name, tuple(events), offsets or _stamped(events), request)


def read_recordings(paths: Sequence[str | Path]) -> list[Recording]:
    """The recordings at ``paths`` (files, run directories, directories of runs)."""
    out: list[Recording] = []
    for given in paths:
        path = Path(given)
        try:
            if path.is_dir():
                if (path / EVENTS_FILE).exists():
                    out.append(_run_dir(path))
                    continue
                runs = sorted(p for p in path.iterdir() if (p / EVENTS_FILE).exists())
                if not runs:
                    raise ReplayError(f"{path}: a directory with no recorded runs in it")
                out.extend(_run_dir(run) for run in runs)
            else:
                events = _events(path)
                out.append(Recording(path.name, tuple(events), _stamped(events)))
        except OSError as exc:
            raise ReplayError(f"{path}: {exc.strerror or exc}") from None
    return out


def conversation_key(request: RunAgentInput | dict[str, Any]) -> str:
    """What two requests of the same conversation share: the messages' roles and text.

    Ids (thread, run, message ids) are left out, since a client mints new ones
    every time it asks again.
    """
    if not isinstance(request, RunAgentInput):
        try:
            request = RunAgentInput.model_validate(request)
        except ValueError:
            return ""
    kept = [
        {
            k: v
            for k, v in m.model_dump(mode="json", by_alias=True).items()
            if k in ("role", "content", "toolCallId")
        }
        for m in request.messages
    ]
    return json.dumps(kept, sort_keys=True, default=str)


class ReplayBook:
    """Recordings served to requests: the same conversation's if recorded, else in turn."""

    def __init__(self, recordings: Sequence[Recording]) -> None:
        self.recordings = tuple(recordings)
        keyed = ((conversation_key(r.request), r) for r in self.recordings if r.request)
        self._by_key = {key: r for key, r in keyed if key}
        self._next = 0

    def __bool__(self) -> bool:
        return bool(self.recordings)

    def pick(self, request: RunAgentInput) -> Recording:
        """The recording for ``request`` (cycling through them for unknown ones)."""
        known = self._by_key.get(conversation_key(request))
        if known is not None:
            return known
        recording = self.recordings[self._next % len(self.recordings)]
        self._next += 1
        return recording


async def paced(recording: Recording, speed: float) -> AsyncIterator[BaseEvent]:
    """The recording's events, each at its offset divided by ``speed`` (inf: at once)."""
    offsets = recording.offsets
    if offsets is None or math.isinf(speed):
        for event in recording.events:
            yield event
        return
    start = anyio.current_time()
    for event, offset in zip(recording.events, offsets, strict=True):
        due = start + offset / speed
        now = anyio.current_time()
        if due > now:
            await anyio.sleep(due - now)
        yield event
