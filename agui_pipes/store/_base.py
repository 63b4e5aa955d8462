"""What every event log backend shares: the interface, ``EventLog``, and in-process wake-ups.

The log keeps, per run, the JSON text of each event exactly as the server
wrote it after ``data:`` (bytes), numbered 1, 2, 3... Storing the wire text
means a resumed stream is the same bytes as the live one, and resuming never
decodes or re-encodes an event.

Backends differ in how they store and how a follower waits; the reading
logic a follower runs (stored entries, then live ones, then stop where the
run ended, or raise if it broke) is written once here, in ``follow``, on top
of ``read``, ``run`` and a backend's ``_wait``. The run records and the checks on
them are in ``_records``, retention in ``_retention``.
"""

from __future__ import annotations

import abc
import secrets
import time
from collections.abc import AsyncIterator, Hashable, Sequence
from types import TracebackType

import anyio

from .._foundation.principal import DEFAULT_SCOPE
from ._claims import ThreadClaims
from ._errors import RunLost, StoreClosed, WrongRun
from ._ids import shown_id
from ._records import (
    RunStatus,
    StoredRun,
    ThreadRecord,
    check_readable,
    past_the_end,
    resume_seq,
)
from ._retention import Retention, SweepSchedule

__all__ = [
    "DEFAULT_SCOPE",
    "MAX_THREADS_PAGE",
    "ChangeSignals",
    "EventLog",
    "check_page",
    "new_epoch",
]

MAX_THREADS_PAGE = 500
"""The most threads one ``EventLog.threads`` call lists."""


class ChangeSignals:
    """Per-run wake-ups within one process: followers wait, writers signal.

    A follower takes the run's event *before* reading, so an append that
    lands between its read and its wait still wakes it; the writer pops the
    event when it signals, so the next follower round gets a fresh one.
    """

    def __init__(self) -> None:
        self._events: dict[Hashable, anyio.Event] = {}

    def token(self, key: Hashable) -> anyio.Event:
        event = self._events.get(key)
        if event is None:
            event = self._events[key] = anyio.Event()
        return event

    def changed(self, key: Hashable) -> None:
        event = self._events.pop(key, None)
        if event is not None:
            event.set()

    def changed_all(self) -> None:
        events, self._events = self._events, {}
        for event in events.values():
            event.set()


def new_epoch() -> str:
    """A short random token naming one store's lifetime (12 hex digits)."""
    return secrets.token_hex(6)


