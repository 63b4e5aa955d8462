"""SSE event ids ``<epoch>.<generation>:<runId>:<seq>``: what a client sends back to resume.

Why four parts: the seq alone is a position in *some* run; the run id ties
it to one run (an id replayed against another run is a 409, not a stream
from the wrong place); the epoch ties it to one store's lifetime, so an id
kept by a browser across a store reset is refused instead of resuming at a
position that now means something else; the generation ties it to one life
of the run id within the store — a run id may be used again once retention
deleted its run, and an old client's id must then be refused rather than
resume inside the new run (``StoredRun.generation``, :func:`generation_of`).

Run ids are free strings in AG-UI and may contain ``:``; the epoch and the
generation never do and the seq is digits, so the id splits at its first and
last colon, and the first part at its last ``.``.

Parsing is bounded: an id longer than :data:`MAX_EVENT_ID_LENGTH` is refused
unread, a seq of more than 19 digits or above :data:`MAX_SEQ` is refused
before it reaches a store (SQLite cannot bind it), and every refusal is a
:class:`BadEventId` whose message shows at most 80 characters of the id.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._foundation.framing import SSE_DATA, SSE_END, SSE_ID
from .._foundation.limits import MAX_EVENT_ID_LENGTH, MAX_SEQ
from ._errors import BadEventId

__all__ = [
    "EventId",
    "format_event_id",
    "generation_of",
    "parse_event_id",
    "shown_id",
    "sse_frame",
]

_ID_END = b"\n" + SSE_DATA
"""What follows an ``id:`` line's value: its line end and the ``data:`` line's start."""
_FORBIDDEN = ("\n", "\r", "\0")
_SEQ_DIGITS = len(str(MAX_SEQ))
_EXPECTED = "expected '<epoch>.<generation>:<runId>:<seq>' as sent in an SSE id: line"
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class EventId:
    """A parsed SSE event id; ``generation`` is ``""`` in an id of the older
    ``<epoch>:<runId>:<seq>`` form, which no run matches."""

    epoch: str
    run_id: str
    seq: int
    generation: str = ""

    def __str__(self) -> str:
        return format_event_id(self.epoch, self.run_id, self.seq, self.generation)


def generation_of(created: float) -> str:
    """The generation of a run created at Unix time ``created``: its microsecond, in base 36.

    Why the creation time: every backend already stores it with the run and
    never changes it, so the generation costs no schema, no write and no
    round trip; a run id used again after its run was pruned is created
    later, so its generation differs (a collision needs the prune and the new
    run within one microsecond of the old run's creation).
    """
    number = max(0, round(created * 1_000_000))
    digits = []
    while True:
        number, digit = divmod(number, 36)
        digits.append(_BASE36[digit])
        if not number:
            return "".join(reversed(digits))


def format_event_id(epoch: str, run_id: str, seq: int, generation: str = "") -> str:
    """The ``id:`` value of the SSE frame holding entry ``seq`` of ``run_id``.

    ``generation`` is the run's (``StoredRun.generation``); without it the id has
    the older ``<epoch>:<runId>:<seq>`` form, which resuming refuses.
    Raises ValueError for a run id an SSE ``id:`` line cannot carry (a line
    break or NUL), rather than writing a frame the client would misparse.
    """
    if any(char in run_id for char in _FORBIDDEN):
        raise ValueError(
            f"run id {shown_id(run_id)} contains a line break or NUL, which an SSE id cannot carry"
        )
    if generation:
        return f"{epoch}.{generation}:{run_id}:{seq}"
    return f"{epoch}:{run_id}:{seq}"


def parse_event_id(text: str) -> EventId:
    """Parse an id made by :func:`format_event_id`; :class:`BadEventId` (400) otherwise.

    Never raises anything else, whatever ``text`` is.
    """
    if len(text) > MAX_EVENT_ID_LENGTH:
        raise BadEventId(
            f"event id of {len(text)} characters is too long: no server issues one over "
            f"{MAX_EVENT_ID_LENGTH} ({_EXPECTED})"
        )
    head, sep, rest = text.partition(":")
    run_id, sep2, seq_text = rest.rpartition(":")
    epoch, dot, generation = head.rpartition(".")
    if not dot:
        epoch, generation = head, ""
    if not sep or not sep2 or not epoch or not run_id or (dot and not generation):
        raise BadEventId(f"unparsable event id {shown_id(text)}: {_EXPECTED}")
    if not (seq_text.isascii() and seq_text.isdigit()):
        raise BadEventId(
            f"unparsable event id {shown_id(text)}: its last part {shown_id(seq_text)} is not "
            f"a sequence number ({_EXPECTED})"
        )
    if len(seq_text) > _SEQ_DIGITS or int(seq_text) > MAX_SEQ:
        # Checked by length first: no int is made of a thousand digits.
        raise BadEventId(
            f"event id {shown_id(text)}: its sequence number is out of range (at most "
            f"{MAX_SEQ}, {_SEQ_DIGITS} digits); send the id of a frame the server sent"
        )
    return EventId(epoch, run_id, int(seq_text), generation)


def shown_id(text: str, limit: int = 80) -> str:
    """``text`` as an error message shows it: quoted, at most ``limit`` characters of it.

    Why: a message quoting what a client sent must not grow with it (an
    answer bounded by what the server issued, not by what it was sent).
    """
    if len(text) <= limit:
        return repr(text)
    return repr(text[: limit - 3] + "...")


def sse_frame(data: bytes, event_id: str | None = None) -> bytes:
    """One SSE frame: ``id: <event_id>`` (when given), ``data: <data>``, blank line.

    ``data`` is one event's wire JSON, as stored in the log: single-line
    (JSON text never holds a raw line break), so one ``data:`` line carries it.
    The same bytes serve the live stream and a replay from the log.
    """
    if event_id is None:
        return SSE_DATA + data + SSE_END
    return b"".join((SSE_ID, event_id.encode(), _ID_END, data, SSE_END))
