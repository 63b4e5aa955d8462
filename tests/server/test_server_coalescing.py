"""The endpoint writes what is ready together, and never holds an event back for a later one.

The ASGI app is called directly (no server) with a recording ``send``, so the
tests see each ASGI message the endpoint makes: events emitted without an
await between them leave in one body, an agent that awaits once per token
shares writes between tokens, and an event emitted before the agent blocks
is written while it is blocked — with no later event to push it out.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from ag_ui.core import BaseEvent

from agui_pipes import StreamTransformer
from agui_pipes.codecs import encode_sse
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint
from agui_pipes.testing import collect

pytestmark = pytest.mark.anyio

_INPUT = {"threadId": "t", "runId": "r", "messages": []}


class _Client:
    """An ASGI client: posts ``_INPUT``, records every body ``send`` gets, can leave."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.left = anyio.Event()
        self._requested = False

    async def receive(self) -> dict[str, Any]:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": json.dumps(_INPUT).encode(), "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            self.bodies.append(message["body"])

    async def call(self, app: AgentEndpoint) -> bytes:
        await app({"type": "http", "method": "POST", "headers": []}, self.receive, self.send)
        return b"".join(self.bodies)

    def frames(self) -> int:
        return sum(body.count(b"data: ") for body in self.bodies)


async def _expected(agent: Any) -> bytes:
    return b"".join(encode_sse(event) for event in await collect(agent, _INPUT))


async def burst(ctx: RunContext[Any]) -> RunOutcome:
    """300 events without an await between them."""
    with ctx.assistant_message() as message:
        for index in range(298):
            message.delta(f"w{index} ")
    return RunOutcome.success()


async def test_events_emitted_without_an_await_leave_in_few_writes_byte_for_byte() -> None:
    client = _Client()
    got = await client.call(AgentEndpoint(burst, keepalive=None))
    assert got == await _expected(burst)
    assert client.frames() == 302
    # All of it was queued before the writer ran: one body (each at most the
    # writer's 64 KiB batch; the whole run is far smaller).
    assert len(client.bodies) == 1


async def tokens(ctx: RunContext[Any]) -> RunOutcome:
    """One await per token, as a model stream does."""
    with ctx.assistant_message() as message:
        for index in range(400):
            message.delta(f"t{index} ")
            await anyio.lowlevel.checkpoint()
    return RunOutcome.success()


async def test_an_agent_awaiting_once_per_token_shares_writes_between_tokens() -> None:
    client = _Client()
    got = await client.call(AgentEndpoint(tokens, keepalive=None))
    assert got == await _expected(tokens)
    # The writer lets the agent take its turns before writing (while each one
    # queues more), so a write carries several tokens beyond the one that woke it.
    assert len(client.bodies) < client.frames() // 3


class _Blocked:
    """Emits one message, then blocks until the test saw it written."""

    def __init__(self) -> None:
        self.release = anyio.Event()

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        ctx.say("before the wait")
        await self.release.wait()
        ctx.say("after the wait")
        return RunOutcome.success()


async def test_an_event_is_written_while_the_agent_waits_with_nothing_after_it() -> None:
    agent = _Blocked()
    client = _Client()

    async def released_once_written() -> None:
        while b"before the wait" not in b"".join(client.bodies):
            await anyio.lowlevel.checkpoint()
        agent.release.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(released_once_written)
            got = await client.call(AgentEndpoint(agent, keepalive=None))
    assert b"after the wait" in got
    assert got.count(b"data: ") == 1 + 3 + 3 + 1


class _Hanging:
    def __init__(self) -> None:
        self.ended_by: str | None = None

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        try:
            ctx.say("first")
            await anyio.sleep_forever()
        except BaseException as exc:
            self.ended_by = type(exc).__name__
            raise
        return RunOutcome.success()  # pragma: no cover


async def test_a_client_that_leaves_cancels_the_agent_at_its_await() -> None:
    agent = _Hanging()
    client = _Client()

    async def leave_once_written() -> None:
        while b"first" not in b"".join(client.bodies):
            await anyio.lowlevel.checkpoint()
        client.left.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(leave_once_written)
            await client.call(AgentEndpoint(agent, keepalive=None))
    assert agent.ended_by in ("CancelledError", "Cancelled")


class _Upper(StreamTransformer):
    """A sync stage: it runs inside the driver, ahead of the endpoint's frames."""

    def transform(self, event: BaseEvent) -> tuple[BaseEvent, ...]:
        delta = getattr(event, "delta", None)
        if isinstance(delta, str):
            return (event.model_copy(update={"delta": delta.upper()}),)
        return (event,)


async def test_a_sync_chain_still_runs_inside_the_driver() -> None:
    client = _Client()
    got = await client.call(AgentEndpoint(tokens, chain=lambda: _Upper(), keepalive=None))
    assert got == b"".join(
        encode_sse(event) for event in await collect(tokens, _INPUT, transformers=[_Upper()])
    )
    assert b'"delta":"T0 "' in got
