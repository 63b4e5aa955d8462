"""Every built-in stage's optimisation hooks agree with its plain ``transform``.

``route`` (the handler the chain calls for a class, or None to skip it) and
``passes`` (the promise that lets a relay forward an event's bytes without
calling any stage) are optional; a stage that defines them must mean exactly
what ``transform`` means. This one property holds every entry of the list of
built-ins to that — built from its registry spec with the options its docs show —
so a new built-in is checked without anyone writing a test for it:

* ``route``: the fused, routed chain gives the same events (or the same error) as
  calling ``transform`` on every event (``_differential.assert_routing_agrees``,
  what tests/pipeline/test_routing.py checks for whole chains);
* ``passes``: a relay with its bypass gives the same bytes (or error) as the relay
  without it and on the reference path (``_differential.assert_bypass_agrees``,
  what tests/relay/test_relay_bypass.py checks for whole chains).

The last tests show the check catching a stage whose hook disagrees with it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from unittest import mock

import pytest
from ag_ui.core import BaseEvent, TextMessageContentEvent
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes import Condition, StreamTransformer, decode
from agui_pipes._stagekit.builtins import BUILTINS, Builtin
from agui_pipes.codecs import encode_json
from agui_pipes.config import Registry
from agui_pipes.testing import run_events, text
from agui_pipes.testing.strategies import streams
from tests._differential import assert_bypass_agrees, assert_routing_agrees, differential_settings
from tests._wire_streams import mutate, valid_stream

_SETTINGS = differential_settings(12)
_TOOLS = ["search", "internal_debug", "debug_dump", "update_items"]


def _factory(builtin: Builtin) -> Callable[[], list[StreamTransformer]]:
    """Fresh one-stage chains of the built-in, configured as its documentation shows."""
    spec = Registry(plugins=False).get(builtin.name)
    assert spec is not None
    extra = spec.options.model_config.get("json_schema_extra")
    examples = extra.get("examples", [{}]) if isinstance(extra, dict) else [{}]
    options = spec.validate(examples[0])

    def stages() -> list[StreamTransformer]:
        stage = spec.build(options)
        assert isinstance(stage, StreamTransformer)
        return [stage]

    return stages


def assert_hooks_agree(
    factory: Callable[[], list[StreamTransformer]], events: Sequence[BaseEvent], batch: int
) -> None:
    """``route`` and ``passes`` of the chain's stages mean what ``transform`` means.

    Under one frozen clock: a stage that reads it (``timestamp``) must give the same
    output on every path.
    """
    with mock.patch("time.time_ns", return_value=1_700_000_000_000_000_000):
        assert_routing_agrees(factory, list(events))
        assert_bypass_agrees(factory, [encode_json(event) for event in events], batch)


def _decoded(items: list[object]) -> list[BaseEvent]:
    events: list[BaseEvent] = []
    for item in items:
        try:
            event = decode(item).event  # type: ignore[arg-type]
        except Exception:  # malformed on purpose: decoding is not under test here
            continue
        if event is not None:
            events.append(event)
    return events


@pytest.mark.parametrize("builtin", BUILTINS, ids=lambda b: b.name)
@_SETTINGS
@given(events=streams(max_runs=2, tool_names=_TOOLS), batch=st.integers(1, 9))
def test_hooks_agree_with_transform_on_valid_streams(
    builtin: Builtin, events: list[BaseEvent], batch: int
) -> None:
    assert_hooks_agree(_factory(builtin), events, batch)


@pytest.mark.parametrize("builtin", BUILTINS, ids=lambda b: b.name)
@_SETTINGS
@given(rng=st.randoms(use_true_random=False), batch=st.integers(1, 9))
def test_hooks_agree_with_transform_on_mutated_streams(
    builtin: Builtin, rng: random.Random, batch: int
) -> None:
    wire, _ = mutate(rng, valid_stream(rng))
    assert_hooks_agree(_factory(builtin), _decoded(list(wire)), batch)


# -- the check catches a hook that disagrees ------------------------------------------


class _RouteDropsDeltas(StreamTransformer):
    """Wrong on purpose: ``transform`` passes every event, the routed handler drops deltas."""

    def route(self, event_class: type[BaseEvent]) -> Callable[[BaseEvent], Sequence[BaseEvent]]:
        if event_class is TextMessageContentEvent:
            return lambda event: ()
        return self.transform


class _PromisesWhatItRewrites(StreamTransformer):
    """Wrong on purpose: upper-cases deltas, yet promises they pass unchanged."""

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta.upper()}),)
        return (event,)

    def passes(
        self, event_class: type[BaseEvent], fields: frozenset[str]
    ) -> tuple[Condition, ...] | None:
        return () if event_class is TextMessageContentEvent else None


_STREAM = run_events(text("m1", "hello", " world"))


def test_a_route_that_disagrees_with_transform_is_caught() -> None:
    with pytest.raises(AssertionError):
        assert_hooks_agree(lambda: [_RouteDropsDeltas()], _STREAM, batch=4)
    with pytest.raises(AssertionError):
        assert_routing_agrees(lambda: [_RouteDropsDeltas()], _STREAM)


def test_a_promise_that_disagrees_with_transform_is_caught() -> None:
    with pytest.raises(AssertionError):
        assert_hooks_agree(lambda: [_PromisesWhatItRewrites()], _STREAM, batch=4)
    # It is the promise that is caught: routing alone agrees (the default route).
    assert_routing_agrees(lambda: [_PromisesWhatItRewrites()], _STREAM)


def test_the_same_stages_without_their_hooks_pass_the_check() -> None:
    # What makes them fail is the hook, not the stream or the check.
    class Plain(_PromisesWhatItRewrites):
        def passes(
            self, event_class: type[BaseEvent], fields: frozenset[str]
        ) -> tuple[Condition, ...] | None:
            return None

    assert_hooks_agree(lambda: [StreamTransformer()], _STREAM, batch=4)
    assert_hooks_agree(lambda: [Plain()], _STREAM, batch=4)
