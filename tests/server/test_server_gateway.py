"""The gateway, in front of a real upstream, both on uvicorn at 127.0.0.1.

Every scenario runs through both of the gateway's paths: ``relay`` (a chain of
sync stages, run by ``agui_pipes.relay.Relay`` per upstream chunk) and
``apply`` (the same chain with an async stage, run by ``chain.apply``).
"""

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
from ag_ui.core import BaseEvent, EventType, TextMessageContentEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.routing import Route

from agui_pipes import (
    AsyncStreamTransformer,
    DecodeError,
    FunctionTransformer,
    Stage,
    TransformerChain,
)
from agui_pipes.codecs import encode_sse
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import Gateway, agent_route
from agui_pipes.testing import event_lines
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import (
    CoalesceDeltas,
    DropEvents,
    FilterToolCalls,
    Redact,
    StateDiff,
    StripRawEvents,
    SubagentVisibility,
    ToolResultToState,
)
from tests._servers import Running, post_run, run_input, serve, sse_events, wait_until

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = [pytest.mark.anyio, pytest.mark.wire]


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
OPENED = (
    STARTED
    + frame({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
    + frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a"})
)
"""Three good events, sent as one body part with a bad fourth: one upstream chunk."""


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
    "/status500": Route(
        "/status500", raw(b"boom", status=500, content_type="text/plain"), methods=["POST"]
    ),
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
    # A failure in the middle of one upstream chunk (decode, verification, a stage).
    "/batch-malformed": Route(
        "/batch-malformed",
        raw(OPENED + frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 5})),
        methods=["POST"],
    ),
    "/batch-violation": Route(
        "/batch-violation",
        raw(OPENED + frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "zz", "delta": "x"})),
        methods=["POST"],
    ),
    "/batch-stage-error": Route(
        "/batch-stage-error",
        raw(OPENED + frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "boom"})),
        methods=["POST"],
    ),
    "/batch-stage-decode-error": Route(
        "/batch-stage-decode-error",
        raw(OPENED + frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "refuse"})),
        methods=["POST"],
    ),
}


async def echo(scope: Any, receive: Any, send: Any) -> None:
    """An upstream answering with the SSE bytes the run input carries, cut where it says.

    The gateway forwards the body as received, so a test drives this upstream
    through ``forwardedProps``: ``{"wire": <SSE text>, "cuts": [byte offsets]}``.
    """
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    props = json.loads(body)["forwardedProps"]
    wire: bytes = props["wire"].encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    start = 0
    for cut in [*sorted(set(props["cuts"])), len(wire)]:
        part, start = wire[start:cut], max(start, cut)
        if part:
            await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Echo:  # an instance, so Starlette routes it as a raw ASGI app
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await echo(scope, receive, send)


ECHO_ROUTE = Route("/echo", _Echo(), methods=["POST"])


def builtin_stages() -> list[Stage]:
    return [
        StripRawEvents(),
        FilterToolCalls.deny(["internal_*"]),
        Redact([r"[0-9]{3,}"], replacement="#"),
        CoalesceDeltas(max_chars=12),
        SubagentVisibility.inline(),
        ToolResultToState.delta("update_items"),
        DropEvents(["reasoning"]),
        StateDiff(),
    ]


def builtin_chain(mode: str) -> Any:
    """The built-in stages; on the ``apply`` path followed by an async pass-through."""
    extra: list[Stage] = [AsyncStreamTransformer()] if mode == "apply" else []
    return lambda: TransformerChain([*builtin_stages(), *extra])


def shout(event: BaseEvent) -> BaseEvent:
    if isinstance(event, TextMessageContentEvent):
        if event.delta == "boom":
            raise ValueError("shout cannot shout boom (expected by the test)")
        if event.delta == "refuse":
            # A stage's own refusal that happens to be a DecodeError: it is the stage
            # refusing, not the upstream sending something malformed.
            raise DecodeError("shout refuses this delta (expected by the test)", path="delta")
        return event.model_copy(update={"delta": event.delta.upper()})
    return event


class AsyncShout(AsyncStreamTransformer):
    """``shout`` as an async stage, so the gateway takes its ``chain.apply`` path."""

    @property
    def name(self) -> str:
        return "shout"

    async def transform(self, event: BaseEvent) -> tuple[BaseEvent, ...]:
        return (shout(event),)


