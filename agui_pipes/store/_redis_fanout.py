"""One blocking ``XREAD`` per process for every follower of a live run: the fan-out reader.

Why: a follower that blocks in ``XREAD`` holds a connection for the whole
wait, so N followers of quiet live runs took N connections and 120 of them
emptied redis-py's pool (HTTP 500s, false ``RUN_LOST``, new runs refused).
Here one task per store object blocks in a single ``XREAD`` over every
stream someone follows, on a connection of its own (never one of the pool),
and hands what it read to the followers waiting on it.

Each followed stream is a ``_Watch``: the newest entry id the reader has
seen (``head``) and the entries it read since ``base``, kept so followers
that are at most ``CACHE`` entries behind take them from memory (no round
trip per follower per event). Ids are compared as ``(major, minor)``: batches
are ``0-{last seq}``, the end marker ``1-*``, so the marker sorts after every
batch. A follower waits with ``wait_past(stream, position)``: it returns as
soon as the stream holds something after ``position`` — the cached entries
after it if the cache covers it, else ``[]`` (read it yourself) — or
``None`` after ``timeout`` (re-check the run record: it may have expired).
A watch belongs to one incarnation of its stream (the run's creation time):
a follower of a run written again under the same id starts the watch over.

A stream the reader does not watch yet is added by the follower that first
waits on it; if the reader is blocked then, the follower writes one entry to
the process's wake stream (``{prefix}wake:{token}``, always in the
``XREAD``), which ends the block so the next one includes the new stream.
A watch without waiters for ``linger`` seconds is dropped.

Everything here runs in the asyncio loop that owns the redis client (the
caller's on asyncio, the bridge loop under trio).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ._redis_bridge import close_client

__all__ = ["FanoutReader", "entry_id", "is_marker"]

Position = tuple[int, int]
Entry = tuple[Position, dict[bytes, bytes]]

CACHE = 256
"""Entries kept per followed stream for followers slightly behind (a wider gap reads)."""


def entry_id(raw: bytes | str) -> Position:
    """A stream entry id ``major-minor`` as a pair of ints, for comparing."""
    name = raw.decode() if isinstance(raw, bytes) else raw
    major, _, minor = name.partition("-")
    return int(major), int(minor or 0)


def is_marker(position: Position) -> bool:
    """Whether an entry id is a run's end marker (``1-*``), not a batch (``0-*``)."""
    return position[0] != 0


class _Watch:
    """One followed stream: what the reader has seen of it, and who waits."""

    def __init__(self, position: Position, created: float) -> None:
        self.created = created
        self.head = position
        self.base = position
        self.entries: deque[Entry] = deque()
        self._loop = asyncio.get_running_loop()
        self.changed: asyncio.Future[None] = self._loop.create_future()
        self.waiters = 0
        self.idle_since = time.monotonic()
        self.generation = 0

    def reset(self, position: Position, created: float) -> None:
        """Start over from ``position`` (the stream was deleted and written again)."""
        self.created = created
        self.head = self.base = position
        self.entries.clear()
        self.generation += 1

    def add(self, entries: list[Entry]) -> None:
        """Entries the reader got after ``head``: keep them, wake the waiters."""
        for entry in entries:
            self.entries.append(entry)
            self.head = entry[0]
        while len(self.entries) > CACHE:
            self.base = self.entries.popleft()[0]
        self.wake()

    def wake(self) -> None:
        # One future shared by every waiter (no task per waiter), replaced at each wake.
        changed, self.changed = self.changed, self._loop.create_future()
        if not changed.done():
            changed.set_result(None)

    def after(self, position: Position) -> list[Entry]:
        """The entries after ``position`` if the cache holds all of them, else ``[]``."""
        if not self.base <= position < self.head:
            return []
        newer: list[Entry] = []
        for entry in reversed(self.entries):  # from the newest: usually one or two to take
            if entry[0] <= position:
                break
            newer.append(entry)
        newer.reverse()
        return newer


