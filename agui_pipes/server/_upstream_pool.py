"""The gateway's upstream connections: a stack of idle ones, constant work per run.

httpx's own pool (httpcore's ``AsyncConnectionPool``) re-examines every
connection it holds, and every request it queues, each time a request starts
or a response is closed — and for each idle connection it counts them all
again. A gateway run holds its upstream connection for the whole stream, so
with N concurrent runs every run's start and end cost O(N) (more with idle
ones): a wave of a thousand runs spent more CPU in that bookkeeping than in
relaying their events (docs/benchmarks.md, the scale benchmark). Past its
keep-alive count (64 was ours) that pool also closes each connection a run
releases while more than that many are open, so every later run paid a new
TCP connection.

``StreamPool`` takes the pool's place inside httpx's transport and keeps only
what a gateway needs: per origin a stack of idle connections (the most
recently used on top, the one least likely to have been closed by the
upstream), popped for a request and pushed back when its response is closed
whole, up to ``max_idle`` of them. Nothing is queued, as before (the gateway's
pool had no connection ceiling). The connections themselves are the pool's
own (``create_connection``: TLS, proxies, keep-alive expiry as configured),
and httpx's transport around it still maps every failure to the same httpx
exception, so what a run sees — and the RUN_ERROR it becomes — is unchanged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, cast

import anyio
import httpcore
import httpx

__all__ = ["DEFAULT_IDLE_CONNECTIONS", "StreamPool", "use_stream_pool"]

DEFAULT_IDLE_CONNECTIONS = 4096
"""Idle upstream connections a gateway keeps open for the next runs (``upstream_idle``).

Sized for thousands of concurrent streams: a wave of runs that ends leaves its
connections for the next wave instead of closing them (an idle connection costs a
socket and ~10 KiB). Past it, a released connection is closed."""


_Key = tuple[bytes, bytes, int]


def _key(origin: httpcore.Origin) -> _Key:
    return (origin.scheme, origin.host, origin.port)


class StreamPool:
    """Upstream connections for streaming runs: O(1) to take one and to give it back."""

    def __init__(self, template: httpcore.AsyncConnectionPool, max_idle: int) -> None:
        if max_idle < 0:
            raise ValueError(f"upstream_idle must be 0 or more, got {max_idle}")
        self._template = template  # makes the connections, as it would have
        self._max_idle = max_idle
        # keyed by (scheme, host, port): httpcore's Origin is not hashable
        self._idle: dict[_Key, deque[httpcore.AsyncConnectionInterface]] = {}
        self._busy: set[httpcore.AsyncConnectionInterface] = set()
        self._closing: list[httpcore.AsyncConnectionInterface] = []

    @property
    def idle(self) -> int:
        """How many idle connections are kept now."""
        return sum(len(stack) for stack in self._idle.values())

    @property
    def busy(self) -> int:
        """How many connections carry a request or a response now."""
        return len(self._busy)

    def _take(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface | None:
        """The most recently released idle connection to ``origin`` still usable, if any."""
        stack = self._idle.get(_key(origin))
        while stack:
            connection = stack.pop()
            if connection.is_available() and not connection.has_expired():
                return connection
            self._discard_later(connection)
        return None

    def _discard_later(self, connection: httpcore.AsyncConnectionInterface) -> None:
        # Expired or closed by the upstream: its socket is closed before the
        # next request goes out or after the next release — taking a connection
        # does not await.
        self._closing.append(connection)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        origin = request.url.origin
        await self._close_discarded()
        while True:
            connection = self._take(origin)
            reused = connection is not None
            if connection is None:
                connection = self._template.create_connection(origin)
            self._busy.add(connection)
            try:
                response = await connection.handle_async_request(request)
            except httpcore.ConnectionNotAvailable:
                # A kept connection the upstream closed meanwhile: take another.
                self._busy.discard(connection)
                await _close(connection)
                if reused:
                    continue
                raise
            except BaseException:
                self._busy.discard(connection)
                await _close(connection)
                raise
            assert isinstance(response.stream, AsyncIterable)
            return httpcore.Response(
                status=response.status,
                headers=response.headers,
                content=_Released(response.stream, self, connection, origin),
                extensions=response.extensions,
            )

    async def release(
        self, connection: httpcore.AsyncConnectionInterface, origin: httpcore.Origin
    ) -> None:
        """The response on ``connection`` is closed: keep the connection, or close it."""
        self._busy.discard(connection)
        stack = self._idle.setdefault(_key(origin), deque())
        # The bottom of the stack was released first: once it expired (the
        # keep-alive expiry, or the upstream closed it), close it rather than
        # hold its socket until a wave of runs reaches down to it.
        while stack and stack[0].has_expired():
            self._closing.append(stack.popleft())
        if connection.is_idle() and len(stack) < self._max_idle:
            stack.append(connection)  # read whole: ready for the next run
        else:
            await _close(connection)  # cut off mid-response, or enough kept
        await self._close_discarded()

    async def _close_discarded(self) -> None:
        while self._closing:
            await _close(self._closing.pop())

    async def aclose(self) -> None:
        connections = [*self._busy, *self._closing]
        for stack in self._idle.values():
            connections.extend(stack)
        self._idle.clear()
        self._busy.clear()
        self._closing.clear()
        for connection in connections:
            await _close(connection)


async def _close(connection: httpcore.AsyncConnectionInterface) -> None:
    with anyio.CancelScope(shield=True):
        await connection.aclose()


class _Released:
    """A response body that hands its connection back to the pool once closed."""

    __slots__ = ("_closed", "_connection", "_origin", "_pool", "_stream")

    def __init__(
        self,
        stream: AsyncIterable[bytes],
        pool: StreamPool,
        connection: httpcore.AsyncConnectionInterface,
        origin: httpcore.Origin,
    ) -> None:
        self._stream = stream
        self._pool = pool
        self._connection = connection
        self._origin = origin
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            close = getattr(self._stream, "aclose", None)
            if close is not None:
                await close()
            await self._pool.release(self._connection, self._origin)


def use_stream_pool(client: httpx.AsyncClient, max_idle: int) -> bool:
    """Put a ``StreamPool`` in ``client``'s transport, in place of httpx's pool.

    Returns False, leaving the client as it is, when its transport is not
    httpx's own with a pool inside (a transport given by the caller, or an
    httpx whose insides moved): the gateway then runs on httpx's pool, slower
    with many streams but the same on the wire.
    """
    transport: Any = getattr(client, "_transport", None)
    pool = getattr(transport, "_pool", None)
    if not isinstance(transport, httpx.AsyncHTTPTransport) or not isinstance(
        pool, httpcore.AsyncConnectionPool
    ):
        return False
    cast(Any, transport)._pool = StreamPool(pool, max_idle)
    return True
