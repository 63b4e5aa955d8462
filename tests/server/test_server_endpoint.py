"""The ASGI agent endpoint, served by uvicorn on 127.0.0.1 and called with httpx."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    RunAgentInput,
    TextMessageContentEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from starlette.applications import Starlette

from agui_pipes import AsyncStreamTransformer, FunctionTransformer, StreamTransformer
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, agent_route
from agui_pipes.transformers import FilterToolCalls, Verify
from tests._servers import Running, post_run, run_input, serve, sse_events, wait_until

pytestmark = pytest.mark.anyio


async def hello(ctx: RunContext[Any]) -> RunOutcome:
    ctx.say("hello world")
    return RunOutcome.success()


async def slow(ctx: RunContext[Any]) -> RunOutcome:
    await anyio.sleep(0.3)
    ctx.say("done")
    return RunOutcome.success()


async def failing(ctx: RunContext[Any]) -> RunOutcome:
    ctx.say("about to fail")
    raise ValueError("the weather service is down")


class Hanging:
    """Says one thing, then waits forever; records how it was stopped."""

    def __init__(self) -> None:
        self.stopped: dict[str, threading.Event] = {}
        self.token_tripped: dict[str, bool] = {}

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        run_id = ctx.run_id
        try:
            ctx.say("first")
            await anyio.sleep_forever()
        finally:
            self.token_tripped[run_id] = ctx.is_cancelled()
            self.stopped.setdefault(run_id, threading.Event()).set()
        return RunOutcome.success()


class Numbered(StreamTransformer):
    """Stateful: prefixes text deltas with this instance's running count."""

    def __init__(self) -> None:
        self.seen = 0

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, TextMessageContentEvent):
            self.seen += 1
            return (event.model_copy(update={"delta": f"{self.seen}:{event.delta}"}),)
        return (event,)


class Shout(AsyncStreamTransformer):
    async def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        await anyio.lowlevel.checkpoint()
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta.upper()}),)
        return (event,)


def drop_steps(event: BaseEvent) -> BaseEvent | None:
    return None if event.type is EventType.STEP_STARTED else event


def greeter(run_input: RunAgentInput) -> Any:
    greeting = (run_input.forwarded_props or {}).get("greeting", "hi")

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.say(greeting)
        return RunOutcome.success()

    return agent


def broken_factory(run_input: RunAgentInput) -> Any:
    raise RuntimeError("no agent for you")


HANGING = Hanging()
CHAIN_CALLS: list[int] = []


def numbered_chain() -> Any:
    CHAIN_CALLS.append(1)
    return Numbered() | FunctionTransformer(drop_steps)


@pytest.fixture(scope="module")
def server() -> Iterator[Running]:
    app = Starlette(
        routes=[
            agent_route("/plain", hello),
            agent_route("/chain", hello, chain=numbered_chain),
            agent_route("/async-chain", hello, chain=lambda: Numbered() | Shout()),
            agent_route("/slow", slow, keepalive=0.05),
            agent_route("/hang", HANGING, keepalive=0.05),
            agent_route("/fail", failing),
            agent_route("/factory", agent_factory=greeter),
            agent_route("/broken-factory", agent_factory=broken_factory),
        ]
    )
    with serve(app) as running:
        yield running


def texts(events: list[BaseEvent]) -> list[str]:
    return [e.delta for e in events if isinstance(e, TextMessageContentEvent)]


async def test_streams_a_run_as_sse(server: Running) -> None:
    async with httpx.AsyncClient() as client:
        response, events = await post_run(client, server.url + "/plain", run_input())
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert "no-cache" in response.headers["cache-control"]
    assert response.headers["x-accel-buffering"] == "no"
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert texts(events) == ["hello world"]
    assert events[0].run_id == "run-1"  # type: ignore[attr-defined]