class FanoutReader:
    """The per-store reader (module doc). ``client`` is its own connection's client;
    ``poke`` writes to ``wake_key`` through the pool."""

    def __init__(
        self,
        client: Any,
        wake_key: str,
        poke: Callable[[], Any],
        block: float,
        count: int,
    ) -> None:
        self._client = client
        self._wake_key = wake_key
        self._wake_position = "0-0"
        self._poke = poke
        self._block_ms = max(1, int(block * 1000))
        self._linger = block
        self._count = count
        self._watches: dict[str, _Watch] = {}
        self._work = asyncio.Event()
        self._blocking = False
        self._failures = 0
        self._task: asyncio.Task[None] | None = None
        self.reads = 0
        """``XREAD`` calls made (for the figures in durable.md and the tests)."""

    @property
    def watched(self) -> int:
        """How many streams the reader follows now."""
        return len(self._watches)

    async def wait_past(
        self,
        stream: str,
        position: Position,
        timeout: float,
        created: float,
        *,
        queried: bool = False,
        read_nothing: bool = False,
    ) -> list[Entry] | None:
        """Wait until ``stream`` holds an entry after ``position`` (see the module doc).

        ``created`` is the creation time of the follower's run, as last read:
        a stream deleted and written again (Redis restarted empty, or the run
        pruned and its id used again) is another run, so what the reader kept
        of the old one is never handed out for it. ``queried``: the caller
        has just read its run (so ``created`` is current); ``read_nothing``:
        and found nothing after ``position``, so a head beyond it is stale.
        """
        watch = self._watches.get(stream)
        fresh = watch is None
        if watch is None:
            watch = self._watches[stream] = _Watch(position, created)
        elif watch.created != created:
            if not queried:
                return []  # the run may be another one now: read it first
            watch.reset(position, created)
            fresh = True
        elif watch.head > position and (
            read_nothing or (is_marker(watch.head) and position < watch.base)
        ):
            # Also an ended stream a follower further back than the cache still
            # sees live: read it again from here (at worst one more read).
            watch.reset(position, created)
            fresh = True
        watch.waiters += 1
        failures = self._failures
        try:
            if fresh:
                await self._start()
            deadline = time.monotonic() + timeout
            while not watch.head > position:
                changed = watch.changed
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                done, _ = await asyncio.wait((changed,), timeout=remaining)
                if not done:
                    return None
                if self._watches.get(stream) is not watch or self._failures != failures:
                    return []  # dropped, or the reader failed: read the run yourself
            return watch.after(position)
        finally:
            watch.waiters -= 1
            if not watch.waiters:
                watch.idle_since = time.monotonic()

    async def _start(self) -> None:
        """Make sure the reader runs and will include every watch in its next ``XREAD``."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        self._work.set()
        if self._blocking:
            try:
                await self._poke()
            except Exception:
                pass

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        for watch in self._watches.values():
            watch.wake()
        self._watches.clear()
        await close_client(self._client)

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            self._drop_idle()
            if not self._watches:
                self._work.clear()
                await self._work.wait()
                continue
            snapshot = {name: (watch, watch.generation) for name, watch in self._watches.items()}
            streams = {self._wake_key: self._wake_position}
            streams.update(
                (name, f"{watch.head[0]}-{watch.head[1]}") for name, watch in self._watches.items()
            )
            self._blocking = True
            try:
                reply = await self._client.xread(streams, count=self._count, block=self._block_ms)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._failures += 1
                for watch in self._watches.values():
                    watch.wake()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            finally:
                self._blocking = False
            backoff = 0.05
            self.reads += 1
            for raw_name, raw_entries in _streams(reply):
                name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
                if name == self._wake_key:
                    if raw_entries:
                        last = raw_entries[-1][0]
                        self._wake_position = last.decode() if isinstance(last, bytes) else last
                    continue
                seen = snapshot.get(name)
                if seen is None or self._watches.get(name) is not seen[0]:
                    continue
                watch, generation = seen
                if watch.generation != generation:
                    continue  # reset while we read: what we got started elsewhere
                entries = [(entry_id(raw), fields) for raw, fields in raw_entries]
                watch.add([entry for entry in entries if entry[0] > watch.head])

    def _drop_idle(self) -> None:
        now = time.monotonic()
        for name, watch in list(self._watches.items()):
            if not watch.waiters and now - watch.idle_since > self._linger:
                del self._watches[name]


def _streams(reply: Any) -> list[tuple[Any, list[Any]]]:
    """``XREAD``'s reply (RESP2, which the reader's client speaks) as ``(stream, entries)``."""
    return [(name, entries) for name, entries in reply or ()]
