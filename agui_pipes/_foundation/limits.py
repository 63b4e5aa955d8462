"""Bounds on the work and memory one input may cost.

One small input must never cost a server minutes or gigabytes: a 1 KB
``STATE_DELTA`` of repeated ``copy`` operations doubles a document per
operation, and a 100k-deep array exhausts the interpreter's stack. Every
place that parses, copies, patches, folds or encodes JSON checks against the
same :class:`Limits`, before it allocates, so the failure is a clear protocol
error at the event that caused it, never a ``MemoryError`` or a
``RecursionError`` somewhere downstream.

The defaults are generous for real agents (a million-node state is far beyond
any UI) and tight enough that the worst case stays within a few hundred MiB.

The id bounds below are fixed, not per server: a run or thread id is a key of
the event log that every process sharing a store, and every client resuming
from it, must accept alike (a server configured for longer ids would record
runs a server beside it refuses to resume).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_LIMITS", "MAX_EVENT_ID_LENGTH", "MAX_ID_LENGTH", "MAX_SEQ", "Limits"]

MAX_ID_LENGTH: Final = 256
"""The longest run or thread id a server accepts, in characters (422 ``bad_id`` past it).

Why bounded: an id is part of every store key and of every SSE ``id:`` line,
so an unbounded one costs its length per frame (a 1 MiB runId made a 2.1 MB
request answer 331 MB) and per stored key.
"""

MAX_SEQ: Final = 2**63 - 1
"""The largest sequence number an SSE id may name: a signed 64-bit integer, what
every backend stores (SQLite's INTEGER); larger ones are 400 ``bad_event_id``."""

MAX_EVENT_ID_LENGTH: Final = MAX_ID_LENGTH + 64
"""The longest SSE event id (``Last-Event-ID`` / ``?after=``) parsed: the longest run
id plus room for the store epoch, the run's generation, the seq and separators
(no server issues a longer one); longer ones are 400 ``bad_event_id`` unread."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The ceilings applied to every JSON value a pipeline handles.

    ``max_depth`` is the deepest nesting of arrays and objects accepted
    anywhere (decode, clone, patch, fold, encode). The default, 1024, is the
    depth orjson itself parses, so nothing the parser accepts is refused
    later by a recursive walk.

    ``max_nodes`` and ``max_bytes`` bound one state or activity document (a
    snapshot, or the result of applying a delta): the number of values in it
    (every object, array and scalar counts one) and the size of its compact
    JSON encoding, estimated as it grows. A patch operation that would cross
    either fails *before* it allocates, like any delta that does not apply.
    """

    max_depth: int = 1024
    max_nodes: int = 1_000_000
    max_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_nodes", "max_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Limits.{name} must be a positive integer, got {value!r}")


DEFAULT_LIMITS = Limits()
