"""The optional aiostream adapter (asyncio only: aiostream does not support trio)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from ag_ui.core import BaseEvent, CustomEvent, EventType, TextMessageContentEvent

from agui_pipes import StreamTransformer, TransformerChain
from agui_pipes.testing import run_events, text

aiostream = pytest.importorskip("aiostream")
from aiostream import pipe, stream  # noqa: E402

from agui_pipes.aiostream import transform  # noqa: E402


class Upper(StreamTransformer):
    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta.upper()}),)
        return (event,)


class Count(StreamTransformer):
    def __init__(self) -> None:
        self.n = 0

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        self.n += 1
        return (event,)

    def finish(self) -> Iterable[BaseEvent]:
        return [CustomEvent(name="count", value=self.n)]


EVENTS = run_events(text("m", "a", "b"))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_chain_as_pipe_operator(anyio_backend: str) -> None:
    xs = stream.iterate(EVENTS) | transform.pipe(Upper() | Count())
    out = await (xs | pipe.list())
    deltas = [e.delta for e in out if isinstance(e, TextMessageContentEvent)]
    assert deltas == ["A", "B"]
    assert out[-1] == CustomEvent(name="count", value=len(EVENTS))
    # iterating the same pipeline again gets fresh stages: same result
    assert await (xs | pipe.list()) == out


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_early_stop_skips_finish(anyio_backend: str) -> None:
    xs = stream.iterate(EVENTS) | transform.pipe(TransformerChain([Count()])) | pipe.take(2)
    out = await (xs | pipe.list())
    assert [e.type for e in out] == [EventType.RUN_STARTED, EventType.TEXT_MESSAGE_START]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_factory_and_single_stage(anyio_backend: str) -> None:
    out = await (stream.iterate(EVENTS) | transform.pipe(lambda: Upper() | Count()) | pipe.list())
    assert out[-1].type is EventType.CUSTOM
    single = await (stream.iterate(EVENTS) | transform.pipe(Upper()) | pipe.list())
    assert len(single) == len(EVENTS)
