"""pydantic-ai and LangGraph agents with scripted models, and each framework's own server.

Each scripted model can be held at a gate (a ``threading.Event`` the test sets)
and records how its stream ended — ``"finished"``, or the exception that
stopped it (a cancellation when the run was stopped) — in ``Observed``, so a
test sees the framework's run itself being cancelled, not only our iterator
closed.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass
class Observed:
    """What the scripted model saw: how each of its streams ended."""

    ends: list[str] = field(default_factory=list)
    gate: threading.Event | None = None
    waiting: threading.Event = field(default_factory=threading.Event)

    async def hold(self) -> None:
        if self.gate is None:
            return
        self.waiting.set()
        while not self.gate.is_set():  # noqa: ASYNC110 - the test's thread sets it
            await anyio.sleep(0.005)

    def ended(self, exc: BaseException | None) -> None:
        self.ends.append("finished" if exc is None else type(exc).__name__)


# -- pydantic-ai -------------------------------------------------------------


def pydantic_ai_agent(scenario: str, observed: Observed | None = None) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    seen = observed or Observed()

    def answered(messages: list[ModelMessage]) -> bool:
        last = messages[-1]
        return isinstance(last, ModelRequest) and any(
            isinstance(part, ToolReturnPart) for part in last.parts
        )

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        try:
            if scenario == "error":
                yield "Let me"
                raise RuntimeError("the model provider went away")
            if scenario == "tools" and not answered(messages):
                yield {
                    0: DeltaToolCall(
                        name="internal_lookup", json_args='{"key": "k"}', tool_call_id="call-i"
                    )
                }
                yield {
                    1: DeltaToolCall(
                        name="get_weather", json_args='{"city": "Paris"}', tool_call_id="call-w"
                    )
                }
            elif scenario == "frontend":
                yield {0: DeltaToolCall(name="confirm", json_args='{"ok": true}', tool_call_id="c")}
            else:
                for piece in ("A weekend", " in Lisbon", " is"):
                    yield piece
                await seen.hold()
                yield " sunny."
        except BaseException as exc:
            seen.ended(exc)
            raise
        seen.ended(None)

    agent = Agent(FunctionModel(stream_function=stream, model_name="scripted"), output_type=str)

    @agent.tool_plain
    async def internal_lookup(key: str) -> str:
        """Internal record (denied by the chain)."""
        return "SECRET"

    @agent.tool_plain
    async def get_weather(city: str) -> str:
        """Weather in a city."""
        return f"sunny in {city}"

    return agent


def pydantic_ai_server(agent: Any) -> Any:
    """pydantic-ai's own AG-UI server: ``AGUIAdapter.dispatch_request`` on a Starlette route."""
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def endpoint(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


# -- LangGraph ---------------------------------------------------------------


def langgraph_graph(scenario: str, observed: Observed | None = None) -> Any:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessageChunk, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGenerationChunk
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from examples.frameworks.langgraph_app import ScriptedChatModel

    seen = observed or Observed()

    def chunks(messages: Sequence[BaseMessage]) -> list[AIMessageChunk]:
        if scenario == "tools" and not isinstance(messages[-1], ToolMessage):
            return [
                AIMessageChunk(
                    content="",
                    id="ai-1",
                    tool_call_chunks=[
                        {"name": "internal_lookup", "args": "", "id": "call-i", "index": 0}
                    ],
                ),
                AIMessageChunk(
                    content="",
                    id="ai-1",
                    tool_call_chunks=[
                        {"name": None, "args": '{"key": "k"}', "id": None, "index": 0}
                    ],
                ),
            ]
        return [AIMessageChunk(content=p, id="ai-2") for p in ("A weekend", " in Lisbon", " is")]

    class Model(ScriptedChatModel):
        def _stream(self, messages: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            raise AssertionError("streamed through _astream only")

        async def _astream(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> AsyncIterator[Any]:
            try:
                if scenario == "error":
                    raise RuntimeError("the model provider went away")
                script = chunks(messages)
                for chunk in script:
                    generation = ChatGenerationChunk(message=chunk)
                    if run_manager is not None:
                        await run_manager.on_llm_new_token(chunk.text, chunk=generation)
                    yield generation
                if script[0].content:
                    await seen.hold()
                    last = AIMessageChunk(content=" sunny.", id="ai-2")
                    yield ChatGenerationChunk(message=last)
            except BaseException as exc:
                seen.ended(exc)
                raise
            seen.ended(None)

    @tool
    async def internal_lookup(key: str) -> str:
        """Internal record (denied by the chain)."""
        return "SECRET"

    return create_agent(Model(), tools=[internal_lookup], checkpointer=InMemorySaver())


def langgraph_server(graph: Any) -> Any:
    """ag-ui-langgraph's own server: its FastAPI endpoint."""
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="scripted", graph=graph), "/")
    return app


# -- comparing streams ---------------------------------------------------------


def normalised(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Payloads without timestamps and raw framework events, ids renamed in order of appearance.

    What differs between two runs of the same script: wall clocks, the ids the
    frameworks mint (uuid4 message ids, uuid7 run ids) and the framework's
    own event dumps (RAW, ``rawEvent``), which carry those ids and times.
    """
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<id{len(names)}>")

    out = []
    for payload in payloads:
        if payload.get("type") == "RAW":
            payload = {"type": "RAW"}
        kept = {k: v for k, v in payload.items() if k not in ("timestamp", "rawEvent")}
        out.append(json.loads(UUID.sub(rename, json.dumps(kept, sort_keys=True))))
    return out


def payloads_of(body: bytes) -> list[dict[str, Any]]:
    found = []
    for frame in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        for line in frame.split(b"\n"):
            if line.startswith(b"data: "):
                found.append(json.loads(line[6:]))
    return found
