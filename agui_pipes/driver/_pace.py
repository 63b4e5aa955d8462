"""Backpressure on a synchronous emit: the agent waits at its next ``await``.

Emit cannot wait — a handle's terminator runs in ``__exit__``, which cannot
``await`` — so when the consumer falls behind, the driver holds the agent at
the next point where it *does* wait: whenever one of the agent's awaits
completes, and ``high`` events or more are still waiting for the consumer,
the agent is resumed only once the consumer has taken them down to ``low``.
An agent streaming a model's tokens (``async for token in model: msg.delta(
token)``) therefore slows to the consumer's pace without any change, and a
consumer that stops reading stops the agent with a bounded backlog: ``high``
plus whatever the agent emits between two awaits.

The hold is placed by ``paced``, a thin trampoline around the agent's
coroutine that passes every suspension through to the event loop unchanged
(asyncio futures and trio traps alike) and, after one completes, waits for
room before stepping the agent on. A cancellation that arrives while the
agent is held is thrown into the agent at the await it was resuming from, so
the agent sees cancellation exactly as it would without the hold.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Generator
from typing import Any, Protocol, TypeVar

import anyio

__all__ = ["Hold", "Pacer", "paced"]

T = TypeVar("T")


class Hold(Protocol):
    """What ``paced`` asks after each of the agent's awaits: ``Pacer``, or a run's sink."""

    def behind(self) -> bool: ...

    async def wait_for_room(self) -> None: ...


class Pacer:
    """The backlog between the agent's emits and the consumer's reads.

    ``sent`` is advanced by the emit path, ``taken`` by the consumer; the
    agent is held while ``sent - taken >= high`` and released at ``low``
    (half of ``high``) or earlier, so a held agent and a slow consumer do not
    wake each other once per event. The consumer looks at ``room`` only when
    its buffer runs dry and at its periodic checkpoints, so a held agent may
    wait until the backlog is empty.
    """

    __slots__ = ("high", "low", "released", "room", "sent", "taken")

    def __init__(self, high: int) -> None:
        self.high = high
        self.low = high // 2
        self.sent = 0
        self.taken = 0
        self.released = False
        """Set when nobody will read any more: holding the agent would hang it."""
        self.room: anyio.Event | None = None
        """What a held agent waits on; None while it is not held (read per event)."""

    def behind(self) -> bool:
        return self.sent - self.taken >= self.high and not self.released

    def took(self, taken: int) -> None:
        """The consumer has taken ``taken`` events in all; wake the agent at ``low``."""
        room = self.room
        if room is not None and self.sent - taken <= self.low:
            self.room = None
            room.set()

    def release(self) -> None:
        """Stop holding the agent for good (the consumer stopped reading)."""
        self.released = True
        room, self.room = self.room, None
        if room is not None:
            room.set()

    async def wait_for_room(self) -> None:
        while self.sent - self.taken > self.low and not self.released:
            room = self.room = anyio.Event()
            await room.wait()


@types.coroutine
def paced(awaitable: Awaitable[T], pacer: Hold) -> Generator[Any, Any, T]:
    """Await ``awaitable``, holding it after each completed suspension while ``pacer`` is behind."""
    inner: Any = awaitable.__await__() if hasattr(awaitable, "__await__") else awaitable
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = inner.send(value) if error is None else inner.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            error = None
        try:
            value = yield request
        except GeneratorExit:
            inner.close()
            raise
        except BaseException as exc:  # the loop's answer is an exception: the agent's to see
            error = exc
            continue
        if pacer.behind():
            try:
                yield from pacer.wait_for_room().__await__()
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:  # cancelled while held: the agent's await sees it
                error = exc
