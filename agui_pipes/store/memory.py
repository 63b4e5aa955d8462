"""``memory:`` — the event log in this process's memory, for tests and one-process demos.

Nothing survives the process, and two processes never see each other's runs:
use ``sqlite:`` for one server that must survive restarts, ``redis:`` for
several. Every operation is synchronous under the hood; followers wake on
an in-process signal, with no polling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import anyio

from .._lazy import public_dir
from ._base import ChangeSignals, EventLog, new_epoch
from ._errors import RunBroken, UnknownRun
from ._records import RunStatus, StoredRun, check_appendable
from ._retention import Retention, doomed_runs
from ._url import EXAMPLES, RETENTION_OPTIONS, StoreURL

__all__ = ["MemoryEventLog"]
__dir__ = public_dir(__all__)


@dataclass
class _Run:
    record: StoredRun
    entries: list[bytes] = field(default_factory=list)


class MemoryEventLog(EventLog):
    """The event log kept in dictionaries; see the module docstring."""

    def __init__(self, retention: Retention | None = None) -> None:
        super().__init__(retention)
        self._runs: dict[str, _Run] = {}
        self._threads: dict[str, list[str]] = {}
        self._signals = ChangeSignals()
        self._marks: dict[tuple[str, str], str] = {}

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

    async def append(self, thread_id: str, run_id: str, payloads: Sequence[bytes]) -> list[int]:
        self._check_open()
        now = self._now()
        run = self._runs.get(run_id)
        if run is None:
            if self._sweep_due(now):
                self._prune(now)
            run = self._runs[run_id] = _Run(
                StoredRun(thread_id, run_id, RunStatus.LIVE, now, now, None, 0)
            )
            self._threads.setdefault(thread_id, []).append(run_id)
        record = run.record
        check_appendable(record, thread_id)
        first = record.last_seq + 1
        run.entries.extend(payloads)
        run.record = replace(record, updated=now, last_seq=len(run.entries))
        if payloads:
            self._signals.changed(run_id)
        await anyio.lowlevel.checkpoint()
        return list(range(first, first + len(payloads)))

    async def read(
        self, run_id: str, after: int = 0, limit: int | None = None
    ) -> list[tuple[int, bytes]]:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        run = self._runs.get(run_id)
        if run is None:
            raise UnknownRun(run_id)
        if run.record.status is RunStatus.BROKEN:
            raise RunBroken(run_id, run.record.reason or "a write failed")
        start = max(after, 0)
        stop = len(run.entries) if limit is None else min(len(run.entries), start + limit)
        return [(seq + 1, run.entries[seq]) for seq in range(start, stop)]

    async def run(self, run_id: str) -> StoredRun | None:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        run = self._runs.get(run_id)
        return None if run is None else run.record

    async def thread_runs(self, thread_id: str) -> list[StoredRun]:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        return [self._runs[run_id].record for run_id in self._threads.get(thread_id, ())]

    async def end_run(
        self, run_id: str, status: RunStatus = RunStatus.FINISHED, reason: str | None = None
    ) -> StoredRun:
        self._check_open()
        status = RunStatus(status)
        run = self._runs.get(run_id)
        if run is None:
            raise UnknownRun(run_id)
        if run.record.status is RunStatus.LIVE:
            now = self._now()
            run.record = replace(run.record, status=status, updated=now, ended=now, reason=reason)
            self._signals.changed(run_id)
        await anyio.lowlevel.checkpoint()
        return run.record

    async def mark_broken(self, run_id: str, reason: str) -> None:
        self._check_open()
        now = self._now()
        run = self._runs.get(run_id)
        if run is None:
            self._runs[run_id] = _Run(
                StoredRun("", run_id, RunStatus.BROKEN, now, now, now, 0, reason)
            )
        else:
            run.record = replace(
                run.record, status=RunStatus.BROKEN, updated=now, ended=now, reason=reason
            )
            run.entries.clear()  # unreadable from now on: no reason to hold them
        self._signals.changed(run_id)
        await anyio.lowlevel.checkpoint()

    async def prune(self, now: float | None = None) -> int:
        self._check_open()
        await anyio.lowlevel.checkpoint()
        return self._prune(self._now() if now is None else now)

    def _prune(self, now: float) -> int:
        records = [run.record for run in self._runs.values()]
        doomed = set(doomed_runs(records, self.retention, now))
        for run_id in doomed:
            record = self._runs.pop(run_id).record
            runs = self._threads.get(record.thread_id)
            if runs is not None:
                runs.remove(run_id)
                if not runs:
                    del self._threads[record.thread_id]
            self._signals.changed(run_id)
        if doomed:
            self._marks = {k: v for k, v in self._marks.items() if k[0] not in doomed}
        return len(doomed)

    async def _put_mark(self, run_id: str, kind: str, value: str) -> None:
        self._marks[run_id, kind] = value
        await anyio.lowlevel.checkpoint()

    async def _get_mark(self, run_id: str, kind: str) -> str | None:
        await anyio.lowlevel.checkpoint()
        return self._marks.get((run_id, kind))

    def _change(self, run_id: str) -> object:
        return self._signals.token(run_id)

    async def _wait(self, run_id: str, change: object) -> None:
        assert isinstance(change, anyio.Event)
        await change.wait()
