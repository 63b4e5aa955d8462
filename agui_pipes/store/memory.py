"""``memory:`` — the event log in this process's memory, for tests and one-process demos.

Nothing survives the process, and two processes never see each other's runs:
use ``sqlite:`` for one server that must survive restarts, ``redis:`` for
several. Every operation is synchronous under the hood; followers wake on
an in-process signal, with no polling.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import anyio

from .._lazy import public_dir
from ._base import DEFAULT_SCOPE, ChangeSignals, EventLog, check_page, new_epoch
from ._errors import RunBroken, ThreadTaken, UnknownRun
from ._records import RunStatus, StoredRun, ThreadRecord, check_appendable
from ._retention import Retention, doomed_runs
from ._url import EXAMPLES, RETENTION_OPTIONS, StoreURL

__all__ = ["MemoryEventLog"]
__dir__ = public_dir(__all__)


@dataclass
class _Run:
    record: StoredRun
    entries: list[bytes] = field(default_factory=list)


@dataclass
class _Thread:
    scope: str
    created: float
    order: int
    runs: list[str] = field(default_factory=list)


class MemoryEventLog(EventLog):
    """The event log kept in dictionaries; see the module docstring."""

    def __init__(self, retention: Retention | None = None) -> None:
        super().__init__(retention)
        self._runs: dict[tuple[str, str], _Run] = {}
        self._threads: dict[str, _Thread] = {}
        self._order = 0
        self._signals = ChangeSignals()
        self._marks: dict[tuple[str, str, str], str] = {}
        self._leases: dict[tuple[str, str], tuple[str, float]] = {}

    @classmethod
    def from_url(cls, url: StoreURL) -> MemoryEventLog:
        """``memory:``: no path, no options but retention."""
        if url.parts.netloc or url.parts.path.strip("/") or url.options:
            raise ValueError(
                f"store URL {url.text!r}: 'memory:' takes no path and no options other than "
                f"retention ({', '.join(RETENTION_OPTIONS)}); {EXAMPLES}"
            )
        return cls(url.retention)

    def __repr__(self) -> str:
        return f"MemoryEventLog(runs={len(self._runs)})"

    async def _open(self) -> str:
        return new_epoch()

    async def _close(self) -> None:
        self._signals.changed_all()

    async def _create(self, scope: str, thread_id: str, run_id: str, digest: str | None) -> bool:
        # No await between the check and the write: atomic within the loop.
        if (scope, run_id) in self._runs:
            await anyio.lowlevel.checkpoint()
            return False
        if digest is not None:  # before append's checkpoint: a loser reads it at once
            self._marks[scope, run_id, "digest"] = digest
        try:
            await self.append(thread_id, run_id, [], scope=scope)
        except BaseException:
            self._marks.pop((scope, run_id, "digest"), None)
            raise
        return True

    def _holder(self, scope: str, thread_id: str) -> str | None:
        lease = self._leases.get((scope, thread_id))
        if lease is None or lease[1] <= time.monotonic():
            return None
        return lease[0]

    async def _acquire(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> str | None:
        await anyio.lowlevel.checkpoint()
        holder = self._holder(scope, thread_id)
        if holder is not None:
            return None if holder == run_id else holder
        self._leases[scope, thread_id] = (run_id, time.monotonic() + ttl_ms / 1000)
        return None

    async def _renew(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> bool:
        await anyio.lowlevel.checkpoint()
        if self._holder(scope, thread_id) != run_id:
            return False
        self._leases[scope, thread_id] = (run_id, time.monotonic() + ttl_ms / 1000)
        return True

    async def _release(self, scope: str, thread_id: str, run_id: str) -> None:
        await anyio.lowlevel.checkpoint()
        lease = self._leases.get((scope, thread_id))
        if lease is not None and lease[0] == run_id:
            del self._leases[scope, thread_id]

    async def append(
        self,
        thread_id: str,
        run_id: str,
        payloads: Sequence[bytes],
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> list[int]:
        self._check_open()
        now = self._now()
        key = (scope, run_id)
        run = self._runs.get(key)
        if run is None:
            thread = self._threads.get(thread_id)
            if thread is not None and thread.scope != scope:
                raise ThreadTaken(thread_id)
            if self._sweep_due(now):
                self._prune(now)
                thread = self._threads.get(thread_id)
            if thread is None:
                self._order += 1
                thread = self._threads[thread_id] = _Thread(scope, now, self._order)
            run = self._runs[key] = _Run(
                StoredRun(thread_id, run_id, RunStatus.LIVE, now, now, None, 0, scope=scope)
            )
            thread.runs.append(run_id)
        record = run.record
        check_appendable(record, thread_id)
        first = record.last_seq + 1
        run.entries.extend(payloads)
        run.record = replace(record, updated=now, last_seq=len(run.entries))
        if payloads:
            self._signals.changed(key)
        await anyio.lowlevel.checkpoint()
        return list(range(first, first + len(payloads)))

    async def read(
        self,
        run_id: str,
        after: int = 0,
        limit: int | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> list[tuple[int, bytes]]:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        run = self._runs.get((scope, run_id))
        if run is None:
            raise UnknownRun(run_id)
        if run.record.status is RunStatus.BROKEN:
            raise RunBroken(run_id, run.record.reason or "a write failed")
        start = max(after, 0)
        stop = len(run.entries) if limit is None else min(len(run.entries), start + limit)
        return [(seq + 1, run.entries[seq]) for seq in range(start, stop)]

    async def run(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> StoredRun | None:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        run = self._runs.get((scope, run_id))
        return None if run is None else run.record

    async def thread_runs(self, thread_id: str, *, scope: str = DEFAULT_SCOPE) -> list[StoredRun]:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        thread = self._threads.get(thread_id)
        if thread is None or thread.scope != scope:
            return []
        return [self._runs[scope, run_id].record for run_id in thread.runs]

    async def thread_scope(self, thread_id: str) -> str | None:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        thread = self._threads.get(thread_id)
        return None if thread is None else thread.scope

    async def threads(
        self, *, scope: str = DEFAULT_SCOPE, limit: int = 50, before: int | None = None
    ) -> list[ThreadRecord]:
        self._check_open()
        check_page(limit, before)
        await anyio.lowlevel.checkpoint()
        found = [
            ThreadRecord(thread_id, thread.created, thread.order)
            for thread_id, thread in self._threads.items()
            if thread.scope == scope and (before is None or thread.order < before)
        ]
        found.sort(key=lambda record: record.cursor, reverse=True)
        return found[:limit]

    async def end_run(
        self,
        run_id: str,
        status: RunStatus = RunStatus.FINISHED,
        reason: str | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> StoredRun:
        self._check_open()
        status = RunStatus(status)
        key = (scope, run_id)
        run = self._runs.get(key)
        if run is None:
            raise UnknownRun(run_id)
        if run.record.status is RunStatus.LIVE:
            now = self._now()
            run.record = replace(run.record, status=status, updated=now, ended=now, reason=reason)
            self._signals.changed(key)
        await anyio.lowlevel.checkpoint()
        return run.record

    async def mark_broken(self, run_id: str, reason: str, *, scope: str = DEFAULT_SCOPE) -> None:
        self._check_open()
        now = self._now()
        key = (scope, run_id)
        run = self._runs.get(key)
        if run is None:
            self._runs[key] = _Run(
                StoredRun("", run_id, RunStatus.BROKEN, now, now, now, 0, reason, scope=scope)
            )
        else:
            run.record = replace(
                run.record, status=RunStatus.BROKEN, updated=now, ended=now, reason=reason
            )
            run.entries.clear()  # unreadable from now on: no reason to hold them
        self._signals.changed(key)
        await anyio.lowlevel.checkpoint()

    async def prune(self, now: float | None = None) -> int:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        return self._prune(self._now() if now is None else now)

    def _prune(self, now: float) -> int:
        records = [run.record for run in self._runs.values()]
        doomed = set(doomed_runs(records, self.retention, now))
        for key in doomed:
            record = self._runs.pop(key).record
            thread = self._threads.get(record.thread_id)
            if thread is not None and thread.scope == record.scope:
                thread.runs.remove(record.run_id)
                if not thread.runs:
                    del self._threads[record.thread_id]
            self._signals.changed(key)
        if doomed:
            self._marks = {k: v for k, v in self._marks.items() if k[:2] not in doomed}
        return len(doomed)

    async def _put_mark(self, scope: str, run_id: str, kind: str, value: str) -> None:
        self._marks[scope, run_id, kind] = value
        await anyio.lowlevel.checkpoint()

    async def _get_mark(self, scope: str, run_id: str, kind: str) -> str | None:
        await anyio.lowlevel.checkpoint()
        return self._marks.get((scope, run_id, kind))

    def _change(self, scope: str, run_id: str) -> object:
        return self._signals.token((scope, run_id))

    async def _wait(self, change: object) -> None:
        assert isinstance(change, anyio.Event)
        await change.wait()