PATHS = ("relay", "apply")
SHOUT = {"relay": lambda: FunctionTransformer(shout), "apply": AsyncShout}
PASS: dict[str, Any] = {"relay": None, "apply": AsyncStreamTransformer}


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    """Which of the gateway's two paths a test goes through (the route prefix)."""
    mode: str = request.param
    return mode


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Running, Running]]:
    with serve(Starlette(routes=[*UPSTREAM_ROUTES.values(), ECHO_ROUTE])) as upstream:
        gateways: dict[str, Gateway] = {}
        for mode in PATHS:
            for path in UPSTREAM_ROUTES:
                gateways[f"/{mode}{path}"] = Gateway(
                    upstream.url + path, chain=SHOUT[mode], keepalive=0.05
                )
            gateways[f"/{mode}/stall"] = Gateway(
                upstream.url + "/stall", chain=PASS[mode], timeout=httpx.Timeout(5, read=0.3)
            )
            gateways[f"/{mode}/unreachable"] = Gateway(
                f"http://127.0.0.1:{closed_port()}/", chain=PASS[mode]
            )
            gateways[f"/{mode}/no-verify"] = Gateway(
                upstream.url + "/violation", chain=PASS[mode], verify=False
            )
            gateways[f"/{mode}/builtin"] = Gateway(
                upstream.url + "/echo", chain=builtin_chain(mode), keepalive=None
            )
            gateways[f"/{mode}/plain"] = Gateway(
                upstream.url + "/echo", chain=PASS[mode], keepalive=None
            )
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


async def test_end_to_end_through_the_gateway(servers: tuple[Running, Running], path: str) -> None:
    _, gateway = servers
    events = await through(gateway, f"/{path}/hello")
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert texts(events) == ["HELLO WORLD"]


async def test_chunks_are_expanded(servers: tuple[Running, Running], path: str) -> None:
    _, gateway = servers
    events = await through(gateway, f"/{path}/chunks")
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert "".join(texts(events)) == "HELLO"


async def test_compressed_upstream_is_decoded(servers: tuple[Running, Running], path: str) -> None:
    # The gateway asks for identity, but an upstream may compress anyway.
    _, gateway = servers
    events = await through(gateway, f"/{path}/gzip")
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_FINISHED]


async def test_bad_body_is_422_and_not_forwarded(
    servers: tuple[Running, Running], path: str
) -> None:
    _, gateway = servers
    before = list(UPSTREAM_CALLS)
    async with httpx.AsyncClient() as client:
        response = await client.post(gateway.url + f"/{path}/counted", content=b'{"runId": 1}')
        assert response.status_code == 422
        assert response.json()["error"] == "invalid_run_input"
        await post_run(client, gateway.url + f"/{path}/counted", run_input("forwarded"))
    assert UPSTREAM_CALLS[len(before) :] == ["forwarded"]


@pytest.mark.parametrize(
    ("route", "code", "fragment"),
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
    route: str,
    code: str,
    fragment: str,
) -> None:
    _, gateway = servers
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    events = await through(gateway, f"/{path}{route}")
    last = events[-1]
    assert last.type is EventType.RUN_ERROR, events
    assert last.code == code  # type: ignore[attr-defined]
    assert fragment in last.message  # type: ignore[attr-defined]
    # An invalid event is named at its own position, once (it used to carry a
    # second, wrong one: "[end of stream after N events]").
    assert "end of stream" not in last.message  # type: ignore[attr-defined]
    # Well-formed: exactly one terminal event, the last one.
    terminal = [e for e in events if e.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)]
    assert terminal == [last]
    await wait_until(
        lambda: any(code in r.getMessage() for r in caplog.records), 2.0, "the failure is logged"
    )


async def test_without_verification_violations_pass(
    servers: tuple[Running, Running], path: str
) -> None:
    _, gateway = servers
    events = await through(gateway, f"/{path}/no-verify")
    # The violating event passes; the stream then ends with the run open.
    assert EventType.TEXT_MESSAGE_CONTENT in [e.type for e in events]
    assert events[-1].code == "UPSTREAM_TRUNCATED"  # type: ignore[attr-defined]


async def test_client_disconnect_closes_upstream_and_cancels_the_agent(
    servers: tuple[Running, Running], anyio_backend: str, path: str
) -> None:
    upstream, gateway = servers
    run_id = f"gw-hang-{path}-{anyio_backend}"
    stopped = HANGING.stopped.setdefault(run_id, threading.Event())
    # Idle keep-alive connections of the gateway's pool may exist from other
    # tests; the hung run's connection must not be added to them.
    idle_before = upstream.open_connections
    async with httpx.AsyncClient() as client:
        url = gateway.url + f"/{path}/hang"
        async with client.stream("POST", url, json=run_input(run_id)) as response:
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
    servers: tuple[Running, Running],
    caplog: pytest.LogCaptureFixture,
    path: str,
    anyio_backend: str,
) -> None:
    _, gateway = servers
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    run_id = f"chunky-{path}-{anyio_backend}"
    await through(gateway, f"/{path}/chunks", run_input(run_id))
    marker = f"gateway run {run_id} "
    await wait_until(lambda: any(marker in r.getMessage() for r in caplog.records), 2.0, "log")
    line = next(r.getMessage() for r in caplog.records if marker in r.getMessage())
    assert "finished" in line
    assert "source 4 → ExpandChunks 6 → shout 6 → Verify 6 → out 6" in line


