"""The endpoint as a bare ASGI app, driven in-process on asyncio *and* trio.

uvicorn only runs on asyncio; these tests drive the same code under trio with
a scripted ASGI ``receive``/``send`` pair, including the disconnect path.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from ag_ui.core import EventType
from starlette.applications import Starlette

from agui_pipes.codecs import SSEDecoder
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, Gateway, agent_route
from tests._servers import EVENT, Running, run_input, serve, wait_until

pytestmark = pytest.mark.anyio


class Client:
    """A scripted ASGI peer: sends one request body, records the response."""

    def __init__(self, body: bytes, *, disconnect_after: bytes | None = None) -> None:
        self._body: bytes | None = body
        self._disconnect_after = disconnect_after
        self._gone = anyio.Event()
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.finished = False

    async def receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
            return
        self.body += message.get("body", b"")
        if not message.get("more_body", False):
            self.finished = True
        if self._disconnect_after is not None and self._disconnect_after in self.body:
            self._gone.set()

    def events(self) -> list[Any]:
        decoder = SSEDecoder()
        return [EVENT.validate_json(p) for p in decoder.feed(self.body)]


SCOPE = {"type": "http", "method": "POST", "path": "/", "headers": []}


async def hello(ctx: RunContext[Any]) -> RunOutcome:
    ctx.say("hello")
    return RunOutcome.success()


async def test_complete_run(anyio_backend: str) -> None:
    client = Client(json.dumps(run_input()).encode())
    await AgentEndpoint(hello)(SCOPE, client.receive, client.send)
    assert client.status == 200
    assert client.finished
    assert [e.type for e in client.events()][0] is EventType.RUN_STARTED
    assert client.events()[-1].type is EventType.RUN_FINISHED


async def test_bad_body(anyio_backend: str) -> None:
    client = Client(b'{"threadId": 1}')
    await AgentEndpoint(hello)(SCOPE, client.receive, client.send)
    assert client.status == 422
    assert client.finished
    assert json.loads(client.body)["error"] == "invalid_run_input"


async def test_disconnect_cancels_the_agent(anyio_backend: str) -> None:
    state: dict[str, Any] = {}

    async def hang(ctx: RunContext[Any]) -> RunOutcome:
        try:
            ctx.say("first")
            await anyio.sleep_forever()
        finally:
            state["cancelled"] = ctx.is_cancelled()
        return RunOutcome.success()

    client = Client(json.dumps(run_input()).encode(), disconnect_after=b'"delta":"first"')
    with anyio.fail_after(1):
        await AgentEndpoint(hang)(SCOPE, client.receive, client.send)
    assert state == {"cancelled": True}
    assert not client.finished  # the response was abandoned, not completed


# -- the gateway in-process (asyncio and trio), upstream on uvicorn ---------------------

HANG_STOPPED: dict[str, threading.Event] = {}


async def hang_forever(ctx: RunContext[Any]) -> RunOutcome:
    try:
        ctx.say("first")
        await anyio.sleep_forever()
    finally:
        HANG_STOPPED.setdefault(ctx.run_id, threading.Event()).set()
    return RunOutcome.success()


@pytest.fixture(scope="module")
def upstream() -> Iterator[Running]:
    app = Starlette(
        routes=[agent_route("/hello", hello), agent_route("/hang", hang_forever, keepalive=0.05)]
    )
    with serve(app) as running:
        yield running


async def test_gateway_relays_on_both_backends(upstream: Running, anyio_backend: str) -> None:
    gateway = Gateway(upstream.url + "/hello")
    try:
        client = Client(json.dumps(run_input()).encode())
        await gateway(SCOPE, client.receive, client.send)
    finally:
        await gateway.aclose()
    assert client.finished
    events = client.events()
    assert events[0].type is EventType.RUN_STARTED
    assert events[-1].type is EventType.RUN_FINISHED


async def test_gateway_disconnect_on_both_backends(upstream: Running, anyio_backend: str) -> None:
    run_id = f"asgi-hang-{anyio_backend}"
    stopped = HANG_STOPPED.setdefault(run_id, threading.Event())
    gateway = Gateway(upstream.url + "/hang")
    try:
        client = Client(json.dumps(run_input(run_id)).encode(), disconnect_after=b'"delta":"first"')
        with anyio.fail_after(1):
            await gateway(SCOPE, client.receive, client.send)
    finally:
        await gateway.aclose()
    await wait_until(stopped.is_set, 1.0, "the upstream agent's finally ran")
    assert not client.finished


async def test_gateway_upstream_refused_on_both_backends(anyio_backend: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gateway = Gateway(f"http://127.0.0.1:{port}/")
    try:
        client = Client(json.dumps(run_input()).encode())
        await gateway(SCOPE, client.receive, client.send)
    finally:
        await gateway.aclose()
    (event,) = client.events()
    assert event.type is EventType.RUN_ERROR
    assert event.code == "UPSTREAM_UNREACHABLE"
