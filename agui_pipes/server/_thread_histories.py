"""Thread histories kept folded in the process: extended by the runs that ended since, paged.

Why: folding a thread's every run on each ``GET threads/{threadId}`` (and on
each POST that must tell the client's new messages from the ones the thread
holds) costs the whole thread every time, and did it on the event loop — a
thread of 1,500 runs read five times at once stalled the server for seconds.
Here each thread's fold (``HistoryFold``) is kept open, per (scope, thread),
for the ``MAX_CACHED_THREADS`` most recently used threads: a read lists the
thread's runs and folds only those that ended since the last read, reading
them in chunks (at most ``CHUNK_RUNS`` runs or ``CHUNK_BYTES`` bytes of
events held at once) and folding each chunk, and stating the page, in a
worker thread, so the loop only awaits the store. One lock per thread: five
readers of one thread fold it once.

The fold is rebuilt from the first run when the listing no longer starts with
the runs already folded (retention removed the oldest, or a run ended after a
newer one): always the fold of the runs the store holds now, in their order.

The fold is also kept in the event log (``HistoryFold.snapshot``, as the
``history`` mark of the thread's first run), rewritten whenever
``SNAPSHOT_EVERY`` more runs were folded since the one kept: a process that
starts, or a thread that left the cache, begins from that snapshot and folds
only the runs that ended after it — a thread of 10,000 runs cost ~5 s to fold
from its runs, its snapshot ~0.1 s. A snapshot is used only when the runs it
folded (ids and generations) are where the listing starts; any other (a
thread pruned since, a corrupt or foreign value) is ignored, logged, and the
thread folded from its runs. One snapshot per thread, deleted with its first
run; two processes folding one thread may each write theirs (the last write
stays, and any of them is correct).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

import anyio
import anyio.lowlevel
import orjson
from ag_ui.core import CustomEvent, MessagesSnapshotEvent, StateSnapshotEvent

from .._consumer.history import HistoryFold, SnapshotInvalid
from ..codecs import encode_sse
from ..store import EventLog, RunBroken, RunStatus, StoredRun, StoreError, UnknownRun

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_RUNS",
    "DEFAULT_HISTORY_PAGE",
    "MAX_CACHED_THREADS",
    "MAX_HISTORY_PAGE",
    "MAX_SNAPSHOT_BYTES",
    "SNAPSHOT_EVERY",
    "HistoryView",
    "ThreadHistories",
    "UnknownBefore",
]

DEFAULT_HISTORY_PAGE: Final = 100
"""Runs in one page of ``GET threads/{threadId}`` when the request names no ``limit``."""

MAX_HISTORY_PAGE: Final = 1000
"""The most runs one page of ``GET threads/{threadId}`` holds (``?limit=``)."""

MAX_CACHED_THREADS: Final = 64
"""Threads whose fold a process keeps (the least recently read go first)."""

CHUNK_RUNS: Final = 64
"""Runs read from the store before they are folded (bounds what is held at once)."""

CHUNK_BYTES: Final = 8 * 1024 * 1024
"""Bytes of stored events read before they are folded (bounds what is held at once)."""

SNAPSHOT_EVERY: Final = 32
"""Runs folded past the thread's stored snapshot before it is written again: a cold read
folds at most this many runs more than the snapshot holds, and a thread's snapshot is
rewritten once per this many runs (it is the whole history: ~0.2 KB a message)."""

MAX_SNAPSHOT_BYTES: Final = 32 * 1024 * 1024
"""The largest snapshot kept in the event log; a thread whose fold is larger is folded
from its runs after a restart (and a warning says so, once per process)."""

_UNFOLDED: Final = (RunStatus.BROKEN, RunStatus.LOST)

_log = logging.getLogger("agui_pipes.server")


class UnknownBefore(LookupError):
    """``before=`` names no ended run of the thread's history."""


