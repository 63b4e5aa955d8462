"""The run driver's RUN_ERROR never names a call the chain removes (hardening issue, item 8).

An agent making pydantic-ai-style interleaved parallel calls emits a late
TOOL_CALL_ARGS for an internal call it already ended. Through the driver:

* with a chain that removes the internal call, the driver's producer
  verification (after the chain) never sees the broken event: the run finishes;
* with a ``verify`` stage *before* the filter, the violation ends the run, and
  the terminal RUN_ERROR — written by the driver from the violation's text and
  sent through the chain — has the removed call's id replaced by ``[hidden]``.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    EventType,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from agui_pipes import RunContext, RunOutcome
from agui_pipes.config import load_chain
from agui_pipes.testing import collect, event_lines

from ._agents import INPUT

pytestmark = pytest.mark.anyio

FILTER = '  - type: filter_tool_calls\n    deny: ["internal_*"]\n'


async def _interleaved(ctx: RunContext[Any]) -> RunOutcome:
    ctx.emit(
        ToolCallStartEvent(
            tool_call_id="internal-call-7",
            tool_call_name="internal_lookup",
            parent_message_id="resp-1",
        )
    )
    ctx.emit(ToolCallArgsEvent(tool_call_id="internal-call-7", delta='{"acct":'))
    ctx.emit(ToolCallEndEvent(tool_call_id="internal-call-7"))
    ctx.emit(
        ToolCallStartEvent(
            tool_call_id="call-9", tool_call_name="search", parent_message_id="resp-1"
        )
    )
    ctx.emit(ToolCallArgsEvent(tool_call_id="internal-call-7", delta=' "A-1"}'))
    ctx.emit(ToolCallArgsEvent(tool_call_id="call-9", delta="{}"))
    ctx.emit(ToolCallEndEvent(tool_call_id="call-9"))
    return RunOutcome.success()


async def test_the_filter_removes_the_broken_event_before_the_driver_verifies() -> None:
    chain = load_chain("transformers:\n" + FILTER)
    events = await collect(_interleaved, INPUT, transformers=chain)
    assert events[-1].type is EventType.RUN_FINISHED
    assert "internal" not in "\n".join(event_lines(events))


async def test_a_driver_run_error_from_a_verify_before_the_filter_is_scrubbed() -> None:
    chain = load_chain("transformers:\n  - type: verify\n" + FILTER)
    events = await collect(_interleaved, INPUT, transformers=chain)
    error = events[-1]
    assert error.type is EventType.RUN_ERROR
    assert "'[hidden]'" in error.message  # type: ignore[attr-defined]
    assert "internal" not in "\n".join(event_lines(events))