async def test_fresh_chain_per_request(server: Running) -> None:
    before = len(CHAIN_CALLS)
    async with httpx.AsyncClient() as client:
        _, first = await post_run(client, server.url + "/chain", run_input("a"))
        _, second = await post_run(client, server.url + "/chain", run_input("b"))
    assert len(CHAIN_CALLS) - before == 2
    # A shared chain would have numbered the second run's delta "2:".
    assert texts(first) == texts(second) == ["1:hello world"]


async def test_async_chain_runs_over_the_driver_output(server: Running) -> None:
    async with httpx.AsyncClient() as client:
        _, events = await post_run(client, server.url + "/async-chain", run_input())
    assert texts(events) == ["1:HELLO WORLD"]
    assert events[-1].type is EventType.RUN_FINISHED


async def test_agent_failure_is_a_run_error(server: Running) -> None:
    async with httpx.AsyncClient() as client:
        response, events = await post_run(client, server.url + "/fail", run_input())
    assert response.status_code == 200
    assert texts(events) == ["about to fail"]
    last = events[-1]
    assert last.type is EventType.RUN_ERROR
    assert last.code == "AGENT_ERROR"  # type: ignore[attr-defined]
    assert "the weather service is down" in last.message  # type: ignore[attr-defined]


async def test_agent_factory_sees_the_input(server: Running) -> None:
    async with httpx.AsyncClient() as client:
        _, events = await post_run(
            client, server.url + "/factory", run_input(forwardedProps={"greeting": "bonjour"})
        )
    assert texts(events) == ["bonjour"]


async def test_failing_factory_is_a_500_json_error(server: Running) -> None:
    async with httpx.AsyncClient() as client:
        response, _ = await post_run(client, server.url + "/broken-factory", run_input())
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert "no agent for you" in response.json()["message"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "empty"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a valid RunAgentInput"),
        (b'{"threadId": "t", "messages": []}', "runId"),
        (b'{"threadId": "t", "runId": 5, "messages": []}', "runId"),
        (b'{"threadId": "t", "runId": "r", "messages": [{"role": "nope"}]}', "messages"),
        # Not JSON, though pydantic's parser takes them: a state holding them could
        # never be echoed back (regression: a NaN state reached the run).
        (
            b'{"threadId": "t", "runId": "r", "messages": [], "state": {"x": [1, NaN]}}',
            "at `state.x.1`: the literal NaN is not JSON",
        ),
        (
            b'{"threadId": "t", "runId": "r", "messages": [], "state": -Infinity}',
            "the literal -Infinity is not JSON",
        ),
        (
            b'{"threadId": "t", "runId": "r", "messages": [], "state": {"n": 1e400}}',
            "beyond the range of a double",
        ),
    ],
)
async def test_bad_bodies_get_422_json(server: Running, body: bytes, fragment: str) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            server.url + "/plain", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    payload = response.json()
    assert payload["error"] == "invalid_run_input"
    assert fragment in payload["message"]


async def test_get_is_405(server: Running) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.get(server.url + "/plain")
    assert response.status_code == 405


async def test_keepalive_comments_while_the_agent_is_idle(server: Running) -> None:
    raw = b""
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", server.url + "/slow", json=run_input()) as response,
    ):
        async for chunk in response.aiter_raw():
            raw += chunk
    assert b": keep-alive\n\n" in raw
    # The comment came before the agent's text, i.e. while it was idle.
    assert raw.index(b": keep-alive") < raw.index(b'"delta":"done"')


async def test_client_disconnect_cancels_the_agent(server: Running, anyio_backend: str) -> None:
    run_id = f"hang-{anyio_backend}"
    stopped = HANGING.stopped.setdefault(run_id, threading.Event())
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", server.url + "/hang", json=run_input(run_id)) as response:
            seen: list[BaseEvent] = []
            async for event in sse_events(response):
                seen.append(event)
                if isinstance(event, TextMessageContentEvent):
                    break
        # Leaving the block closed the connection mid-stream.
        assert texts(seen) == ["first"]
        await wait_until(stopped.is_set, 1.0, "the agent's finally ran after the disconnect")
    assert HANGING.token_tripped[run_id] is True
    await wait_until(
        lambda: server.open_connections == 0 and server.open_tasks == 0,
        2.0,
        "uvicorn has no connection or task left",
    )


