"""LlamaIndex (``llama-index-protocols-ag-ui``) served in-process: a scripted LLM behind
``AGUIChatWorkflow``, through :func:`agui_pipes.integrations.llamaindex.llamaindex_producer`.

The same workflow behind LlamaIndex's own FastAPI router, with an agui_pipes gateway
in front, gives the same stream after the chain; see tests/integrations/_framework_checks.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agui_pipes.transformers import ExpandChunks, Redact
from tests.integrations import _framework_checks as checks

pytestmark = pytest.mark.anyio

pytest.importorskip(
    "llama_index.protocols.ag_ui", reason="llama-index-protocols-ag-ui (the test extra) is missing"
)

from llama_index.core.llms import ChatMessage, ChatResponse, MessageRole  # noqa: E402
from llama_index.core.llms.llm import ToolSelection  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402
from llama_index.protocols.ag_ui.agent import AGUIChatWorkflow  # noqa: E402

from agui_pipes.integrations.llamaindex import llamaindex_producer  # noqa: E402


class ScriptedLLM(MockFunctionCallingLLM):
    """First turn: a ``weather`` tool call; once its result is in: the answer, streamed.

    With a ``hold``, it streams the first piece and then waits for the hold's gate.
    """

    def __init__(self, hold: checks.Hold | None = None) -> None:
        super().__init__()
        self._hold = hold

    async def astream_chat_with_tools(  # type: ignore[override]
        self, tools: Sequence[Any], user_msg: Any = None, chat_history: Any = None, **kw: Any
    ) -> AsyncIterator[ChatResponse]:
        history = list(chat_history or [])
        answered = any(m.role == MessageRole.TOOL for m in history)
        hold = self._hold

        async def stream() -> AsyncIterator[ChatResponse]:
            if hold is None and not answered:
                calls = [{"id": "call-1", "name": "weather", "kwargs": {"city": "Lisbon"}}]
                message = ChatMessage(
                    role="assistant", content="", additional_kwargs={"calls": calls}
                )
                yield ChatResponse(message=message, delta="")
                return
            text = ""
            for piece in ("A weekend", " in Lisbon", " is sunny."):
                text += piece
                yield ChatResponse(message=ChatMessage(role="assistant", content=text), delta=piece)
                if hold is not None:
                    try:
                        while not hold.gate.is_set():  # noqa: ASYNC110 - never set by the test
                            await anyio.sleep(0.01)
                    except BaseException:
                        hold.ended.append("cancelled")
                        raise
                    hold.ended.append("finished")

        return stream()

    def get_tool_calls_from_response(  # type: ignore[override]
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kw: Any
    ) -> list[ToolSelection]:
        calls = response.message.additional_kwargs.get("calls", [])
        return [
            ToolSelection(tool_id=c["id"], tool_name=c["name"], tool_kwargs=c["kwargs"])
            for c in calls
        ]


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _workflow(hold: checks.Hold | None = None) -> AGUIChatWorkflow:
    return AGUIChatWorkflow(llm=ScriptedLLM(hold), backend_tools=[weather], timeout=60)


def _chain() -> Any:
    return ExpandChunks() | Redact(patterns=["sunny"], replacement="[weather]")


def _framework_app() -> Any:
    from fastapi import FastAPI
    from llama_index.protocols.ag_ui.router import get_ag_ui_workflow_router

    async def factory() -> AGUIChatWorkflow:
        return _workflow()

    app = FastAPI()
    app.include_router(get_ag_ui_workflow_router(workflow_factory=factory), prefix="/li")
    return app


async def test_text_and_a_tool_call_equal_the_frameworks_own_server_behind_a_gateway() -> None:
    stream = await checks.same_stream(
        llamaindex_producer(_workflow()), _framework_app(), "/li/run", _chain
    )
    types = [event["type"] for event in stream]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in types and "TEXT_MESSAGE_CONTENT" in types
    # the adapter's seconds became milliseconds
    assert all(e["timestamp"] > 10**12 for e in stream if "timestamp" in e)


async def test_the_ts_client_completes_the_run(ts_oracle: Any, tmp_path: Path) -> None:
    result = await checks.ts_client_completes(
        llamaindex_producer(_workflow), _chain, ts_oracle, tmp_path
    )
    said = [m for m in result["messages"] if m["role"] == "assistant"][-1]["content"]
    assert said == "A weekend in Lisbon is [weather]."


async def test_a_cut_client_resumes_from_the_store(tmp_path: Path) -> None:
    await checks.cut_and_resume(llamaindex_producer(_workflow()), ExpandChunks, tmp_path)


async def test_a_stop_cancels_the_workflow(tmp_path: Path) -> None:
    hold = checks.Hold()
    await checks.stop_cancels(llamaindex_producer(_workflow(hold)), hold, tmp_path)


class BrokenLLM(ScriptedLLM):
    async def astream_chat_with_tools(  # type: ignore[override]
        self, tools: Sequence[Any], user_msg: Any = None, chat_history: Any = None, **kw: Any
    ) -> AsyncIterator[ChatResponse]:
        raise RuntimeError(f"cannot reach {checks.SECRET}")


async def test_a_failing_model_ends_the_run_naming_its_type_only() -> None:
    workflow = AGUIChatWorkflow(llm=BrokenLLM(), timeout=60)
    error = await checks.failure_without_its_text(llamaindex_producer(workflow))
    assert error["code"] == "AGENT_ERROR"


def test_anything_but_a_workflow_is_refused() -> None:
    with pytest.raises(TypeError, match="llama_index Workflow"):
        llamaindex_producer(42)
