"""The gateway's upstream connections (``server/_upstream_pool.StreamPool``), over real HTTP.

The upstream is an agent endpoint on uvicorn at 127.0.0.1 behind an ASGI
wrapper that notes the client port of every request (one port, one upstream
connection); the gateway is served the same way, and a client posts runs to it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from starlette.applications import Starlette

from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, Gateway
from agui_pipes.server._upstream_pool import DEFAULT_IDLE_CONNECTIONS, StreamPool
from tests._servers import Running, post_run, run_input, serve, sse_events, wait_until

pytestmark = pytest.mark.anyio

RELEASE = threading.Event()
"""Lets the ``hold`` runs end (set by the test that holds them)."""


async def agent(ctx: RunContext[Any]) -> RunOutcome:
    if ctx.input.run_id.startswith("hold"):
        ctx.say("FIRST")
        # set from the test's thread; a cancelled run (its client left) stops waiting
        await anyio.to_thread.run_sync(RELEASE.wait, abandon_on_cancel=True)
    ctx.say("hello world")
    return RunOutcome.success()


class PortsSeen:
    """An ASGI wrapper noting the client port of every request it passes on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.ports: list[int] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.ports.append(scope["client"][1])
        await self.app(scope, receive, send)


@pytest.fixture
def upstream() -> Iterator[tuple[Running, PortsSeen]]:
    app = PortsSeen(AgentEndpoint(agent=agent, keepalive=None))
    with serve(app) as server:
        yield server, app


def _app(gateway: Gateway) -> Starlette:
    """The gateway as ``serve`` runs it: its lifespan closes its client in its own loop."""
    return Starlette(routes=gateway.routes("/"), lifespan=gateway.lifespan)


def _pool(gateway: Gateway) -> StreamPool:
    pool = gateway._upstream.http()._transport._pool  # type: ignore[attr-defined]
    assert isinstance(pool, StreamPool), "httpx's transport moved: the gateway lost its pool"
    return pool


async def test_sequential_runs_reuse_one_upstream_connection(
    upstream: tuple[Running, PortsSeen],
) -> None:
    server, seen = upstream
    gateway = Gateway(server.url + "/")
    with serve(_app(gateway)) as front:
        async with httpx.AsyncClient() as client:
            for index in range(3):
                response, events = await post_run(client, front.url, run_input(f"r{index}"))
                assert response.status_code == 200
                assert events[-1].type.value == "RUN_FINISHED"
        await wait_until(lambda: _pool(gateway).busy == 0, 5.0, "the last run released")
        assert _pool(gateway).idle == 1
    assert len(seen.ports) == 3
    assert len(set(seen.ports)) == 1, f"a new upstream connection per run: {seen.ports}"


async def test_concurrent_runs_each_hold_a_connection_and_leave_it_for_the_next(
    upstream: tuple[Running, PortsSeen],
) -> None:
    """Past the old keep-alive count, released connections used to be closed."""
    server, seen = upstream
    gateway = Gateway(server.url + "/", upstream_idle=3)
    RELEASE.clear()
    with serve(_app(gateway)) as front:
        async with httpx.AsyncClient() as client:
            first: list[str] = []

            async def hold(index: int) -> None:
                body = run_input(f"hold-{index}")
                async with client.stream("POST", front.url, json=body) as response:
                    async for event in sse_events(response):
                        if event.type.value == "TEXT_MESSAGE_CONTENT" and not first.count(
                            str(index)
                        ):
                            first.append(str(index))
                        if event.type.value == "RUN_FINISHED":
                            return

            async with anyio.create_task_group() as tg:
                for index in range(5):
                    tg.start_soon(hold, index)
                await wait_until(lambda: len(first) == 5, 10.0, "five runs streaming")
                assert _pool(gateway).busy == 5
                RELEASE.set()
            held = set(seen.ports)
            assert len(held) == 5
            # three kept (upstream_idle=3), two closed
            await wait_until(lambda: _pool(gateway).busy == 0, 5.0, "all released")
            assert _pool(gateway).idle == 3
            for index in range(3):
                _, events = await post_run(client, front.url, run_input(f"next-{index}"))
                assert events[-1].type.value == "RUN_FINISHED"
            assert set(seen.ports[5:]) <= held, "a kept connection was not reused"


async def test_a_run_cut_off_mid_stream_closes_its_upstream_connection(
    upstream: tuple[Running, PortsSeen],
) -> None:
    server, seen = upstream
    gateway = Gateway(server.url + "/")
    RELEASE.clear()
    with serve(_app(gateway)) as front:
        async with httpx.AsyncClient() as client:
            async with client.stream("POST", front.url, json=run_input("hold-cut")) as r:
                async for event in sse_events(r):
                    if event.type.value == "TEXT_MESSAGE_CONTENT":
                        break  # the client leaves mid-run
            await wait_until(lambda: _pool(gateway).busy == 0, 5.0, "the run released")
            # half-read: not kept for another run, and the upstream saw it close
            assert _pool(gateway).idle == 0
            await wait_until(
                lambda: server.open_connections == 0, 5.0, "the upstream connection closed"
            )
            RELEASE.set()
            _, events = await post_run(client, front.url, run_input("after"))
            assert events[-1].type.value == "RUN_FINISHED"
            assert len(set(seen.ports)) == 2


def test_upstream_idle_is_checked() -> None:
    assert DEFAULT_IDLE_CONNECTIONS >= 1000  # sized for thousands of streams
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(ValueError, match="upstream_idle must be a whole number"):
            Gateway("http://127.0.0.1:9/", upstream_idle=bad)  # type: ignore[arg-type]


async def test_a_client_given_by_the_caller_is_left_as_it_is() -> None:
    own = httpx.AsyncClient()
    try:
        gateway = Gateway("http://127.0.0.1:9/", client=own)
        assert gateway._upstream.http() is own
        assert not isinstance(own._transport._pool, StreamPool)  # type: ignore[attr-defined]
    finally:
        await own.aclose()


class _Connection:
    """Stands for an httpcore connection in the pool's bookkeeping (no I/O)."""

    def __init__(self) -> None:
        self.expired = False
        self.closed = False

    def is_idle(self) -> bool:
        return not self.closed

    def is_available(self) -> bool:
        return not self.closed

    def has_expired(self) -> bool:
        return self.expired

    async def aclose(self) -> None:
        self.closed = True


async def test_expired_idle_connections_are_closed_from_the_bottom_of_the_stack() -> None:
    """The oldest idle connections, once expired, are closed at the next release."""
    import httpcore

    origin = httpcore.URL("http://127.0.0.1:9/").origin
    pool = StreamPool(httpcore.AsyncConnectionPool(), max_idle=10)
    first, second, third = _Connection(), _Connection(), _Connection()
    for connection in (first, second):
        await pool.release(connection, origin)  # type: ignore[arg-type]
    assert pool.idle == 2
    first.expired = True
    await pool.release(third, origin)  # type: ignore[arg-type]
    assert first.closed and not second.closed and not third.closed
    assert pool.idle == 2
    await pool.aclose()
    assert second.closed and third.closed
