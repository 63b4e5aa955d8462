"""AgentEndpoint(producer=...) with plain producers: the producer's side of a run.

Each failure on the producer's side ends the run with its stable RUN_ERROR code,
and the producer's iterator is closed however the run ends. Driven as an ASGI
app with a scripted ``receive`` / ``send``, on asyncio and trio.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from agui_pipes.server import DEFAULT_PRODUCER_TIMEOUT, AgentEndpoint
from agui_pipes.server.auth import Principal

pytestmark = pytest.mark.anyio

BODY = json.dumps({"threadId": "t", "runId": "r", "messages": []}).encode()


class Exchange:
    """One POST to an ASGI app: the request body, then a disconnect only when asked."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.leave = anyio.Event()
        self._sent_body = False

    async def receive(self) -> dict[str, Any]:
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def payloads(self) -> list[dict[str, Any]]:
        body = b"".join(
            m.get("body", b"") for m in self.messages if m["type"] == "http.response.body"
        )
        return [json.loads(line[6:]) for line in body.split(b"\n") if line.startswith(b"data: ")]

    async def post(self, app: Any) -> list[dict[str, Any]]:
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/",
            "headers": [(b"content-type", b"application/json"), (b"accept", b"text/event-stream")],
        }
        await app(scope, self.receive, self.send)
        return self.payloads()


def _started(run_input: RunAgentInput) -> RunStartedEvent:
    return RunStartedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)


async def test_a_silent_producer_ends_with_agent_timeout_and_is_closed() -> None:
    closed: list[bool] = []

    async def silent(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        try:
            yield _started(run_input)
            await anyio.sleep_forever()
            yield _started(run_input)  # pragma: no cover
        finally:
            closed.append(True)

    app = AgentEndpoint(producer=silent, producer_timeout=0.2, keepalive=None)
    got = await Exchange().post(app)
    assert [p["type"] for p in got] == ["RUN_STARTED", "RUN_ERROR"]
    assert got[-1]["code"] == "AGENT_TIMEOUT" and "0.2s" in got[-1]["message"]
    assert closed == [True]


async def test_the_timeout_is_each_wait_not_the_whole_run() -> None:
    async def steady(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        yield _started(run_input)
        yield TextMessageStartEvent(message_id="m", role="assistant")
        for n in range(6):
            await anyio.sleep(0.05)  # six waits of 0.05 s: 0.3 s in all, past the timeout
            yield TextMessageContentEvent(message_id="m", delta=str(n))
        yield TextMessageEndEvent(message_id="m")
        yield RunFinishedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)

    app = AgentEndpoint(producer=steady, producer_timeout=0.25, keepalive=None)
    got = await Exchange().post(app)
    assert got[-1]["type"] == "RUN_FINISHED"
    assert "".join(p.get("delta", "") for p in got) == "012345"


@pytest.mark.parametrize(
    ("items", "code", "said"),
    [
        ([], "AGENT_TRUNCATED", "without any event"),
        ([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}], "AGENT_TRUNCATED", "still open"),
        ([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, 42], "AGENT_MALFORMED", "#1"),
        (
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                {"type": "TEXT_MESSAGE_START"},
            ],
            "AGENT_MALFORMED",
            "invalid event #1",
        ),
    ],
)
async def test_a_stream_that_is_not_a_whole_run_ends_with_its_code(
    items: list[Any], code: str, said: str
) -> None:
    async def given(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[Any]:
        for item in items:
            yield item

    got = await Exchange().post(AgentEndpoint(producer=given, keepalive=None))
    assert got[-1]["type"] == "RUN_ERROR" and got[-1]["code"] == code
    assert said in got[-1]["message"]


async def test_stop_runs_without_a_store_cancels_the_producer() -> None:
    waiting = anyio.Event()
    closed: list[bool] = []

    async def waits(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        try:
            yield _started(run_input)
            waiting.set()
            await anyio.sleep_forever()
            yield _started(run_input)  # pragma: no cover
        finally:
            closed.append(True)

    app = AgentEndpoint(producer=waits, keepalive=None)
    exchange = Exchange()
    async with anyio.create_task_group() as tg:
        tg.start_soon(exchange.post, app)
        await waiting.wait()
        assert await app.stop_runs() == []
    got = exchange.payloads()
    assert got[-1]["type"] == "RUN_ERROR" and got[-1]["code"] == "CANCELLED"
    assert closed == [True]


async def test_a_client_that_leaves_closes_the_producer() -> None:
    waiting = anyio.Event()
    closed: list[bool] = []

    async def waits(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        try:
            yield _started(run_input)
            waiting.set()
            await anyio.sleep_forever()
            yield _started(run_input)  # pragma: no cover
        finally:
            closed.append(True)

    exchange = Exchange()
    async with anyio.create_task_group() as tg:
        tg.start_soon(exchange.post, AgentEndpoint(producer=waits, keepalive=None))
        await waiting.wait()
        exchange.leave.set()
    assert closed == [True]


def test_the_endpoint_takes_one_source_and_a_positive_timeout() -> None:
    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        yield _started(run_input)

    async def agent(ctx: Any) -> None:
        return None

    with pytest.raises(TypeError, match="exactly one of agent"):
        AgentEndpoint(agent, producer=produce)
    with pytest.raises(TypeError, match="echo_input"):
        AgentEndpoint(producer=produce, echo_input=True)
    with pytest.raises(TypeError, match="must be callable"):
        AgentEndpoint(producer=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="producer_timeout"):
        AgentEndpoint(producer=produce, producer_timeout=0)
    assert DEFAULT_PRODUCER_TIMEOUT == 60.0


async def test_objects_in_free_form_fields_reach_the_chain_as_json() -> None:
    # Regression: LangGraph puts LangChain messages (pydantic models) in a snapshot;
    # the encoder refused them (ENCODE_ERROR) where a framework's server dumps them.
    from ag_ui.core import StateSnapshotEvent
    from pydantic import BaseModel

    class Note(BaseModel):
        text: str

    async def framework(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[Any]:
        yield _started(run_input).model_copy(update={"raw_event": Note(text="raw")})
        yield StateSnapshotEvent(snapshot={"notes": [Note(text="hi")]})
        yield RunFinishedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)

    got = await Exchange().post(AgentEndpoint(producer=framework, keepalive=None))
    assert [p["type"] for p in got] == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert got[0]["rawEvent"] == {"text": "raw"}
    assert got[1]["snapshot"] == {"notes": [{"text": "hi"}]}
