"""Interop: the official TS client's ``HttpAgent`` (@ag-ui/client 1.0.0) against our
endpoint and our gateway, both on uvicorn at 127.0.0.1 (node harness: tests/harness)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import BaseEvent, StateSnapshotEvent, TextMessageContentEvent
from starlette.applications import Starlette
from starlette.routing import Route

from agui_pipes import FunctionTransformer
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import Gateway, agent_route
from tests._oracle import to_wire
from tests._servers import Running, post_run, serve

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = [pytest.mark.node, pytest.mark.wire]

USER = {"id": "u1", "role": "user", "content": "What's the weather in Lisbon?"}


async def weather(ctx: RunContext[Any]) -> RunOutcome:
    ctx.set_state({"city": "Lisbon", "status": "looking"})
    with ctx.tool_call("get_weather") as call:
        call.args_json({"city": "Lisbon"})
        call.result_json({"sky": "sunny", "celsius": 24})
    ctx.update_state(lambda state: {**state, "status": "done"})
    ctx.say("It is sunny and 24 degrees.")
    return RunOutcome.success()


STOPPED: dict[str, threading.Event] = {}


async def hanging(ctx: RunContext[Any]) -> RunOutcome:
    try:
        ctx.say("thinking")
        await anyio.sleep_forever()
    finally:
        STOPPED.setdefault(ctx.run_id, threading.Event()).set()
    return RunOutcome.success()


def shout(event: BaseEvent) -> BaseEvent:
    if isinstance(event, TextMessageContentEvent):
        return event.model_copy(update={"delta": event.delta.upper()})
    return event


def stamp(event: BaseEvent) -> BaseEvent:
    if isinstance(event, StateSnapshotEvent) and isinstance(event.snapshot, dict):
        return event.model_copy(update={"snapshot": {**event.snapshot, "via": "gateway"}})
    return event


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Running, Running]]:
    upstream_app = Starlette(
        routes=[
            agent_route("/agent", weather, chain=lambda: FunctionTransformer(shout)),
            agent_route("/hang", hanging, keepalive=0.05),
        ]
    )
    with serve(upstream_app) as upstream:
        gateways = [
            Gateway(upstream.url + "/agent", chain=lambda: FunctionTransformer(stamp)),
            Gateway(upstream.url + "/hang", keepalive=0.05),
        ]
        routes = [
            Route("/agent", gateways[0], methods=["POST"]),
            Route("/hang", gateways[1], methods=["POST"]),
        ]
        with serve(Starlette(routes=routes)) as gateway:
            yield upstream, gateway


def http_case(url: str, **extra: Any) -> dict[str, Any]:
    return {"url": url, "threadId": "t1", "runId": "r1", "initialMessages": [USER], **extra}


def without_ids(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in messages]


def test_http_agent_against_endpoint_and_gateway(
    servers: tuple[Running, Running], ts_oracle: Callable[..., list[Any]]
) -> None:
    upstream, gateway = servers
    direct, relayed = ts_oracle(
        [http_case(upstream.url + "/agent"), http_case(gateway.url + "/agent")]
    )
    for result in (direct, relayed):
        assert result["outcome"] == "completed", result["error"]
        assert result["warnings"] == []
        assistant_call, tool, answer = result["messages"][1:]
        assert result["messages"][0]["content"] == USER["content"]
        assert assistant_call["toolCalls"][0]["function"] == {
            "name": "get_weather",
            "arguments": '{"city":"Lisbon"}',
        }
        assert tool == {
            "id": tool["id"],
            "role": "tool",
            "toolCallId": assistant_call["toolCalls"][0]["id"],
            "content": '{"sky":"sunny","celsius":24}',
        }
        # The endpoint's chain ran: the text is upper-cased.
        assert answer["content"] == "IT IS SUNNY AND 24 DEGREES."
    assert direct["state"] == {"city": "Lisbon", "status": "done"}
    # The gateway's own chain ran on top (the snapshot is stamped; the delta applies on it).
    assert relayed["state"] == {"city": "Lisbon", "status": "done", "via": "gateway"}
    assert without_ids(direct["messages"]) == without_ids(relayed["messages"])


@pytest.mark.anyio
async def test_http_agent_sees_what_a_python_client_sees(
    servers: tuple[Running, Running], ts_oracle: Callable[..., list[Any]]
) -> None:
    # The same run fetched with httpx and replayed in-process by the TS client
    # must end in the same messages and state as the TS client's own HTTP run.
    _, gateway = servers
    body = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [USER],
        "state": {},
        "tools": [],
        "context": [],
    }
    async with httpx.AsyncClient() as client:
        _, events = await post_run(client, gateway.url + "/agent", body)
    over_http, replayed = await anyio.to_thread.run_sync(
        lambda: ts_oracle(
            [
                http_case(gateway.url + "/agent"),
                {"stream": [to_wire(e) for e in events], "initialMessages": [USER]},
            ]
        )
    )
    assert replayed["outcome"] == over_http["outcome"] == "completed"
    assert replayed["messages"] == over_http["messages"]
    assert replayed["state"] == over_http["state"]


@pytest.mark.parametrize("via", ["endpoint", "gateway"])
def test_http_agent_abort_cancels_the_agent(
    servers: tuple[Running, Running], ts_oracle: Callable[..., list[Any]], via: str
) -> None:
    upstream, gateway = servers
    base = upstream.url if via == "endpoint" else gateway.url
    run_id = f"abort-{via}"
    stopped = STOPPED.setdefault(run_id, threading.Event())
    # RUN_STARTED, TEXT_MESSAGE_START, then abortRun().
    (result,) = ts_oracle([http_case(base + "/hang", runId=run_id, abortAfterEvents=2)])
    assert [e["type"] for e in result["events"]][:2] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    assert stopped.wait(1.0), "the agent's finally did not run within 1 s of the abort"
    deadline = time.monotonic() + 2
    while upstream.open_tasks and time.monotonic() < deadline:
        time.sleep(0.01)
    assert upstream.open_tasks == 0
