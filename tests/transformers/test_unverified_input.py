"""The built-in stages take unverified input without breaking (the gateway verifies last).

The gateway runs ``ExpandChunks | <your chain> | Verify`` so that it verifies what
the client receives. Your stages therefore see the upstream's events as they
come, violations included. This property holds every built-in stage to that:
on a valid stream broken by a drop, a duplicate, a swap or a move, the chain
either produces a stream the final Verify accepts or stops with a deliberate
``StreamRejected`` (a protocol violation) — never a ``StageError`` (a crash).
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import StreamRejected, TransformerChain
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import (
    CoalesceDeltas,
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    Redact,
    StateDiff,
    StripRawEvents,
    SubagentVisibility,
    ToolResultToState,
    Verify,
)


def _chains() -> list[list[Any]]:
    return [
        [
            StripRawEvents(),
            FilterToolCalls.deny(["internal_*"], state_messages=["/messages"]),
            Redact([r"[0-9]{3,}"], replacement="#"),
            CoalesceDeltas(max_chars=12),
            SubagentVisibility.inline(),
            ToolResultToState.delta("update_items"),
            DropEvents(["reasoning"]),
            StateDiff(),
        ],
        [FilterToolCalls.allow(["search"]), SubagentVisibility.hidden()],
        [SubagentVisibility.attributed(), ToolResultToState.at("search", "/found")],
    ]


@st.composite
def _broken(draw: st.DrawFn) -> list[BaseEvent]:
    events = list(
        draw(streams(max_runs=2, tool_names=["search", "internal_lookup", "update_items"]))
    )
    for _ in range(draw(st.integers(1, 3))):
        if len(events) < 2:
            break
        i = draw(st.integers(0, len(events) - 1))
        j = draw(st.integers(0, len(events) - 1))
        kind = draw(st.sampled_from(["drop", "duplicate", "swap", "move"]))
        if kind == "drop":
            del events[i]
        elif kind == "duplicate":
            events.insert(j, events[i])
        elif kind == "swap":
            events[i], events[j] = events[j], events[i]
        else:
            events.insert(j, events.pop(i))
    return events


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_broken(), which=st.integers(0, 2))
def test_stages_on_broken_streams_end_in_output_or_a_rejection(
    events: list[BaseEvent], which: int
) -> None:
    chain = TransformerChain(
        [ExpandChunks(), *_chains()[which], Verify(profile="consumer", on_violation="raise")]
    )
    try:
        list(chain.apply_sync(events))
    except StreamRejected:
        pass  # a deliberate refusal, what the gateway turns into RUN_ERROR