class HistoryView:
    """A page of a thread's history, as the thread route serves it.

    ``head`` is the history run's SSE frames; ``runs`` the thread's run
    records (as listed); ``next`` the run id to ask ``before=`` for the
    older page (None on the oldest).
    """

    __slots__ = ("head", "next", "runs")

    def __init__(self, head: bytes, runs: list[StoredRun], next_run: str | None) -> None:
        self.head = head
        self.runs = runs
        self.next = next_run


class _Entry:
    __slots__ = ("fold", "head", "listed", "lock", "runs", "stored", "too_large")

    def __init__(self, thread_id: str) -> None:
        self.fold = HistoryFold(thread_id)
        self.stored = 0  # runs the snapshot in the event log holds (as far as this one knows)
        self.too_large = False  # its snapshot was over MAX_SNAPSHOT_BYTES: warned, not kept
        self.lock = anyio.Lock()
        self.listed = -1.0  # when the last update began listing the runs (monotonic)
        self.runs: list[StoredRun] = []  # what it listed
        # The last page encoded: (runs folded, before, limit) -> (frames, next).
        self.head: tuple[tuple[int, str | None, int], tuple[bytes, str | None]] | None = None


def foldable(runs: Sequence[StoredRun]) -> list[str]:
    """The ids of the runs a history folds: ended, and neither broken nor lost."""
    return [r.run_id for r in runs if r.status.ended and r.status not in _UNFOLDED]


