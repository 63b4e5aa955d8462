"""Stages that remove (or hold back) events keep what id-less chunks mean (regression tests).

A removed event may have closed a chunk lane (TOOL_CALL_START, STATE_SNAPSHOT,
SUBAGENT_FINISHED, ...) or replaced its item (a removed chunk of another kind).
Downstream, that lane then still holds its old item, and a later id-less chunk
used to resolve differently there: ambiguous (the client rejects the stream —
found by the hypothesis property ``test_output_stays_valid[keep-text-state]``)
or, silently, to another message. The stages now give such a chunk the ids of
the item it belongs to. Every case is judged against the input with its chunks
expanded *before* the removal (what the input meant), and by the TS client.

Redact does not remove closing events but *delays* explicit CONTENT / ARGS
(hold-back buffer); released late, they close on the client a chunk lane the
input had reopened meanwhile (found by ``test_output_stays_valid[redact]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    RunFinishedSuccessOutcome,
    StateSnapshotEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from agui_pipes import Stage
from agui_pipes.testing import (
    reasoning,
    run_events,
    step,
    text,
    text_chunks,
    tool_call,
    tool_call_chunks,
)
from agui_pipes.transformers import (
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    KeepEvents,
    Redact,
    SubagentVisibility,
)
from tests.transformers._stage_helpers import consumed, through

Oracle = Callable[..., list[dict[str, Any]]]

_CLOSERS: dict[str, list[BaseEvent]] = {
    "tool_call": tool_call("c1", "internal_lookup", "{}", result="ok", subagent="sub-1"),
    "reasoning": reasoning("r1", "hmm", subagent="sub-1"),
    "state": [StateSnapshotEvent(snapshot={"k": 1}, subagent_run_id="sub-1")],
    "step": step("look", subagent="sub-1"),
    "custom": [CustomEvent(name="note", value=1, subagent_run_id="sub-1")],
    "subagent": [SubagentFinishedEvent(subagent_run_id="sub-1")],
    "messages_snapshot": [
        MessagesSnapshotEvent(
            messages=[AssistantMessage(id="m1", content="hi there", subagent_run_id="sub-1")]
        )
    ],
}
"""Per family, events of it that close subagent sub-1's chunk lane."""


def _closed_then_idless(family: str) -> list[BaseEvent]:
    """sub-1 streams m1 as chunks; ``family`` closes its lane; sub-2 streams m2 as chunks;
    an untagged id-less chunk follows — on the client it can only continue m2."""
    ends = [SubagentFinishedEvent(subagent_run_id="sub-2")]
    if family != "subagent":
        ends.append(SubagentFinishedEvent(subagent_run_id="sub-1"))
    return run_events(
        [
            SubagentStartedEvent(subagent_run_id="sub-1", name="researcher"),
            SubagentStartedEvent(subagent_run_id="sub-2", name="writer"),
        ]
        + text_chunks("m1", "hi", " there", subagent="sub-1")
        + _CLOSERS[family]
        + text_chunks("m2", "x", subagent="sub-2")
        + [TextMessageChunkEvent(delta='"quoted"')]
        + ends
    )


def _replaced_then_idless() -> list[BaseEvent]:
    """The parent's text chunk m1 is replaced by a tool chunk in the same lane; sub-1
    streams m2; an untagged id-less text chunk can then only continue m2 (the parent's
    lane holds a tool call) — with the tool chunk removed it would silently join m1."""
    return run_events(
        text_chunks("m1", "a")
        + tool_call_chunks("c1", "internal_lookup", "{}")
        + text_chunks("m2", "b", subagent="sub-1")
        + [TextMessageChunkEvent(delta="c")]
    )


def _held_content_then_chunks() -> list[BaseEvent]:
    """sub-1's held CONTENT of m4 is followed by sub-1's chunk message m5 and tool call
    chunks; untagged m4 / m6 events (parent lane) keep sub-1's lane open in the input."""
    s = "sub-1"
    return run_events(
        [
            SubagentStartedEvent(subagent_run_id=s, name="writer"),
            TextMessageStartEvent(message_id="m4", subagent_run_id=s),
            TextMessageContentEvent(message_id="m4", delta="Hello", subagent_run_id=s),
            TextMessageChunkEvent(message_id="m5", delta="answer", subagent_run_id=s),
            TextMessageContentEvent(message_id="m4", delta=" there"),
            TextMessageChunkEvent(delta=" more", subagent_run_id=s),
            TextMessageEndEvent(message_id="m4"),
            TextMessageChunkEvent(delta="", subagent_run_id=s),
            TextMessageStartEvent(message_id="m6", subagent_run_id=s),
            ToolCallChunkEvent(
                tool_call_id="c2", tool_call_name="search", delta='{"b":', subagent_run_id=s
            ),
            TextMessageContentEvent(message_id="m6", delta="x"),
            ToolCallChunkEvent(delta="1}", subagent_run_id=s),
            TextMessageEndEvent(message_id="m6"),
            ToolCallChunkEvent(tool_call_id="c2", delta="", subagent_run_id=s),
            SubagentFinishedEvent(subagent_run_id=s),
        ]
    )


