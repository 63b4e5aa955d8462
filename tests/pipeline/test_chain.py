"""TransformerChain: composition, fused execution, finish order, closing, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import anyio
import anyio.lowlevel
import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    TextMessageContentEvent,
)

from agui_pipes import (
    AsyncStreamTransformer,
    FunctionTransformer,
    StageError,
    StreamOperator,
    StreamRejected,
    StreamTransformer,
    TransformerChain,
)
from agui_pipes.testing import run_events, text

pytestmark = pytest.mark.anyio


class Upper(StreamTransformer):
    """Rewrites text deltas to upper case."""

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta.upper()}),)
        return (event,)


class DropContent(StreamTransformer):
    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        return () if event.type is EventType.TEXT_MESSAGE_CONTENT else (event,)


class Splice(StreamTransformer):
    """Emits a CUSTOM marker before every text delta."""

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if event.type is EventType.TEXT_MESSAGE_CONTENT:
            return [CustomEvent(name="before", value=None), event]
        return (event,)


class Marker(StreamTransformer):
    """Counts what it sees; on finish emits CUSTOM(name, count)."""

    def __init__(self, name: str) -> None:
        self.label = name
        self.seen = 0

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        self.seen += 1
        return (event,)

    def finish(self) -> Iterable[BaseEvent]:
        return [CustomEvent(name=self.label, value=self.seen)]


class Boom(StreamTransformer):
    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if event.type is EventType.TEXT_MESSAGE_END:
            raise ValueError("kaboom")
        return (event,)


class Refuse(StreamTransformer):
    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if event.type is EventType.TEXT_MESSAGE_CONTENT:
            raise StreamRejected("no text allowed")
        return (event,)


class AsyncUpper(AsyncStreamTransformer):
    async def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        await anyio.lowlevel.checkpoint()
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta.upper()}),)
        return (event,)

    async def finish(self) -> Iterable[BaseEvent]:
        await anyio.lowlevel.checkpoint()
        return [CustomEvent(name="async-finish", value=None)]


def types(events: Iterable[BaseEvent]) -> list[str]:
    return [e.type.value for e in events]


def deltas(events: Iterable[BaseEvent]) -> list[str]:
    return [e.delta for e in events if isinstance(e, TextMessageContentEvent)]


class Source:
    """An async source that records whether it was closed and how far it got."""

    def __init__(self, events: list[BaseEvent]) -> None:
        self.events = events
        self.closed = False
        self.yielded = 0

    async def gen(self) -> AsyncIterator[BaseEvent]:
        try:
            for event in self.events:
                self.yielded += 1
                yield event
                await anyio.lowlevel.checkpoint()
        finally:
            self.closed = True


STREAM = run_events(text("m1", "a", "b"))


# -- composition ---------------------------------------------------------------


def test_pipe_operator_builds_flat_chain() -> None:
    a, b, c = Upper(), DropContent(), Splice()
    chain = a | b | c
    assert isinstance(chain, TransformerChain)
    assert chain.stages == (a, b, c)
    nested = TransformerChain([TransformerChain([a, b]), TransformerChain([c])])
    assert nested.stages == (a, b, c)
    assert repr(chain) == "Upper() | DropContent() | Splice()"
    assert len(chain) == 3


def test_chain_rejects_non_stages() -> None:
    with pytest.raises(TypeError, match="chain stages must be"):
        TransformerChain([Upper(), lambda e: e])  # type: ignore[list-item]


def test_drop_rewrite_splice() -> None:
    assert deltas((Upper() | Marker("x")).apply_sync(STREAM)) == ["A", "B"]
    assert deltas(DropContent().fresh().__or__(Marker("x")).apply_sync(STREAM)) == []
    out = TransformerChain([Splice()]).apply_sync(STREAM)
    assert types(out).count("CUSTOM") == 2
    assert types(out)[2:4] == ["CUSTOM", "TEXT_MESSAGE_CONTENT"]


def test_splice_feeds_every_output_to_the_next_stage() -> None:
    seen = Marker("count")
    out = (Splice() | seen).apply_sync(STREAM)
    # 6 source events + 2 spliced markers reach the counter
    assert seen.seen == 8
    assert out[-1] == CustomEvent(name="count", value=8)


def test_chain_of_chains_behaves_like_the_flat_chain() -> None:
    flat = TransformerChain([Upper(), Splice(), Marker("m")]).apply_sync(STREAM)
    nested = TransformerChain([Upper() | Splice(), TransformerChain([Marker("m")])]).apply_sync(
        STREAM
    )
    assert flat == nested


def test_finish_order_flows_downstream() -> None:
    # first's finish output passes through second's transform before second finishes
    first, second = Marker("first"), Marker("second")
    out = (first | second).apply_sync(STREAM)
    assert [e.name for e in out if isinstance(e, CustomEvent)] == ["first", "second"]
    assert second.seen == len(STREAM) + 1
    assert out[-1] == CustomEvent(name="second", value=len(STREAM) + 1)


def test_chain_is_itself_a_sync_transformer() -> None:
    chain = Upper() | DropContent()
    assert chain.is_sync
    assert list(chain.transform(STREAM[2])) == []
    outer = TransformerChain([Marker("outer")])
    assert list(outer.finish()) == [CustomEvent(name="outer", value=0)]


def test_function_transformer() -> None:
    def only_text(event: BaseEvent) -> BaseEvent | None:
        return event if event.type.value.startswith("TEXT") else None

    out = TransformerChain([FunctionTransformer(only_text)]).apply_sync(STREAM)
    assert all(t.startswith("TEXT") for t in types(out))
    assert repr(FunctionTransformer(only_text)) == "FunctionTransformer(only_text)"


def test_fresh_rebuilds_initial_state_and_copies_options() -> None:
    marker = Marker("m")
    (TransformerChain([marker])).apply_sync(STREAM)
    assert marker.seen == len(STREAM)
    again = marker.fresh()
    assert again is not marker and again.seen == 0 and again.label == "m"


def test_a_chain_processes_one_stream_only() -> None:
    chain = Upper() | Marker("m")
    chain.apply_sync(STREAM)
    with pytest.raises(RuntimeError, match="already processed a stream"):
        chain.apply_sync(STREAM)
    fresh = chain.fresh()
    assert fresh.stages[1] is not chain.stages[1]
    assert fresh.apply_sync(STREAM)[-1] == CustomEvent(name="m", value=len(STREAM))


def test_stage_error_names_stage_and_event() -> None:
    with pytest.raises(StageError) as info:
        (Upper() | Boom()).apply_sync(STREAM)
    err = info.value
    assert err.stage == "Boom"
    assert err.index == 4
    assert err.event is not None and err.event.type is EventType.TEXT_MESSAGE_END
    assert isinstance(err.__cause__, ValueError)
    assert "stage Boom" in str(err) and "#4 (TEXT_MESSAGE_END)" in str(err)
    assert "kaboom" in str(err)


def test_rejection_passes_through_as_itself_annotated() -> None:
    with pytest.raises(StreamRejected) as info:
        (Upper() | Refuse()).apply_sync(STREAM)
    assert type(info.value) is StreamRejected
    assert info.value.stage == "Refuse"
    assert info.value.index == 2
    assert "no text allowed" in str(info.value)


def test_bad_source_item_is_a_type_error_naming_its_index() -> None:
    bad: list[object] = [*STREAM[:2], {"type": "TEXT_MESSAGE_CONTENT"}]
    with pytest.raises(TypeError, match=r"source item #2 is a dict"):
        TransformerChain([Upper()]).apply_sync(bad)  # type: ignore[arg-type]


# -- async application -------------------------------------------------------------


async def test_apply_over_async_source() -> None:
    source = Source(STREAM)
    chain = Upper() | Marker("end")
    out = [e async for e in chain.apply(source.gen())]
    assert deltas(out) == ["A", "B"]
    assert out[-1] == CustomEvent(name="end", value=len(STREAM))
    assert source.closed


async def test_empty_chain_passes_everything() -> None:
    source = Source(STREAM)
    out = [e async for e in TransformerChain().apply(source.gen())]
    assert out == STREAM


async def test_async_stage_between_sync_stages() -> None:
    chain = TransformerChain([Splice(), AsyncUpper(), Marker("m")])
    out = [e async for e in chain.apply(Source(STREAM).gen())]
    assert deltas(out) == ["A", "B"]
    names = [e.name for e in out if isinstance(e, CustomEvent)]
    assert names == ["before", "before", "async-finish", "m"]


async def test_early_close_closes_source_and_skips_finish() -> None:
    source = Source(STREAM)
    marker = Marker("m")
    stream = TransformerChain([marker]).apply(source.gen())
    first = await stream.__anext__()
    assert first.type is EventType.RUN_STARTED
    await stream.aclose()
    assert source.closed
    assert source.yielded == 1
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_async_with_exit_closes_source() -> None:
    source = Source(STREAM)
    got = []
    async with TransformerChain([Upper(), AsyncUpper()]).apply(source.gen()) as events:
        async for event in events:
            got.append(event)
            break
    assert source.closed
    assert len(got) == 1


async def test_finish_not_called_when_upstream_fails() -> None:
    finished: list[str] = []

    class Tracker(StreamTransformer):
        def finish(self) -> Iterable[BaseEvent]:
            finished.append("yes")
            return ()

    async def failing() -> AsyncIterator[BaseEvent]:
        yield STREAM[0]
        raise OSError("upstream dropped")

    with pytest.raises(OSError, match="upstream dropped"):
        async for _ in TransformerChain([Tracker()]).apply(failing()):
            pass
    assert finished == []


async def test_cancellation_propagates_and_closes_source() -> None:
    started = anyio.Event()
    closed = anyio.Event()

    async def endless() -> AsyncIterator[BaseEvent]:
        try:
            yield STREAM[0]
            started.set()
            await anyio.sleep_forever()
            yield STREAM[1]  # pragma: no cover - never reached
        finally:
            closed.set()

    finished: list[bool] = []

    class Tracker(StreamTransformer):
        def finish(self) -> Iterable[BaseEvent]:
            finished.append(True)
            return ()

    async def consume() -> None:
        async with TransformerChain([Tracker()]).apply(endless()) as events:
            async for _ in events:
                pass

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await started.wait()
            tg.cancel_scope.cancel()
        await closed.wait()
    assert finished == []


async def test_stage_error_in_async_pipeline() -> None:
    with pytest.raises(StageError) as info:
        async for _ in (AsyncUpper() | Boom()).apply(Source(STREAM).gen()):
            pass
    assert info.value.stage == "Boom"


async def test_bad_item_from_async_source_names_index() -> None:
    async def source() -> AsyncIterator[object]:
        yield STREAM[0]
        yield "not an event"

    with pytest.raises(TypeError, match=r"source item #1 is a str"):
        async for _ in TransformerChain([AsyncUpper()]).apply(source()):  # type: ignore[arg-type]
            pass


# -- operators -------------------------------------------------------------------


class Heartbeat(StreamOperator):
    """Emits CUSTOM heartbeat events while the source is idle (a time-based stage)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    async def run(self, source, emit):  # type: ignore[no-untyped-def]
        send, receive = anyio.create_memory_object_stream[BaseEvent | None](0)

        async def pump() -> None:
            async with send:
                async for event in source:
                    await send.send(event)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            async with receive:
                while True:
                    with anyio.move_on_after(self.interval):
                        try:
                            event = await receive.receive()
                        except anyio.EndOfStream:
                            return
                        await emit(event)
                        continue
                    await emit(CustomEvent(name="heartbeat", value=None))


