"""Google ADK (``ag-ui-adk``) served in-process: a scripted ``BaseLlm`` behind an ``LlmAgent``,
through :func:`agui_pipes.integrations.adk.adk_producer`.

The same agent behind ag-ui-adk's own FastAPI endpoint, with an agui_pipes gateway in
front, gives the same stream after the chain; see tests/integrations/_framework_checks.py.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agui_pipes.server import build_app
from agui_pipes.server.auth import Principal
from agui_pipes.transformers import Redact
from tests._durable_http import HEADERS, events, read_frames
from tests._servers import serve
from tests.integrations import _framework_checks as checks

pytestmark = pytest.mark.anyio

pytest.importorskip("ag_ui_adk", reason="ag-ui-adk (the test extra) is missing")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # ADK's "[EXPERIMENTAL]" notices at import
    from ag_ui_adk import ADKAgent, add_adk_fastapi_endpoint
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

from agui_pipes.integrations.adk import adk_chain, adk_producer  # noqa: E402


class ScriptedLlm(BaseLlm):
    """First turn: a ``weather`` tool call; once its result is in: the answer, streamed.

    With a ``hold``, it streams the first piece and then waits for the hold's gate.
    """

    model: str = "scripted"
    hold: Any = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answered = any(
            part.function_response for c in llm_request.contents for part in (c.parts or [])
        )
        if self.hold is None and not answered:
            call = types.FunctionCall(id="call-1", name="weather", args={"city": "Lisbon"})
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )
            return
        text = ""
        for piece in ("A weekend", " in Lisbon", " is sunny."):
            text += piece
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=piece)]), partial=True
            )
            if self.hold is not None:
                try:
                    while not self.hold.gate.is_set():  # noqa: ASYNC110 - never set by the test
                        await anyio.sleep(0.01)
                except BaseException:
                    self.hold.ended.append("cancelled")
                    raise
                self.hold.ended.append("finished")
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=text)]), partial=False
        )


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _agent(hold: checks.Hold | None = None) -> LlmAgent:
    return LlmAgent(name="planner", model=ScriptedLlm(hold=hold), tools=[weather])


def _chain() -> Any:
    return adk_chain() | Redact(patterns=["sunny"], replacement="[weather]")


def _quiet(make: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make()


def _framework_app() -> Any:
    from fastapi import FastAPI

    app = FastAPI()
    add_adk_fastapi_endpoint(
        app,
        _quiet(lambda: ADKAgent(adk_agent=_agent(), session_service=InMemorySessionService())),
        path="/adk",
    )
    return app


async def test_text_and_a_tool_call_equal_the_frameworks_own_server_behind_a_gateway() -> None:
    stream = await checks.same_stream(
        _quiet(lambda: adk_producer(_agent())), _framework_app(), "/adk", _chain
    )
    types_ = [event["type"] for event in stream]
    assert types_[0] == "RUN_STARTED" and types_[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in types_ and "TOOL_CALL_RESULT" in types_
    snapshots = [e["snapshot"] for e in stream if e["type"] == "STATE_SNAPSHOT"]
    assert snapshots and all(not any(k.startswith("_ag_ui_") for k in s) for s in snapshots)


async def test_the_ts_client_completes_the_run(ts_oracle: Any, tmp_path: Path) -> None:
    result = await checks.ts_client_completes(
        _quiet(lambda: adk_producer(_agent())), _chain, ts_oracle, tmp_path
    )
    said = [m.get("content") for m in result["messages"] if m["role"] == "assistant"]
    assert said[-1] == "A weekend in Lisbon is [weather].", result["events"]


async def test_a_cut_client_resumes_from_the_store(tmp_path: Path) -> None:
    await checks.cut_and_resume(_quiet(lambda: adk_producer(_agent())), adk_chain, tmp_path)


async def test_a_stop_cancels_the_adk_run(tmp_path: Path) -> None:
    hold = checks.Hold()
    await checks.stop_cancels(_quiet(lambda: adk_producer(_agent(hold))), hold, tmp_path)


async def test_the_adk_user_is_the_callers_principal_and_client_scoped_state_is_dropped() -> None:
    producer = _quiet(lambda: adk_producer(_agent()))
    app = build_app(
        producer=producer,
        path="/agent",
        keepalive=None,
        authorize=lambda request: Principal("team-a", subject="alice"),
    )
    payload = checks.body() | {"state": {"app:plan": "x", "user:tier": "gold", "city": "Lisbon"}}
    with serve(app) as server:
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream("POST", f"{server.url}/agent", json=payload, headers=HEADERS) as reply,
        ):
            frames = await read_frames(reply)
    snapshot = [e for e in events(frames) if e.type == "STATE_SNAPSHOT"][-1].snapshot
    assert snapshot["_ag_ui_user_id"] == "team-a:alice"  # no chain here: ADK's own keys show
    assert snapshot["city"] == "Lisbon"
    assert "app:plan" not in snapshot and "user:tier" not in snapshot


class BrokenLlm(ScriptedLlm):
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        raise RuntimeError(f"cannot reach {checks.SECRET}")
        yield  # pragma: no cover - an async generator that fails at once


async def test_a_failing_model_ends_the_run_with_its_code_and_not_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer = _quiet(lambda: adk_producer(LlmAgent(name="planner", model=BrokenLlm())))
    error = await checks.failure_without_its_text(producer)
    assert error["code"] == "BACKGROUND_EXECUTION_ERROR"
    assert error["message"] == (
        "the agent failed (BACKGROUND_EXECUTION_ERROR); the server log has the details"
    )
    assert checks.SECRET in caplog.text  # the operator still reads it


def test_anything_but_an_adk_agent_is_refused() -> None:
    with pytest.raises(TypeError, match="ADK agent"):
        adk_producer(42)
    with pytest.raises(TypeError, match="user_id_extractor"):
        _quiet(lambda: adk_producer(_agent(), user_id_extractor=lambda run_input: "x"))
