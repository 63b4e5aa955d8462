"""``redis://host:port/db`` — the event log several server processes share, in Redis Streams.

Why Redis: processes behind a load balancer must all see every run, so a
client cut from process A can resume on process B, and B's follower must
wake when A appends. Redis Streams give both: an append-only log per run,
read by range (``XRANGE``) and waited on (``XREAD BLOCK``: one per process,
for all its followers, in ``_redis_fanout``).

Layout (every key starts with ``prefix``, ``agui:`` by default):

* ``{prefix}run:{runId}`` — a hash: thread, status, created, updated,
  ended, last_seq, reason, order;
* ``{prefix}events:{runId}`` — a stream with one entry per appended batch
  (the payloads joined, their lengths, the first seq: see ``_batches``),
  whose explicit entry id is ``0-{last seq of the batch}``; so reading after
  seq N is ``XRANGE (0-N`` (the batch holding N+1 and all later ones) minus
  what the first batch holds up to N. Ending a run adds one marker entry
  ``1-*`` (after every batch id), which wakes blocked followers at once;
* ``{prefix}thread:{threadId}`` — a sorted set of the thread's runs by
  creation order; ``{prefix}runs`` the same for all runs (for retention);
  ``{prefix}order`` the counter giving that order; ``{prefix}epoch``;
* ``{prefix}mark:{kind}:{runId}`` — the cross-process signals (reader seen,
  stop requested, owner heartbeat): plain strings ``SET`` with an expiry
  (``max_age``, or a day without one), refreshed by every write, and
  deleted with their run by ``prune``; ``mark:history:`` on a thread's first
  run holds the thread's folded history (expiring with ``max_age`` only);
* ``{prefix}threads`` — a sorted set of the scope's threads by creation order
  (the ``threads`` listing);
* ``{prefix}wake:{token}`` — one per open store object: a short stream its
  fan-out reader always reads, written to end the reader's block when a
  follower starts watching a new stream (``_redis_fanout``); it expires.

Those are the keys of the default scope — the very keys 0.1 wrote, so its
runs are the default scope's. Another scope's keys have the same names after
``{prefix}@{len(scope)}:{scope}/`` (the length makes the name unambiguous
whatever the scope holds). Global to every scope: ``{prefix}order``,
``{prefix}epoch``, ``{prefix}scopes`` (the scopes other than the default,
for retention) and ``{prefix}owner:{threadId}``, a hash naming the scope a
thread belongs to (``scope``, ``created``, ``order``). ``{prefix}layout``
says the keys of 0.1 were given their thread owners and listing (done once,
at the first open by this version: see ``_migrate``).

An append is one Lua script (one round trip, atomic): it creates the run if
needed, checks it is live and of the same thread, ``XADD``s the batch as one
entry and advances ``last_seq`` — so two processes can never interleave seqs.

Retention: ``max_age`` becomes key expiry (refreshed by every write), so
runs of a crashed fleet still go away; counts are applied by ``prune``.
Streams are never trimmed with ``MAXLEN``: a trimmed run would resume with a
silent hole, exactly what the log exists to prevent; whole runs go instead.

The ``redis`` package's client (``redis.asyncio``) runs on asyncio only.
Under trio the store runs it in an asyncio loop of its own, in a thread,
and awaits each call through a worker thread: the same behaviour, at the
cost of a thread hop per Redis call (asyncio is the faster choice).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlencode, urlunsplit

from .._lazy import public_dir
from ._base import DEFAULT_SCOPE, check_page
from ._batches import join_batch, split_batch
from ._errors import RunBroken, RunLost, UnknownRun, WrongRun
from ._ids import shown_id
from ._records import RunStatus, StoredRun, ThreadRecord, check_readable
from ._redis_claims import RedisClaims
from ._redis_connection import (
    DEFAULT_BLOCK,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_POOL_TIMEOUT,
    DEFAULT_SOCKET_TIMEOUT,
)
from ._redis_fanout import is_marker
from ._redis_layout import EpochChanged, appended, run_record, text
from ._retention import doomed_runs
from ._url import EXAMPLES, StoreURL

__all__ = ["RedisEventLog"]
__dir__ = public_dir(__all__)


_LAST_EVENT = "0-18446744073709551615"

_RESET = (
    "the event log was reset (Redis restarted empty or was flushed) while the run was "
    "live; its earlier events are gone"
)

_MARKS = ("reader", "stop", "beat", "history")
"""The kinds of marks ``EventLog`` writes (see ``_base``), deleted with their run."""


class RedisEventLog(RedisClaims):
    """The event log in Redis Streams; see the module docstring.

    ``url`` is a redis-py URL (``redis://[user:pass@]host:port/db``, or
    ``rediss://`` for TLS). ``block`` is how long the shared reader's ``XREAD
    BLOCK`` waits, and how often a quiet follower re-checks its run record (a
    safety net: ending a run wakes followers at once through the stream's end
    marker). ``max_connections``, ``pool_timeout`` and ``socket_timeout`` are
    the connection budget (``_redis_connection``).
    """

    @classmethod
    def from_url(cls, url: StoreURL) -> RedisEventLog:
        """``redis://`` / ``rediss://``; options ``prefix``, ``block``, ``max_connections``,
        ``pool_timeout``, ``socket_timeout`` (see ``RedisConnection``), the rest to redis-py."""
        prefix = url.options.pop("prefix", "agui:")
        block = url.number("block", float, DEFAULT_BLOCK)
        max_connections = url.number("max_connections", int, DEFAULT_MAX_CONNECTIONS)
        pool_timeout = url.number("pool_timeout", float, DEFAULT_POOL_TIMEOUT)
        socket_timeout = url.number("socket_timeout", float, DEFAULT_SOCKET_TIMEOUT)
        if max_connections < 2:
            raise ValueError(
                f"store URL {url.text!r}: option max_connections={max_connections} must be "
                "2 or more (a follower's read and the run's writes each need one)"
            )
        if not url.parts.hostname and not url.parts.path.strip("/"):
            raise ValueError(f"store URL {url.text!r} names no Redis server; {EXAMPLES}")
        client_url = urlunsplit(url.parts._replace(query=urlencode(url.options)))
        return cls(
            client_url,
            url.retention,
            prefix=prefix,
            block=block,
            max_connections=max_connections,
            pool_timeout=pool_timeout,
            socket_timeout=socket_timeout,
        )

    # -- writes ----------------------------------------------------------------

    # It expired between the SET and the GET: try again.

    async def append(
        self,
        thread_id: str,
        run_id: str,
        payloads: Sequence[bytes],
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> list[int]:
        self._check_open()
        written = self._writing.get((scope, run_id))
        if written is not None and written != self._epoch:
            # Written before Redis was reset, the reset seen since by a lookup.
            del self._writing[scope, run_id]
            raise RunBroken(run_id, _RESET)
        now = self._now()
        keys = [
            self._key("run:", run_id, scope),
            self._key("events:", run_id, scope),
            self._key("thread:", thread_id, scope),
            self._key("runs", "", scope),
            self._key("order"),
            self._key("owner:", thread_id),
            self._key("threads", "", scope),
            self._key("scopes"),
            self._key("epoch"),
        ]
        count = len(payloads)
        args: list[str | int | bytes] = [thread_id, run_id, repr(now), self._ttl, count]
        args.extend(join_batch(payloads) if count else (b"", b""))
        args.extend((scope, DEFAULT_SCOPE, "", self.epoch))
        reply = await self._io(self._scripts["append"](keys=keys, args=args))
        try:
            first, created = appended(reply, run_id, thread_id)
        except EpochChanged as changed:
            # Redis lost everything this store wrote (restarted empty, or
            # flushed): the run's earlier events are gone, so its log can never
            # be whole again. Take the new epoch and refuse the append.
            self._writing.pop((scope, run_id), None)
            await self._epoch_changed(changed)
            raise RunBroken(run_id, _RESET) from None
        if written is None:
            self._writing[scope, run_id] = self.epoch
        if created and self._sweep_due(now):
            await self.prune(now)
        return list(range(first, first + len(payloads)))

    async def end_run(
        self,
        run_id: str,
        status: RunStatus = RunStatus.FINISHED,
        reason: str | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> StoredRun:
        self._check_open()
        self._writing.pop((scope, run_id), None)
        status = RunStatus(status)
        flat = await self._io(
            self._scripts["end"](
                keys=[self._key("run:", run_id, scope), self._key("events:", run_id, scope)],
                args=[
                    status.value,
                    repr(self._now()),
                    reason or "",
                    "0" if reason is None else "1",
                    self._ttl,
                ],
            )
        )
        fields = dict(zip(flat[::2], flat[1::2], strict=True)) if flat else {}
        record = run_record(run_id, fields, scope)
        if record is None:
            raise UnknownRun(run_id)
        return record

    async def mark_broken(self, run_id: str, reason: str, *, scope: str = DEFAULT_SCOPE) -> None:
        self._check_open()
        self._writing.pop((scope, run_id), None)
        await self._io(
            self._scripts["broken"](
                keys=[self._key("run:", run_id, scope), self._key("events:", run_id, scope)],
                args=[reason, repr(self._now()), self._ttl],
            )
        )

    async def prune(self, now: float | None = None) -> int:
        self._check_open()
        return await self._io(self._prune(now))

    async def _prune(self, now: float | None) -> int:
        when = self._now() if now is None else now
        client = self._redis()
        scopes = [DEFAULT_SCOPE]
        scopes += sorted(text(name) or "" for name in await client.smembers(self._key("scopes")))
        records: list[StoredRun] = []
        gone: dict[str, list[str]] = {}
        orders: dict[tuple[str, str], float] = {}
        for scope in scopes:
            listed = await client.zrange(self._key("runs", "", scope), 0, -1, withscores=True)
            run_ids = [text(name) or "" for name, _ in listed]
            orders.update(((scope, text(n) or ""), score) for n, score in listed)
            for run_id, record in zip(run_ids, await self._records(run_ids, scope), strict=True):
                if record is None:
                    gone.setdefault(scope, []).append(run_id)  # expired by max_age
                else:
                    records.append(record)
        records.sort(key=lambda record: orders[record.key])  # creation order, every scope
        doomed = doomed_runs(records, self.retention, when)
        by_key = {record.key: record for record in records}
        threads: set[tuple[str, str]] = set()
        async with client.pipeline(transaction=False) as pipe:
            for scope, run_id in doomed:
                pipe.delete(
                    self._key("run:", run_id, scope),
                    self._key("events:", run_id, scope),
                    *(self._key(f"mark:{kind}:", run_id, scope) for kind in _MARKS),
                )
                thread_id = by_key[scope, run_id].thread_id
                pipe.zrem(self._key("thread:", thread_id, scope), run_id)
                pipe.zrem(self._key("runs", "", scope), run_id)
                threads.add((scope, thread_id))
            for scope, run_ids in gone.items():
                pipe.zrem(self._key("runs", "", scope), *run_ids)
            await pipe.execute()
        for scope, thread_id in threads:
            if not await client.exists(self._key("thread:", thread_id, scope)):
                # A thread whose last run went is no one's any more.
                await client.delete(self._key("owner:", thread_id))
                await client.zrem(self._key("threads", "", scope), thread_id)
        return len(doomed)

    # -- marks -----------------------------------------------------------------

    _MARK_TTL = 86400
    """Expiry of a mark without ``max_age``: a day after its last refresh."""

    async def _put_mark(self, scope: str, run_id: str, kind: str, value: str) -> None:
        # A thread's history snapshot lives as long as its runs (until retention
        # prunes its first run), not a day: the signals are refreshed, it is not.
        ttl = self._ttl or (None if kind == "history" else self._MARK_TTL)
        key = self._key(f"mark:{kind}:", run_id, scope)
        await self._io(self._redis().set(key, value, ex=ttl))

    async def _get_mark(self, scope: str, run_id: str, kind: str) -> str | None:
        if kind == "digest":  # kept in the run's hash, by the create script
            digest = await self._io(self._redis().hget(self._key("run:", run_id, scope), kind))
            return text(digest)
        value = await self._io(self._redis().get(self._key(f"mark:{kind}:", run_id, scope)))
        return text(value)

    # -- reads -----------------------------------------------------------------

    async def _records(self, run_ids: Sequence[str], scope: str) -> list[StoredRun | None]:
        if not run_ids:
            return []
        async with self._redis().pipeline(transaction=False) as pipe:
            for run_id in run_ids:
                pipe.hgetall(self._key("run:", run_id, scope))
            replies = await pipe.execute()
        return [
            run_record(run_id, fields, scope)
            for run_id, fields in zip(run_ids, replies, strict=True)
        ]

    async def run(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> StoredRun | None:
        self._check_open()

        async def query() -> list[Any]:
            async with self._redis().pipeline(transaction=False) as pipe:
                pipe.hgetall(self._key("run:", run_id, scope))
                pipe.get(self._key("epoch"))
                replies: list[Any] = await pipe.execute()
                return replies

        fields, epoch = await self._io(query())
        await self._check_epoch(epoch)
        return run_record(run_id, fields, scope)

    async def _check_epoch(self, stored: bytes | None) -> None:
        """Follow the epoch Redis holds (read with every run lookup: no extra round trip),
        so every process sharing it agrees after a restart; set one if it is gone."""
        if stored is None:
            await self._reset_epoch()
        else:
            self._adopt_epoch(stored)

    async def thread_runs(self, thread_id: str, *, scope: str = DEFAULT_SCOPE) -> list[StoredRun]:
        self._check_open()
        return await self._io(self._thread_runs(thread_id, scope))

    async def thread_scope(self, thread_id: str) -> str | None:
        self._check_open()
        owner = await self._io(self._redis().hget(self._key("owner:", thread_id), "scope"))
        return text(owner)

    async def threads(
        self, *, scope: str = DEFAULT_SCOPE, limit: int = 50, before: int | None = None
    ) -> list[ThreadRecord]:
        self._check_open()
        check_page(limit, before)
        return await self._io(self._threads(scope, limit, before))

    async def _threads(self, scope: str, limit: int, before: int | None) -> list[ThreadRecord]:
        client = self._redis()
        key = self._key("threads", "", scope)
        top = "+inf" if before is None else f"({before}"
        listed = await client.zrevrangebyscore(
            key, top, "-inf", start=0, num=limit, withscores=True
        )
        names = [text(name) or "" for name, _ in listed]
        async with client.pipeline(transaction=False) as pipe:
            for thread_id in names:
                pipe.hmget(self._key("owner:", thread_id), ["scope", "created"])
            owners = await pipe.execute()
        found: list[ThreadRecord] = []
        expired: list[str] = []
        for (thread_id, order), (owner, created) in zip(
            zip(names, (score for _, score in listed), strict=True), owners, strict=True
        ):
            if text(owner) != scope:
                expired.append(thread_id)  # expired by max_age, or pruned
                continue
            found.append(ThreadRecord(thread_id, float(text(created) or 0), int(order)))
        if expired:
            await client.zrem(key, *expired)
        return found

    async def _thread_runs(self, thread_id: str, scope: str) -> list[StoredRun]:
        key = self._key("thread:", thread_id, scope)
        async with self._redis().pipeline(transaction=False) as pipe:
            pipe.zrange(key, 0, -1)
            pipe.get(self._key("epoch"))
            names, epoch = await pipe.execute()
        await self._check_epoch(epoch)
        run_ids = [text(name) or "" for name in names]
        records = await self._records(run_ids, scope)
        pairs = zip(run_ids, records, strict=True)
        expired = [run_id for run_id, record in pairs if record is None]
        if expired:
            await self._redis().zrem(key, *expired)
        return [record for record in records if record is not None]

    async def read(
        self,
        run_id: str,
        after: int = 0,
        limit: int | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> list[tuple[int, bytes]]:
        self._check_open()

        async def query() -> list[Any]:
            async with self._redis().pipeline(transaction=False) as pipe:
                pipe.hmget(self._key("run:", run_id, scope), ["status", "reason"])
                pipe.xrange(
                    self._key("events:", run_id, scope),
                    f"(0-{max(after, 0)}",
                    _LAST_EVENT,
                    limit,
                )
                replies: list[Any] = await pipe.execute()
                return replies

        (status, reason), entries = await self._io(query())
        if status is None:
            raise UnknownRun(run_id)
        if status == b"broken":
            raise RunBroken(run_id, text(reason) or "a write failed")
        out: list[tuple[int, bytes]] = []
        for _, fields in entries:
            out.extend(split_batch(int(fields[b"f"]), fields[b"d"], fields[b"l"], after))
        return out if limit is None else out[:limit]

    async def follow(
        self, run_id: str, after: int = 0, *, scope: str = DEFAULT_SCOPE
    ) -> AsyncIterator[tuple[int, bytes]]:
        """Stored entries, then live ones from the shared fan-out reader, until the end marker.

        A follower holds no connection while it waits: it reads the run (one
        pipelined round trip: its status, then its entries after ``after``),
        then waits on the process's fan-out reader (``_redis_fanout``), which
        usually hands it the new entries themselves. It reads the run again
        when the reader cannot (it fell behind the reader's cache, or the
        reader failed), after every ``block`` seconds without news (the run
        may have expired or been pruned) and at the end marker.
        """
        self._check_open()
        stream = self._key("events:", run_id, scope)
        check_every = self._owner_check_interval()
        block = self.block if check_every is None else min(self.block, check_every)
        next_check = time.monotonic() + block
        query = True
        while True:
            queried = query
            read_nothing = False
            if query:
                status, entries = await self._io(self._query(run_id, after, scope))
                read_nothing = not entries
                for entry in entries:
                    yield entry
                if entries:
                    after = entries[-1][0]
                if len(entries) >= self.follow_batch:
                    continue  # more stored after these: read on
                if status.ended:
                    _raise_if_lost(status)
                    if not entries and after > status.last_seq:
                        # A position the run never reached: an end with no terminal
                        # event would look like a cut stream (as the base follow says).
                        raise WrongRun(
                            f"position #{after} is past the end of run {shown_id(run_id)} "
                            f"(its last event is #{status.last_seq})"
                        )
                    return
                query = False
            waited = await self._io_wait(
                self._reader().wait_past(
                    stream,
                    (0, after),
                    max(0.001, block),
                    status.created,
                    queried=queried,
                    read_nothing=read_nothing,
                )
            )
            if waited is None:  # nothing new for a while: did the run expire, or its writer die?
                if check_every is not None and time.monotonic() >= next_check:
                    next_check = time.monotonic() + block
                    await self.check_owner(run_id, scope=scope)
                query = True
                continue
            if not waited:
                query = True  # new entries the reader did not keep for us: read them
                continue
            next_check = time.monotonic() + block
            for position, fields in waited:
                if is_marker(position):
                    query = True  # the end: read the record (and anything before the marker)
                    break
                for entry in split_batch(int(fields[b"f"]), fields[b"d"], fields[b"l"], after):
                    yield entry
                    after = entry[0]

    async def _query(
        self, run_id: str, after: int, scope: str
    ) -> tuple[StoredRun, list[tuple[int, bytes]]]:
        """The run's record and its entries after ``after`` (at most ``follow_batch``), in one
        round trip; the record is read first, so a run seen ended has all its entries here."""
        async with self._redis().pipeline(transaction=False) as pipe:
            pipe.hgetall(self._key("run:", run_id, scope))
            pipe.xrange(
                self._key("events:", run_id, scope),
                f"(0-{max(after, 0)}",
                _LAST_EVENT,
                self.follow_batch,
            )
            fields, stored = await pipe.execute()
        record = check_readable(run_record(run_id, fields, scope), run_id)
        out: list[tuple[int, bytes]] = []
        for _, batch in stored:
            out.extend(split_batch(int(batch[b"f"]), batch[b"d"], batch[b"l"], after))
        return record, out


def _raise_if_lost(record: StoredRun) -> None:
    if record.status is RunStatus.LOST:
        raise RunLost(record.run_id, record.reason or "its writer died")
