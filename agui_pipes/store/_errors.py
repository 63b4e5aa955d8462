"""The exceptions of the event log, each carrying the HTTP status a server maps it to.

Why the status lives on the exception: the resume endpoints (issue 16) must
answer an unparsable ``Last-Event-ID`` with 400, an unknown run with 404 and
an id of another run or another store with 409 — never with a stream that
silently restarts. Putting the status on the class keeps that mapping in one
place, next to the condition it describes, instead of in every server.
"""

from __future__ import annotations

from typing import ClassVar

from .._foundation.errors import AguiPipesError

__all__ = [
    "BadEventId",
    "RunBroken",
    "RunEnded",
    "RunLost",
    "StoreClosed",
    "StoreError",
    "StoreUnavailable",
    "ThreadTaken",
    "UnknownRun",
    "WrongRun",
    "WrongThread",
]


class StoreError(AguiPipesError):
    """Base class of the event log's errors; ``http_status`` is the answer a server gives."""

    http_status: ClassVar[int] = 500


class StoreUnavailable(StoreError):
    """The store cannot answer now (unreachable, too slow, or every connection busy): HTTP 503.

    A server answers it before any stream starts, as ``store_unavailable``; its
    text says what to do (retry later) and never where the store is.
    """

    http_status: ClassVar[int] = 503


class BadEventId(StoreError, ValueError):
    """An SSE event id (``Last-Event-ID`` / ``?after=``) that cannot be parsed: HTTP 400."""

    http_status: ClassVar[int] = 400


class UnknownRun(StoreError, LookupError):
    """No run (or thread) by that id in the store — never stored, or pruned: HTTP 404."""

    http_status: ClassVar[int] = 404

    def __init__(self, run_id: str, message: str | None = None) -> None:
        self.run_id = run_id
        super().__init__(message or f"no run {run_id!r} in the event log (never stored, or pruned)")


class WrongRun(StoreError):
    """An event id of another run or another store epoch than the one asked for: HTTP 409."""

    http_status: ClassVar[int] = 409


class WrongThread(StoreError, ValueError):
    """An append names a run that the store holds under another thread."""

    http_status: ClassVar[int] = 409


class ThreadTaken(StoreError, LookupError):
    """An append would create a run in a thread that another scope's runs hold.

    A thread belongs to the scope that created it; a server answers this as it
    answers a thread that does not exist (404), so another scope's thread ids
    stay unseen and its thread is not touched.
    """

    http_status: ClassVar[int] = 404

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"no thread {thread_id!r} in the event log")


class RunEnded(StoreError):
    """An append to a run that was already marked ended: its log is closed."""

    http_status: ClassVar[int] = 409


class RunBroken(StoreError):
    """The run's log is incomplete (a write failed), so it cannot be read or resumed.

    Raised by ``read`` and ``follow`` instead of returning what was stored:
    a resumed stream with a hole in it would look valid and be wrong. HTTP 410
    (Gone): the events existed, the log cannot give them back.
    """

    http_status: ClassVar[int] = 410

    def __init__(self, run_id: str, reason: str) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(
            f"run {run_id!r} cannot be resumed: its event log is incomplete ({reason})"
        )


class RunLost(StoreError):
    """The process writing the run stopped heartbeating: it died, the run will never end.

    Raised by ``follow`` after the events that were stored (they are correct;
    nothing more will come), so a reader learns the run is lost instead of
    waiting forever. HTTP 410: the rest of the run is gone.
    """

    http_status: ClassVar[int] = 410

    def __init__(self, run_id: str, reason: str) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"run {run_id!r} is lost: {reason}")


class StoreClosed(StoreError, RuntimeError):
    """The store was used before ``open()`` (``async with store``) or after ``aclose()``."""

    http_status: ClassVar[int] = 503
