"""Backpressure: a consumer that stops reading holds the agent at its next await."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from ag_ui.core import EventType, RunErrorEvent, TextMessageContentEvent

from agui_pipes.driver import DEFAULT_BACKPRESSURE, RunContext, RunOutcome, run

pytestmark = pytest.mark.anyio

INPUT = {"threadId": "t", "runId": "r"}


class Flood:
    """Streams ``n`` deltas, awaiting between bursts of ``burst``; records how it ended."""

    def __init__(self, n: int, burst: int = 1) -> None:
        self.n = n
        self.burst = burst
        self.emitted = 0
        self.ended_by: str | None = None
        self.ended = anyio.Event()

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        try:
            with ctx.assistant_message() as message:
                for index in range(self.n):
                    message.delta("x" * 100)
                    self.emitted += 1
                    if index % self.burst == self.burst - 1:
                        await anyio.lowlevel.checkpoint()
        except BaseException as exc:
            self.ended_by = type(exc).__name__
            self.ended.set()
            raise
        self.ended_by = "return"
        self.ended.set()
        return RunOutcome.success()


async def _stall() -> None:
    """Read nothing until every other task waits: the agent is held, or it has ended."""
    await anyio.wait_all_tasks_blocked()


@pytest.mark.parametrize("burst", [1, 10])
async def test_a_consumer_that_stops_reading_holds_the_agent(burst: int) -> None:
    agent = Flood(20_000, burst=burst)
    async with run(agent, INPUT, backpressure=50) as events:
        first = await events.__anext__()
        assert first.type is EventType.RUN_STARTED
        await _stall()
        # RUN_STARTED, TEXT_MESSAGE_START, then deltas: held once 50 wait,
        # plus what one burst emits before its await.
        held_at = agent.emitted
        assert not agent.ended.is_set()
        assert 0 < held_at <= 50 + burst
        await _stall()
        assert agent.emitted == held_at
        received = 1
        async for _ in events:
            received += 1
    assert agent.ended_by == "return"
    assert received == 20_000 + 4


async def test_the_default_bound_holds_too() -> None:
    agent = Flood(10_000)
    async with run(agent, INPUT) as events:
        await events.__anext__()
        await _stall()
        assert not agent.ended.is_set()
        assert 0 < agent.emitted <= DEFAULT_BACKPRESSURE
        await events.aclose()
    assert agent.ended_by in ("RunError", "Cancelled", "CancelledError")


async def test_backpressure_none_never_holds() -> None:
    agent = Flood(2_000)
    async with run(agent, INPUT, backpressure=None) as events:
        await events.__anext__()
        # No reads from here: an agent that is never held finishes on its own
        # (held, it would wait for a read forever; the bound is only a safety
        # net, never a timing the test depends on).
        with anyio.fail_after(60):
            await agent.ended.wait()
        assert agent.emitted == 2_000
        assert len([event async for event in events]) == 2_000 + 3


async def test_leaving_cancels_a_held_agent_at_its_await(anyio_backend: str) -> None:
    agent = Flood(20_000)
    async with run(agent, INPUT, backpressure=20) as events:
        await events.__anext__()
        await _stall()
        assert not agent.ended.is_set()
        assert 0 < agent.emitted <= 21
    # The consumer left: the held agent saw cancellation, not an error.
    assert agent.ended_by == ("Cancelled" if anyio_backend == "trio" else "CancelledError")


async def test_aclose_releases_a_held_agent() -> None:
    agent = Flood(20_000)
    async with run(agent, INPUT, backpressure=20) as events:
        await events.__anext__()
        await _stall()
        assert not agent.ended.is_set()
        await events.aclose()
        with anyio.fail_after(5):
            await agent.ended.wait()
    assert agent.ended_by == "RunError"  # its next emit failed with DISCONNECTED


async def test_a_held_agent_gets_the_values_of_its_awaits() -> None:
    """What the agent awaited while held is delivered to it unchanged (trio traps too)."""
    send, receive = anyio.create_memory_object_stream[int](100)
    got: list[int] = []

    async def relay(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.assistant_message() as message:
            async with receive:
                async for value in receive:
                    got.append(value)
                    message.delta(str(value))
        return RunOutcome.success()

    async with run(relay, INPUT, backpressure=4) as events:
        await events.__anext__()
        async with send:
            for value in range(100):
                await send.send(value)
        await _stall()
        deltas = [
            event.delta async for event in events if isinstance(event, TextMessageContentEvent)
        ]
    assert got == list(range(100))
    assert deltas == [str(value) for value in range(100)]


async def test_an_agent_failing_while_paced_is_a_run_error() -> None:
    async def failing(ctx: RunContext[Any]) -> RunOutcome:
        for _ in range(50):
            ctx.say("x")
            await anyio.lowlevel.checkpoint()
        raise ValueError("boom")

    async with run(failing, INPUT, backpressure=2) as events:
        last = [event async for event in events][-1]
    assert isinstance(last, RunErrorEvent)
    assert "boom" in last.message


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_backpressure_must_be_a_positive_count(bad: Any) -> None:
    async def agent(ctx: RunContext[Any]) -> None:
        return None

    with pytest.raises(ValueError, match="backpressure must be a positive number of events"):
        run(agent, INPUT, backpressure=bad)
