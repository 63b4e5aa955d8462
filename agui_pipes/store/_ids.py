"""SSE event ids ``<epoch>:<runId>:<seq>``: what a client sends back to resume.

Why three parts: the seq alone is a position in *some* run; the run id ties
it to one run (an id replayed against another run is a 409, not a stream
from the wrong place); the epoch ties it to one store's lifetime, so an id
kept by a browser across a store reset is refused instead of resuming at a
position that now means something else.

Run ids are free strings in AG-UI and may contain ``:``; the epoch never
does and the seq is digits, so the id splits at its first and last colon.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._foundation.framing import SSE_DATA, SSE_END, SSE_ID
from ._errors import BadEventId

__all__ = ["EventId", "format_event_id", "parse_event_id", "sse_frame"]

_MAX_ID = 1024
_ID_END = b"\n" + SSE_DATA
"""What follows an ``id:`` line's value: its line end and the ``data:`` line's start."""
_FORBIDDEN = ("\n", "\r", "\0")


@dataclass(frozen=True)
class EventId:
    """A parsed SSE event id."""

    epoch: str
    run_id: str
    seq: int

    def __str__(self) -> str:
        return format_event_id(self.epoch, self.run_id, self.seq)


def format_event_id(epoch: str, run_id: str, seq: int) -> str:
    """The ``id:`` value of the SSE frame holding entry ``seq`` of ``run_id``.

    Raises ValueError for a run id an SSE ``id:`` line cannot carry (a line
    break or NUL), rather than writing a frame the client would misparse.
    """
    if any(char in run_id for char in _FORBIDDEN):
        raise ValueError(
            f"run id {run_id!r} contains a line break or NUL, which an SSE id cannot carry"
        )
    return f"{epoch}:{run_id}:{seq}"


def parse_event_id(text: str) -> EventId:
    """Parse an id made by :func:`format_event_id`; :class:`BadEventId` (400) otherwise."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    expected = "expected '<epoch>:<runId>:<seq>' as sent in an SSE id: line"
    if len(text) > _MAX_ID:
        raise BadEventId(f"event id of {len(text)} characters is too long ({expected})")
    epoch, sep, rest = text.partition(":")
    run_id, sep2, seq_text = rest.rpartition(":")
    if not sep or not sep2 or not epoch or not run_id:
        raise BadEventId(f"unparsable event id {shown!r}: {expected}")
    if not (seq_text.isascii() and seq_text.isdigit()):
        raise BadEventId(
            f"unparsable event id {shown!r}: its last part {seq_text!r} is not a sequence "
            f"number ({expected})"
        )
    return EventId(epoch, run_id, int(seq_text))


def sse_frame(data: bytes, event_id: str | None = None) -> bytes:
    """One SSE frame: ``id: <event_id>`` (when given), ``data: <data>``, blank line.

    ``data`` is one event's wire JSON, as stored in the log: single-line
    (JSON text never holds a raw line break), so one ``data:`` line carries it.
    The same bytes serve the live stream and a replay from the log.
    """
    if event_id is None:
        return SSE_DATA + data + SSE_END
    return b"".join((SSE_ID, event_id.encode(), _ID_END, data, SSE_END))
