"""The gateway, in front of a real upstream, both on uvicorn at 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from _servers import Running, post_run, run_input, serve, sse_events, wait_until
from ag_ui.core import BaseEvent, EventType, TextMessageContentEvent
from starlette.applications import Starlette
from starlette.routing import Route

from agui_pipes import FunctionTransformer
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import Gateway, agent_route

pytestmark = pytest.mark.anyio


# -- upstream agents and misbehaving upstreams --------------------------------------


async def hello(ctx: RunContext[Any]) -> RunOutcome:
    ctx.say("hello world")
    return RunOutcome.success()


class Hanging:
    def __init__(self) -> None:
        self.stopped: dict[str, threading.Event] = {}

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        try:
            ctx.say("first")
            await anyio.sleep_forever()
        finally:
            self.stopped.setdefault(ctx.run_id, threading.Event()).set()
        return RunOutcome.success()


HANGING = Hanging()
UPSTREAM_CALLS: list[str] = []


def counted(run_input: Any) -> Any:
    UPSTREAM_CALLS.append(run_input.run_id)
    return hello


def frame(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {text}\n\n".encode()


STARTED = frame({"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"})
FINISHED = frame({"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"})


def raw(
    *parts: bytes,
    status: int = 200,
    content_type: str = "text/event-stream",
    stall: float = 0.0,
    crash: bool = False,
    encoding: str | None = None,
) -> Any:
    """A scripted upstream: answers with ``parts``, optionally stalls or crashes mid-body."""

    class App:  # an instance, so Starlette routes it as a raw ASGI app
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await app(scope, receive, send)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body", False):
            pass
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", content_type.encode())]
                + ([(b"content-encoding", encoding.encode())] if encoding else []),
            }
        )
        for part in parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})
        if stall:
            await anyio.sleep(stall)
        if crash:
            raise RuntimeError("upstream crashed mid-body (expected by the test)")
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return App()


UPSTREAM_ROUTES = {
    "/hello": agent_route("/hello", hello),
    "/counted": agent_route("/counted", agent_factory=counted),
    "/hang": agent_route("/hang", HANGING, keepalive=0.05),
    "/chunks": Route(
        "/chunks",
        raw(
            STARTED,
            frame({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "hel"}),
            frame({"type": "TEXT_MESSAGE_CHUNK", "delta": "lo"}),
            FINISHED,
        ),
        methods=["POST"],
    ),
    "/gzip": Route(
        "/gzip",
        raw(gzip.compress(STARTED + FINISHED), encoding="gzip"),
        methods=["POST"],
    ),
    "/status500": Route("/status500", raw(b"boom", status=500, content_type="text/plain"),
                        methods=["POST"]),
    "/not-sse": Route("/not-sse", raw(b"{}", content_type="application/json"), methods=["POST"]),
    "/malformed": Route("/malformed", raw(frame({"type": "RUN_STARTED"})), methods=["POST"]),
    "/not-json": Route("/not-json", raw(STARTED, frame("hello")), methods=["POST"]),
    "/open-run": Route(
        "/open-run",
        raw(STARTED, frame({"type": "TEXT_MESSAGE_START", "messageId": "m1"})),
        methods=["POST"],
    ),
    "/cut-frame": Route("/cut-frame", raw(STARTED, b'data: {"type": "TEXT'), methods=["POST"]),
    "/empty": Route("/empty", raw(), methods=["POST"]),
    "/violation": Route(
        "/violation",
        raw(STARTED, frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "zz", "delta": "x"})),
        methods=["POST"],
    ),
    "/stall": Route("/stall", raw(STARTED, stall=1.0), methods=["POST"]),
    "/crash": Route("/crash", raw(STARTED, crash=True), methods=["POST"]),
}


def shout(event: BaseEvent) -> BaseEvent:
    if isinstance(event, TextMessageContentEvent):
        return event.model_copy(update={"delta": event.delta.upper()})
    return event


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Running, Running]]:
    with serve(Starlette(routes=list(UPSTREAM_ROUTES.values()))) as upstream:
        gateways = {
            path: Gateway(upstream.url + path, chain=lambda: FunctionTransformer(shout),
                          keepalive=0.05)
            for path in UPSTREAM_ROUTES
        }
        gateways["/stall"] = Gateway(upstream.url + "/stall", timeout=httpx.Timeout(5, read=0.3))
        gateways["/unreachable"] = Gateway(f"http://127.0.0.1:{closed_port()}/")
        gateways["/no-verify"] = Gateway(upstream.url + "/violation", verify=False)
        routes = [Route(path, g, methods=["POST"]) for path, g in gateways.items()]

        @asynccontextmanager
        async def lifespan(app: object) -> AsyncIterator[None]:
            try:
                yield
            finally:  # close the upstream clients in the server's own loop
                for g in gateways.values():
                    await g.aclose()

        with serve(Starlette(routes=routes, lifespan=lifespan)) as gateway:
            yield upstream, gateway


async def through(gateway: Running, path: str, body: Any = None) -> list[BaseEvent]:
    async with httpx.AsyncClient() as client:
        response, events = await post_run(client, gateway.url + path, body or run_input())
    assert response.status_code == 200
    return events


def texts(events: list[BaseEvent]) -> list[str]:
    return [e.delta for e in events if isinstance(e, TextMessageContentEvent)]


async def test_end_to_end_through_the_gateway(servers: tuple[Running, Running]) -> None:
    _, gateway = servers
    events = await through(gateway, "/hello")
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert texts(events) == ["HELLO WORLD"]


async def test_chunks_are_expanded(servers: tuple[Running, Running]) -> None:
    _, gateway = servers
    events = await through(gateway, "/chunks")
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert "".join(texts(events)) == "HELLO"


async def test_compressed_upstream_is_decoded(servers: tuple[Running, Running]) -> None:
    # The gateway asks for identity, but an upstream may compress anyway.
    _, gateway = servers
    events = await through(gateway, "/gzip")
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_FINISHED]


async def test_bad_body_is_422_and_not_forwarded(servers: tuple[Running, Running]) -> None:
    _, gateway = servers
    before = list(UPSTREAM_CALLS)
    async with httpx.AsyncClient() as client:
        response = await client.post(gateway.url + "/counted", content=b'{"runId": 1}')
        assert response.status_code == 422
        assert response.json()["error"] == "invalid_run_input"
        await post_run(client, gateway.url + "/counted", run_input("forwarded"))
    assert UPSTREAM_CALLS[len(before):] == ["forwarded"]


@pytest.mark.parametrize(
    ("path", "code", "fragment"),
    [
        ("/unreachable", "UPSTREAM_UNREACHABLE", "cannot reach the upstream agent"),
        ("/status500", "UPSTREAM_HTTP_ERROR", "answered 500 Internal Server Error: boom"),
        ("/not-sse", "UPSTREAM_BAD_RESPONSE", "application/json"),
        ("/malformed", "UPSTREAM_MALFORMED", "invalid event #0"),
        ("/not-json", "UPSTREAM_MALFORMED", "invalid event #1"),
        ("/open-run", "UPSTREAM_TRUNCATED", "run run-1 was still open"),
        ("/cut-frame", "UPSTREAM_TRUNCATED", "middle of a frame"),
        ("/empty", "UPSTREAM_TRUNCATED", "without any event"),
        ("/crash", "UPSTREAM_TRUNCATED", "connection broke"),
        ("/stall", "UPSTREAM_TIMEOUT", "sent nothing for 0.3s"),
        ("/violation", "PROTOCOL_VIOLATION", "No active text message found with ID 'zz'"),
    ],
)
async def test_upstream_failures_become_run_error(
    servers: tuple[Running, Running],
    caplog: pytest.LogCaptureFixture,
    path: str,
    code: str,
    fragment: str,
) -> None:
    _, gateway = servers
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    events = await through(gateway, path)
    last = events[-1]
    assert last.type is EventType.RUN_ERROR, events
    assert last.code == code  # type: ignore[attr-defined]
    assert fragment in last.message  # type: ignore[attr-defined]
    # Well-formed: exactly one terminal event, the last one.
    terminal = [e for e in events if e.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)]
    assert terminal == [last]
    await wait_until(
        lambda: any(code in r.getMessage() for r in caplog.records), 2.0, "the failure is logged"
    )


async def test_without_verification_violations_pass(servers: tuple[Running, Running]) -> None:
    _, gateway = servers
    events = await through(gateway, "/no-verify")
    # The violating event passes; the stream then ends with the run open.
    assert EventType.TEXT_MESSAGE_CONTENT in [e.type for e in events]
    assert events[-1].code == "UPSTREAM_TRUNCATED"  # type: ignore[attr-defined]


async def test_client_disconnect_closes_upstream_and_cancels_the_agent(
    servers: tuple[Running, Running], anyio_backend: str
) -> None:
    upstream, gateway = servers
    run_id = f"gw-hang-{anyio_backend}"
    stopped = HANGING.stopped.setdefault(run_id, threading.Event())
    # Idle keep-alive connections of the gateway's pool may exist from other
    # tests; the hung run's connection must not be added to them.
    idle_before = upstream.open_connections
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", gateway.url + "/hang", json=run_input(run_id)) as response:
            async for event in sse_events(response):
                if isinstance(event, TextMessageContentEvent):
                    assert event.delta == "FIRST"
                    break
        await wait_until(stopped.is_set, 1.0, "the upstream agent's finally ran")
    await wait_until(
        lambda: upstream.open_connections <= idle_before and upstream.open_tasks == 0,
        2.0,
        f"the upstream request's connection was closed ({idle_before} before)",
    )
    await wait_until(
        lambda: gateway.open_connections == 0 and gateway.open_tasks == 0,
        2.0,
        "no gateway connection left",
    )


async def test_gateway_log_line_counts_each_stage(
    servers: tuple[Running, Running], caplog: pytest.LogCaptureFixture
) -> None:
    _, gateway = servers
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    await through(gateway, "/chunks", run_input("chunky"))
    await wait_until(
        lambda: any("gateway run chunky" in r.getMessage() for r in caplog.records), 2.0, "log"
    )
    line = next(r.getMessage() for r in caplog.records if "gateway run chunky" in r.getMessage())
    assert "finished" in line
    assert "source 4 → ExpandChunks 6 → Verify 6 → shout 6 → out 6" in line


def test_gateway_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="http"):
        Gateway("ftp://example.com/")
    with pytest.raises(ValueError, match="keepalive"):
        Gateway("http://127.0.0.1:1/", keepalive=-1)
    with pytest.raises(TypeError, match="chain factory"):
        Gateway("http://127.0.0.1:1/", chain=3)  # type: ignore[arg-type]
