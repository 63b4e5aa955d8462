"""Per-class routing never changes what a chain does.

A fused chain calls each stage through the function its ``route`` handed
over for the event's class (or skips it), re-planning when a stage's
``route_key`` changes. The reference here pushes every event through every
stage's ``transform`` — no routing at all — and the two must agree exactly: same
events out, or the same error, on valid streams and on mutated ones (wrong
owners, dropped/duplicated/swapped events, conflicting chunks, truncation),
where the slow paths and violation policies run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest
from ag_ui.core import BaseEvent
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes import StreamTransformer, TransformerChain, decode
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import (
    CoalesceDeltas,
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    KeepEvents,
    StripRawEvents,
    SubagentVisibility,
    Verify,
)
from tests._differential import assert_routing_agrees, differential_settings, gateway_stages
from tests._wire_streams import mutate, valid_stream

_SETTINGS = differential_settings(80)


@pytest.fixture
def route_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chains built in the test take the stages' ``route`` handlers.

    They do unless the fast path is switched off (``AGUI_PIPES_FAST_PATH=0``:
    then ``transform`` only); the tests that watch which events a ``route``
    handler is given need them whatever the environment says.
    """
    import agui_pipes._foundation.switch as switch

    monkeypatch.setattr(switch, "ENABLED", True)


CHAINS: dict[str, Callable[[], list[StreamTransformer]]] = {
    "gateway": gateway_stages,
    "verify-warn": lambda: [ExpandChunks(), Verify(profile="consumer", on_violation="warn")],
    "verify-run-error": lambda: [
        ExpandChunks(),
        Verify(profile="consumer", on_violation="run_error"),
    ],
    "unexpanded": lambda: [
        FilterToolCalls.allow(["get_*"]),
        SubagentVisibility.hidden(),
        DropEvents(["reasoning"]),
        ExpandChunks(),
        Verify(profile="producer", on_violation="run_error"),
    ],
    "mixed": lambda: [
        SubagentVisibility.attributed(),
        KeepEvents(["text", "tool_call", "state"]),
        StripRawEvents(),
        CoalesceDeltas(max_chars=4),
        ExpandChunks(),
    ],
}


def _compare(name: str, events: list[BaseEvent]) -> None:
    assert_routing_agrees(CHAINS[name], events)


@pytest.mark.parametrize("name", sorted(CHAINS))
@_SETTINGS
@given(events=streams(max_runs=2, tool_names=["search", "internal_debug", "update_items"]))
def test_routing_matches_calling_every_stage_on_valid_streams(
    name: str, events: list[BaseEvent]
) -> None:
    _compare(name, events)


@pytest.mark.parametrize("name", sorted(CHAINS))
@_SETTINGS
@given(rng=st.randoms(use_true_random=False))
def test_routing_matches_calling_every_stage_on_mutated_streams(
    name: str, rng: random.Random
) -> None:
    wire, _ = mutate(rng, valid_stream(rng))
    events: list[BaseEvent] = []
    for item in wire:
        try:
            event = decode(item).event
        except Exception:  # malformed on purpose: decoding is not under test here
            continue
        if event is not None:
            events.append(event)
    _compare(name, events)


class _Opens(StreamTransformer):
    """Ignores everything until a TEXT_MESSAGE_START, then sees every event."""

    route_key = False

    def __init__(self) -> None:
        self.seen: list[str] = []

    def route(
        self, event_class: type[BaseEvent]
    ) -> Callable[[BaseEvent], Sequence[BaseEvent]] | None:
        from ag_ui.core import TextMessageStartEvent

        if self.route_key or event_class is TextMessageStartEvent:
            return self.transform
        return None

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self.seen.append(event.type.value)
        if not self.route_key:
            self.route_key = True
            self.reroute()
        return (event,)


@pytest.mark.usefixtures("route_hooks")
def test_reroute_switches_the_plan_mid_stream() -> None:
    from agui_pipes.testing import run_events, text

    stage = _Opens()
    events = run_events(text("m1", "a", "b"))
    assert TransformerChain([stage]).apply_sync(events) == events
    # Nothing before the start; everything after it, the run's end included.
    assert stage.seen == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]


