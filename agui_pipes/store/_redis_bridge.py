"""Running ``redis.asyncio`` on any event loop, and its errors as the store's.

redis-py's asyncio client belongs to one asyncio loop; under trio the store
hands each call to an asyncio loop of its own (``Bridge``). Either way a
redis-py error leaves the store as :class:`StoreError`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ._errors import StoreError, StoreUnavailable

__all__ = ["Bridge", "close_client", "translated", "unavailable"]

_T = TypeVar("_T")


async def close_client(client: Any) -> None:
    """``aclose()`` from redis 5.0.1 on; ``close()`` (deprecated later) before it."""
    close = getattr(client, "aclose", None) or client.close
    await close()


@contextmanager
def translated(store: object) -> Iterator[None]:
    """Raise redis-py's own errors as the store's: unreachable or slow is :class:`StoreUnavailable`.

    Connection errors, timeouts and a pool with no connection free within its
    wait are the store being unavailable (503, retry later): their text says
    so without naming the server. Anything else (a script error, a wrong key
    type) is a plain :class:`StoreError`.
    """
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        import redis.exceptions

        if isinstance(exc, redis.exceptions.BusyLoadingError):  # pragma: no cover - a restart
            raise StoreUnavailable("the event log is loading its data; retry shortly") from exc
        if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
            raise StoreUnavailable(unavailable(store, exc)) from exc
        if isinstance(exc, redis.exceptions.RedisError):
            raise StoreError(f"the Redis event log {store!r} failed: {exc}") from exc
        raise


def unavailable(store: object, exc: BaseException) -> str:
    """What a client is told when Redis cannot answer: why, in its terms, and what to do."""
    import redis.exceptions

    if isinstance(exc, redis.exceptions.TimeoutError):
        wait = getattr(store, "socket_timeout", None)
        return f"the event log did not answer within {wait} s; retry later"
    if "No connection available" in str(exc):
        size = getattr(store, "max_connections", None)
        wait = getattr(store, "pool_timeout", None)
        return (
            f"the event log is busy: no connection of {size} was free within {wait} s; retry later"
        )
    return "the event log cannot be reached; retry later"


class Bridge:
    """An asyncio loop in a thread of its own, for running redis.asyncio from trio.

    redis.asyncio's connections, locks and pool belong to an asyncio loop.
    Under trio (or any non-asyncio loop) every Redis call is handed to this
    loop and awaited through a worker thread: one thread hop per call, so
    slower than on asyncio, but the same behaviour. Cancelling the caller
    cancels the call in the bridge loop.
    """

    WAITERS = 2000
    """The most followers waiting at once through the bridge (each in a worker thread)."""

    def __init__(self) -> None:
        self._waiters: anyio.CapacityLimiter | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="agui-pipes-redis-bridge", daemon=True
        )
        self._thread.start()

    async def run(self, coro: Coroutine[Any, Any, _T], *, waiting: bool = False) -> _T:
        """Await ``coro`` in the bridge loop; ``waiting`` for a follower's long wait.

        A follower's wait holds its worker thread for up to a block time, so
        waits take threads of their own limiter (``WAITERS``): a crowd of
        followers never starves the store's commands (appends, reads) of
        threads, nor the rest of the process's ``to_thread`` calls.
        """
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            if waiting:
                if self._waiters is None:
                    self._waiters = anyio.CapacityLimiter(self.WAITERS)
                limiter = self._waiters
            else:
                limiter = None
            return await anyio.to_thread.run_sync(
                future.result, abandon_on_cancel=True, limiter=limiter
            )
        except BaseException:
            future.cancel()
            raise

    async def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        await anyio.to_thread.run_sync(self._thread.join)
        self.loop.close()
