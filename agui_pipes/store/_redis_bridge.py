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

from ._errors import StoreError

__all__ = ["Bridge", "close_client", "translated"]

_T = TypeVar("_T")


async def close_client(client: Any) -> None:
    """``aclose()`` from redis 5.0.1 on; ``close()`` (deprecated later) before it."""
    close = getattr(client, "aclose", None) or client.close
    await close()


@contextmanager
def translated(store: object) -> Iterator[None]:
    """Raise redis-py's own errors (connection lost, timeout) as :class:`StoreError`."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        import redis.exceptions

        if isinstance(exc, redis.exceptions.RedisError):
            raise StoreError(f"the Redis event log {store!r} failed: {exc}") from exc
        raise


class Bridge:
    """An asyncio loop in a thread of its own, for running redis.asyncio from trio.

    redis.asyncio's connections, locks and pool belong to an asyncio loop.
    Under trio (or any non-asyncio loop) every Redis call is handed to this
    loop and awaited through a worker thread: one thread hop per call, so
    slower than on asyncio, but the same behaviour. Cancelling the caller
    cancels the call in the bridge loop.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="agui-pipes-redis-bridge", daemon=True
        )
        self._thread.start()

    async def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except BaseException:
            future.cancel()
            raise

    async def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        await anyio.to_thread.run_sync(self._thread.join)
        self.loop.close()
