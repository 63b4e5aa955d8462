"""The seeds' examples, ported with the same assertions (both anyio backends)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from ag_ui.core import (
    EventType,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    StateSnapshotEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
)

from agui_pipes import RunContext, RunError, RunOutcome
from agui_pipes.testing import collect
from agui_pipes.verify import Rule

from ._agents import INPUT, Approver, Chatty, Editor, Flaky, Supervisor

pytestmark = pytest.mark.anyio


def said(events: list[Any]) -> list[str]:
    return [e.delta for e in events if isinstance(e, TextMessageContentEvent)]


async def test_a_failed_run_ends_in_run_error() -> None:
    events = await collect(Flaky(), INPUT)

    error = events[-1]
    assert isinstance(error, RunErrorEvent), events
    assert error.message == "agent error: the weather service is down"
    assert error.code == "AGENT_ERROR"
    assert events[0].type is EventType.RUN_STARTED
    assert said(events) == ["Looking that up."]


async def test_raw_emit_of_content_for_an_unopened_message_is_rejected() -> None:
    seen: list[RunError] = []

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        try:
            ctx.emit(TextMessageContentEvent(message_id="msg-1", delta="hello"))
        except RunError as error:
            seen.append(error)
            raise
        raise AssertionError("the verifier should reject this")

    events = await collect(agent, INPUT)

    (error,) = seen
    assert error.verification is not None
    assert error.verification.rule == Rule.NOT_OPEN
    assert error.rule == Rule.NOT_OPEN
    assert error.code == "PROTOCOL_VIOLATION"
    assert "breaks rule `not-open`" in error.message
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].code == "PROTOCOL_VIOLATION"
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_ERROR]


async def test_every_emit_after_cancellation_fails() -> None:
    events = await collect(Chatty(), INPUT)

    assert said(events) == ["one"]
    # The terminal event goes out regardless of the cancellation.
    assert events[-1].type is EventType.RUN_ERROR
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].code == "CANCELLED"


async def call_the_model() -> str:
    return "the model's reply"


async def test_until_cancelled_returns_the_value_when_not_cancelled() -> None:
    answers: list[str | None] = []

    async def slow(ctx: RunContext[Any]) -> RunOutcome:
        reply = await ctx.until_cancelled(call_the_model())
        answers.append(reply)
        if reply is None:
            raise RunError.cancelled()
        ctx.say(reply)
        return RunOutcome.success()

    events = await collect(slow, INPUT)

    assert answers == ["the model's reply"]
    assert said(events) == ["the model's reply"]
    assert events[-1].type is EventType.RUN_FINISHED


async def test_until_cancelled_returns_none_when_cancellation_wins() -> None:
    answers: list[object] = []

    async def never() -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def slow(ctx: RunContext[Any]) -> RunOutcome:
        # A future that never resolves, against a token that has been tripped.
        ctx.cancel_token.cancel()
        answers.append(await ctx.until_cancelled(never()))
        return RunOutcome.success()

    events = await collect(slow, INPUT)

    assert answers == [None]
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].code == "CANCELLED"


async def test_until_cancelled_abandons_an_in_flight_await_when_the_token_trips() -> None:
    answers: list[object] = []
    cleaned_up: list[bool] = []

    async def in_flight() -> str:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned_up.append(True)
        raise AssertionError("unreachable")

    async def slow(ctx: RunContext[Any]) -> RunOutcome:
        async with anyio.create_task_group() as tg:

            async def trip() -> None:
                await anyio.sleep(0.01)
                ctx.cancel_token.cancel()

            tg.start_soon(trip)
            answers.append(await ctx.until_cancelled(in_flight()))
        return RunOutcome.cancelled()

    events = await collect(slow, INPUT)

    assert answers == [None]
    assert cleaned_up == [True]
    assert isinstance(events[-1], RunFinishedEvent)
    assert events[-1].outcome is not None
    assert events[-1].outcome.type == "cancelled"


async def test_the_editor_example_emits_the_exact_sequence() -> None:
    events = await collect(Editor(), {"threadId": "thread-1", "runId": "run-1"})

    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.STEP_STARTED,
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        EventType.REASONING_MESSAGE_CONTENT,
        EventType.REASONING_MESSAGE_END,
        EventType.REASONING_END,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.STATE_SNAPSHOT,
        EventType.STEP_FINISHED,
        EventType.RUN_FINISHED,
    ]
    snapshot = events[11]
    assert isinstance(snapshot, StateSnapshotEvent)
    assert snapshot.snapshot == {"revision": 1, "title": "Q3 plan"}


async def test_the_approver_interrupts_then_acts_on_the_answer() -> None:
    first = await collect(Approver(), INPUT)

    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent)
    outcome = finished.outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    assert [(i.id, i.reason) for i in outcome.interrupts] == [
        ("delete-everything", "tool_approval")
    ]
    assert said(first) == []

    resolved = await collect(
        Approver(),
        {
            "threadId": "t",
            "runId": "r2",
            "resume": [{"interruptId": "delete-everything", "status": "resolved"}],
        },
    )
    assert said(resolved) == ["Done."]
    assert isinstance(resolved[-1], RunFinishedEvent)
    assert resolved[-1].outcome is None  # a plain success

    declined = await collect(
        Approver(),
        {
            "threadId": "t",
            "runId": "r3",
            "resume": [{"interruptId": "delete-everything", "status": "cancelled"}],
        },
    )
    assert said(declined) == ["Cancelled."]
    assert declined[-1].type is EventType.RUN_FINISHED


async def test_the_supervisor_attributes_nested_subagents() -> None:
    events = await collect(Supervisor(), INPUT)

    started = [e for e in events if isinstance(e, SubagentStartedEvent)]
    assert [(s.name, s.subagent_run_id, s.parent_subagent_run_id) for s in started] == [
        ("planner", "r-sub-1", None),
        ("estimator", "r-sub-2", "r-sub-1"),
    ]
    texts = [(e.delta, e.subagent_run_id) for e in events if isinstance(e, TextMessageContentEvent)]
    assert texts == [
        ("Two tasks: scope, then risks.", "r-sub-1"),
        ("About a day each.", "r-sub-2"),
        ("Plan ready.", None),
    ]
    finished = [e for e in events if isinstance(e, SubagentFinishedEvent)]
    assert [(f.subagent_run_id, f.result) for f in finished] == [
        ("r-sub-2", None),
        ("r-sub-1", {"tasks": 2}),
    ]
    # Everything between a subagent's start and finish is tagged with some subagent.
    types = [e.type for e in events]
    assert types.index(EventType.SUBAGENT_FINISHED) < types.index(EventType.RUN_FINISHED)
    assert isinstance(events[-1], RunFinishedEvent)


async def test_a_subagent_scope_left_without_an_ending_fails_the_run() -> None:
    async def forgetful(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.subagent("planner") as planner:
            planner.say("Two tasks.")
        return RunOutcome.success()

    events = await collect(forgetful, INPUT)

    error = events[-1]
    assert isinstance(error, RunErrorEvent)
    assert error.code == "PROTOCOL_VIOLATION"
    assert "requires an explicit finish, fail or suspend" in error.message
    assert sum(e.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR) for e in events) == 1
