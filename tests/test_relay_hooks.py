"""Relay's hooks: what ``on_input`` and ``on_event`` see, against the decoder and the chain."""

from __future__ import annotations

import json

from ag_ui.core import BaseEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes import TransformerChain
from agui_pipes.decode import decode
from agui_pipes.relay import Relay
from agui_pipes.testing import event_lines
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import ExpandChunks, FilterToolCalls


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
