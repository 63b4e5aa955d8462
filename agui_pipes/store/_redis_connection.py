"""The Redis event log's connection: the client, its bridge loop, keys, the epoch and the layout.

``RedisConnection`` is the part of ``RedisEventLog`` that talks to the server
without knowing runs: opening (first contact, the epoch, the scripts, the
one-time migration of 0.1's keys), closing, running a redis.asyncio coroutine
on asyncio or in the bridge loop (trio), and naming keys per scope. The log's
operations (``redis.py``) build on it.

The connection budget is the store's, not redis-py's defaults: a *blocking*
pool of ``max_connections`` (256) where a command waits up to
``pool_timeout`` (15 s) for a free connection, then fails as
:class:`StoreUnavailable` (a server's 503 ``store_unavailable``) — back-pressure,
never a half-written batch. Commands time out after ``socket_timeout`` (5 s).
Followers do not hold pool connections while they wait: the fan-out reader
(``_redis_fanout``) blocks for all of them on one connection of its own, whose
socket timeout is ``block + socket_timeout`` so a blocking read never times out
as a failure. Commands are retried once on a connection error (a pooled
connection the server closed, e.g. after a restart: the command never ran)
and never on a timeout (it may have run: a retried append would duplicate).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio

from ._base import DEFAULT_SCOPE, EventLog, new_epoch
from ._errors import StoreError
from ._redis_bridge import Bridge, close_client, translated
from ._redis_fanout import FanoutReader
from ._redis_layout import APPEND, BROKEN, CREATE, END, LEASE_RELEASE, LEASE_RENEW, text
from ._retention import Retention

__all__ = ["RedisConnection"]

_T = TypeVar("_T")

DEFAULT_MAX_CONNECTIONS = 256
"""Connections in the pool of one store object (one server process). A connection is
held for one command's round trip, which in a busy event loop lasts until the task is
scheduled again: 200 concurrent paced runs of one process (appends, heartbeats, stop
polls) waited past ``pool_timeout`` with 32; 2 waves of 200 clients at 100 events/s each
broke 3 runs of 400 that way with 128, none with 256. Followers hold none."""

DEFAULT_POOL_TIMEOUT = 15.0
"""Seconds a command waits for a free pooled connection before ``StoreUnavailable``. Only an
overloaded process waits (a dead or slow Redis fails on its own timeouts first): 1,000
resumes of one live run arriving at once got 16 503s with 5 s, none with 15 s."""

DEFAULT_SOCKET_TIMEOUT = 5.0
"""Seconds a command waits for Redis's answer before ``StoreUnavailable``."""

DEFAULT_BLOCK = 5.0
"""Seconds one blocking ``XREAD`` of the fan-out reader waits (a follower re-checks its
run's record at least this often)."""

_LAYOUT = "2"
"""The ``{prefix}layout`` of keys with thread owners and listings (0.1's have none)."""