async def test_operator_emits_on_its_own_schedule() -> None:
    async def slow() -> AsyncIterator[BaseEvent]:
        yield STREAM[0]
        await anyio.sleep(0.35)
        yield STREAM[-1]

    async with (Upper() | Heartbeat(0.1) | Marker("m")).apply(slow()) as events:
        out = [e async for e in events]
    names = [e.name for e in out if isinstance(e, CustomEvent)]
    assert names.count("heartbeat") >= 2
    assert names[-1] == "m"
    assert out[0].type is EventType.RUN_STARTED
    assert out[-2].type is EventType.RUN_FINISHED


async def test_operator_chain_requires_async_with() -> None:
    stream = TransformerChain([Heartbeat(1.0)]).apply(Source(STREAM).gen())
    with pytest.raises(RuntimeError, match="async with"):
        await stream.__anext__()
    await stream.aclose()


async def test_operator_early_exit_leaves_nothing_running() -> None:
    source = Source(STREAM * 3)
    with anyio.fail_after(5):
        async with TransformerChain([Heartbeat(10.0)]).apply(source.gen()) as events:
            async for _ in events:
                break
    assert source.closed


async def test_operator_failure_surfaces_named() -> None:
    class Broken(StreamOperator):
        async def run(self, source, emit):  # type: ignore[no-untyped-def]
            async for event in source:
                await emit(event)
                raise LookupError("operator bug")

    with pytest.raises(StageError) as info:
        async with TransformerChain([Broken()]).apply(Source(STREAM).gen()) as events:
            async for _ in events:
                pass
    assert info.value.stage == "Broken"
    assert isinstance(info.value.__cause__, LookupError)


