"""The Redis event log's connection: the client, its bridge loop, keys, the epoch and the layout.

``RedisConnection`` is the part of ``RedisEventLog`` that talks to the server
without knowing runs: opening (first contact, the epoch, the scripts, the
one-time migration of 0.1's keys), closing, running a redis.asyncio coroutine
on asyncio or in the bridge loop (trio), and naming keys per scope. The log's
operations (``redis.py``) build on it.
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
from ._redis_layout import APPEND, BROKEN, CREATE, END, LEASE_RELEASE, LEASE_RENEW, text
from ._retention import Retention

__all__ = ["RedisConnection"]

_T = TypeVar("_T")

_LAYOUT = "2"
"""The ``{prefix}layout`` of keys with thread owners and listings (0.1's have none)."""


class RedisConnection(EventLog):
    """The client, the bridge loop and the keys of one Redis event log (module doc)."""

    def __init__(
        self,
        url: str,
        retention: Retention | None = None,
        prefix: str = "agui:",
        block: float = 5.0,
    ) -> None:
        super().__init__(retention)
        if not block > 0:
            raise ValueError(f"block must be a positive number of seconds, got {block!r}")
        self.url = url
        self.prefix = prefix
        self.block = block
        self._client: Any = None
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
        client = redis.asyncio.Redis.from_url(self.url, decode_responses=False)
        self._client = client

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

    async def _close(self) -> None:
        client, self._client = self._client, None
        bridge = self._bridge
        try:
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
