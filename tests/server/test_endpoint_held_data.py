"""The agent endpoint releases what its stages hold before the driver's RUN_ERROR (issue 27).

The driver ends a run the agent did not finish — it raised, or it was
cancelled (what a stop or a client leaving does) — with its own RUN_ERROR,
passed through the chain. Every built-in that holds data releases it before
that event: the client gets what the chain gives for the agent's events and
releases at their end (``tests._held.released_at_cut``), then one RUN_ERROR;
Redact's held text leaves redacted, never raw.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallStartEvent,
)

from agui_pipes import AsyncStreamTransformer, RunContext, TransformerChain, run
from agui_pipes._stagekit.builtins import BUILTINS
from agui_pipes.codecs import SSEDecoder, encode_json
from agui_pipes.driver import CancelToken
from agui_pipes.server import AgentEndpoint
from tests._held import HOLDERS, built_in_stage, released_at_cut
from tests._servers import run_input

pytestmark = pytest.mark.anyio

KEY = "sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ"
EMITTED: list[BaseEvent] = [
    TextMessageStartEvent(message_id="m1", role="assistant"),
    TextMessageContentEvent(message_id="m1", delta="Hello "),
    TextMessageContentEvent(message_id="m1", delta=KEY + " and 4111111111111111"),
    ToolCallStartEvent(tool_call_id="c1", tool_call_name="internal_debug"),
    ToolCallArgsEvent(tool_call_id="c1", delta='{"a": 1'),
]
HOLDING = [builtin for builtin in BUILTINS if builtin.name in HOLDERS]


def _agent(ending: str, token: CancelToken | None = None) -> Any:
    async def agent(ctx: RunContext[Any]) -> None:
        for event in EMITTED:
            ctx.emit(event)
        if ending == "raises":
            raise RuntimeError("the model went away")
        assert token is not None
        token.cancel("stopped by the user")  # what a stop does; the agent then returns
        await anyio.lowlevel.checkpoint()

    return agent


def _expected(stage_name: str) -> list[bytes]:
    builtin = next(b for b in BUILTINS if b.name == stage_name)
    started = RunStartedEvent(thread_id="thread-1", run_id="run-1")
    events, _ = released_at_cut([built_in_stage(builtin)()], [started, *EMITTED])
    return sorted(_reported(encode_json(event) for event in events))


def _reported(payloads: Iterable[bytes]) -> list[bytes]:
    """``payloads`` without Repair's reports (it reports a cut, and no cut here)."""
    return [p for p in payloads if b'"name":"agui_pipes.repair"' not in p]


def _checked(payloads: Sequence[bytes], stage_name: str) -> dict[str, Any]:
    """The events before the RUN_ERROR are the chain's, in some order; returns the error."""
    *before, last = payloads
    assert sorted(_reported(before)) == _expected(stage_name)
    assert KEY.encode() not in b"".join(payloads) or stage_name != "redact"
    error = json.loads(last)
    assert error["type"] == "RUN_ERROR"
    return error  # type: ignore[no-any-return]


@pytest.mark.parametrize("builtin", HOLDING, ids=lambda b: b.name)
async def test_an_agent_that_raises_gets_its_held_data_out_first(builtin: Any) -> None:
    endpoint = AgentEndpoint(
        _agent("raises"), chain=lambda: TransformerChain([built_in_stage(builtin)()])
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(endpoint), base_url="http://endpoint.test"
    ) as client:
        response = await client.post("/", content=json.dumps(run_input()))
    error = _checked(SSEDecoder().feed_bytes(response.content), builtin.name)
    assert error["code"] == "AGENT_ERROR"


@pytest.mark.parametrize("builtin", HOLDING, ids=lambda b: b.name)
async def test_a_cancelled_run_gets_its_held_data_out_first(builtin: Any) -> None:
    token = CancelToken()
    stages = [built_in_stage(builtin)()]
    async with run(
        _agent("cancelled", token), run_input(), transformers=stages, cancel_token=token
    ) as events:
        out = [event async for event in events]
    assert [e.type for e in out].count(EventType.RUN_ERROR) == 1
    error = _checked([encode_json(event) for event in out], builtin.name)
    assert error["code"] == "CANCELLED"


class _FailsOnToolCall(AsyncStreamTransformer):
    """An async stage (the chain then runs over the driver's output) that breaks on a call."""

    async def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.type is EventType.TOOL_CALL_START:
            raise RuntimeError("boom")
        return (event,)


async def test_a_stage_after_a_failing_async_stage_releases_what_it_holds() -> None:
    """The stage-failure rule on the endpoint: the stages after the one that raised drain."""
    redact = next(b for b in BUILTINS if b.name == "redact")
    endpoint = AgentEndpoint(
        _agent("raises"),
        chain=lambda: TransformerChain([_FailsOnToolCall(), built_in_stage(redact)()]),
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(endpoint), base_url="http://endpoint.test"
    ) as client:
        response = await client.post("/", content=json.dumps(run_input()))
    events = [json.loads(p) for p in SSEDecoder().feed_bytes(response.content)]
    texts = "".join(e.get("delta", "") for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert texts == "Hello [secret] and [secret]"  # released, redacted, before the error
    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "STAGE_ERROR")
