"""Each RUN_ERROR code, the RUN_FINISHED fallback and the RunError type itself."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageStartEvent,
)
from pydantic import BaseModel

from agui_pipes import FunctionTransformer, RunContext, RunError, RunOutcome, run
from agui_pipes.driver import Agent, ErrorCode
from agui_pipes.testing import collect
from agui_pipes.verify import Rule

from ._agents import INPUT

pytestmark = pytest.mark.anyio

TERMINAL = (EventType.RUN_FINISHED, EventType.RUN_ERROR)


def terminal(events: list[BaseEvent]) -> RunErrorEvent:
    assert events[0].type is EventType.RUN_STARTED, events
    assert sum(e.type in TERMINAL for e in events) == 1, events
    last = events[-1]
    assert isinstance(last, RunErrorEvent), events
    return last


async def test_an_interrupt_without_interrupts_is_protocol() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        return RunOutcome.interrupt([])

    error = terminal(await collect(agent, INPUT))
    assert error.code == "PROTOCOL"
    assert "at least one interrupt" in error.message


async def test_an_agent_returning_something_else_is_protocol() -> None:
    async def agent(ctx: RunContext[Any]) -> Any:
        return "done"

    error = terminal(await collect(agent, INPUT))
    assert error.code == "PROTOCOL"
    assert "returned a str" in error.message


async def test_an_invalid_field_value_is_protocol() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.message("robot")
        return RunOutcome.success()

    error = terminal(await collect(agent, INPUT))
    assert error.code == "PROTOCOL"
    assert "TextMessageStartEvent rejected role='robot'" in error.message


class Strict(BaseModel):
    count: int


class Counter(Agent[Strict]):
    def __init__(self) -> None:
        self.ran = False

    async def run(self, ctx: RunContext[Strict]) -> RunOutcome:
        self.ran = True
        return RunOutcome.success()


async def test_state_that_does_not_decode_is_serialization_and_the_agent_does_not_run() -> None:
    agent = Counter()
    events = await collect(agent, {**INPUT, "state": {"count": "many"}})

    error = terminal(events)
    assert error.code == "SERIALIZATION"
    assert "does not decode into Strict" in error.message
    assert "count" in error.message
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    assert agent.ran is False


async def test_missing_state_for_a_model_with_required_fields_is_serialization() -> None:
    agent = Counter()
    error = terminal(await collect(agent, INPUT))
    assert error.code == "SERIALIZATION"
    assert agent.ran is False


async def test_state_decodes_into_the_model() -> None:
    agent = Counter()
    events = await collect(agent, {**INPUT, "state": {"count": 3}})
    assert events[-1].type is EventType.RUN_FINISHED
    assert agent.ran is True


@pytest.mark.parametrize(
    "act",
    [
        lambda ctx: ctx.tool_call("search").args_json({"when": object()}),
        lambda ctx: ctx.tool_call("search").result_json({1, 2}),
        lambda ctx: ctx.set_state({"x": float("nan")}),
        lambda ctx: ctx.subagent("s").finish_with(object()),
    ],
    ids=["args", "result", "state", "subagent-result"],
)
async def test_values_without_a_json_form_are_serialization(act: Any) -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        act(ctx)
        return RunOutcome.success()

    error = terminal(await collect(agent, INPUT))
    assert error.code == "SERIALIZATION"
    assert "does not convert to JSON" in error.message


async def test_a_verifier_rejection_is_protocol_violation_and_sticky() -> None:
    caught: list[RunError] = []

    async def stubborn(ctx: RunContext[Any]) -> RunOutcome:
        try:
            ctx.emit(TextMessageStartEvent(message_id="m"))
            ctx.emit(TextMessageStartEvent(message_id="m"))
        except RunError as error:
            caught.append(error)
        try:
            ctx.say("carrying on regardless")
        except RunError as error:
            caught.append(error)
        return RunOutcome.success()

    events = await collect(stubborn, INPUT)

    error = terminal(events)
    assert error.code == "PROTOCOL_VIOLATION"
    assert "duplicate-start" in error.message
    assert [c.rule for c in caught] == [Rule.DUPLICATE_START, Rule.DUPLICATE_START]
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.RUN_ERROR,
    ]


async def test_the_driver_owns_the_run_lifecycle_events() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.emit(RunFinishedEvent(thread_id="t", run_id="r"))
        return RunOutcome.success()

    error = terminal(await collect(agent, INPUT))
    assert error.code == "PROTOCOL_VIOLATION"
    assert "the driver emits the run's start and terminal events" in error.message


async def test_a_rejected_run_finished_becomes_run_error() -> None:
    async def careless(ctx: RunContext[Any]) -> RunOutcome:
        message = ctx.assistant_message()  # never ended
        message.delta("half a thought")
        return RunOutcome.success()

    events = await collect(careless, INPUT)

    error = terminal(events)
    assert error.code == "PROTOCOL_VIOLATION"
    assert "open-at-finish" in error.message
    assert all(e.type is not EventType.RUN_FINISHED for e in events)


async def test_without_verification_the_same_run_finishes() -> None:
    async def careless(ctx: RunContext[Any]) -> RunOutcome:
        ctx.assistant_message().delta("half a thought")
        return RunOutcome.success()

    events = await collect(careless, INPUT, verify=False)
    assert events[-1].type is EventType.RUN_FINISHED


async def test_the_consumer_going_away_is_disconnected_for_the_agent() -> None:
    seen: list[RunError] = []
    emitted = anyio.Event()
    go_on = anyio.Event()
    reported = anyio.Event()

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.say("first")
        emitted.set()
        await go_on.wait()
        try:
            ctx.say("nobody hears this")
        except RunError as error:
            seen.append(error)
            reported.set()
            raise
        return RunOutcome.success()

    async with run(agent, INPUT) as events:
        first = await events.__anext__()
        assert first.type is EventType.RUN_STARTED
        await emitted.wait()
        await events.aclose()
        go_on.set()
        with anyio.fail_after(5):
            await reported.wait()

    (error,) = seen
    assert error.code == "DISCONNECTED"
    assert error.is_disconnected()
    assert not error.is_cancelled()


async def test_an_error_of_the_agent_is_agent_error() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        raise RunError.agent(ValueError("quota exceeded"))

    error = terminal(await collect(agent, INPUT))
    assert (error.code, error.message) == ("AGENT_ERROR", "agent error: quota exceeded")


async def test_a_foreign_exception_is_agent_error() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        raise KeyError("missing")

    error = terminal(await collect(agent, INPUT))
    assert error.code == "AGENT_ERROR"
    assert error.message == "agent error: 'missing'"


async def test_an_error_inside_a_task_group_keeps_its_code() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        async def fail() -> None:
            raise RunError.serialization("bad tool output")

        async with anyio.create_task_group() as tg:
            tg.start_soon(fail)
        return RunOutcome.success()

    error = terminal(await collect(agent, INPUT))
    assert (error.code, error.message) == ("SERIALIZATION", "bad tool output")


async def test_a_full_bounded_buffer_is_event_buffer_full() -> None:
    async def firehose(ctx: RunContext[Any]) -> RunOutcome:
        for n in range(10):
            ctx.say(f"line {n}")  # no await: the consumer never gets to read
        return RunOutcome.success()

    events = await collect(firehose, INPUT, event_buffer=4)

    error = terminal(events)
    assert error.code == "EVENT_BUFFER_FULL"
    assert "event buffer is full (4 events waiting)" in error.message
    # The four buffered (plus one handed straight to a reader already waiting,
    # depending on scheduling), then the terminal event; never the whole burst.
    assert 5 <= len(events) <= 6


async def test_a_bounded_buffer_is_enough_when_the_agent_yields() -> None:
    async def polite(ctx: RunContext[Any]) -> RunOutcome:
        for n in range(10):
            ctx.say(f"line {n}")
            await anyio.lowlevel.checkpoint()
        return RunOutcome.success()

    events = await collect(polite, INPUT, event_buffer=16)
    assert events[-1].type is EventType.RUN_FINISHED
    assert len(events) == 2 + 3 * 10


async def test_a_failing_transformer_ends_the_run() -> None:
    def explode(event: BaseEvent) -> BaseEvent:
        if event.type is EventType.TEXT_MESSAGE_CONTENT:
            raise RuntimeError("stage bug")
        return event

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.say("hello")
        return RunOutcome.success()

    events = await collect(agent, INPUT, transformers=[FunctionTransformer(explode)])
    error = terminal(events)
    assert error.code == "AGENT_ERROR"
    assert "explode" in error.message
    assert "stage bug" in error.message


async def test_a_transformer_swallowing_run_finished_still_ends_the_run() -> None:
    def swallow(event: BaseEvent) -> BaseEvent | None:
        return None if event.type is EventType.RUN_FINISHED else event

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        return RunOutcome.success()

    events = await collect(agent, INPUT, transformers=[FunctionTransformer(swallow)])
    error = terminal(events)
    assert error.code == "PROTOCOL_VIOLATION"
    assert "dropped the run's RUN_FINISHED" in error.message


async def test_events_a_transformer_appends_after_the_terminal_are_dropped() -> None:
    def echo_twice(event: BaseEvent) -> list[BaseEvent]:
        return [event, event] if event.type is EventType.RUN_FINISHED else [event]

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        return RunOutcome.success()

    events = await collect(
        agent, INPUT, transformers=[FunctionTransformer(echo_twice)], verify=False
    )
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_FINISHED]


def test_error_routing_helpers() -> None:
    assert RunError.cancelled().is_cancelled()
    assert not RunError.cancelled().is_disconnected()
    assert RunError.disconnected().is_disconnected()
    cause = ValueError("boom")
    wrapped = RunError.agent(cause)
    assert wrapped.__cause__ is cause
    assert str(wrapped) == "agent error: boom"
    assert RunError.agent("plain text").message == "agent error: plain text"
    assert {c.value for c in ErrorCode} == {
        "PROTOCOL",
        "SERIALIZATION",
        "PROTOCOL_VIOLATION",
        "CANCELLED",
        "DISCONNECTED",
        "AGENT_ERROR",
        "EVENT_BUFFER_FULL",
        "INVALID_RESUME",
    }
    assert RunError.violation("x").rule is None
