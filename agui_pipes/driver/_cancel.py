"""A shared "stop now" flag that works on asyncio and trio alike.

Why not ``anyio.Event`` directly: an event must be created inside a running
event loop, while a token is typically created by a transport (or a test)
before anything runs, and ``cancel()`` is a plain synchronous call made from
wherever the disconnect is noticed. So the token is a bool, a list of
callbacks, and ``anyio.Event``\\ s created lazily — one per waiter, inside
the waiter's own loop — that ``cancel()`` sets.

``cancel()`` must be called from the thread running the event loop (use
``anyio.from_thread.run_sync(token.cancel)`` from a worker thread).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["CancelToken"]


class CancelToken:
    """Cancellation shared by everyone holding the same token; it trips once, for good."""

    __slots__ = ("_callbacks", "_cancelled", "reason")

    def __init__(self) -> None:
        self._cancelled = False
        self._callbacks: dict[int, Callable[[], object]] = {}
        self.reason: str | None = None
        """Why the token tripped, if whoever cancelled said (the first reason given wins):
        the run's RUN_ERROR CANCELLED carries it as its message, so a client reads
        *why* ("stopped by the user", "nobody reconnected within 30 s") rather than
        only that the run was cancelled."""

    def cancel(self, reason: str | None = None) -> None:
        """Trip the token. Idempotent; wakes every waiter and runs every callback once.

        ``reason`` becomes the message of the run's RUN_ERROR CANCELLED.
        """
        if self.reason is None and reason is not None:
            self.reason = reason
        if self._cancelled:
            return
        self._cancelled = True
        callbacks = list(self._callbacks.values())
        self._callbacks.clear()
        for callback in callbacks:
            callback()

    def is_cancelled(self) -> bool:
        """Whether the token has tripped."""
        return self._cancelled

    async def wait(self) -> None:
        """Return once the token has tripped (immediately if it already has)."""
        if self._cancelled:
            return
        event = anyio.Event()
        remove = self.on_cancel(event.set)
        try:
            await event.wait()
        finally:
            remove()

    cancelled = wait
    """Alias of ``wait()``: ``await token.cancelled()``."""

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run ``callback`` when the token trips (now, if it already has).

        Returns a function that unregisters the callback; calling it after the
        token tripped is harmless.
        """
        if self._cancelled:
            callback()
            return _noop
        key = id(callback)
        while key in self._callbacks:
            key += 1
        self._callbacks[key] = callback

        def remove() -> None:
            self._callbacks.pop(key, None)

        return remove

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self._cancelled})"


def _noop() -> None:
    return None