@pytest.mark.parametrize(
    ("route", "code", "fragment"),
    [
        ("/batch-malformed", "UPSTREAM_MALFORMED", "invalid event #3"),
        ("/batch-violation", "PROTOCOL_VIOLATION", "'zz'"),
        ("/batch-stage-error", "STAGE_ERROR", "shout cannot shout boom"),
    ],
)
async def test_a_failure_mid_chunk_still_sends_the_frames_before_it(
    servers: tuple[Running, Running], path: str, route: str, code: str, fragment: str
) -> None:
    # The upstream sends the four events as one body part: on the relay path they
    # arrive as one chunk, one batch, and the fourth fails inside it.
    _, gateway = servers
    events = await through(gateway, f"/{path}{route}")
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.RUN_ERROR,
    ]
    assert texts(events) == ["A"]
    assert events[-1].code == code  # type: ignore[attr-defined]
    assert fragment in events[-1].message  # type: ignore[attr-defined]
    assert "end of stream" not in events[-1].message  # type: ignore[attr-defined]


async def body_of(gateway: Running, route: str, body: dict[str, Any]) -> bytes:
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", gateway.url + route, json=body) as response,
    ):
        assert response.status_code == 200
        return await response.aread()


@pytest.mark.parametrize(
    "route",
    [
        "/hello",
        "/chunks",
        "/malformed",
        "/not-json",
        "/open-run",
        "/cut-frame",
        "/empty",
        "/violation",
        "/crash",
        "/no-verify",
        "/batch-malformed",
        "/batch-violation",
        "/batch-stage-error",
        "/batch-stage-decode-error",
    ],
)
async def test_both_paths_send_the_same_bytes_on_every_scenario(
    servers: tuple[Running, Running], route: str
) -> None:
    _, gateway = servers
    # These gateways send keep-alives every 50 ms: whether one falls between two
    # frames is timing, so they are left out of the comparison.
    keepalive = b": keep-alive\n\n"
    relayed = (await body_of(gateway, f"/relay{route}", run_input())).replace(keepalive, b"")
    applied = (await body_of(gateway, f"/apply{route}", run_input())).replace(keepalive, b"")
    assert relayed == applied
    assert relayed.startswith(b"data: ")


def payloads(events: list[BaseEvent], style: str) -> list[str]:
    if style == "canonical":  # the encoder's own bytes: the relay passes them through
        return [encode_sse(e)[6:-2].decode() for e in events]
    return event_lines(events)  # sorted keys: the relay re-encodes


@settings(max_examples=40, deadline=None)
@given(
    events=streams(max_runs=2, tool_names=["search", "internal_debug", "update_items"]),
    style=st.sampled_from(["canonical", "sorted"]),
    cuts=st.lists(st.integers(0, 20_000), max_size=6),
)
async def test_relay_path_is_byte_identical_to_the_apply_path(
    servers: tuple[Running, Running], events: list[BaseEvent], style: str, cuts: list[int]
) -> None:
    from agui_pipes.codecs import decode
    from agui_pipes.transformers import ExpandChunks, Verify

    _, gateway = servers
    sent = payloads(events, style)
    body = run_input(forwardedProps={"wire": "".join(f"data: {p}\n\n" for p in sent), "cuts": cuts})
    relayed = await body_of(gateway, "/relay/builtin", body)
    applied = await body_of(gateway, "/apply/builtin", body)
    assert relayed == applied
    # And both are what the gateway's chain gives offline: nothing lost, nothing added.
    offline = TransformerChain(
        [ExpandChunks(), *builtin_stages(), Verify(profile="consumer", on_violation="raise")]
    )
    decoded = [decode(payload).event for payload in sent]
    expected = b"".join(encode_sse(e) for e in offline.apply_sync([e for e in decoded if e]))
    assert relayed == expected


def test_gateway_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="http"):
        Gateway("ftp://example.com/")
    with pytest.raises(ValueError, match="keepalive"):
        Gateway("http://127.0.0.1:1/", keepalive=-1)
    with pytest.raises(TypeError, match="chain factory"):
        Gateway("http://127.0.0.1:1/", chain=3)  # type: ignore[arg-type]


async def test_forwarded_deltas_are_counted_at_every_stage_of_the_log_line(
    servers: tuple[Running, Running],
    caplog: pytest.LogCaptureFixture,
    path: str,
    anyio_backend: str,
) -> None:
    """On the relay path the deltas take the bypass (no stage sees them);
    the per-stage counts and the outcome must still read as on the apply path."""
    _, gateway = servers
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    run_id = f"plain-{path}-{anyio_backend}"
    wire = [
        {"type": "RUN_STARTED", "threadId": "thread-1", "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"d{i}"} for i in range(5)),
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": run_id},
    ]
    sent = "".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in wire)
    events = await through(
        gateway, f"/{path}/plain", run_input(run_id, forwardedProps={"wire": sent, "cuts": [99]})
    )
    assert texts(events) == [f"d{i}" for i in range(5)]
    marker = f"gateway run {run_id} "
    await wait_until(lambda: any(marker in r.getMessage() for r in caplog.records), 2.0, "log")
    line = next(r.getMessage() for r in caplog.records if marker in r.getMessage())
    assert "finished" in line
    stages = "ExpandChunks 9"
    if path == "apply":
        stages += " → AsyncStreamTransformer 9"
    assert f"source 9 → {stages} → Verify 9 → out 9" in line