async def test_per_run_log_line(server: Running, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    async with httpx.AsyncClient() as client:
        await post_run(client, server.url + "/chain", run_input("logged"))
    await wait_until(
        lambda: any("run logged" in r.getMessage() for r in caplog.records), 2.0, "log line"
    )
    line = next(r.getMessage() for r in caplog.records if "run logged" in r.getMessage())
    assert "finished" in line
    # source 5 → Numbered 5 → drop_steps 5 → out 5 (nothing dropped in this run)
    assert "source 5 → Numbered 5 → drop_steps 5 → out 5" in line


def test_endpoint_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="exactly one of"):
        AgentEndpoint()
    with pytest.raises(TypeError, match="exactly one of"):
        AgentEndpoint(hello, agent_factory=greeter)
    with pytest.raises(ValueError, match="keepalive"):
        AgentEndpoint(hello, keepalive=0)
    with pytest.raises(TypeError, match="chain factory"):
        AgentEndpoint(hello, chain=42)  # type: ignore[arg-type]


async def _emits_nan(ctx: RunContext[Any]) -> None:
    ctx.emit(CustomEvent(name="ratio", value={"r": float("nan")}))


_NAN_STAGE = FunctionTransformer(
    lambda e: (
        [e, CustomEvent(name="x", value=[float("inf")])] if e.type is EventType.RUN_STARTED else [e]
    ),
    name="inf_maker",
)


@pytest.mark.parametrize(
    ("agent", "chain", "where"),
    [(_emits_nan, None, "`value.r`"), (hello, lambda: _NAN_STAGE.fresh(), "`value.0`")],
)
async def test_an_unencodable_event_is_an_encode_error_not_an_internal_one(
    agent: Any, chain: Any, where: str
) -> None:
    # Regression: NaN from the agent or a stage ended the run as INTERNAL_ERROR
    # ("the server failed: EncodeError ...") with a traceback in the log.
    app = Starlette(routes=[agent_route("/", agent, chain=chain)])
    with serve(app) as server:
        async with httpx.AsyncClient() as client:
            _, events = await post_run(client, server.url + "/", run_input())
    error = events[-1]
    assert error.type is EventType.RUN_ERROR
    assert error.code == "ENCODE_ERROR"  # type: ignore[attr-defined]
    assert where in error.message  # type: ignore[attr-defined]


async def _late_internal_args(ctx: RunContext[Any]) -> None:
    # pydantic-ai's interleaving: arguments of a call after its END.
    ctx.emit(ToolCallStartEvent(tool_call_id="internal-call-7", tool_call_name="internal_lookup"))
    ctx.emit(ToolCallEndEvent(tool_call_id="internal-call-7"))
    ctx.emit(ToolCallArgsEvent(tool_call_id="internal-call-7", delta='{"q": "x"}'))


async def test_an_async_chain_never_quotes_a_violation_naming_what_it_hides() -> None:
    # Regression: with an async chain, a Verify early in the user's chain raised
    # "No active tool call found with ID 'internal-call-7'" and the endpoint sent it
    # in RUN_ERROR, though the chain's FilterToolCalls hides that call.
    chain = lambda: Shout() | Verify() | FilterToolCalls.deny(["internal_*"])  # noqa: E731
    app = Starlette(routes=[agent_route("/", _late_internal_args, chain=chain, verify=False)])
    with serve(app) as server:
        async with httpx.AsyncClient() as client:
            response = await client.post(server.url + "/", json=run_input())
    assert b"internal-call-7" not in response.content
    assert b"internal_lookup" not in response.content
    error = [
        e
        for e in (
            json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
        )
    ][-1]
    assert error["type"] == "RUN_ERROR" and error["code"] == "PROTOCOL_VIOLATION"
    assert "found by stage Verify" in error["message"] and "withheld" in error["message"]