def _held_args_then_untagged_chunk() -> list[BaseEvent]:
    """sub-3's held ARGS of c1, then sub-3's chunk call c2; untagged END / RESULT of c1
    leave sub-3's lane open, so an untagged id-less chunk continues c2 (the only open
    tool chunk) — after the late ARGS, downstream it must reopen c2 in sub-3's lane."""
    s = "sub-3"
    return run_events(
        [
            SubagentStartedEvent(subagent_run_id=s, name="coder"),
            ToolCallStartEvent(tool_call_id="c1", tool_call_name="search", subagent_run_id=s),
            ToolCallArgsEvent(tool_call_id="c1", delta='{"a":1}', subagent_run_id=s),
            ToolCallChunkEvent(
                tool_call_id="c2", tool_call_name="search", delta='{"ite', subagent_run_id=s
            ),
            ToolCallEndEvent(tool_call_id="c1"),
            ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="{}"),
            ToolCallChunkEvent(delta='ms"'),
            ToolCallChunkEvent(delta=": [1]}", subagent_run_id=s),
            SubagentFinishedEvent(subagent_run_id=s),
        ]
    )


_CASES: list[tuple[str, Stage, list[BaseEvent]]] = [
    *((f"drop-{f}", DropEvents([f]), _closed_then_idless(f)) for f in sorted(_CLOSERS)),
    *((f"keep-text-{f}", KeepEvents(["text", "state"]), _closed_then_idless(f)) for f in _CLOSERS),
    *(
        (f"filter-{f}", FilterToolCalls.deny(["internal_*"]), _closed_then_idless(f))
        for f in ("tool_call",)
    ),
    ("drop-replacing-chunk", DropEvents(["tool_call"]), _replaced_then_idless()),
    ("keep-replacing-chunk", KeepEvents(["text"]), _replaced_then_idless()),
    ("filter-replacing-chunk", FilterToolCalls.deny(["internal_*"]), _replaced_then_idless()),
    ("hidden-replacing-chunk", SubagentVisibility.hidden(), _replaced_then_idless()),
    ("redact-held-content", Redact(["zzz"]), _held_content_then_chunks()),
    ("redact-held-content-hb0", Redact(["zzz"], hold_back=0), _held_content_then_chunks()),
    ("redact-matching", Redact(["er"], replacement="#"), _held_content_then_chunks()),
    ("redact-reopens-in-lane", Redact(["zzz"], hold_back=3), _held_args_then_untagged_chunk()),
]


def _meant(stage: Stage, events: list[BaseEvent]) -> list[dict[str, Any]]:
    """The messages of the input, chunks resolved on the whole input, then ``stage``."""
    return consumed(through(ExpandChunks() | stage, events)).messages


@pytest.mark.parametrize(("stage", "events"), [c[1:] for c in _CASES], ids=[c[0] for c in _CASES])
def test_idless_chunk_keeps_its_message(stage: Stage, events: list[BaseEvent]) -> None:
    out = through(stage, events)
    messages = consumed(out).messages  # raised chunk-ambiguous before the fix
    assert messages == _meant(stage, events)
    # the chain routes per class (deltas skip DropEvents while no chunk is open);
    # calling ``transform`` on every event must give the very same stream
    direct = stage.fresh()
    assert out == [e for event in events for e in direct.transform(event)] + list(direct.finish())


def test_the_reported_stream_assembles_each_subagents_message() -> None:
    out = through(KeepEvents(["text", "state"]), _closed_then_idless("tool_call"))
    contents = {m["id"]: (m["content"], m["subagentRunId"]) for m in consumed(out).messages}
    assert contents == {"m1": ("hi there", "sub-1"), "m2": ('x"quoted"', "sub-2")}
    # the id-less chunk got its message's id; nothing else was rewritten
    filled = [e for e in out if e.type == "TEXT_MESSAGE_CHUNK" and e.delta == '"quoted"']  # type: ignore[attr-defined]
    assert [e.message_id for e in filled] == ["m2"]  # type: ignore[attr-defined]


def test_replacing_chunk_removed_does_not_join_the_wrong_message() -> None:
    out = through(DropEvents(["tool_call"]), _replaced_then_idless())
    contents = {m["id"]: m["content"] for m in consumed(out).messages}
    assert contents == {"m1": "a", "m2": "bc"}