class EventLog(ThreadClaims):
    """A durable log of runs' events: append, read, follow live, list a thread's runs.

    Use it as an async context manager (``async with open_store(url) as
    log:``), or ``await log.open()`` / ``await log.aclose()``. One object is
    meant for one event loop; several objects (processes) may share a SQLite
    file or a Redis database.

    A run is created by its first ``append`` (an empty batch creates it
    without events), takes appends while it is live, and is closed by
    ``end_run`` or ``mark_broken``. Sequence numbers are per run, from 1,
    without holes.

    Every method takes ``scope=`` (default :data:`DEFAULT_SCOPE`, the scope of
    logs written before scopes existed): runs are keyed by (scope, run id), so
    another scope's run is one this scope does not hold, and a run id another
    scope used names a new run here. A thread belongs to the scope whose run
    created it: an append that would create a run in another scope's thread
    raises :class:`ThreadTaken`, and ``thread_runs`` of another scope's thread
    is empty.
    """

    follow_batch = 512
    """Entries read per round trip while following."""

    owner_timeout: float | None = 15.0
    """Seconds without a heartbeat (``heartbeat``) after which a follower declares a
    live run lost (``None``: never). Only runs that were heartbeated at least once
    are judged, so a log written without heartbeats is never declared lost."""

    resume_wait: float = 10.0
    """Seconds ``resume_after`` waits for a live run's log to reach the seq of a
    client's id before answering that it is past the run's end (409). A server
    sends an event's frame before the event is stored, so the log may lag the
    ids clients hold by a batch; the recorder stores it within its own bounds
    (``RunRecorder.close_timeout``, 10 s) or marks the run broken (then 410)."""

    def __init__(self, retention: Retention | None = None) -> None:
        self.retention = retention or Retention()
        self._epoch: str | None = None
        self._closed = False
        self._sweeps = SweepSchedule()

    # -- lifecycle -------------------------------------------------------------

    @property
    def epoch(self) -> str:
        """The store's random token, made when the store was first created and kept in it."""
        if self._epoch is None:
            raise self._not_open()
        return self._epoch

    async def open(self) -> None:
        """Connect and read (or create) the epoch. Idempotent."""
        if self._closed:
            raise StoreClosed(f"{self!r} was closed; open a new store object")
        if self._epoch is None:
            self._epoch = await self._open()

    async def aclose(self) -> None:
        """Release connections. Idempotent; the stored runs stay."""
        if not self._closed:
            self._closed = True
            if self._epoch is not None:
                self._epoch = None
                await self._close()

    async def __aenter__(self) -> EventLog:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True):
            await self.aclose()

    def _check_open(self) -> None:
        if self._epoch is None:
            raise self._not_open()

    def _not_open(self) -> StoreClosed:
        if self._closed:
            return StoreClosed(f"{self!r} is closed")
        return StoreClosed(
            f"{self!r} is not open: use `async with store:` or `await store.open()` first"
        )

    # -- the interface ---------------------------------------------------------

    @abc.abstractmethod
    async def append(
        self,
        thread_id: str,
        run_id: str,
        payloads: Sequence[bytes],
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> list[int]:
        """Store ``payloads`` (each one event's wire JSON) at the end of the run, in one write.

        Creates the run (status live) on its first append; an empty batch
        only creates it. Returns the sequence numbers given, consecutive.
        Raises :class:`WrongThread` if the run belongs to another thread,
        :class:`RunEnded` if it was ended, :class:`RunBroken` if broken,
        :class:`ThreadTaken` if a new run's thread is another scope's.
        """

    @abc.abstractmethod
    async def read(
        self,
        run_id: str,
        after: int = 0,
        limit: int | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> list[tuple[int, bytes]]:
        """Stored entries of the run with ``seq > after``, in order, at most ``limit``.

        Raises :class:`UnknownRun` for a run the store does not hold and
        :class:`RunBroken` for a run whose log is incomplete.
        """

    @abc.abstractmethod
    async def run(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> StoredRun | None:
        """The run's record, or None."""

    @abc.abstractmethod
    async def thread_runs(self, thread_id: str, *, scope: str = DEFAULT_SCOPE) -> list[StoredRun]:
        """The thread's runs, oldest first (the order they were created); none for a
        thread of another scope."""

    @abc.abstractmethod
    async def thread_scope(self, thread_id: str) -> str | None:
        """The scope the thread belongs to, or None for a thread the store does not hold."""

    @abc.abstractmethod
    async def threads(
        self, *, scope: str = DEFAULT_SCOPE, limit: int = 50, before: int | None = None
    ) -> list[ThreadRecord]:
        """The scope's threads, newest first, at most ``limit`` (1 to
        :data:`MAX_THREADS_PAGE`); with ``before`` (a record's ``cursor``) only
        those created before that one."""

    @abc.abstractmethod
    async def end_run(
        self,
        run_id: str,
        status: RunStatus = RunStatus.FINISHED,
        reason: str | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> StoredRun:
        """Close the run's log with ``status``: followers stop after its last entry.

        Ending an already ended run keeps its first status (and returns it):
        the first ending is the true one. Raises :class:`UnknownRun`.
        """

    @abc.abstractmethod
    async def mark_broken(self, run_id: str, reason: str, *, scope: str = DEFAULT_SCOPE) -> None:
        """Record that a write of this run failed: it can no longer be read or resumed.

        Overrides any status (a run that ended cleanly but lost a batch is
        still broken). A run the store does not hold is created broken, so
        a client trying to resume it gets "broken", not "unknown".
        """

    @abc.abstractmethod
    async def prune(self, now: float | None = None) -> int:
        """Apply ``self.retention`` now; the number of runs deleted."""

    @abc.abstractmethod
    async def _open(self) -> str: ...

    @abc.abstractmethod
    async def _close(self) -> None: ...

    async def check_owner(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> StoredRun | None:
        """Mark a live run lost if its writer's heartbeat is older than ``owner_timeout``.

        Returns the run's record after the check (``LOST`` if this call or
        another process declared it lost). The first ending wins, so when
        several followers notice at once the run is marked once.
        """
        record = await self.run(run_id, scope=scope)
        timeout = self.owner_timeout
        if record is None or record.status.ended or timeout is None:
            return record
        beat = await self.heartbeat_seen(run_id, scope=scope)
        if beat is None:
            return record
        silent = self._now() - beat
        if silent <= timeout:
            return record
        return await self.end_run(
            run_id,
            RunStatus.LOST,
            f"the process writing it stopped heartbeating {silent:.1f} s ago "
            f"(owner timeout {timeout} s): it died or lost the event log",
            scope=scope,
        )

    async def health(self) -> str | None:
        """``None`` when the store can take writes now, else why not (no path, no internals).

        Cheap and bounded: a server's ``/healthz`` calls it. A backend that can
        tell (SQLite: a stalled write, the file deleted, the disk full) overrides
        it; the default knows of no trouble.
        """
        return None

    def _owner_check_interval(self) -> float | None:
        timeout = self.owner_timeout
        return None if timeout is None else max(0.05, timeout / 3)

    # -- shared behaviour ------------------------------------------------------

    async def follow(
        self, run_id: str, after: int = 0, *, scope: str = DEFAULT_SCOPE
    ) -> AsyncIterator[tuple[int, bytes]]:
        """Yield the run's entries after ``after``: stored ones, then live ones as appended.

        Stops after the last entry of an ended run; raises :class:`RunBroken`
        as soon as the run is marked broken (entries yielded before were
        stored and are correct; what follows could have a hole),
        :class:`RunLost` after the last entry of a run whose writer died
        (checked with ``check_owner`` whenever the follower has waited
        ``owner_timeout / 3`` seconds with nothing new),
        :class:`UnknownRun` for a run the store does not hold and
        :class:`WrongRun` when the run ended before ``after``.
        """
        check_every = self._owner_check_interval()
        next_check = time.monotonic() if check_every is None else time.monotonic() + check_every
        while True:
            change = self._change(scope, run_id)
            # The record is read before the entries: a run seen ended here
            # had all its entries stored, so an empty read below is its end.
            record = check_readable(await self.run(run_id, scope=scope), run_id)
            entries = await self.read(run_id, after=after, limit=self.follow_batch, scope=scope)
            for entry in entries:
                yield entry
            if entries:
                after = entries[-1][0]
                continue
            if record.status is RunStatus.LOST:
                raise RunLost(run_id, record.reason or "its writer died")
            if record.status.ended:
                if after > record.last_seq:
                    # Asked for a position the run never reached: an end with
                    # no terminal event would look like a cut stream.
                    raise WrongRun(
                        f"position #{after} is past the end of run {shown_id(run_id)} "
                        f"(its last event is #{record.last_seq})"
                    )
                return
            if check_every is None:
                await self._wait(change)
                continue
            now = time.monotonic()
            if now >= next_check:
                next_check = now + check_every
                await self.check_owner(run_id, scope=scope)
                continue
            with anyio.move_on_after(next_check - now):
                await self._wait(change)

    def _change(self, scope: str, run_id: str) -> object:
        """A token taken before reading, that ``_wait`` waits on (backend-specific)."""
        return None

    async def _wait(self, change: object) -> None:
        """Return when the run may have changed since ``change`` was taken."""
        await anyio.sleep(0.1)

    async def resume_after(
        self,
        run_id: str,
        last_event_id: str | None,
        *,
        scope: str = DEFAULT_SCOPE,
        issued: int | None = None,
    ) -> int:
        """The seq to read after for a client resuming ``run_id`` from an SSE id.

        ``None`` (no header) means from the start (0). Raises
        :class:`BadEventId` (400) for an unparsable id, :class:`WrongRun`
        (409) for an id of another run, of another store epoch (the store
        was reset: positions in it mean nothing now), of an earlier run of the
        same id (deleted by retention) or past the end of the run (the scope
        is not in the id: the run is looked up in ``scope``, the requesting
        principal's), :class:`UnknownRun` (404) for a run not in the store,
        and :class:`RunBroken` (410) for a run whose log is incomplete.

        Past the end of a *live* run: ``issued`` is the last seq the writer
        numbered, when the caller knows it (the server writing the run) — an
        id past it is refused at once. Otherwise the log may not hold yet an
        event whose frame was sent, so an id past what is stored waits up to
        ``resume_wait`` seconds for it (returning as soon as it is stored) and
        is refused if the run ends first or it never comes.
        """
        record = check_readable(await self.run(run_id, scope=scope), run_id)
        if last_event_id is None:
            return 0
        seq = resume_seq(record, last_event_id, self.epoch)
        if record.status.ended or seq <= record.last_seq:
            return seq
        if issued is not None:
            if seq <= issued:
                return seq
            raise past_the_end(last_event_id, run_id, issued, live=True)
        with anyio.move_on_after(self.resume_wait):
            while True:
                change = self._change(scope, run_id)
                record = check_readable(await self.run(run_id, scope=scope), run_id)
                if record.last_seq >= seq:
                    return seq
                if record.status.ended:
                    raise past_the_end(last_event_id, run_id, record.last_seq, live=False)
                await self._wait(change)
        raise past_the_end(last_event_id, run_id, record.last_seq, live=True)

    def _sweep_due(self, now: float) -> bool:
        """True at most once per ``retention.interval``: time to prune on this create."""
        return self._sweeps.due(self.retention, now)

    @staticmethod
    def _now() -> float:
        return time.time()


def check_page(limit: int, before: int | None) -> None:
    """Raise ``ValueError`` for a ``threads`` page that cannot be listed."""
    if not (isinstance(limit, int) and 1 <= limit <= MAX_THREADS_PAGE):
        raise ValueError(f"limit must be an int from 1 to {MAX_THREADS_PAGE}, got {limit!r}")
    if before is not None and not isinstance(before, int):
        raise ValueError(f"before must be a thread cursor (an int) or None, got {before!r}")
