"""Durable runs: an event log of runs' wire events, in memory, SQLite or Redis Streams.

* ``open_store(url)`` — ``memory:``, ``sqlite:///runs.db``, ``redis://host:6379/0``;
* ``EventLog`` — the interface every backend implements (append, read,
  follow, run, thread_runs, end_run, mark_broken, prune);
* ``RunRecorder`` — a server's background writer of one run;
* ``format_event_id`` / ``parse_event_id`` / ``sse_frame`` — SSE ids
  ``<epoch>:<runId>:<seq>`` and the frames carrying them;
* the errors, each with the HTTP status a server answers with.

See docs/durable.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._base import EventLog, Retention, RunRecord, RunStatus
    from ._errors import (
        BadEventId,
        RunBroken,
        RunEnded,
        RunLost,
        StoreClosed,
        StoreError,
        UnknownRun,
        WrongRun,
        WrongThread,
    )
    from ._ids import EventId, format_event_id, parse_event_id, sse_frame
    from ._open import open_store
    from ._recorder import RunRecorder
    from .memory import MemoryEventLog
    from .redis import RedisEventLog
    from .sqlite import SQLiteEventLog
else:
    from .._lazy import attach

    __getattr__, __dir__ = attach(
        __name__,
        {
            "EventLog": "._base",
            "Retention": "._base",
            "RunRecord": "._base",
            "RunStatus": "._base",
            "BadEventId": "._errors",
            "RunBroken": "._errors",
            "RunEnded": "._errors",
            "RunLost": "._errors",
            "StoreClosed": "._errors",
            "StoreError": "._errors",
            "UnknownRun": "._errors",
            "WrongRun": "._errors",
            "WrongThread": "._errors",
            "EventId": "._ids",
            "format_event_id": "._ids",
            "parse_event_id": "._ids",
            "sse_frame": "._ids",
            "open_store": "._open",
            "RunRecorder": "._recorder",
            "MemoryEventLog": ".memory",
            "RedisEventLog": ".redis",
            "SQLiteEventLog": ".sqlite",
        },
    )

__all__ = [
    "BadEventId",
    "EventId",
    "EventLog",
    "MemoryEventLog",
    "RedisEventLog",
    "Retention",
    "RunBroken",
    "RunEnded",
    "RunLost",
    "RunRecord",
    "RunRecorder",
    "RunStatus",
    "SQLiteEventLog",
    "StoreClosed",
    "StoreError",
    "UnknownRun",
    "WrongRun",
    "WrongThread",
    "format_event_id",
    "open_store",
    "parse_event_id",
    "sse_frame",
]