def test_chunks_that_resolve_alike_are_left_untouched() -> None:
    # The dropped reasoning closes m1's lane, but m2 opens with its id and its
    # id-less continuations resolve to m2 either way: every event is passed as is.
    events = run_events(
        text_chunks("m1", "a", "b")
        + reasoning("r1", "hmm")
        + text_chunks("m2", "c", "d")
        + tool_call_chunks("c1", "search", '{"q"', ":1}")
        + reasoning("r2", "again")
        + text_chunks("m3", "e", "f")
    )
    for stage in (DropEvents(["reasoning"]), KeepEvents(["text", "tool_call"])):
        out = through(stage, events)
        kept = [e for e in events if not e.type.startswith("REASONING")]
        assert len(out) == len(kept)
        assert all(a is b for a, b in zip(out, kept, strict=True))


def test_ts_client_assembles_the_same_messages(ts_oracle: Oracle) -> None:
    outputs = [through(stage, events) for _, stage, events in _CASES]
    results = ts_oracle([{"stream": out} for out in outputs])
    for (name, _, _), out, theirs in zip(_CASES, outputs, results, strict=True):
        assert theirs["outcome"] == "completed", (name, theirs["error"])
        ours = consumed(out)
        assert ours.messages == theirs["messages"], name
        assert ours.state == theirs["state"], name


def test_following_lanes_leaves_outcomes_and_snapshots_alone() -> None:
    # Dropping reasoning makes the stage follow lanes (and see run-level events),
    # which must not make it clean what only dropping tool calls cleans.
    events = run_events(
        text_chunks("m1", "a")
        + tool_call("c1", "search", "{}")
        + [MessagesSnapshotEvent(messages=[AssistantMessage(id="m1", content="a")])],
        outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c1"]),
    )
    out = through(DropEvents(["reasoning"]), events)
    assert out == events
    assert all(a is b for a, b in zip(out, events, strict=True))


def _call_in_subagent_message() -> list[BaseEvent]:
    """sub-1 writes m1 and opens a call in it with an *untagged* start (the call is
    sub-1's through its parent message) but tagged arguments."""
    call = tool_call("c1", "search", '{"q":', "1}", parent_message_id="m1", subagent="sub-1")
    call[0] = call[0].model_copy(update={"subagent_run_id": None})
    return run_events(
        [
            SubagentStartedEvent(subagent_run_id="sub-1", name="researcher"),
            *text("m1", "let me look", subagent="sub-1"),
            *call,
            SubagentFinishedEvent(subagent_run_id="sub-1"),
        ]
    )


@pytest.mark.parametrize(
    "stage",
    [DropEvents(["text"]), KeepEvents(["tool_call"]), KeepEvents(["tool_call", "subagent"])],
    ids=repr,
)
def test_call_keeps_its_owner_when_its_parent_message_is_dropped(stage: Stage) -> None:
    events = _call_in_subagent_message()
    out = through(stage, events)
    messages = consumed(out).messages  # owner-mismatch on the tagged ARGS before the fix
    assert messages == _meant(stage, events)
    assert [(m["id"], m["subagentRunId"]) for m in messages] == [("m1", "sub-1")]
    assert messages[0]["toolCalls"][0]["function"]["arguments"] == '{"q":1}'
    starts = [e for e in out if e.type == "TOOL_CALL_START"]
    assert [e.subagent_run_id for e in starts] == ["sub-1"]


def test_call_owner_follows_a_dropped_snapshot() -> None:
    # Only the (dropped) snapshot tells the client that sub-1 owns m1.
    call = _call_in_subagent_message()[5:-2]
    assert call[0].type == "TOOL_CALL_START" and call[-1].type == "TOOL_CALL_END"
    events = run_events(
        [
            SubagentStartedEvent(subagent_run_id="sub-1", name="researcher"),
            MessagesSnapshotEvent(
                messages=[AssistantMessage(id="m1", content="x", subagent_run_id="sub-1")]
            ),
            *call,
            SubagentFinishedEvent(subagent_run_id="sub-1"),
        ]
    )
    consumed(events)
    out = through(DropEvents(["messages_snapshot"]), events)
    assert consumed(out).messages[0]["subagentRunId"] == "sub-1"


def test_ts_client_agrees_on_the_owned_call(ts_oracle: Oracle) -> None:
    outputs = [through(KeepEvents(["tool_call"]), _call_in_subagent_message())]
    (theirs,) = ts_oracle([{"stream": out} for out in outputs])
    assert theirs["outcome"] == "completed", theirs["error"]
    assert consumed(outputs[0]).messages == theirs["messages"]
