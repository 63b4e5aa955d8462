"""In-process framework producers behind agui_pipes, no second HTTP hop.

pydantic-ai (a scripted ``FunctionModel`` behind its ``AGUIAdapter``) and
LangGraph (a scripted chat model behind ``ag-ui-langgraph``), each served by
``build_app(producer=...)`` with a chain and a store, driven over HTTP by the
official TypeScript client and by agui_pipes' own client: the chain applies,
the run is recorded and resumable, a stop closes the framework's run, and a
producer that raises ends the run with a clear error.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
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

from agui_pipes import fold
from agui_pipes.server import Producer, build_app
from agui_pipes.server.auth import Principal
from agui_pipes.transformers import Redact
from tests._durable_http import events as _events
from tests._durable_http import get_frames
from tests._servers import serve, wait_until

pytestmark = pytest.mark.anyio

pydantic_ai = pytest.importorskip("pydantic_ai", reason="the producers extra is not installed")
ag_ui_langgraph = pytest.importorskip(
    "ag_ui_langgraph", reason="the producers extra is not installed"
)


def _pydantic_ai_agent(gate: threading.Event | None = None) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def stream(messages: list[Any], info: AgentInfo) -> AsyncIterator[str]:
        for piece in ("A weekend", " in Lisbon", " is"):
            yield piece
        while gate is not None and not gate.is_set():  # noqa: ASYNC110 - a test's thread sets it
            await anyio.sleep(0.01)
        yield " sunny."

    return Agent(FunctionModel(stream_function=stream, model_name="scripted"), output_type=str)


def _langgraph_agent() -> Any:
    from ag_ui_langgraph import LangGraphAgent
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.producers.langgraph_scenarios import ScriptedChatModel, _text_chunks

    def script(messages: Sequence[Any]) -> list[Any]:
        return _text_chunks("ai-text-1", "A weekend", " in Lisbon", " is sunny.")

    graph = create_agent(ScriptedChatModel(script=script), tools=[], checkpointer=InMemorySaver())
    return LangGraphAgent(name="scripted", graph=graph)


def _producer(framework: str, gate: threading.Event | None = None) -> Producer:
    if framework == "pydantic-ai":
        from agui_pipes.integrations.pydantic_ai import pydantic_ai_producer

        return pydantic_ai_producer(_pydantic_ai_agent(gate))
    from agui_pipes.integrations.langgraph import langgraph_producer

    return langgraph_producer(_langgraph_agent())


USER = {"id": "u-1", "role": "user", "content": "Where should I go?"}


@pytest.mark.parametrize("framework", ["pydantic-ai", "langgraph"])
async def test_a_framework_run_goes_through_the_chain_and_the_store(
    framework: str, tmp_path: Path, ts_oracle: Any
) -> None:
    app = build_app(
        producer=_producer(framework),
        chain=lambda: Redact(patterns=["Lisbon"], replacement="[city]"),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        path="/agent",
        keepalive=None,
    )
    with serve(app) as server:
        url = f"{server.url}/agent"
        (result,) = await anyio.to_thread.run_sync(
            ts_oracle, [{"url": url, "threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}]
        )
        assert result["outcome"] == "completed", result["error"]
        said = [m for m in result["messages"] if m["role"] == "assistant"][-1]["content"]
        assert said == "A weekend in [city] is sunny."
        # Recorded: the stored run replays what the client got, ids and all.
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            status, frames, _ = await get_frames(client, "/agent/runs/r-1")
    assert status == 200
    replayed = fold(_events(frames))
    assert [m["content"] for m in replayed.messages if m["role"] == "assistant"] == [said]


async def test_a_stop_closes_the_frameworks_run(tmp_path: Path) -> None:
    gate = threading.Event()
    closed: list[str] = []
    inner = _producer("pydantic-ai", gate)

    async def watched(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        try:
            async for event in inner(run_input, principal):  # type: ignore[union-attr]
                yield event
        finally:
            closed.append(run_input.run_id)

    app = build_app(
        producer=watched, store=f"sqlite:///{tmp_path / 'runs.db'}", path="/agent", keepalive=None
    )
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            body = {"threadId": "t-1", "runId": "r-1", "messages": [USER]}
            seen = anyio.Event()
            types: list[str] = []

            async def post() -> None:
                async with client.stream(
                    "POST", "/agent", json=body, headers={"accept": "text/event-stream"}
                ) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: "):
                            types.append(line.split('"type":"', 1)[1].split('"', 1)[0])
                            if "TEXT_MESSAGE_CONTENT" in line:
                                seen.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(post)
                await seen.wait()
                stopped = await client.post("/agent/runs/r-1/stop")
                assert stopped.status_code == 200, stopped.text
            await wait_until(lambda: closed == ["r-1"], 10, "the producer closed")
    assert types[-1] == "RUN_ERROR"
    assert not gate.is_set()  # the model never got to finish: its stream was closed


async def test_a_producer_that_raises_ends_the_run_with_an_error() -> None:
    async def broken(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        yield RunStartedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)
        yield TextMessageStartEvent(message_id="m", role="assistant")
        yield TextMessageContentEvent(message_id="m", delta="half")
        raise RuntimeError("the model provider went away")

    app = build_app(producer=broken, path="/agent", keepalive=None)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            response = await client.post(
                "/agent",
                json={"threadId": "t", "runId": "r", "messages": []},
                headers={"accept": "text/event-stream"},
            )
    assert response.status_code == 200
    last = [line for line in response.text.splitlines() if line.startswith("data: ")][-1]
    assert '"type":"RUN_ERROR"' in last and '"code":"AGENT_ERROR"' in last
    assert "went away" not in last  # the exception's text goes to the log, not the client


async def test_dict_events_and_the_callers_principal_reach_the_producer() -> None:
    seen: list[Principal] = []

    async def plain(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[Any]:
        seen.append(principal)
        ids = {"threadId": run_input.thread_id, "runId": run_input.run_id}
        yield {"type": "RUN_STARTED", **ids}
        yield {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"}
        yield TextMessageEndEvent(message_id="m")
        yield RunFinishedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id)

    def authorize(request: Any) -> Principal:
        return Principal("team-a", subject="alice")

    app = build_app(producer=plain, path="/agent", keepalive=None, authorize=authorize)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            response = await client.post(
                "/agent",
                json={"threadId": "t", "runId": "r", "messages": []},
                headers={"accept": "text/event-stream"},
            )
    assert response.status_code == 200
    assert '"delta":"hi"' in response.text and '"type":"RUN_FINISHED"' in response.text
    assert [(p.scope, p.subject) for p in seen] == [("team-a", "alice")]


def test_build_app_takes_exactly_one_source() -> None:
    async def nothing(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        if False:
            yield  # pragma: no cover

    with pytest.raises(TypeError, match=r"upstream=\.\.\. or producer="):
        build_app(producer=nothing, upstream="http://127.0.0.1:9/")
