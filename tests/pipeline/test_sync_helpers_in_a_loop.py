"""``apply_sync`` and ``run_transformer`` with async stages, called inside a running loop.

They start an event loop of their own, which cannot happen inside a running
one; the error says so and names the async form to use — on asyncio and on
trio — instead of anyio's "Already running asyncio in this thread".
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import anyio
import anyio.to_thread
import pytest
from ag_ui.core import BaseEvent, TextMessageContentEvent

from agui_pipes import AsyncStreamTransformer, StreamTransformer, TransformerChain
from agui_pipes.testing import run_events, run_transformer, text

pytestmark = pytest.mark.anyio


class AsyncUpper(AsyncStreamTransformer):
    async def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        await anyio.lowlevel.checkpoint()
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta.upper()}),)
        return (event,)


class Keep(StreamTransformer):
    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        return (event,)


def events() -> list[BaseEvent]:
    return run_events(text("m1", "hi"))


def deltas(out: Iterable[BaseEvent]) -> list[str]:
    return [e.delta for e in out if isinstance(e, TextMessageContentEvent)]


async def test_apply_sync_with_an_async_stage_names_the_async_form(anyio_backend_name: str) -> None:
    chain = TransformerChain([Keep(), AsyncUpper()])
    with pytest.raises(RuntimeError) as raised:
        chain.apply_sync(events())
    message = str(raised.value)
    assert message.startswith(
        f"apply_sync() cannot run this chain inside a running {anyio_backend_name} event loop"
    )
    assert "async with chain.apply(source) as out" in message
    assert "Already running" not in message

    # Refused before anything ran: the chain is still unused, and the fix works.
    async def source() -> AsyncIterator[BaseEvent]:
        for event in events():
            yield event

    async with chain.apply(source()) as out:
        assert deltas([event async for event in out]) == ["HI"]


async def test_apply_sync_in_a_worker_thread_as_the_error_suggests() -> None:
    chain = TransformerChain([AsyncUpper()])
    out = await anyio.to_thread.run_sync(chain.apply_sync, events())
    assert deltas(out) == ["HI"]


async def test_apply_sync_of_a_sync_chain_still_works_inside_a_loop() -> None:
    assert deltas(TransformerChain([Keep()]).apply_sync(events())) == ["hi"]


async def test_run_transformer_with_an_async_stage_says_to_use_a_plain_test(
    anyio_backend_name: str,
) -> None:
    with pytest.raises(RuntimeError) as raised:
        run_transformer(AsyncUpper(), events())
    message = str(raised.value)
    assert message.startswith(
        f"run_transformer() cannot run AsyncUpper inside a running {anyio_backend_name} event loop"
    )
    assert "plain `def test_...`" in message
    assert "TransformerChain([stage]).apply(source)" in message
    assert "Already running" not in message


async def test_run_transformer_of_a_sync_stage_still_works_inside_a_loop() -> None:
    assert deltas(run_transformer(Keep(), events())) == ["hi"]


def test_outside_a_loop_both_run_async_stages() -> None:
    assert deltas(run_transformer(AsyncUpper(), events())) == ["HI"]
    assert deltas(TransformerChain([Keep(), AsyncUpper()]).apply_sync(events())) == ["HI"]
