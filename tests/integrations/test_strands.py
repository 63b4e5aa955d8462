"""AWS Strands (``ag-ui-strands``) served in-process: a scripted Strands ``Model`` behind an
``Agent``, through :func:`agui_pipes.integrations.strands.strands_producer`.

The same agent behind ag-ui-strands' own FastAPI endpoint, with an agui_pipes gateway in
front, gives the same stream after the chain; see tests/integrations/_framework_checks.py.
"""

from __future__ import annotations

import json
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

pytest.importorskip("ag_ui_strands", reason="ag-ui-strands (the test extra) is missing")

from ag_ui_strands import StrandsAgent, add_strands_fastapi_endpoint  # noqa: E402
from strands import Agent, tool  # noqa: E402
from strands.models.model import Model  # noqa: E402

from agui_pipes.integrations.strands import RecentThreads, strands_producer  # noqa: E402


class ScriptedModel(Model):
    """First turn: a ``weather`` tool call; once its result is in: the answer, streamed.

    With a ``hold``, it streams the first piece and then waits for the hold's gate.
    Every conversation it was called with is kept in ``seen``.
    """

    def __init__(self, hold: checks.Hold | None = None) -> None:
        self.config: dict[str, Any] = {}
        self.hold = hold
        self.seen: list[list[Any]] = []

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model streams text and tool calls only")

    async def stream(  # type: ignore[override]
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        self.seen.append(list(messages))
        answered = any("toolResult" in block for m in messages for block in m["content"])
        yield {"messageStart": {"role": "assistant"}}
        if self.hold is None and not answered:
            start = {"toolUse": {"toolUseId": "call-1", "name": "weather"}}
            yield {"contentBlockStart": {"start": start}}
            args = json.dumps({"city": "Lisbon"})
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": args}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
            return
        yield {"contentBlockStart": {"start": {}}}
        for piece in ("A weekend", " in Lisbon", " is sunny."):
            yield {"contentBlockDelta": {"delta": {"text": piece}}}
            if self.hold is not None:
                try:
                    while not self.hold.gate.is_set():  # noqa: ASYNC110 - never set by the test
                        await anyio.sleep(0.01)
                except BaseException:
                    self.hold.ended.append("cancelled")
                    raise
                self.hold.ended.append("finished")
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _agent(hold: checks.Hold | None = None, model: ScriptedModel | None = None) -> Agent:
    return Agent(model=model or ScriptedModel(hold), tools=[weather], callback_handler=None)


def _chain() -> Any:
    return Redact(patterns=["sunny"], replacement="[weather]")


def _framework_app() -> Any:
    from fastapi import FastAPI

    app = FastAPI()
    add_strands_fastapi_endpoint(app, StrandsAgent(_agent(), name="planner"), "/strands")
    return app


async def test_text_and_a_tool_call_equal_the_frameworks_own_server_behind_a_gateway() -> None:
    stream = await checks.same_stream(
        strands_producer(_agent(), name="planner"), _framework_app(), "/strands", _chain
    )
    types = [event["type"] for event in stream]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in types and "TOOL_CALL_RESULT" in types
    assert {e["threadId"] for e in stream if "threadId" in e} == {"t-1"}


async def test_the_ts_client_completes_the_run(ts_oracle: Any, tmp_path: Path) -> None:
    result = await checks.ts_client_completes(
        strands_producer(_agent()), _chain, ts_oracle, tmp_path
    )
    said = [m.get("content") for m in result["messages"] if m["role"] == "assistant"]
    assert said[-1] == "A weekend in Lisbon is [weather].", result["events"]


async def test_a_cut_client_resumes_from_the_store(tmp_path: Path) -> None:
    await checks.cut_and_resume(strands_producer(_agent()), None, tmp_path)


async def test_a_stop_cancels_the_strands_run(tmp_path: Path) -> None:
    hold = checks.Hold()
    await checks.stop_cancels(strands_producer(_agent(hold)), hold, tmp_path)


async def test_two_scopes_with_one_thread_id_do_not_share_a_conversation() -> None:
    model = ScriptedModel()
    producer = strands_producer(_agent(model=model))
    scopes = iter(["team-a", "team-b"])
    app = build_app(
        producer=producer,
        path="/agent",
        keepalive=None,
        authorize=lambda request: Principal(next(scopes)),
    )
    with serve(app) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            for run_id, text in (("r-a", "secret plan of team a"), ("r-b", "hello")):
                payload = checks.body(run_id) | {
                    "messages": [{"id": f"u-{run_id}", "role": "user", "content": text}]
                }
                async with client.stream(
                    "POST", f"{server.url}/agent", json=payload, headers=HEADERS
                ) as reply:
                    frames = await read_frames(reply)
                assert events(frames)[-1].type == "RUN_FINISHED"
    team_b = [call for call in model.seen if "hello" in json.dumps(call)]
    assert team_b and all("secret plan" not in json.dumps(call) for call in team_b)


class BrokenModel(ScriptedModel):
    async def stream(  # type: ignore[override]
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        raise RuntimeError(f"cannot reach {checks.SECRET}")
        yield  # pragma: no cover - an async generator that fails at once


async def test_a_failing_model_ends_the_run_with_its_code_and_not_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = await checks.failure_without_its_text(strands_producer(_agent(model=BrokenModel())))
    assert error["code"] == "STRANDS_FORCE_STOP"
    assert (
        error["message"] == "the agent failed (STRANDS_FORCE_STOP); the server log has the details"
    )
    assert checks.SECRET in caplog.text


def test_recent_threads_keeps_the_most_recently_used() -> None:
    threads = RecentThreads(2)
    threads["a"], threads["b"] = 1, 2
    assert threads["a"] == 1  # a is now the most recent
    threads["c"] = 3
    assert list(threads) == ["a", "c"]
    with pytest.raises(ValueError, match="whole number"):
        RecentThreads(0)


def test_anything_but_a_strands_agent_is_refused() -> None:
    with pytest.raises(TypeError, match="Strands Agent"):
        strands_producer(42)
