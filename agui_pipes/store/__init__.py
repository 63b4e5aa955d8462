"""Durable runs: an event log of runs' wire events, in memory, SQLite or Redis Streams.

* ``open_store(url)`` — ``memory:``, ``sqlite:///runs.db``, ``redis://host:6379/0``;
* ``EventLog`` — the interface every backend implements (append, read,
  follow, run, thread_runs, end_run, mark_broken, prune);
* ``StoreBackend`` / ``StoreURL`` — what a backend class provides to be
  opened from a URL (``from_url``), registered under its scheme in the
  entry-point group ``agui_pipes.stores``;
* ``RunRecorder`` — a server's background writer of one run;
* ``format_event_id`` / ``parse_event_id`` / ``sse_frame`` — SSE ids
  ``<epoch>:<runId>:<seq>`` and the frames carrying them;
* the errors, each with the HTTP status a server answers with.

See docs/durable.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # What type checkers see; `_EXPORTS` below is what runs (a test keeps them equal).
    from ._base import EventLog as EventLog
    from ._errors import BadEventId as BadEventId
    from ._errors import RunBroken as RunBroken
    from ._errors import RunEnded as RunEnded
    from ._errors import RunLost as RunLost
    from ._errors import StoreClosed as StoreClosed
    from ._errors import StoreError as StoreError
    from ._errors import StoreUnavailable as StoreUnavailable
    from ._errors import ThreadTaken as ThreadTaken
    from ._errors import UnknownRun as UnknownRun
    from ._errors import WrongRun as WrongRun
    from ._errors import WrongThread as WrongThread
    from ._ids import EventId as EventId
    from ._ids import format_event_id as format_event_id
    from ._ids import parse_event_id as parse_event_id
    from ._ids import sse_frame as sse_frame
    from ._open import open_store as open_store
    from ._recorder import RunRecorder as RunRecorder
    from ._records import RunStatus as RunStatus
    from ._records import StoredRun as StoredRun
    from ._records import ThreadRecord as ThreadRecord
    from ._registry import StoreBackend as StoreBackend
    from ._retention import Retention as Retention
    from ._url import StoreURL as StoreURL
    from .memory import MemoryEventLog as MemoryEventLog
    from .redis import RedisEventLog as RedisEventLog
    from .sqlite import SQLiteEventLog as SQLiteEventLog
else:
    from .._lazy import attach as _attach

    _EXPORTS = {
        "EventLog": "._base",
        "BadEventId": "._errors",
        "RunBroken": "._errors",
        "RunEnded": "._errors",
        "RunLost": "._errors",
        "StoreClosed": "._errors",
        "StoreError": "._errors",
        "StoreUnavailable": "._errors",
        "ThreadTaken": "._errors",
        "UnknownRun": "._errors",
        "WrongRun": "._errors",
        "WrongThread": "._errors",
        "EventId": "._ids",
        "format_event_id": "._ids",
        "parse_event_id": "._ids",
        "sse_frame": "._ids",
        "open_store": "._open",
        "RunRecorder": "._recorder",
        "StoredRun": "._records",
        "RunStatus": "._records",
        "ThreadRecord": "._records",
        "StoreBackend": "._registry",
        "Retention": "._retention",
        "StoreURL": "._url",
        "MemoryEventLog": ".memory",
        "RedisEventLog": ".redis",
        "SQLiteEventLog": ".sqlite",
    }
    __getattr__, __dir__ = _attach(__name__, _EXPORTS)
    __all__ = [*_EXPORTS]
