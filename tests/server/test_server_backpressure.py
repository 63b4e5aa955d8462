"""A slow client holds the run: bounded memory, a held agent, a send timeout.

Real uvicorn (tests/_servers.py) and a raw socket client that sends its POST
and then reads nothing, with a small receive buffer: the server must stop
the agent once ``send_buffer`` bytes (plus the sockets' own buffers) wait,
keep its memory within that bound, and give the client up after
``send_timeout`` — the agent cancelled, no task left.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

from agui_pipes.codecs import encode_sse
from agui_pipes.server import AgentEndpoint, agent_route
from agui_pipes.server.gateway import Gateway
from agui_pipes.testing import collect
from tests._servers import Running, serve
from tests._slow_clients import KIB, Flood, poll, stalled_client, wait_until_held


@contextmanager
def traced() -> Iterator[Callable[[], int]]:
    """Python's own allocations (all threads) from now on: returns the peak growth."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        yield lambda: tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


SEND_BUFFER = 256 * KIB
SEND_TIMEOUT = 2.0
SLACK = 1024 * KIB
"""What a stalled run holds beside ``send_buffer``: the server's transport buffer
(uvicorn's 64 KiB high-water mark plus one 64 KiB write), the write being framed,
the driver's few held events, the tracing itself."""


def test_a_stalled_client_holds_the_agent_and_is_dropped_after_the_send_timeout() -> None:
    agent = Flood(100_000)
    options = {"keepalive": None, "send_buffer": SEND_BUFFER, "send_timeout": SEND_TIMEOUT}
    app = Starlette(
        routes=[agent_route("/warm-up", Flood(10), **options), agent_route("/", agent, **options)]
    )
    with serve(app) as server:
        _warm_up(server)
        with traced() as growth, stalled_client(server.port):
            _check_held_then_dropped(server, agent, growth)
    poll(lambda: server.open_connections == 0, 5, "the connection closed")


def _warm_up(server: Running) -> None:
    """One short run first, so what a first run imports or caches is not counted."""
    response = httpx.post(f"{server.url}/warm-up", json=_INPUT, timeout=30)
    assert response.status_code == 200


def _check_held_then_dropped(server: Running, agent: Flood, growth: Callable[[], int]) -> None:
    poll(lambda: agent.emitted > 0, 10, "the agent started")
    held_since = wait_until_held(lambda: agent.emitted)
    # Held: what it emitted is what the buffers hold, far from the whole run.
    held_at = agent.emitted
    assert not agent.ended.is_set()
    assert held_at < 20_000
    assert growth() < SEND_BUFFER + SLACK
    # Then the send timeout gives the client up: the agent is cancelled
    # at its await (it sees cancellation, not an error) and no task is left.
    assert agent.ended.wait(SEND_TIMEOUT + 5), "the run was not cancelled"
    assert time.monotonic() - held_since < SEND_TIMEOUT + 5
    assert agent.ended_by == "CancelledError"
    assert agent.emitted == held_at
    poll(lambda: server.open_tasks == 0, 5, "the run's task ended")


def test_a_client_that_leaves_while_held_ends_the_run(server_app: tuple[Running, Flood]) -> None:
    server, agent = server_app
    with stalled_client(server.port):
        wait_until_held(lambda: agent.emitted)
    assert agent.ended.wait(5), "the run was not cancelled when the client left"
    assert agent.ended_by == "CancelledError"
    poll(lambda: server.open_tasks == 0 and server.open_connections == 0, 5, "all closed")


@pytest.fixture
def server_app() -> Iterator[tuple[Running, Flood]]:
    agent = Flood(100_000)
    app = AgentEndpoint(agent, keepalive=None, send_buffer=SEND_BUFFER, send_timeout=60)
    with serve(app) as server:
        yield server, agent


