"""RunContext's emitters, handles, ids, state publishing and resume answers."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    RunErrorEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallResultEvent,
)

from agui_pipes import FunctionTransformer, RunContext, RunError, RunOutcome
from agui_pipes.testing import collect

from ._agents import INPUT

pytestmark = pytest.mark.anyio

T = EventType


def types(events: list[BaseEvent]) -> list[EventType]:
    return [e.type for e in events]


async def test_a_message_ends_when_an_exception_unwinds_its_scope() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.assistant_message() as message:
            message.delta("partial")
            raise ValueError("model stream broke")

    events = await collect(agent, INPUT)

    assert types(events) == [
        T.RUN_STARTED,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.RUN_ERROR,
    ]
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].message == "agent error: model stream broke"


async def test_a_step_finishes_on_an_early_error() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.step("search"), ctx.tool_call("lookup") as call:
            call.args("{")
            raise RunError.agent("timeout")

    events = await collect(agent, INPUT)

    assert types(events) == [
        T.RUN_STARTED,
        T.STEP_STARTED,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.STEP_FINISHED,
        T.RUN_ERROR,
    ]


async def test_tool_calls_stream_arguments_and_answer_with_results() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        message_id = ctx.say("Let me check.")
        call = ctx.tool_call("weather", parent_message_id=message_id)
        call.args('{"city":')
        call.args('"Oslo"}')
        call.end()
        call.result("rainy")
        with ctx.tool_call("forecast") as second:
            second.args_json({"days": 3})
        second.result_json({"days": ["rain", "rain", "sun"]})
        return RunOutcome.success()

    events = await collect(agent, INPUT)

    assert types(events)[4:] == [
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        T.RUN_FINISHED,
    ]
    results = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert [(r.tool_call_id, r.message_id, r.content) for r in results] == [
        ("r-call-1", "r-msg-2", "rainy"),
        ("r-call-2", "r-msg-3", '{"days":["rain","rain","sun"]}'),
    ]
    assert events[4].model_dump()["parent_message_id"] == "r-msg-1"


async def test_a_tool_result_closes_open_arguments_first() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        call = ctx.tool_call("now")
        call.result_json("12:00")
        with pytest.raises(RunError, match="already has a result"):
            call.result("again")
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    assert types(events) == [
        T.RUN_STARTED,
        T.TOOL_CALL_START,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        T.RUN_FINISHED,
    ]


async def test_an_ended_handle_refuses_more_content() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        message = ctx.assistant_message()
        message.end()
        with pytest.raises(RunError, match="already ended"):
            message.delta("late")
        with pytest.raises(RunError, match="already ended"):
            message.end()
        step = ctx.step("s")
        step.end()
        with pytest.raises(RunError, match="already finished"):
            step.end()
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    assert events[-1].type is T.RUN_FINISHED


async def test_reasoning_spans_hold_several_messages() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.reasoning() as span:
            span.think("First thought.")
            with span.message() as thought:
                thought.delta("Second ")
                thought.delta("thought.")
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    assert types(events) == [
        T.RUN_STARTED,
        T.REASONING_START,
        T.REASONING_MESSAGE_START,
        T.REASONING_MESSAGE_CONTENT,
        T.REASONING_MESSAGE_END,
        T.REASONING_MESSAGE_START,
        T.REASONING_MESSAGE_CONTENT,
        T.REASONING_MESSAGE_CONTENT,
        T.REASONING_MESSAGE_END,
        T.REASONING_END,
        T.RUN_FINISHED,
    ]


async def test_message_roles_and_names() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.message("system", name="policy") as note:
            note.delta("Be brief.")
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    start = events[1]
    assert isinstance(start, TextMessageStartEvent)
    assert (start.role, start.name) == ("system", "policy")


async def chatty_agent(ctx: RunContext[Any]) -> RunOutcome:
    ctx.say("a")
    call = ctx.tool_call("t")
    call.result("r")
    with ctx.subagent("helper") as helper:
        helper.say("b")
        helper.finish()
    ctx.think("c")
    return RunOutcome.success()


async def test_ids_are_deterministic_per_run() -> None:
    first = await collect(chatty_agent, INPUT)
    second = await collect(chatty_agent, INPUT)

    assert [e.model_dump() for e in first] == [e.model_dump() for e in second]
    ids = {
        value
        for e in first
        for key, value in e.model_dump().items()
        if key.endswith("_id") and key not in ("thread_id", "run_id") and value
    }
    assert ids == {"r-msg-1", "r-msg-2", "r-msg-3", "r-msg-4", "r-msg-5", "r-call-1", "r-sub-1"}


async def test_a_scope_tags_what_goes_through_it_and_nests() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.subagent("outer", description="plans") as outer:
            outer.emit(CustomEvent(name="progress", value=1))
            with outer.step("inner step") as step:
                step.say("in a step")
            with outer.subagent("inner") as inner:
                inner.fail("no capacity", code="BUSY")
            outer.suspend(["approve-1"])
        # A subagent suspended on an interrupt: the run's outcome carries it.
        return RunOutcome.interrupt(
            [{"id": "approve-1", "reason": "tool_approval", "subagentRunId": "r-sub-1"}]
        )

    events = await collect(agent, INPUT)

    tags = {e.type: getattr(e, "subagent_run_id", None) for e in events}
    assert tags[T.CUSTOM] == "r-sub-1"
    assert tags[T.STEP_STARTED] == tags[T.STEP_FINISHED] == "r-sub-1"
    assert tags[T.TEXT_MESSAGE_CONTENT] == "r-sub-1"
    error = next(e for e in events if isinstance(e, SubagentErrorEvent))
    assert (error.subagent_run_id, error.message, error.code) == ("r-sub-2", "no capacity", "BUSY")
    finished = next(e for e in events if isinstance(e, SubagentFinishedEvent))
    assert finished.outcome is not None
    assert finished.model_dump(by_alias=True, exclude_none=True)["outcome"] == {
        "type": "suspended",
        "interruptIds": ["approve-1"],
    }
    assert events[-1].type is T.RUN_FINISHED


async def test_an_ended_scope_cannot_emit() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        helper = ctx.subagent("helper")
        helper.finish()
        with pytest.raises(RunError, match="has ended"):
            helper.say("late")
        with pytest.raises(RunError, match="list of interrupt ids"):
            ctx.subagent("other").suspend("one-id")
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    # "other" was never ended: the run cannot finish.
    assert isinstance(events[-1], RunErrorEvent)
    assert "requires an explicit finish, fail or suspend" in events[-1].message


async def test_emit_refuses_things_that_are_not_events() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.emit({"type": "CUSTOM"})  # type: ignore[arg-type]
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].code == "PROTOCOL"
    assert "ag_ui.core event model, got dict" in events[-1].message


# -- state ---------------------------------------------------------------------


def state_events(events: list[BaseEvent]) -> list[BaseEvent]:
    return [e for e in events if e.type in (T.STATE_SNAPSHOT, T.STATE_DELTA)]


async def test_state_publishing_snapshot_then_nothing_then_delta_then_snapshot() -> None:
    big = {"notes": ["x" * 40] * 10, "count": 0}

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.set_state(big)  # first publish: snapshot
        ctx.publish_state()  # unchanged: nothing

        def bump(state: dict[str, Any]) -> None:
            state["count"] = 1

        ctx.update_state(bump)  # small change to a big state: delta
        ctx.set_state({"other": True})  # replaces everything: the patch is bigger
        return RunOutcome.success()

    events = await collect(agent, INPUT)

    published = state_events(events)
    assert [e.type for e in published] == [T.STATE_SNAPSHOT, T.STATE_DELTA, T.STATE_SNAPSHOT]
    delta = published[1]
    assert isinstance(delta, StateDeltaEvent)
    operations = [op.model_dump(mode="json", exclude_unset=True) for op in delta.delta]
    assert operations == [{"op": "replace", "path": "/count", "value": 1}]
    assert jsonpatch.apply_patch(big, operations) == {**big, "count": 1}


async def test_a_type_change_that_compares_equal_in_python_is_still_published() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.set_state({"flag": 1})
        ctx.set_state({"flag": True})
        return RunOutcome.success()

    published = state_events(await collect(agent, INPUT))
    assert len(published) == 2
    last = published[-1]
    assert isinstance(last, StateSnapshotEvent)
    assert json.dumps(last.snapshot) == '{"flag": true}'


async def test_the_state_baseline_follows_what_left_the_pipeline() -> None:
    dropped: list[BaseEvent] = []

    def drop_first_snapshot(event: BaseEvent) -> BaseEvent | None:
        if event.type is T.STATE_SNAPSHOT and not dropped:
            dropped.append(event)
            return None
        return event

    big = {"items": list(range(50)), "n": 0}

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.set_state(big)
        ctx.update_state(lambda s: {**s, "n": 1})
        ctx.update_state(lambda s: {**s, "n": 2})
        return RunOutcome.success()

    events = await collect(agent, INPUT, transformers=[FunctionTransformer(drop_first_snapshot)])

    published = state_events(events)
    # The client never saw the first snapshot, so the second publish cannot be a
    # delta against it: it is a snapshot, and only then do deltas follow.
    assert [e.type for e in published] == [T.STATE_SNAPSHOT, T.STATE_DELTA]
    first = published[0]
    assert isinstance(first, StateSnapshotEvent)
    assert first.snapshot == {**big, "n": 1}


async def test_an_agent_without_a_model_sees_the_raw_input_state() -> None:
    seen: list[Any] = []

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        seen.append(ctx.state)
        return RunOutcome.success()

    await collect(agent, {**INPUT, "state": {"todo": ["a"]}})
    assert seen == [{"todo": ["a"]}]


async def test_state_events_from_a_scope_carry_its_tag() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.subagent("writer") as writer:
            writer.set_state({"by": "writer"})
            writer.finish()
        return RunOutcome.success()

    published = state_events(await collect(agent, INPUT))
    assert [getattr(e, "subagent_run_id", None) for e in published] == ["r-sub-1"]


# -- input -----------------------------------------------------------------------


async def test_resume_answers_and_input_echo() -> None:
    seen: dict[str, Any] = {}

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        seen["is_resume"] = ctx.is_resume
        seen["ids"] = [entry.interrupt_id for entry in ctx.resume]
        seen["a"] = ctx.resume_for("a")
        seen["missing"] = ctx.resume_for("zzz")
        seen["thread"] = (ctx.thread_id, ctx.run_id, len(ctx.messages))
        return RunOutcome.success()

    run_input = {
        "threadId": "t",
        "runId": "r",
        "parentRunId": "r0",
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        "resume": [{"interruptId": "a", "status": "resolved", "payload": {"ok": True}}],
    }
    events = await collect(agent, run_input, echo_input=True)

    assert seen["is_resume"] is True
    assert seen["ids"] == ["a"]
    assert seen["a"].payload == {"ok": True}
    assert seen["missing"] is None
    assert seen["thread"] == ("t", "r", 1)
    started = events[0]
    assert isinstance(started, RunStartedEvent)
    assert started.parent_run_id == "r0"
    assert started.input is not None
    assert started.input.run_id == "r"

    plain = await collect(agent, INPUT)
    assert seen["is_resume"] is False
    first = plain[0]
    assert isinstance(first, RunStartedEvent)
    assert first.input is None


async def test_say_validates_before_opening_the_message() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.say(42)  # type: ignore[arg-type]
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    assert types(events) == [T.RUN_STARTED, T.RUN_ERROR]
    assert not any(isinstance(e, TextMessageContentEvent) for e in events)