class ThreadHistories:
    """The folded histories of the threads this process read most recently (module doc)."""

    def __init__(self, max_threads: int = MAX_CACHED_THREADS) -> None:
        if not (isinstance(max_threads, int) and max_threads > 0):
            raise ValueError(f"max_threads must be a positive int, got {max_threads!r}")
        self._max = max_threads
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._loop: object = None

    def _entry(self, scope: str, thread_id: str) -> _Entry:
        loop = anyio.lowlevel.current_token()
        if loop != self._loop:
            # The locks belong to one event loop: an app served by another loop
            # (a test's, a sync client's own) starts a cache of its own.
            self._loop = loop
            self._entries = OrderedDict()
        key = (scope, thread_id)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(thread_id)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return entry

    async def page(
        self,
        store: EventLog,
        scope: str,
        thread_id: str,
        *,
        before: str | None = None,
        limit: int = DEFAULT_HISTORY_PAGE,
    ) -> HistoryView:
        """The page of ``limit`` runs before ``before`` (default: the newest), encoded.

        Raises ``UnknownRun`` for a thread with no runs, ``UnknownBefore``
        when ``before`` is not one of its folded runs, ``ValueError`` when its
        runs do not fold, and the store's errors.
        """
        entry = self._entry(scope, thread_id)
        arrived = time.monotonic()
        async with entry.lock:
            runs = await self._update(entry, store, scope, thread_id, arrived)
            if not runs:
                raise UnknownRun(thread_id, f"no thread {thread_id!r} in the event log")
            fold = entry.fold
            if before is not None and before not in fold.keys:
                raise UnknownBefore(
                    f"?before= names {before[:80]!r}, which is not an ended run of thread "
                    f"{thread_id!r}; pass the run id a page gave as its next"
                )

            def encode() -> tuple[bytes, str | None]:
                page = fold.page(before=before, limit=limit)
                events = page.events
                if page.next is not None:
                    marker = CustomEvent(name=PAGE_EVENT, value={"next": page.next})
                    events = [*events[:-1], marker, events[-1]]
                return b"".join(encode_sse(event) for event in events), page.next

            key = (len(fold.keys), before, limit)
            if entry.head is not None and entry.head[0] == key:
                head, next_run = entry.head[1]  # nothing was folded since: the same page
            else:
                head, next_run = await anyio.to_thread.run_sync(encode)
                entry.head = (key, (head, next_run))
        return HistoryView(head, runs, next_run)

    async def message_ids(self, store: EventLog, scope: str, thread_id: str) -> set[str]:
        """The ids of the messages the thread's history holds (its ended runs, folded)."""
        entry = self._entry(scope, thread_id)
        arrived = time.monotonic()
        async with entry.lock:
            await self._update(entry, store, scope, thread_id, arrived)
            return await anyio.to_thread.run_sync(entry.fold.message_ids)

    async def messages(
        self, store: EventLog, scope: str, thread_id: str
    ) -> list[dict[str, object]]:
        """The history's messages in wire form (a copy), oldest first."""
        entry = self._entry(scope, thread_id)
        arrived = time.monotonic()
        async with entry.lock:
            await self._update(entry, store, scope, thread_id, arrived)

            def dump() -> list[dict[str, object]]:
                snapshot = entry.fold.events()[1]
                dumped = snapshot.model_dump(by_alias=True, exclude_none=True, mode="json")
                messages: list[dict[str, object]] = dumped["messages"]
                return messages

            return await anyio.to_thread.run_sync(dump)

    async def seed(
        self, store: EventLog, scope: str, thread_id: str
    ) -> tuple[list[StoredRun], list[dict[str, Any]], Any]:
        """The thread's run records, and its history's messages and state (None: untouched).

        What a join of the thread's live run starts its fold from.
        """
        entry = self._entry(scope, thread_id)
        arrived = time.monotonic()
        async with entry.lock:
            runs = await self._update(entry, store, scope, thread_id, arrived)

            def dump() -> tuple[list[dict[str, Any]], Any]:
                messages: list[dict[str, Any]] = []
                state: Any = None
                for event in entry.fold.events():
                    if isinstance(event, MessagesSnapshotEvent):
                        dumped = event.model_dump(by_alias=True, exclude_none=True, mode="json")
                        messages = dumped["messages"]
                    elif isinstance(event, StateSnapshotEvent):
                        state = event.snapshot
                return messages, state

            messages, state = await anyio.to_thread.run_sync(dump)
        return runs, messages, state

    async def _update(
        self, entry: _Entry, store: EventLog, scope: str, thread_id: str, arrived: float
    ) -> list[StoredRun]:
        """Fold the runs that ended since; the thread's run records (entry's lock held).

        A reader that waited for the lock while another updated the fold takes
        that update (it began after the reader arrived, so it saw at least
        what the reader would have): concurrent readers list the runs once.
        """
        if entry.listed >= arrived:
            return entry.runs
        entry.listed = time.monotonic()
        entry.runs = []
        runs = await store.thread_runs(thread_id, scope=scope)
        fold = entry.fold

        def unfolded() -> tuple[bool, list[str]]:
            # O(runs) of Python: in the worker thread, not on the loop.
            wanted = foldable(runs)
            done = len(fold.keys)
            if fold.keys != wanted[:done]:
                return False, wanted
            return True, wanted[done:]

        kept, pending = await anyio.to_thread.run_sync(unfolded)
        if not kept:
            fold = entry.fold = HistoryFold(thread_id)
            entry.stored = 0
        if not fold.keys and pending:
            restored = await _load_snapshot(store, scope, thread_id, runs, pending)
            if restored is not None:
                fold = entry.fold = restored
                entry.stored = len(fold.keys)
                pending = pending[len(fold.keys) :]
                kept = False  # the page encoded last is stale
        if pending or not kept:
            entry.head = None  # the fold changes: the page encoded last is stale
        chunk: list[tuple[str, list[bytes]]] = []
        size = 0
        try:
            for run_id in pending:
                try:
                    data = [payload for _, payload in await store.read(run_id, scope=scope)]
                except (RunBroken, UnknownRun):
                    data = []  # broken or pruned since listed: it adds nothing
                chunk.append((run_id, data))
                size += sum(map(len, data))
                if len(chunk) >= CHUNK_RUNS or size >= CHUNK_BYTES:
                    await anyio.to_thread.run_sync(_fold_chunk, fold, chunk)
                    chunk, size = [], 0
            if chunk:
                await anyio.to_thread.run_sync(_fold_chunk, fold, chunk)
            if len(fold.keys) - entry.stored >= SNAPSHOT_EVERY and not entry.too_large:
                await self._save_snapshot(entry, store, scope, thread_id, runs)
        except BaseException:
            # A fold cut halfway (a run that does not fold, a cancelled read)
            # is not the fold of any list of runs: start again next time.
            entry.fold = HistoryFold(thread_id)
            entry.listed, entry.head = -1.0, None
            raise
        entry.runs = runs
        return runs

    @staticmethod
    async def _save_snapshot(
        entry: _Entry, store: EventLog, scope: str, thread_id: str, runs: list[StoredRun]
    ) -> None:
        """Keep the entry's fold in the event log (a failing store: logged, the read goes on)."""
        fold = entry.fold
        generations = _generations(runs, fold.keys)
        data = await anyio.to_thread.run_sync(
            lambda: orjson.dumps(generations) + b"\n" + fold.snapshot()
        )
        if len(data) > MAX_SNAPSHOT_BYTES:
            entry.too_large = True
            _log.warning(
                "thread %r: its history (%d runs, %.1f MiB) is over the %d MiB a snapshot may "
                "hold; it is folded from its runs after a restart",
                thread_id[:80],
                len(fold.keys),
                len(data) / 2**20,
                MAX_SNAPSHOT_BYTES // 2**20,
            )
            return
        try:
            await store.put_history_snapshot(runs[0].run_id, data, scope=scope)
        except StoreError as exc:
            _log.warning("thread %r: cannot keep its history snapshot: %s", thread_id[:80], exc)
            return
        entry.stored = len(fold.keys)