class RedisConnection(EventLog):
    """The client, the bridge loop and the keys of one Redis event log (module doc)."""

    def __init__(
        self,
        url: str,
        retention: Retention | None = None,
        prefix: str = "agui:",
        block: float = DEFAULT_BLOCK,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
    ) -> None:
        super().__init__(retention)
        for name, value in (
            ("block", block),
            ("pool_timeout", pool_timeout),
            ("socket_timeout", socket_timeout),
        ):
            if not (isinstance(value, int | float) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if not (isinstance(max_connections, int) and max_connections >= 2):
            raise ValueError(f"max_connections must be an int >= 2, got {max_connections!r}")
        self.url = url
        self.prefix = prefix
        self.block = block
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout
        self.socket_timeout = socket_timeout
        self._client: Any = None
        self._fanout: FanoutReader | None = None
        self._writing: dict[tuple[str, str], str] = {}
        """The epoch each live run this store writes was created in (an append to a run of
        an older epoch is refused: Redis forgot it)."""
        self._scripts: dict[str, Any] = {}
        self._bridge: Bridge | None = None

    def __repr__(self) -> str:
        parts = urlsplit(self.url)
        host = parts.hostname or "localhost"
        where = f"{parts.scheme}://{host}:{parts.port or 6379}{parts.path}"
        return f"RedisEventLog({where!r}, prefix={self.prefix!r})"  # never the password

    def _key(self, kind: str, name: str = "", scope: str = DEFAULT_SCOPE) -> str:
        if scope == DEFAULT_SCOPE:
            return f"{self.prefix}{kind}{name}"
        return f"{self.prefix}@{len(scope)}:{scope}/{kind}{name}"

    @property
    def _ttl(self) -> int:
        age = self.retention.max_age
        return 0 if age is None else max(1, math.ceil(age))

    def _redis(self) -> Any:
        if self._client is None:
            raise self._not_open()
        return self._client

    async def _io(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run a redis.asyncio coroutine: here on asyncio, in the bridge loop elsewhere."""
        with translated(self):
            bridge = self._bridge
            if bridge is None:
                return await coro
            return await bridge.run(coro)

    async def _io_wait(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """``_io`` for a follower's wait (under trio, from the bridge's waiting threads)."""
        with translated(self):
            bridge = self._bridge
            if bridge is None:
                return await coro
            return await bridge.run(coro, waiting=True)

    def _reader(self) -> FanoutReader:
        if self._fanout is None:
            raise self._not_open()
        return self._fanout

    def _adopt_epoch(self, stored: bytes | str | None) -> bool:
        """Take the epoch Redis holds now; True if it differs from the one this store had.

        Every process sharing the database reads the stored epoch on its run
        lookups and writes, so after Redis restarts empty (the key gone) they
        all move to the one epoch the first of them set (``SET NX``).
        """
        epoch = text(stored)
        if epoch is None or epoch == self._epoch:
            return False
        self._epoch = epoch
        return True

    async def _reset_epoch(self) -> None:
        """The epoch key is gone (Redis restarted empty, or flushed): set one, adopt the stored."""
        client = self._redis()

        async def exchange() -> bytes | str | None:
            await client.set(self._key("epoch"), new_epoch(), nx=True)
            stored: bytes | str | None = await client.get(self._key("epoch"))
            return stored

        self._adopt_epoch(await self._io(exchange()))

    async def _open(self) -> str:
        try:
            import redis.asyncio
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "the Redis event log needs the redis package: pip install 'agui-pipes[redis]'"
            ) from exc
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # trio: redis.asyncio runs in a bridge loop
            self._bridge = Bridge()
        client = redis.asyncio.Redis.from_pool(self._pool(redis.asyncio, self.socket_timeout))
        self._client = client
        # The fan-out reader's own connection: a pool of one, and a socket
        # timeout above its blocking read, so a quiet stream is not an error.
        reader = redis.asyncio.Redis.from_pool(
            self._pool(redis.asyncio, self.block + self.socket_timeout, size=1)
        )
        wake_key = self._key("wake:", new_epoch())

        async def poke() -> None:
            async with client.pipeline(transaction=False) as pipe:
                pipe.xadd(wake_key, {"p": "1"}, maxlen=8)
                pipe.expire(wake_key, max(60, math.ceil(self.block * 4)))
                await pipe.execute()

        self._fanout = FanoutReader(reader, wake_key, poke, self.block, self.follow_batch)

        async def first_contact() -> bytes | str | None:
            await client.set(self._key("epoch"), new_epoch(), nx=True)
            epoch: bytes | str | None = await client.get(self._key("epoch"))
            return epoch

        try:
            epoch = await self._io(first_contact())
        except Exception as exc:
            await self._close()
            raise StoreError(f"cannot reach the Redis event log at {self!r}: {exc}") from exc
        self._scripts = {
            "append": client.register_script(APPEND),
            "end": client.register_script(END),
            "broken": client.register_script(BROKEN),
            "create": client.register_script(CREATE),
            "lease_renew": client.register_script(LEASE_RENEW),
            "lease_release": client.register_script(LEASE_RELEASE),
        }
        try:
            await self._io(self._migrate())
        except Exception as exc:
            await self._close()
            raise StoreError(f"cannot migrate the Redis event log at {self!r}: {exc}") from exc
        return str(text(epoch))

    async def _migrate(self) -> None:
        """Give the threads of 0.1's keys (the default scope's) an owner and a listing.

        Idempotent (every write is ``NX``), so processes opening the store at
        once may all run it; ``{prefix}layout`` makes later opens skip it.
        """
        client = self._redis()
        if text(await client.get(self._key("layout"))) == _LAYOUT:
            return
        pattern = _glob_escape(self._key("thread:")) + "*"
        async for raw in client.scan_iter(match=pattern, count=500):
            name = text(raw) or ""
            thread_id = name[len(self._key("thread:")) :]
            first = await client.zrange(name, 0, 0, withscores=True)
            if not first:
                continue
            run_id, order = text(first[0][0]) or "", int(first[0][1])
            created = await client.hget(self._key("run:", run_id), "created")
            owner = self._key("owner:", thread_id)
            await client.hsetnx(owner, "scope", DEFAULT_SCOPE)
            await client.hsetnx(owner, "created", text(created) or "0")
            await client.hsetnx(owner, "order", order)
            await client.zadd(self._key("threads"), {thread_id: order}, nx=True)
        await client.set(self._key("layout"), _LAYOUT)

    def _pool(self, module: Any, socket_timeout: float, size: int | None = None) -> Any:
        """A blocking pool from the URL with the store's budget and timeouts (module doc)."""
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError

        return module.BlockingConnectionPool.from_url(
            self.url,
            decode_responses=False,
            max_connections=size or self.max_connections,
            timeout=self.pool_timeout,
            socket_timeout=socket_timeout,
            socket_connect_timeout=self.socket_timeout,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            protocol=2,
        )

    async def _close(self) -> None:
        client, self._client = self._client, None
        fanout, self._fanout = self._fanout, None
        bridge = self._bridge
        try:
            if fanout is not None:
                with anyio.CancelScope(shield=True):
                    await self._io(fanout.close())
            if client is not None:
                with anyio.CancelScope(shield=True):
                    await self._io(close_client(client))
        finally:
            if bridge is not None:
                self._bridge = None
                await bridge.stop()


def _glob_escape(text: str) -> str:
    """``text`` matched literally in a Redis ``MATCH`` pattern."""
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)
