"""Compact / compact(): fewer events, the same conversation.

Properties on hypothesis-generated valid streams (agui_pipes.testing.strategies):

* the consumer folds the same messages and state from ``compact(s)`` as from
  ``s`` (chunks included, and from a seeded state the stage cannot know);
* ``compact(s)`` passes the consumer verifier; the stage run live through a
  chain equals ``compact`` of the whole list; ``compact`` is idempotent;
* memory: the stage never holds more items than the stream has open.

Then the facts one by one (what merges, what does not, ag-ui #1720), and the
official TS client's verdict in test_compact_ts.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    MessagesSnapshotEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import Limits, StreamRejected, TransformerChain, fold
from agui_pipes.config import load_chain
from agui_pipes.testing.strategies import expanded_streams, json_patches, json_values, streams
from agui_pipes.transformers import Compact, ExpandChunks, Verify
from agui_pipes.transformers.compact import compact
from tests.transformers._stage_helpers import consumed, through, through_async, wire
from tests.transformers.test_unverified_input import _broken

_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_ALL = {
    "reopen": True,
    "leading_run_error": True,
    "late_run_error": True,
}


def _expanded(events: list[BaseEvent]) -> list[BaseEvent]:
    return through(ExpandChunks(), events)


@st.composite
def state_bursts(draw: st.DrawFn) -> list[BaseEvent]:
    """Runs of bursts of state events (snapshots, deltas, deltas that fail) between messages.

    The general stream strategy rarely puts state events side by side; these
    streams do little else, across several runs, sometimes before any snapshot.
    """
    doc: Any = {}
    events: list[BaseEvent] = []
    for r in range(draw(st.integers(1, 3))):
        events.append(RunStartedEvent(thread_id="t", run_id=f"r{r}"))
        for b in range(draw(st.integers(0, 4))):
            mid = f"m{r}-{b}"
            events.append(TextMessageStartEvent(message_id=mid))
            for _ in range(draw(st.integers(0, 5))):
                choice = draw(st.sampled_from(["delta", "delta", "snapshot", "fail", "text"]))
                if choice == "snapshot":
                    doc = draw(st.dictionaries(st.sampled_from("abc"), json_values(), max_size=3))
                    events.append(StateSnapshotEvent(snapshot=doc))
                elif choice == "delta":
                    patch, doc = draw(json_patches(doc))
                    events.append(StateDeltaEvent(delta=patch))
                elif choice == "fail":
                    events.append(StateDeltaEvent(delta=[{"op": "remove", "path": "/zz/0"}]))
                else:
                    events.append(TextMessageContentEvent(message_id=mid, delta="x"))
            events.append(TextMessageEndEvent(message_id=mid))
        events.append(RunFinishedEvent(thread_id="t", run_id=f"r{r}"))
    return events


# -- properties ------------------------------------------------------------------------


@_SETTINGS
@given(events=state_bursts(), seed=st.sampled_from([{}, {"a": {"b": 1}}, [0]]))
def test_state_bursts_fold_the_same_from_any_seed_state(events: list[BaseEvent], seed: Any) -> None:
    out = compact(events)
    consumed(out)
    assert fold(out, state=seed).state == fold(events, state=seed).state
    assert fold(out).messages == fold(events).messages
    assert wire(compact(out)) == wire(out)


@_SETTINGS
@given(events=streams(**_ALL))
def test_the_consumer_folds_the_same_messages_and_state(events: list[BaseEvent]) -> None:
    ours = consumed(events)
    out = compact(events)
    theirs = consumed(out)  # also: the output passes the consumer verifier
    assert theirs.messages == ours.messages
    assert theirs.state == ours.state
    assert [r.outcome for r in theirs.runs] == [r.outcome for r in ours.runs]
    assert len(out) <= len(_expanded(events))
    assert not any(e.type.value.endswith("_CHUNK") for e in out)


@_SETTINGS
@given(events=expanded_streams(reopen=True), seed=st.sampled_from([[], {"a": [1]}, 7, None]))
def test_fold_of_compact_equals_fold_from_any_seed_state(
    events: list[BaseEvent], seed: Any
) -> None:
    # The stage cannot know the state a client brings, so whatever it is, merging
    # must not change what the deltas do to it.
    assert fold(compact(events)).messages == fold(events).messages
    assert fold(compact(events)).state == fold(events).state
    assert fold(compact(events), state=seed).state == fold(events, state=seed).state


@_SETTINGS
@given(events=expanded_streams(reopen=True), data=st.data())
def test_a_stream_cut_anywhere_folds_the_same(events: list[BaseEvent], data: st.DataObject) -> None:
    # Whatever is open at the cut passes unchanged: nothing lost, nothing invented.
    cut = events[: data.draw(st.integers(0, len(events)))]
    assert fold(compact(cut)).messages == fold(cut).messages
    assert fold(compact(cut)).state == fold(cut).state


@_SETTINGS
@given(events=streams(**_ALL))
def test_compact_is_idempotent(events: list[BaseEvent]) -> None:
    once = compact(events)
    assert wire(compact(once)) == wire(once)


@pytest.mark.anyio
@settings(_SETTINGS, max_examples=40)
@given(events=streams(**_ALL))
async def test_the_stage_in_a_chain_equals_compact_of_the_whole_list(
    events: list[BaseEvent],
) -> None:
    assert wire(await through_async(Compact(), events)) == wire(compact(events))


def _open_in_input(event: BaseEvent, open_now: set[tuple[str, str]]) -> None:
    """An independent count of the items the stream has open after ``event``."""
    kind = event.type.value.split("_")[0]
    if event.type in (EventType.TEXT_MESSAGE_START, EventType.REASONING_MESSAGE_START):
        open_now.add((kind, event.message_id))  # type: ignore[attr-defined]
    elif event.type in (EventType.TEXT_MESSAGE_END, EventType.REASONING_MESSAGE_END):
        open_now.discard((kind, event.message_id))  # type: ignore[attr-defined]
    elif event.type is EventType.TOOL_CALL_START:
        open_now.add((kind, event.tool_call_id))  # type: ignore[attr-defined]
    elif event.type is EventType.TOOL_CALL_END:
        open_now.discard((kind, event.tool_call_id))  # type: ignore[attr-defined]
    elif event.type in (EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR):
        open_now.clear()


@_SETTINGS
@given(events=expanded_streams(**_ALL))
def test_memory_is_bounded_by_the_items_open(events: list[BaseEvent]) -> None:
    stage = Compact()
    open_now: set[tuple[str, str]] = set()
    for event in events:
        stage.transform(event)
        _open_in_input(event, open_now)
        assert stage.open_items <= len(open_now)
    stage.finish()
    assert stage.open_items == 0


def test_a_long_stream_holds_one_item_at_a_time() -> None:
    stage = Compact()
    events: list[BaseEvent] = [RunStartedEvent(thread_id="t", run_id="r")]
    for i in range(2000):
        events += [
            TextMessageStartEvent(message_id=f"m{i}"),
            *(TextMessageContentEvent(message_id=f"m{i}", delta="x") for _ in range(5)),
            TextMessageEndEvent(message_id=f"m{i}"),
            StateDeltaEvent(delta=[{"op": "add", "path": "/n", "value": i}]),
        ]
    events.append(RunFinishedEvent(thread_id="t", run_id="r"))
    most = 0
    out: list[BaseEvent] = []
    for event in events:
        out += stage.transform(event)
        most = max(most, stage.open_items)
    out += stage.finish()
    assert most == 1
    assert len(out) == 2 + 2000 * 4
    assert fold(out).messages == fold(events).messages


@settings(_SETTINGS, max_examples=200)
@given(events=_broken())
def test_broken_input_ends_in_output_or_a_rejection_never_a_crash(
    events: list[BaseEvent],
) -> None:
    # In a gateway the stage sees the upstream as it comes, violations included.
    chain = TransformerChain([Compact(), Verify(profile="consumer", on_violation="raise")])
    try:
        list(chain.apply_sync(events))
    except StreamRejected:
        pass  # a deliberate refusal (a chunk stream no client could assemble, say)


# -- what merges -----------------------------------------------------------------------


def _run(*body: BaseEvent, error: bool = False) -> list[BaseEvent]:
    end: BaseEvent = (
        RunErrorEvent(message="boom") if error else RunFinishedEvent(thread_id="t", run_id="r")
    )
    return [RunStartedEvent(thread_id="t", run_id="r"), *body, end]


def _types(events: list[BaseEvent]) -> list[str]:
    return [e.type.value for e in events]


def _text(mid: str, *deltas: str, **fields: Any) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(message_id=mid),
        *(TextMessageContentEvent(message_id=mid, delta=d, **fields) for d in deltas),
        TextMessageEndEvent(message_id=mid),
    ]


def test_a_closed_message_becomes_start_content_end() -> None:
    events = _run(*_text("m1", "Hel", "lo", " world"))
    out = compact(events)
    assert _types(out) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert out[2].delta == "Hello world"  # type: ignore[attr-defined]


def test_merged_delta_keeps_first_timestamp_and_merges_metadata() -> None:
    events = _run(
        TextMessageStartEvent(message_id="m1"),
        TextMessageContentEvent(message_id="m1", delta="a", timestamp=5, metadata={"k": 1}),
        TextMessageContentEvent(message_id="m1", delta="b", timestamp=6, metadata={"k": 2, "j": 0}),
        TextMessageEndEvent(message_id="m1"),
    )
    merged = compact(events)[2]
    assert merged.timestamp == 5
    assert merged.metadata == {"k": 2, "j": 0}
    assert consumed(compact(events)).messages == consumed(events).messages


def test_parallel_tool_calls_keep_their_order_and_each_merges() -> None:
    events = _run(
        ToolCallStartEvent(tool_call_id="a", tool_call_name="x"),
        ToolCallStartEvent(tool_call_id="b", tool_call_name="y"),
        ToolCallArgsEvent(tool_call_id="a", delta='{"q"'),
        ToolCallArgsEvent(tool_call_id="b", delta='{"r"'),
        ToolCallArgsEvent(tool_call_id="a", delta=": 1}"),
        ToolCallArgsEvent(tool_call_id="b", delta=": 2}"),
        ToolCallEndEvent(tool_call_id="b"),
        ToolCallEndEvent(tool_call_id="a"),
    )
    out = compact(events)
    assert [(e.type.value, getattr(e, "delta", None)) for e in out[1:-1]] == [
        ("TOOL_CALL_START", None),
        ("TOOL_CALL_START", None),
        ("TOOL_CALL_ARGS", '{"r": 2}'),
        ("TOOL_CALL_END", None),
        ("TOOL_CALL_ARGS", '{"q": 1}'),
        ("TOOL_CALL_END", None),
    ]
    assert consumed(out).tool_calls == consumed(events).tool_calls


def test_a_raw_event_is_never_merged_away() -> None:
    events = _run(
        TextMessageStartEvent(message_id="m1"),
        TextMessageContentEvent(message_id="m1", delta="a"),
        TextMessageContentEvent(message_id="m1", delta="b"),
        TextMessageContentEvent(message_id="m1", delta="c", raw_event={"provider": 1}),
        TextMessageContentEvent(message_id="m1", delta="d"),
        TextMessageContentEvent(message_id="m1", delta="e"),
        TextMessageEndEvent(message_id="m1"),
    )
    out = compact(events)
    assert [getattr(e, "delta", None) for e in out[2:5]] == ["ab", "c", "de"]
    assert out[3].raw_event == {"provider": 1}


def test_an_item_open_when_the_run_errors_passes_unchanged() -> None:
    deltas = [TextMessageContentEvent(message_id="m1", delta=d) for d in "abc"]
    events = _run(TextMessageStartEvent(message_id="m1"), *deltas, error=True)
    out = compact(events)
    assert out[2:5] == deltas
    assert consumed(out).messages == consumed(events).messages


def test_an_item_open_when_the_stream_ends_passes_unchanged() -> None:
    deltas = [ToolCallArgsEvent(tool_call_id="c", delta=d) for d in "abc"]
    events = [
        RunStartedEvent(thread_id="t", run_id="r"),
        ToolCallStartEvent(tool_call_id="c", tool_call_name="x"),
        *deltas,
    ]
    assert compact(events)[2:] == deltas


def test_a_messages_snapshot_releases_what_is_held_before_it() -> None:
    events = _run(
        TextMessageStartEvent(message_id="m1"),
        TextMessageContentEvent(message_id="m1", delta="a"),
        TextMessageContentEvent(message_id="m1", delta="b"),
        MessagesSnapshotEvent(messages=[]),
        TextMessageContentEvent(message_id="m1", delta="c"),
        TextMessageEndEvent(message_id="m1"),
    )
    out = compact(events)
    assert _types(out)[1:5] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "MESSAGES_SNAPSHOT",
        "TEXT_MESSAGE_CONTENT",
    ]
    # the snapshot dropped m1, so "c" lands nowhere: the same either way
    assert fold(out).messages == fold(events).messages


def test_text_and_reasoning_sharing_an_id_keep_their_interleaving() -> None:
    events = _run(
        TextMessageStartEvent(message_id="m"),
        ReasoningMessageStartEvent(message_id="m", role="reasoning"),
        TextMessageContentEvent(message_id="m", delta="1"),
        ReasoningMessageContentEvent(message_id="m", delta="2"),
        TextMessageContentEvent(message_id="m", delta="3"),
        ReasoningMessageEndEvent(message_id="m"),
        TextMessageEndEvent(message_id="m"),
    )
    assert fold(compact(events)).messages == fold(events).messages


def test_a_tool_result_naming_an_open_message_releases_it_first() -> None:
    events = _run(
        ToolCallStartEvent(tool_call_id="c", tool_call_name="x", parent_message_id="p"),
        ToolCallEndEvent(tool_call_id="c"),
        TextMessageStartEvent(message_id="m"),
        TextMessageContentEvent(message_id="m", delta="a"),
        ToolCallResultEvent(message_id="m", tool_call_id="c", content="r"),
        TextMessageContentEvent(message_id="m", delta="b"),
        TextMessageEndEvent(message_id="m"),
    )
    assert fold(compact(events)).messages == fold(events).messages


def test_chunks_are_expanded_then_merged() -> None:
    events = _run(
        TextMessageChunkEvent(message_id="m1", delta="a"),
        TextMessageChunkEvent(delta="b"),
        TextMessageChunkEvent(delta="c"),
    )
    out = compact(events)
    assert _types(out)[1:4] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]
    assert consumed(out).messages == consumed(events).messages


# -- state -----------------------------------------------------------------------------


def _add(path: str, value: Any) -> StateDeltaEvent:
    return StateDeltaEvent(delta=[{"op": "add", "path": path, "value": value}])


def test_a_snapshot_and_its_deltas_become_one_snapshot() -> None:
    events = _run(StateSnapshotEvent(snapshot={"a": 1}), _add("/b", 2), _add("/c", 3))
    out = compact(events)
    assert _types(out) == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert out[1].snapshot == {"a": 1, "b": 2, "c": 3}  # type: ignore[attr-defined]


def test_deltas_on_a_known_state_become_one_delta() -> None:
    events = _run(
        StateSnapshotEvent(snapshot={}),
        TextMessageStartEvent(message_id="m"),
        _add("/a", 1),
        TextMessageContentEvent(message_id="m", delta="x"),
        _add("/b", 2),
        TextMessageEndEvent(message_id="m"),
    )
    out = compact(events)
    deltas = [e for e in out if e.type is EventType.STATE_DELTA]
    assert len(deltas) == 1 and [op.path for op in deltas[0].delta] == ["/a", "/b"]  # type: ignore[attr-defined]
    assert fold(out).state == {"a": 1, "b": 2}


def test_state_carries_across_runs_unlike_ag_ui_1720() -> None:
    # Run 1 establishes /log; run 2 appends to it with deltas only. compactEvents
    # restarted run 2 from {}, so its deltas no longer applied.
    first = _run(StateSnapshotEvent(snapshot={"log": []}))
    second = [
        RunStartedEvent(thread_id="t", run_id="r2"),
        StateDeltaEvent(delta=[{"op": "add", "path": "/log/-", "value": "x"}]),
        StateDeltaEvent(delta=[{"op": "add", "path": "/log/-", "value": "y"}]),
        RunFinishedEvent(thread_id="t", run_id="r2"),
    ]
    out = compact(first + second)
    assert fold(out).state == {"log": ["x", "y"]}
    assert _types(out).count("STATE_DELTA") == 1


def test_deltas_against_an_unknown_state_pass_unchanged() -> None:
    # No snapshot yet: the deltas apply to whatever state the client brought, and a
    # failing one is skipped alone there — merging would change that.
    d1 = StateDeltaEvent(delta=[{"op": "remove", "path": "/maybe"}])
    d2 = _add("/b", 2)
    out = compact(_run(d1, d2))
    assert out[1:3] == [d1, d2]
    assert fold(out, state={}).state == {"b": 2}
    assert fold(out, state={"maybe": 0}).state == {"b": 2}


def test_a_delta_replacing_the_whole_document_makes_the_state_known() -> None:
    events = _run(
        StateDeltaEvent(delta=[{"op": "replace", "path": "", "value": {"a": 1}}]),
        _add("/b", 2),
    )
    out = compact(events)
    assert _types(out) == ["RUN_STARTED", "STATE_DELTA", "RUN_FINISHED"]
    assert fold(out, state=[1, 2]).state == {"a": 1, "b": 2}


def test_a_failing_delta_on_a_known_state_is_left_out() -> None:
    events = _run(
        StateSnapshotEvent(snapshot={"a": 1}),
        TextMessageStartEvent(message_id="m"),
        TextMessageEndEvent(message_id="m"),
        _add("/b", 1),
        StateDeltaEvent(delta=[{"op": "remove", "path": "/nope"}]),
        _add("/c", 1),
    )
    out = compact(events)
    deltas = [e for e in out if e.type is EventType.STATE_DELTA]
    assert len(deltas) == 1 and [op.path for op in deltas[0].delta] == ["/b", "/c"]  # type: ignore[attr-defined]
    assert fold(out).state == fold(events).state == {"a": 1, "b": 1, "c": 1}


def test_a_state_past_the_limits_passes_and_the_state_is_unknown_again() -> None:
    limits = Limits(max_nodes=10)
    big = StateSnapshotEvent(snapshot={"xs": list(range(20))})
    d1, d2 = _add("/a", 1), _add("/b", 2)
    out = compact(_run(StateSnapshotEvent(snapshot={}), big, d1, d2), limits=limits)
    assert out[1:5] == [StateSnapshotEvent(snapshot={}), big, d1, d2]


def test_state_events_of_different_owners_or_with_raw_events_stay_apart() -> None:
    events = _run(
        StateSnapshotEvent(snapshot={}),
        StateDeltaEvent(delta=[{"op": "add", "path": "/a", "value": 1}], subagent_run_id="s"),
        _add("/b", 1),
        StateDeltaEvent(delta=[{"op": "add", "path": "/c", "value": 1}], raw_event="r"),
        _add("/d", 1),
    )
    out = compact(events)
    assert _types(out).count("STATE_DELTA") + _types(out).count("STATE_SNAPSHOT") == 5
    assert fold(out).state == fold(events).state


# -- configuration ---------------------------------------------------------------------


def test_the_yaml_name_builds_the_stage() -> None:
    factory = load_chain("transformers:\n  - type: compact\n    limits: {max_nodes: 100}\n")
    chain = factory()
    events = _run(*_text("m1", "a", "b"))
    assert _types(chain.apply_sync(events)) == _types(compact(events))


def test_fresh_gives_an_independent_stage() -> None:
    stage = Compact(limits=Limits(max_nodes=50))
    stage.transform(RunStartedEvent(thread_id="t", run_id="r"))
    stage.transform(TextMessageStartEvent(message_id="m"))
    assert stage.open_items == 1
    again = stage.fresh()
    assert again.open_items == 0 and again.limits == Limits(max_nodes=50)


def test_what_needs_no_merging_comes_out_as_the_same_objects() -> None:
    events = _run(*_text("m1", "only"), StateSnapshotEvent(snapshot={"a": 1}))
    assert all(a is b for a, b in zip(compact(events), events, strict=True))