def _generations(runs: Sequence[StoredRun], keys: Sequence[str]) -> list[float]:
    """When the runs ``keys`` name were created, in their order (a snapshot's run check).

    The creation time is what a run's generation is made of (``StoredRun.generation``):
    a run id used again after a prune has another. The float itself, because turning
    10,000 of them into generation strings took ~30 ms.
    """
    by_id = {run.run_id: run.created for run in runs}
    return [by_id[key] for key in keys]


async def _load_snapshot(
    store: EventLog,
    scope: str,
    thread_id: str,
    runs: list[StoredRun],
    wanted: list[str],
) -> HistoryFold | None:
    """The thread's stored fold, when the runs it folded are where ``wanted`` starts.

    ``None`` when there is none, it folded other runs (a thread pruned since),
    or it does not read (logged): the caller folds from the runs.
    """
    try:
        data = await store.history_snapshot(runs[0].run_id, scope=scope)
    except StoreError as exc:
        _log.warning("thread %r: cannot read its history snapshot: %s", thread_id[:80], exc)
        return None
    if data is None:
        return None

    def restore() -> HistoryFold | None:
        head, _, body = data.partition(b"\n")
        try:
            generations = orjson.loads(head)
            fold = HistoryFold.restore(thread_id, body)
        except (orjson.JSONDecodeError, SnapshotInvalid) as exc:
            _log.warning(
                "thread %r: its stored history snapshot is unusable (%s); folding its runs",
                thread_id[:80],
                exc,
            )
            return None
        done = len(fold.keys)
        if fold.keys != wanted[:done] or generations != _generations(runs, fold.keys):
            return None  # it folded runs the thread no longer holds in that order
        return fold

    return await anyio.to_thread.run_sync(restore)


PAGE_EVENT: Final = "agui_pipes.history_page"
"""The CUSTOM event a history page carries when an older page exists (its value: ``next``)."""


def _fold_chunk(fold: HistoryFold, chunk: list[tuple[str, list[bytes]]]) -> None:
    for run_id, data in chunk:
        fold.add(run_id, data)