@pytest.mark.anyio
@pytest.mark.parametrize("send_buffer", [1, 3000, SEND_BUFFER])
async def test_a_reading_client_gets_every_byte(send_buffer: int) -> None:
    """However small the buffer, a client that reads gets the run byte for byte."""
    expected = b"".join(encode_sse(event) for event in await collect(Flood(3_000), _INPUT))
    app = AgentEndpoint(Flood(3_000), keepalive=None, send_buffer=send_buffer, send_timeout=5)
    with serve(app) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                server.url, json=_INPUT, headers={"accept": "text/event-stream"}
            )
    assert response.status_code == 200
    assert response.content == expected


_INPUT = {"threadId": "t", "runId": "r", "messages": []}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"send_buffer": 0}, "send_buffer must be a positive number of bytes"),
        ({"send_buffer": 1.5}, "send_buffer must be a positive number of bytes"),
        ({"send_timeout": 0}, "send_timeout must be a positive number of seconds or None"),
        ({"send_timeout": -1.0}, "send_timeout must be a positive number of seconds or None"),
    ],
)
def test_send_limits_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AgentEndpoint(Flood(1), **options)


def test_a_stalled_gateway_client_closes_the_upstream_after_the_send_timeout() -> None:
    """In-process (no kernel timeout on the socket): the send timeout alone ends it."""
    agent = Flood(1_000, "y" * 100_000)
    upstream_app = AgentEndpoint(agent, keepalive=None, send_buffer=64 * KIB, send_timeout=120)
    with serve(upstream_app) as upstream:
        gateway_app = Gateway(
            upstream.url, keepalive=None, send_buffer=64 * KIB, send_timeout=SEND_TIMEOUT
        )
        with serve(gateway_app) as gateway, stalled_client(gateway.port):
            poll(lambda: agent.emitted > 0, 10, "the upstream agent started")
            held_since = wait_until_held(lambda: agent.emitted)
            assert not agent.ended.is_set()
            assert agent.emitted < 500
            assert agent.ended.wait(SEND_TIMEOUT + 5), "the upstream run was not cancelled"
            assert time.monotonic() - held_since < SEND_TIMEOUT + 5
            assert agent.ended_by == "CancelledError"
            poll(
                lambda: gateway.open_tasks == 0 and upstream.open_connections == 0,
                5,
                "the gateway's run ended and its upstream connection closed",
            )


class _Deltas:
    """Emits the given deltas, awaiting every ``every`` of them."""

    def __init__(self, sizes: list[int], every: int) -> None:
        self.sizes = sizes
        self.every = every

    async def run(self, ctx: Any) -> None:
        with ctx.assistant_message() as message:
            for index, size in enumerate(self.sizes):
                message.delta(chr(0x61 + index % 26) * size)
                if index % self.every == 0:
                    await anyio.lowlevel.checkpoint()


async def _serve_once(app: AgentEndpoint, pauses: list[int]) -> bytes:
    """Call the ASGI app directly with a client whose writes take ``pauses`` checkpoints."""
    body = json.dumps(_INPUT).encode()
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    received: list[bytes] = []
    writes = 0

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal writes
        for _ in range(pauses[writes % len(pauses)]):
            await anyio.lowlevel.checkpoint()
        writes += 1
        if message["type"] == "http.response.body":
            received.append(message["body"])

    await app({"type": "http", "method": "POST", "headers": []}, receive, send)
    return b"".join(received)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6000), min_size=1, max_size=100),
    every=st.integers(1, 40),
    send_buffer=st.integers(1, 20_000),
    pauses=st.lists(st.integers(0, 30), min_size=1, max_size=5),
)
def test_whatever_the_buffer_and_the_pace_the_client_gets_the_run_byte_for_byte(
    backend: str, sizes: list[int], every: int, send_buffer: int, pauses: list[int]
) -> None:
    async def both() -> tuple[bytes, bytes]:
        expected = b"".join(
            encode_sse(event) for event in await collect(_Deltas(sizes, every), _INPUT)
        )
        app = AgentEndpoint(
            _Deltas(sizes, every), keepalive=None, send_buffer=send_buffer, send_timeout=30
        )
        return expected, await _serve_once(app, pauses)

    expected, got = anyio.run(both, backend=backend)
    assert got == expected