def test_apply_sync_runs_async_stages_on_a_private_loop() -> None:
    out = TransformerChain([AsyncUpper(), Marker("m")]).apply_sync(STREAM)
    assert deltas(out) == ["A", "B"]
    assert out[-1] == CustomEvent(name="m", value=len(STREAM) + 1)


def test_same_instance_twice_in_a_chain() -> None:
    splice = Splice()
    out = TransformerChain([splice, DropContent(), splice]).apply_sync(STREAM)
    # second pass of Splice sees no content events (dropped), so only the first
    # pass's markers survive
    assert types(out).count("CUSTOM") == 2
    with pytest.raises(StageError) as info:
        TransformerChain([Upper(), Boom(), Upper()]).apply_sync(STREAM)
    assert info.value.stage == "Boom"


class CountText(StreamTransformer):
    """Declares it only touches text deltas; the chain must not call it for others."""

    event_types = frozenset({EventType.TEXT_MESSAGE_CONTENT})

    def __init__(self) -> None:
        self.calls: list[str] = []

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        self.calls.append(event.type.value)
        return (event,)


def test_declared_event_types_skip_other_events() -> None:
    counter = CountText()
    out = (Upper() | counter | Marker("m")).apply_sync(STREAM)
    assert counter.calls == ["TEXT_MESSAGE_CONTENT"] * 2
    assert deltas(out) == ["A", "B"]


def test_declared_event_types_respected_after_a_splice() -> None:
    counter = CountText()
    out = (Splice() | counter).apply_sync(STREAM)
    assert counter.calls == ["TEXT_MESSAGE_CONTENT"] * 2
    assert types(out).count("CUSTOM") == 2


def test_instance_level_event_types() -> None:
    counter = CountText()
    counter.event_types = frozenset({"TEXT_MESSAGE_END"})
    TransformerChain([counter]).apply_sync(STREAM)
    assert counter.calls == ["TEXT_MESSAGE_END"]
