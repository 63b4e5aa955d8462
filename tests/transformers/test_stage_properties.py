"""Properties every built-in stage keeps on hypothesis-generated valid streams.

* **Stays valid**: the output is accepted by our consumer pipeline (chunk
  expansion + consumer-profile verifier + fold). The same outputs go through the
  official TS client in test_stage_properties_ts.py.
* **Semantics**: inline folds like attributed, hidden folds to the parent's
  messages with the same state, CoalesceDeltas / StateDiff / StripRawEvents /
  Timestamp / a never-matching Redact fold exactly like their input, a denied
  tool's name never appears, and a stage that removes events folds as if the
  chunks had been expanded before it ran (removing an event never changes
  which message an id-less chunk continues).
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import BaseEvent, EventType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import Stage
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import (
    CoalesceDeltas,
    Compact,
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    KeepEvents,
    Redact,
    StateDiff,
    StateFilter,
    StripRawEvents,
    SubagentVisibility,
    Timestamp,
    ToolResultToState,
)
from tests.transformers._stage_helpers import consumed, through, wire

_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

STAGES: dict[str, Stage] = {
    "filter-deny": FilterToolCalls.deny(["internal_*"]),
    "filter-allow": FilterToolCalls.allow(["search", "get_*"]),
    "result-snapshot": ToolResultToState.snapshot("search"),
    "result-delta-replacing": ToolResultToState.delta("get_weather").replacing(),
    "result-at": ToolResultToState.at("write_file", "/files/last"),
    "visibility-attributed": SubagentVisibility.attributed(),
    "visibility-inline": SubagentVisibility.inline(),
    "visibility-hidden": SubagentVisibility.hidden(),
    "drop-reasoning-raw": DropEvents(["reasoning", "raw", "custom"]),
    "drop-tool-calls": DropEvents(["tool_call"]),
    "drop-subagent-steps": DropEvents(["subagent", "step", "activity"]),
    "keep-text-state": KeepEvents(["text", "state"]),
    "drop-text-snapshots": DropEvents(["text", "messages_snapshot"]),
    "keep-tool-calls": KeepEvents(["tool_call"]),
    "strip-raw": StripRawEvents(),
    "coalesce": CoalesceDeltas(),
    "coalesce-bounded": CoalesceDeltas(max_chars=3),
    "compact": Compact(),
    "redact": Redact([r"[aeiou]{2}", r"\d+"], replacement="#"),
    "redact-errors-custom": Redact([r"[aeiou]{2}"], replacement="#", errors=True, custom=True),
    "state-diff": StateDiff(),
    "state-filter-deny": StateFilter(deny=["/items", "/a/*/b", "/x/0"], activities=True),
    "state-filter-allow": StateFilter(allow=["/a", "/items/*/name", "/b/0"], deny=["/a/x"]),
    "timestamp": Timestamp(clock=lambda: 1_700_000_000_000),
}


@pytest.mark.parametrize("name", sorted(STAGES))
@_SETTINGS
@given(events=streams())
def test_output_stays_valid(name: str, events: list[BaseEvent]) -> None:
    out = through(STAGES[name], events)
    consumed(out)


def _untagged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "subagentRunId"} for m in messages]


@_SETTINGS
@given(events=streams())
def test_inline_folds_like_attributed_without_any_subagent_trace(events: list[BaseEvent]) -> None:
    out = through(SubagentVisibility.inline(), events)
    assert '"subagentRunId"' not in wire(out) and "SUBAGENT_" not in wire(out)
    attributed, inline = consumed(events), consumed(out)
    assert inline.messages == _untagged(attributed.messages)
    assert inline.state == attributed.state


@pytest.mark.parametrize("snapshots", [False, True])
@_SETTINGS
@given(data=st.data())
def test_hidden_folds_to_the_parents_messages_with_the_same_state(
    snapshots: bool, data: st.DataObject
) -> None:
    events = data.draw(streams(messages_snapshots=snapshots))
    out = through(SubagentVisibility.hidden(), events)
    assert '"subagentRunId"' not in wire(out) and "SUBAGENT_" not in wire(out)
    attributed, hidden = consumed(events), consumed(out)
    assert hidden.state == attributed.state
    # the parent's own messages, plus the results the consumer is owed: a tool message
    # is kept iff the consumer saw its call, whoever executed it
    parents = [m for m in attributed.messages if "subagentRunId" not in m and m["role"] != "tool"]
    visible_calls = {c["id"] for m in parents for c in m.get("toolCalls") or ()}
    visible_calls |= {
        e.tool_call_id  # type: ignore[attr-defined]
        for e in out
        if e.type in (EventType.TOOL_CALL_START, EventType.TOOL_CALL_CHUNK)
    }
    expected = [
        m
        for m in attributed.messages
        if (m["toolCallId"] in visible_calls if m["role"] == "tool" else m in parents)
    ]
    got = hidden.messages
    # An activity written by the parent first and updated by a subagent later is the
    # parent's (first writer wins) and shown as the parent wrote it, while the attributed
    # client tags it with the later writer: leave such shared activities out.
    writers: dict[str, set[str | None]] = {}
    for e in events:
        if e.type in (EventType.ACTIVITY_SNAPSHOT, EventType.ACTIVITY_DELTA):
            writers.setdefault(e.message_id, set()).add(e.subagent_run_id)  # type: ignore[attr-defined]
    shared = {i for i, w in writers.items() if len(w) > 1}
    got = [m for m in got if m["id"] not in shared]
    expected = [m for m in expected if m["id"] not in shared]
    if snapshots:
        # Known limit (docs): a snapshot carrying only a subagent's reasoning/activity
        # messages is, filtered, no longer authoritative for that role, so the parent's
        # client-side reasoning/activity messages survive where the attributed client
        # drops them. Compare the conversation roles only.
        got = [m for m in got if m["role"] not in ("reasoning", "activity")]
        expected = [m for m in expected if m["role"] not in ("reasoning", "activity")]
    assert got == _untagged(expected)


@pytest.mark.parametrize(
    "stage",
    [
        CoalesceDeltas(),
        CoalesceDeltas(max_chars=2),
        StateDiff(),
        StripRawEvents(),
        Timestamp(),
        Redact(["\x00never\x00"]),
        SubagentVisibility.attributed(),
    ],
    ids=repr,
)
@_SETTINGS
@given(events=streams())
def test_stage_folds_exactly_like_its_input(stage: Stage, events: list[BaseEvent]) -> None:
    out = through(stage, events)
    before, after = consumed(events), consumed(out)
    assert after.messages == before.messages
    assert after.state == before.state
    if isinstance(stage, CoalesceDeltas):
        assert len(out) <= len(events)


@_SETTINGS
@given(events=streams(tool_names=["search", "internal_debug"]))
def test_denied_tool_leaves_no_trace(events: list[BaseEvent]) -> None:
    out = through(FilterToolCalls.deny(["internal_debug"]), events)
    assert "internal_debug" not in wire(out)
    result = consumed(out)
    assert all(c["name"] == "search" for c in result.tool_calls)


@_SETTINGS
@given(events=streams())
def test_drop_events_removes_exactly_the_family(events: list[BaseEvent]) -> None:
    out = through(DropEvents(["reasoning"]), events)
    assert not any(e.type.value.startswith("REASONING_") for e in out)
    kept = [e for e in events if not e.type.value.startswith("REASONING_")]
    assert [e.type for e in out] == [e.type for e in kept]
    assert all(m["role"] != "reasoning" for m in consumed(out).messages)
    assert EventType.RUN_STARTED in {e.type for e in out}


_REMOVERS = sorted(
    name for name in STAGES if name.startswith(("drop-", "keep-", "filter-", "visibility-"))
)


@pytest.mark.parametrize("name", _REMOVERS)
@_SETTINGS
@given(events=streams())
def test_removing_stage_folds_like_it_does_on_expanded_chunks(
    name: str, events: list[BaseEvent]
) -> None:
    stage = STAGES[name]
    meant = consumed(through(ExpandChunks() | stage, events))
    got = consumed(through(stage, events))
    assert got.messages == meant.messages
    assert got.state == meant.state
