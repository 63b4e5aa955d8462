"""Relay's hooks: what ``on_input`` and ``on_event`` see, against the decoder and the chain."""

from __future__ import annotations

import json

import pytest
from ag_ui.core import BaseEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes import TransformerChain
from agui_pipes.codecs import decode
from agui_pipes.relay import Relay
from agui_pipes.testing import event_lines
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import ExpandChunks, FilterToolCalls

# Every test here runs on the fast path and on the reference path (tests/conftest.py).
# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = [pytest.mark.usefixtures("wire_path"), pytest.mark.wire]


def chain() -> TransformerChain:
    return TransformerChain([ExpandChunks(), FilterToolCalls.deny(["internal_*"])])


@settings(max_examples=100, deadline=None)
@given(streams(max_runs=2, tool_names=["search", "internal_debug"]), st.integers(1, 5))
def test_on_input_sees_the_decoded_events_and_on_event_the_output(
    events: list[BaseEvent], batch: int
) -> None:
    lines = [line.encode() for line in event_lines(events)]
    # An unknown event type in the middle: decoded (and counted) but dropped, so not input.
    lines.insert(len(lines) // 2, json.dumps({"type": "THINKING_START"}).encode())
    inputs: list[BaseEvent] = []
    outputs: list[BaseEvent] = []
    relay = Relay(chain(), on_input=inputs.append, on_event=outputs.append)
    for i in range(0, len(lines), batch):
        relay.feed(lines[i : i + batch])
    relay.finish()
    decoded = [d.event for d in (decode(line) for line in lines) if d.event is not None]
    assert inputs == decoded
    assert outputs == chain().apply_sync(decoded)
    assert relay.events_in == len(lines)


@settings(max_examples=60, deadline=None)
@given(streams(max_runs=2, tool_names=["search", "internal_debug"]), st.integers(1, 5))
def test_hooks_limited_to_classes_see_exactly_those_and_keep_the_bypass(
    events: list[BaseEvent], batch: int
) -> None:
    from ag_ui.core import RunErrorEvent, RunFinishedEvent, RunStartedEvent

    from agui_pipes.codecs import encode_sse
    from agui_pipes.transformers import Verify

    watched = {RunStartedEvent, RunFinishedEvent, RunErrorEvent}
    lines = [encode_sse(e)[6:-2] for e in events]
    lines.insert(len(lines) // 2, json.dumps({"type": "THINKING_START"}).encode())
    inputs: list[BaseEvent] = []
    outputs: list[BaseEvent] = []

    def stages() -> TransformerChain:
        return TransformerChain([*chain().stages, Verify()])

    relay = Relay(
        stages(),
        on_input=inputs.append,
        input_types=watched,
        on_event=outputs.append,
        output_types=watched,
    )
    out = b"".join(relay.feed(lines[i : i + batch]) for i in range(0, len(lines), batch))
    out += relay.finish()
    decoded = [d.event for d in (decode(line) for line in lines) if d.event is not None]
    expected = stages().apply_sync(decoded)
    assert out == b"".join(encode_sse(e) for e in expected)
    assert inputs == [e for e in decoded if type(e) in watched]
    assert outputs == [e for e in expected if type(e) in watched]
    assert (relay.events_in, relay.events_unknown) == (len(lines), 1)
    assert relay.events_out == len(expected)


def test_limited_hooks_keep_the_bypass_and_an_unlimited_one_turns_it_off() -> None:
    from ag_ui.core import RunFinishedEvent, RunStartedEvent

    from agui_pipes.codecs import encode_sse
    from agui_pipes.testing import run_events, text
    from agui_pipes.transformers import Verify

    lines = [encode_sse(e)[6:-2] for e in run_events(text("m1", "a", "b", "c"))]
    seen: list[BaseEvent] = []
    limited = Relay(
        TransformerChain([Verify()]),
        on_input=seen.append,
        input_types={RunStartedEvent},
        on_event=seen.append,
        output_types={RunFinishedEvent},
        fast_path=True,
    )
    limited.feed(lines)
    assert (limited.events_forwarded, [type(e) for e in seen]) == (
        3,
        [RunStartedEvent, RunFinishedEvent],
    )
    unlimited = Relay(TransformerChain([Verify()]), on_event=seen.append, fast_path=True)
    unlimited.feed(lines)
    assert unlimited.events_forwarded == 0


def test_take_unsent_returns_the_frames_before_a_failing_event() -> None:
    from agui_pipes.codecs import encode_sse
    from agui_pipes.testing import run_events, text
    from agui_pipes.transformers import Verify

    events = run_events(text("m1", "a", "b"))
    lines = [encode_sse(e)[6:-2] for e in events]
    bad = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m9","delta":"x"}'
    relay = Relay(TransformerChain([Verify()]))
    with pytest.raises(Exception, match="m9"):
        relay.feed([*lines[:4], bad, lines[4]])
    assert relay.take_unsent() == b"".join(encode_sse(e) for e in events[:4])
    assert relay.take_unsent() == b""
    assert relay.events_out == 4
