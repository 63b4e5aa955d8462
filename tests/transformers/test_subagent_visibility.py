"""SubagentVisibility: attributed, inline (same fold, no subagent trace), hidden (parent only)."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    ActivitySnapshotEvent,
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    RunAgentInput,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)

from agui_pipes.testing import (
    reasoning,
    run_events,
    run_finished,
    run_started,
    step,
    subagent,
    text,
    text_chunks,
    tool_call,
)
from agui_pipes.transformers import SubagentVisibility
from agui_pipes.verify import VerificationError
from tests.transformers._stage_helpers import consumed, through, through_async, wire

INLINE = SubagentVisibility.inline()
HIDDEN = SubagentVisibility.hidden()


def _untagged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "subagentRunId"} for m in messages]


def _delegating_run() -> list[BaseEvent]:
    """The parent asks a helper (agent as tool), the helper works, nested, state on both sides."""
    helper_work = (
        step("research", text("h1", "helper says hi"))
        + reasoning("hr1", "helper thinks")
        + tool_call("hc1", "lookup", '{"q":1}', result="looked up", parent_message_id="h1")
        + [StateDeltaEvent(delta=[{"op": "add", "path": "/helper", "value": True}])]
        + subagent("n1", "nested", text("nm1", "deep"), parent="s1")
    )
    return run_events(
        step(
            "main",
            [
                StateSnapshotEvent(snapshot={"parent": 1}),
                *text("p1", "asking the helper"),
                *tool_call("pc1", "delegate", '{"task":"x"}', parent_message_id="p1"),
                *subagent("s1", "helper", helper_work, parent_tool_call_id="pc1"),
                ToolCallResultEvent(
                    message_id="pr1", tool_call_id="pc1", content="done", subagent_run_id="s1"
                ),
                *text("p2", "helper finished"),
            ],
        )
    )


# -- attributed -------------------------------------------------------------------


def test_attributed_changes_nothing() -> None:
    events = _delegating_run()
    assert through(SubagentVisibility.attributed(), events) == events
    assert through(SubagentVisibility(), events) == events


@pytest.mark.parametrize("mode", ["attributed", "inline", "hidden"])
def test_run_finished_with_an_active_subagent_is_rejected(mode: str) -> None:
    events = [*run_started(), SubagentStartedEvent(subagent_run_id="s1", name="w"), *run_finished()]
    with pytest.raises(VerificationError, match="open-at-finish") as info:
        through(SubagentVisibility(mode), events)  # type: ignore[arg-type]
    assert "'s1'" in str(info.value)


def test_unknown_mode_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not one of"):
        SubagentVisibility("flat")  # type: ignore[arg-type]


# -- inline ------------------------------------------------------------------------


def test_inline_has_no_subagent_trace_and_folds_the_same() -> None:
    events = _delegating_run()
    out = through(INLINE, events)
    assert "subagent" not in wire(out).lower()
    attributed, inline = consumed(events), consumed(out)
    assert inline.messages == _untagged(attributed.messages)
    assert inline.state == attributed.state


def test_inline_drops_only_tagged_steps() -> None:
    out = through(INLINE, _delegating_run())
    steps = [e.step_name for e in out if isinstance(e, StepStartedEvent | StepFinishedEvent)]
    assert steps == ["main", "main"]


def test_inline_fills_idless_chunks_before_stripping_tags() -> None:
    # Parent and helper stream chunks at the same time; once tags are stripped both would
    # share the parent's lane, so every continuation must name its item.
    events = run_events(
        [
            SubagentStartedEvent(subagent_run_id="s1", name="helper"),
            TextMessageChunkEvent(message_id="p1", delta="par"),
            TextMessageChunkEvent(message_id="h1", delta="hel", subagent_run_id="s1"),
            TextMessageChunkEvent(delta="ent"),
            TextMessageChunkEvent(delta="per", subagent_run_id="s1"),
            ToolCallChunkEvent(
                tool_call_id="c1", tool_call_name="t", parent_message_id="h1", delta="{",
                subagent_run_id="s1",
            ),
            TextMessageChunkEvent(delta="!"),
            ToolCallChunkEvent(delta="}", subagent_run_id="s1"),
            *subagent("s1", "helper")[-1:],
        ]
    )  # fmt: skip
    out = through(INLINE, events)
    chunks = [e for e in out if isinstance(e, TextMessageChunkEvent | ToolCallChunkEvent)]
    assert all(getattr(c, "message_id", None) or getattr(c, "tool_call_id", None) for c in chunks)
    last_tool = chunks[-1]
    assert isinstance(last_tool, ToolCallChunkEvent) and last_tool.tool_call_name == "t"
    assert consumed(out).messages == _untagged(consumed(events).messages)
    assert {m["id"]: m.get("content") for m in consumed(out).messages} == {
        "p1": "parent!",
        "h1": "helper",
    }


def test_inline_strips_nested_tags() -> None:
    echo = RunAgentInput(
        thread_id="thread-1",
        run_id="run-1",
        messages=[AssistantMessage(id="a0", content="old", subagent_run_id="s0")],
    )
    events = [
        *run_started(input=echo),
        MessagesSnapshotEvent(
            messages=[AssistantMessage(id="a1", content="x", subagent_run_id="s1")]
        ),
        *run_finished(
            outcome=RunFinishedInterruptOutcome(
                interrupts=[Interrupt(id="i1", reason="ask", subagent_run_id="s1")]
            )
        ),
    ]
    out = through(INLINE, events)
    assert "subagent" not in wire(out).lower()
    assert out[-1].outcome.interrupts[0].id == "i1"  # type: ignore[attr-defined]


# -- hidden ------------------------------------------------------------------------


def _parent_only() -> list[BaseEvent]:
    return run_events(
        step(
            "main",
            [
                StateSnapshotEvent(snapshot={"parent": 1}),
                *text("p1", "asking the helper"),
                *tool_call("pc1", "delegate", '{"task":"x"}', parent_message_id="p1"),
                StateDeltaEvent(delta=[{"op": "add", "path": "/helper", "value": True}]),
                ToolCallResultEvent(message_id="pr1", tool_call_id="pc1", content="done"),
                *text("p2", "helper finished"),
            ],
        )
    )


def test_hidden_folds_to_the_parents_messages_with_identical_state() -> None:
    events = _delegating_run()
    out = through(HIDDEN, events)
    assert "subagent" not in wire(out).lower()
    hidden, attributed = consumed(out), consumed(events)
    assert hidden.state == attributed.state
    assert hidden.messages == consumed(_parent_only()).messages
    assert [m["id"] for m in hidden.messages] == ["p1", "pr1", "p2"]


def test_hidden_judges_untagged_events_by_their_owner() -> None:
    events = run_events(
        [
            SubagentStartedEvent(subagent_run_id="s1", name="helper"),
            TextMessageStartEvent(message_id="h1", subagent_run_id="s1"),
            TextMessageContentEvent(message_id="h1", delta="untagged continuation"),
            TextMessageEndEvent(message_id="h1"),
            # untagged call inside the helper's message belongs to the helper
            ToolCallStartEvent(tool_call_id="hc", tool_call_name="t", parent_message_id="h1"),
            *tool_call("hc", "t")[1:],
            ToolCallResultEvent(message_id="hr", tool_call_id="hc", content="x"),
            ActivitySnapshotEvent(
                message_id="act", activity_type="p", content={}, subagent_run_id="s1"
            ),
            ActivitySnapshotEvent(message_id="act", activity_type="p", content={"k": 1}),
            ReasoningEncryptedValueEvent(subtype="tool-call", entity_id="hc", encrypted_value="e"),
            ReasoningEncryptedValueEvent(subtype="message", entity_id="p9", encrypted_value="v"),
            CustomEvent(name="tagged", value=1, subagent_run_id="s1"),
            CustomEvent(name="mine", value=2),
            *subagent("s1", "helper")[-1:],
        ]
    )
    out = through(HIDDEN, events)
    assert "untagged continuation" not in wire(out)
    assert '"hc"' not in wire(out)
    assert [e.type.value for e in out[1:-1]] == ["REASONING_ENCRYPTED_VALUE", "CUSTOM"]
    consumed(out)


def test_hidden_snapshot_is_authoritative_and_filtered() -> None:
    call = ToolCall(id="c1", function=FunctionCall(name="t", arguments="{}"))
    sub_call = ToolCall(id="c2", function=FunctionCall(name="t", arguments="{}"))
    snapshot = MessagesSnapshotEvent(
        messages=[
            UserMessage(id="u1", content="q"),
            AssistantMessage(id="a1", content="mine", tool_calls=[call]),
            ToolMessage(id="t1", tool_call_id="c1", content="answered by s1", subagent_run_id="s1"),
            AssistantMessage(
                id="a2", content="theirs", tool_calls=[sub_call], subagent_run_id="s1"
            ),
            ToolMessage(id="t2", tool_call_id="c2", content="sub result"),
        ]
    )
    events = run_events(
        [
            snapshot,
            # a1 was the helper's according to nothing earlier; a2 is the helper's now:
            TextMessageStartEvent(message_id="a2"),
            TextMessageContentEvent(message_id="a2", delta=" more"),
            TextMessageEndEvent(message_id="a2"),
            ToolCallResultEvent(message_id="t3", tool_call_id="c1", content="again"),
        ]
    )
    out = through(HIDDEN, events)
    kept = out[1]
    assert [m.id for m in kept.messages] == ["u1", "a1", "t1"]  # type: ignore[attr-defined]
    assert kept.messages[2].subagent_run_id is None  # type: ignore[attr-defined]
    assert " more" not in wire(out)
    assert "again" in wire(out)
    consumed(out)


def test_hidden_open_entity_keeps_its_visibility_until_it_closes() -> None:
    events = run_events(
        [
            TextMessageStartEvent(message_id="m1"),
            TextMessageContentEvent(message_id="m1", delta="a"),
            MessagesSnapshotEvent(
                messages=[AssistantMessage(id="m1", content="a", subagent_run_id="s9")]
            ),
            TextMessageContentEvent(message_id="m1", delta="b"),
            TextMessageEndEvent(message_id="m1"),
            TextMessageStartEvent(message_id="m1"),  # reopened: now the subagent's
            TextMessageContentEvent(message_id="m1", delta="c"),
            TextMessageEndEvent(message_id="m1"),
        ]
    )
    out = through(HIDDEN, events)
    deltas = [e.delta for e in out if isinstance(e, TextMessageContentEvent)]
    assert deltas == ["a", "b"]
    consumed(out)


def test_hidden_chunks_follow_their_lane() -> None:
    events = run_events(
        [
            SubagentStartedEvent(subagent_run_id="s1", name="helper"),
            *text_chunks("h1", "secret", subagent="s1"),
            TextMessageChunkEvent(message_id="p1", delta="visible"),
            TextMessageChunkEvent(delta=" too"),
            TextMessageChunkEvent(message_id="p1", delta="!"),
            TextMessageChunkEvent(delta=" also secret", subagent_run_id="s1"),
            *subagent("s1", "helper")[-1:],
        ]
    )
    out = through(HIDDEN, events)
    assert "secret" not in wire(out)
    assert consumed(out).messages == [{"id": "p1", "role": "assistant", "content": "visible too!"}]


def test_hidden_echo_only_adds_owners_and_run_finished_is_cleaned() -> None:
    echo = RunAgentInput(
        thread_id="thread-1",
        run_id="run-1",
        messages=[
            AssistantMessage(id="e1", content="old helper", subagent_run_id="s0"),
            UserMessage(id="u1", content="q"),
        ],
    )
    events = [
        *run_started(input=echo),
        TextMessageStartEvent(message_id="e1"),  # first writer (the echo) was the helper
        TextMessageEndEvent(message_id="e1"),
        *tool_call("c1", "t"),
        *run_finished(outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c1", "zz"])),
    ]
    out = through(HIDDEN, events)
    assert [m.id for m in out[0].input.messages] == ["u1"]  # type: ignore[attr-defined]
    assert not any(isinstance(e, TextMessageStartEvent) for e in out)
    assert out[-1].outcome.pending_tool_call_ids == ["c1"]  # type: ignore[attr-defined]


def test_hidden_state_resets_per_run_and_fresh_instances_are_independent() -> None:
    first = run_events(subagent("s1", "helper", text("m1", "x")))
    second = run_events(text("m1", "parent now"), run_id="run-2")
    out = through(HIDDEN, first + second)
    assert "parent now" in wire(out)
    a, b = HIDDEN.fresh(), HIDDEN.fresh()
    for event in first[:3]:
        list(a.transform(event))
    content = TextMessageContentEvent(message_id="m1", delta="?")
    assert list(a.transform(content)) == [] and list(b.transform(content)) == [content]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["attributed", "inline", "hidden"])
async def test_same_output_through_chain_apply(mode: str) -> None:
    stage = SubagentVisibility(mode)  # type: ignore[arg-type]
    events = _delegating_run()
    assert await through_async(stage, events) == through(stage, events)