class _Overrides(ExpandChunks):
    """A subclass replacing transform must see every event, whatever the parent routes."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self.count += 1
        return super().transform(event)


def test_a_subclass_overriding_transform_is_not_bypassed() -> None:
    from agui_pipes.testing import run_events, text

    stage = _Overrides()
    events = run_events(text("m1", "a", "b"))
    TransformerChain([stage]).apply_sync(events)
    assert stage.count == len(events)


class _Counts(StreamTransformer):
    """A routed stage whose attributes are only what its own constructor set."""

    event_types = ("TEXT_MESSAGE_CONTENT",)

    def __init__(self) -> None:
        self.count = [0]

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self.count[0] += 1
        return (event,)


def test_running_a_stage_writes_nothing_into_it() -> None:
    """Regression: the chain used to store its reroute listeners in each stage's ``__dict__``."""
    from agui_pipes.codecs import encode_ndjson
    from agui_pipes.relay import Relay
    from agui_pipes.testing import run_events, text

    events = run_events(text("m1", "a", "b"))
    counts, opens, expand = _Counts(), _Opens(), ExpandChunks()
    before = [dict(vars(s)) for s in (counts, opens, expand)]
    TransformerChain([counts, opens, expand]).apply_sync(events)
    relay = Relay(TransformerChain([counts, opens, expand]))
    relay.feed(encode_ndjson(e).strip() for e in events)
    relay.finish()
    assert vars(counts) == before[0]
    assert counts.count == [4]
    # _Opens and ExpandChunks write ``route_key`` themselves (and _Opens its log);
    # nothing else appears.
    assert set(vars(opens)) == set(before[1]) | {"route_key"}
    assert set(vars(expand)) <= set(before[2]) | {"route_key"}


class _Unhashable(_Opens):
    """A stage that compares by value (so it has no hash) still reroutes its chains."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unhashable) and other.seen == self.seen


@pytest.mark.usefixtures("route_hooks")
def test_an_unhashable_stage_reroutes() -> None:
    from agui_pipes.testing import run_events, text

    stage = _Unhashable()
    events = run_events(text("m1", "a"))
    assert TransformerChain([stage]).apply_sync(events) == events
    assert stage.seen == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]


def test_a_finished_chain_does_not_keep_its_stages_alive() -> None:
    import gc
    import weakref

    from agui_pipes.testing import run_events, text

    stage = _Opens()
    chain = TransformerChain([stage, ExpandChunks()])
    chain.apply_sync(run_events(text("m1", "a")))
    gone = weakref.ref(stage)
    del stage, chain
    gc.collect()
    assert gone() is None


@pytest.mark.usefixtures("route_hooks")
def test_a_stage_in_a_second_chain_reroutes_that_chain() -> None:
    from agui_pipes.testing import run_events, text

    stage = _Opens()
    first = TransformerChain([stage])
    second = first.fresh()  # a new _Opens: the first one's listeners stay with it
    events = run_events(text("m1", "a"))
    assert second.apply_sync(events) == events
    assert stage.seen == []
    assert first.apply_sync(events) == events
    assert stage.seen[0] == "TEXT_MESSAGE_START"


@pytest.mark.usefixtures("route_hooks")
def test_a_stage_shared_by_many_chains_prunes_gone_ones_and_reroutes_the_live() -> None:
    """The listeners of chains that are gone are pruned only once the list doubled
    (every new chain over a shared stage used to walk all of them, O(chains running)
    per chain); meanwhile the live chains' listeners all stay, and still reroute."""
    import gc

    from agui_pipes._pipeline.transformer import route_watchers
    from agui_pipes.testing import run_events, text

    stage = _Opens()
    live = [TransformerChain([stage]) for _ in range(10)]
    gc.collect()
    listeners = route_watchers._by_stage[id(stage)]
    alive = sum(ref() is not None for ref in listeners)
    for _ in range(2000):
        TransformerChain([stage])  # built and dropped at once, as a finished run's
    gc.collect()
    assert sum(ref() is not None for ref in listeners) == alive
    # the gone ones do not pile up (a dropped chain waits for a collection to go, so
    # a pruning can count some as live: the bound is loose)
    assert len(listeners) < 200
    events = run_events(text("m1", "a"))
    assert live[-1].apply_sync(events) == events
    assert stage.seen[0] == "TEXT_MESSAGE_START"  # the reroute reached the chain
    assert stage.seen[-1] == "RUN_FINISHED"
