"""Cancellation by the consumer leaving and by the token; no task outlives a run."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from ag_ui.core import BaseEvent, EventType, RunErrorEvent, RunFinishedEvent

from agui_pipes import (
    AsyncStreamTransformer,
    CancelToken,
    RunContext,
    RunError,
    RunOutcome,
    StreamTransformer,
    run,
)
from agui_pipes.testing import collect

from ._agents import INPUT

pytestmark = pytest.mark.anyio


def task_count() -> int:
    return len(anyio.get_running_tasks())


class Endless:
    """Talks until stopped; records that its cleanup ran."""

    def __init__(self) -> None:
        self.cleaned_up = False
        self.said = 0

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        try:
            while True:
                ctx.say(f"line {self.said}")
                self.said += 1
                await anyio.lowlevel.checkpoint()
        finally:
            self.cleaned_up = True


async def test_leaving_early_cancels_the_agent_and_waits_for_its_cleanup() -> None:
    before = task_count()
    agent = Endless()
    token = CancelToken()

    async with run(agent, INPUT, cancel_token=token) as events:
        received = []
        async for event in events:
            received.append(event)
            if len(received) == 4:
                break
        assert task_count() > before

    assert agent.cleaned_up
    assert token.is_cancelled()  # anything the agent started elsewhere hears about it too
    assert task_count() == before
    assert received[0].type is EventType.RUN_STARTED


async def test_an_exception_in_the_consumer_still_cleans_up() -> None:
    before = task_count()
    agent = Endless()

    async def consume() -> None:
        async with run(agent, INPUT) as events:
            async for _ in events:
                raise LookupError("the consumer failed")

    with pytest.raises(LookupError):
        await consume()

    assert agent.cleaned_up
    assert task_count() == before


async def test_a_token_tripped_from_outside_ends_the_run_with_cancelled() -> None:
    before = task_count()
    agent = Endless()
    token = CancelToken()
    received: list[BaseEvent] = []

    async with run(agent, INPUT, cancel_token=token) as events:
        async for event in events:
            received.append(event)
            if len(received) == 7:
                token.cancel()

    assert agent.cleaned_up
    assert task_count() == before
    last = received[-1]
    assert isinstance(last, RunErrorEvent)
    assert last.code == "CANCELLED"
    assert sum(e.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR) for e in received) == 1


async def test_a_token_cancelled_before_the_run_still_gives_a_well_formed_stream() -> None:
    token = CancelToken()
    token.cancel()

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.check_cancelled()
        raise AssertionError("check_cancelled should have raised")

    events = await collect(agent, INPUT, cancel_token=token)
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].code == "CANCELLED"


@pytest.mark.parametrize("where", ["outside", "before", "in the agent"])
async def test_the_reason_given_to_cancel_is_the_run_errors_message(where: str) -> None:
    token = CancelToken()
    if where == "before":
        token.cancel("stopped by the operator")
    agent = Endless()
    received: list[BaseEvent] = []

    async def stops_itself(ctx: RunContext[Any]) -> RunOutcome:
        ctx.cancel_token.cancel("stopped by the operator")
        return RunOutcome.success()

    chosen: Any = stops_itself if where == "in the agent" else agent
    async with run(chosen, INPUT, cancel_token=token) as events:
        async for event in events:
            received.append(event)
            if where == "outside" and len(received) == 7:
                token.cancel("stopped by the operator")
                token.cancel("a later reason")  # the first reason given wins
    last = received[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
    assert last.message == "stopped by the operator"
    assert token.reason == "stopped by the operator"


async def test_a_cancel_without_reason_keeps_the_generic_message() -> None:
    token = CancelToken()
    token.cancel()
    assert token.reason is None
    events = await collect(Endless(), INPUT, cancel_token=token)
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].message == "the run was cancelled"


async def test_an_agent_ignoring_cancellation_still_ends_cancelled() -> None:
    async def stubborn(ctx: RunContext[Any]) -> RunOutcome:
        ctx.cancel_token.cancel()
        return RunOutcome.success()

    events = await collect(stubborn, INPUT)
    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].code == "CANCELLED"


async def test_an_agent_may_report_a_cancelled_outcome() -> None:
    async def graceful(ctx: RunContext[Any]) -> RunOutcome:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_trip_soon, ctx.cancel_token)
            await ctx.cancelled()
        assert ctx.is_cancelled()
        return RunOutcome.cancelled()

    events = await collect(graceful, INPUT)
    last = events[-1]
    assert isinstance(last, RunFinishedEvent)
    assert last.outcome is not None
    assert last.outcome.type == "cancelled"


async def _trip_soon(token: CancelToken) -> None:
    await anyio.sleep(0.001)
    token.cancel()


async def test_the_cancel_token() -> None:
    token = CancelToken()
    calls: list[str] = []
    remove = token.on_cancel(lambda: calls.append("a"))
    token.on_cancel(lambda: calls.append("b"))
    remove()
    assert not token.is_cancelled()

    async with anyio.create_task_group() as tg:
        tg.start_soon(_trip_soon, token)
        with anyio.fail_after(5):
            await token.wait()

    token.cancel()  # idempotent
    assert calls == ["b"]
    assert token.is_cancelled()
    await token.cancelled()  # already tripped: returns at once
    token.on_cancel(lambda: calls.append("late"))
    assert calls == ["b", "late"]
    assert repr(token) == "CancelToken(cancelled=True)"


async def test_check_cancelled_raises_cancelled() -> None:
    token = CancelToken()
    token.cancel()
    seen: list[RunError] = []

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        try:
            ctx.check_cancelled()
        except RunError as error:
            seen.append(error)
            raise
        return RunOutcome.success()

    await collect(agent, INPUT, cancel_token=token)
    assert [e.is_cancelled() for e in seen] == [True]


# -- misuse of run() is a clear error, before anything starts -------------------


async def noop(ctx: RunContext[Any]) -> RunOutcome:
    return RunOutcome.success()


async def test_run_must_be_used_with_async_with() -> None:
    with pytest.raises(TypeError, match="async with run"):
        async for _ in run(noop, INPUT):  # type: ignore[attr-defined]
            pass


async def test_a_run_can_be_entered_once() -> None:
    handle = run(noop, INPUT)
    async with handle as events:
        assert [e.type async for e in events][-1] is EventType.RUN_FINISHED
    with pytest.raises(RuntimeError, match="entered once"):
        async with handle:
            pass


class Sleepy(AsyncStreamTransformer):
    pass


class Passing(StreamTransformer):
    pass


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"event_buffer": 0}, ValueError, "positive number"),
        ({"cancel_token": object()}, TypeError, "CancelToken"),
        ({"transformers": [Sleepy()]}, TypeError, "synchronous"),
        ({"transformers": 3}, TypeError, "transformers must be"),
    ],
)
async def test_bad_options_are_rejected(kwargs: dict[str, Any], exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        run(noop, INPUT, **kwargs)


async def test_bad_agents_and_inputs_are_rejected() -> None:
    with pytest.raises(TypeError, match="needs an agent"):
        run(42, INPUT)
    with pytest.raises(ValueError, match="threadId and runId"):
        run(noop, {"threadId": "t"})
    with pytest.raises(TypeError, match="RunAgentInput or a mapping"):
        run(noop, "t/r")  # type: ignore[arg-type]


async def test_transformers_as_a_factory_or_a_single_stage() -> None:
    built: list[Passing] = []

    def factory() -> StreamTransformer:
        built.append(Passing())
        return built[-1]

    assert (await collect(noop, INPUT, transformers=factory))[-1].type is EventType.RUN_FINISHED
    assert len(built) == 1
    assert (await collect(noop, INPUT, transformers=Passing()))[-1].type is (EventType.RUN_FINISHED)


async def test_an_outer_cancel_scope_stops_consumer_and_agent() -> None:
    before = task_count()
    agent = Endless()

    received = 0
    with anyio.CancelScope() as outer:
        async with run(agent, INPUT) as events:
            async for _ in events:
                received += 1
                if received == 5:
                    outer.cancel()  # the consumer's next await is cancelled

    assert agent.cleaned_up
    assert agent.said > 0
    assert task_count() == before


async def test_a_completed_run_leaves_no_task_and_keeps_the_token() -> None:
    before = task_count()
    token = CancelToken()
    events = await collect(noop, INPUT, cancel_token=token)
    assert events[-1].type is EventType.RUN_FINISHED
    assert task_count() == before
    assert not token.is_cancelled()


async def test_a_synchronous_agent_is_a_clear_agent_error() -> None:
    def sync_agent(ctx: RunContext[Any]) -> RunOutcome:
        return RunOutcome.success()

    events = await collect(sync_agent, INPUT)
    last = events[-1]
    assert isinstance(last, RunErrorEvent)
    assert last.code == "AGENT_ERROR"
    assert "sync_agent is not async" in last.message
    assert "make it `async def`" in last.message
