"""A slow client holds the run: bounded memory, a held agent, a send timeout.

Real uvicorn (tests/_servers.py) and a raw socket client that sends its POST
and then reads nothing, with a small receive buffer: the server must stop
the agent once ``send_buffer`` bytes (plus the sockets' own buffers) wait,
keep its memory within that bound, and give the client up after
``send_timeout`` — the agent cancelled, no task left.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from _servers import Running, serve
from starlette.applications import Starlette

from agui_pipes.codecs import encode_sse
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, agent_route
from agui_pipes.testing import collect

DELTA = "x" * 1000
KIB = 1024


class Flood:
    """Streams ``n`` 1 KB deltas, awaiting after each; records how it ended (thread-safe)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.emitted = 0
        self.ended_by: str | None = None
        self.ended = threading.Event()

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        try:
            with ctx.assistant_message() as message:
                for _ in range(self.n):
                    message.delta(DELTA)
                    self.emitted += 1
                    await anyio.lowlevel.checkpoint()
        except BaseException as exc:
            self.ended_by = type(exc).__name__
            raise
        finally:
            self.ended.set()
        self.ended_by = "return"
        return RunOutcome.success()


def poll(condition: Callable[[], bool], within: float, what: str) -> None:
    """Poll a condition set by the server's thread; fail naming ``what``."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within}s: {what}")
        time.sleep(0.01)


def wait_until_held(count: Callable[[], int], quiet: float = 0.5, within: float = 20) -> float:
    """Wait until ``count()`` stops growing for ``quiet`` seconds; return when it stopped."""
    deadline = time.monotonic() + within
    last, since = count(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return since
    raise AssertionError(f"the producer was never held: {count()} events and counting")


@contextmanager
def stalled_client(port: int, path: str = "/") -> Iterator[socket.socket]:
    """A client that POSTs a run and then reads nothing (a small receive buffer)."""
    body = json.dumps({"threadId": "t", "runId": "r", "messages": []}).encode()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    request = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(request + body)
    try:
        yield sock
    finally:
        sock.close()


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
