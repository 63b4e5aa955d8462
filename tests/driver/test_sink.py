"""``Run(..., sink=)``: every event handed over in the agent's task, the agent paced by the sink."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from ag_ui.core import BaseEvent, EventType

from agui_pipes.driver import Run, RunContext, RunOutcome
from agui_pipes.testing import collect

pytestmark = pytest.mark.anyio

INPUT = {"threadId": "t", "runId": "r", "messages": []}


class _Sink:
    """Records events; ``behind`` while more than ``limit`` are unread."""

    def __init__(self, limit: int = 1_000_000) -> None:
        self.events: list[BaseEvent] = []
        self.limit = limit
        self.read = 0
        self.room: anyio.Event | None = None
        self.broken = False

    def deliver(self, event: BaseEvent) -> None:
        if self.broken:
            raise anyio.BrokenResourceError
        self.events.append(event)

    def behind(self) -> bool:
        return len(self.events) - self.read >= self.limit

    async def wait_for_room(self) -> None:
        while self.behind():
            self.room = anyio.Event()
            await self.room.wait()

    def read_all(self) -> None:
        self.read = len(self.events)
        if self.room is not None:
            self.room.set()


async def tokens(ctx: RunContext[Any]) -> RunOutcome:
    with ctx.assistant_message() as message:
        for index in range(50):
            message.delta(f"t{index}")
            await anyio.lowlevel.checkpoint()
    return RunOutcome.success()


async def test_the_sink_gets_the_whole_run_and_the_stream_only_ends() -> None:
    sink = _Sink()
    async with Run(tokens, INPUT, sink=sink) as events:
        assert [event async for event in events] == []
    expected = await collect(tokens, INPUT)
    assert [e.model_dump() for e in sink.events] == [e.model_dump() for e in expected]


async def test_a_sink_that_is_behind_holds_the_agent_at_its_await() -> None:
    sink = _Sink(limit=5)
    async with Run(tokens, INPUT, sink=sink) as events, anyio.create_task_group() as tg:

        async def drain() -> None:
            async for _ in events:
                pass

        tg.start_soon(drain)
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        held_at = len(sink.events)
        assert held_at <= 5 + 1  # RUN_STARTED..., then one token past the bound at most
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        assert len(sink.events) == held_at
        while sink.events[-1].type is not EventType.RUN_FINISHED:
            sink.read_all()
            await anyio.lowlevel.checkpoint()
    assert len(sink.events) == 50 + 4


async def test_a_broken_sink_fails_the_run_as_disconnected() -> None:
    sink = _Sink()
    ended: list[str] = []

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        try:
            with ctx.assistant_message() as message:
                for index in range(50):
                    if index == 3:
                        sink.broken = True
                    message.delta(f"t{index}")
                    await anyio.lowlevel.checkpoint()
        except BaseException as exc:
            ended.append(getattr(exc, "code", type(exc).__name__))
            raise
        return RunOutcome.success()  # pragma: no cover

    async with Run(agent, INPUT, sink=sink) as events:
        assert [event async for event in events] == []
    assert ended == ["DISCONNECTED"]
    assert [e.type for e in sink.events][-1] is EventType.TEXT_MESSAGE_CONTENT
