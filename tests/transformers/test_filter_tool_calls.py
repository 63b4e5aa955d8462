"""FilterToolCalls: a blocked call leaves no trace anywhere in the stream."""

from __future__ import annotations

import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningMessageChunkEvent,
    RunAgentInput,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    Tool,
    ToolCall,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    ToolMessage,
    UserMessage,
)

from agui_pipes.testing import (
    assert_events_equal,
    run_events,
    run_finished,
    run_started,
    subagent,
    text,
    text_chunks,
    tool_call,
    tool_call_chunks,
)
from agui_pipes.transformers import FilterToolCalls
from tests.transformers._stage_helpers import consumed, through, through_async, wire

DENY = FilterToolCalls.deny(["internal_*"])


def _stream() -> list[BaseEvent]:
    return run_events(
        text("m1", "Looking it up")
        + tool_call("c1", "internal_lookup", '{"secret":', "1}", result="classified")
        + tool_call("c2", "search", '{"q":"x"}', result="found")
        + text("m2", "Done")
    )


def _expected() -> list[BaseEvent]:
    return run_events(
        text("m1", "Looking it up")
        + tool_call("c2", "search", '{"q":"x"}', result="found")
        + text("m2", "Done")
    )


def test_blocked_call_lifecycle_and_result_are_dropped() -> None:
    out = through(DENY, _stream())
    assert_events_equal(out, _expected())
    assert "internal_lookup" not in wire(out)
    assert "classified" not in wire(out)


def test_output_folds_like_a_stream_without_the_call() -> None:
    assert consumed(through(DENY, _stream())).messages == consumed(_expected()).messages


def test_exact_names_and_globs() -> None:
    stage = FilterToolCalls.deny(["debug", "internal_?ookup", "x[12]"])
    assert stage.blocks("debug") and stage.blocks("internal_lookup") and stage.blocks("x2")
    assert not stage.blocks("debugger") and not stage.blocks("internal_llookup")
    assert not stage.blocks("x3")
    assert FilterToolCalls.deny("debug").blocks("debug")


def test_allow_mode_passes_only_listed_tools() -> None:
    out = through(FilterToolCalls.allow(["search"]), _stream())
    assert_events_equal(out, _expected())


def test_allow_mode_with_glob() -> None:
    out = through(FilterToolCalls.allow(["sea*"]), _stream())
    assert_events_equal(out, _expected())


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({}, "neither was"),
        ({"allow": ["a"], "deny": ["b"]}, "both were"),
        ({"deny": []}, "at least one"),
        ({"allow": [""]}, "non-empty"),
    ],
)
def test_configuration_errors_are_clear(kwargs: dict[str, list[str]], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        FilterToolCalls(**kwargs)


def test_chunks_and_idless_continuations_of_a_blocked_call_are_dropped() -> None:
    events = run_events(
        text_chunks("m1", "a", "b")
        + tool_call_chunks("c1", "internal_x", '{"k"', ":1}", parent_message_id="m1")
        + tool_call_chunks("c2", "search", '{"q"', ":2}", parent_message_id="m1")
        + [ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="hidden")]
    )
    out = through(DENY, events)
    expected = run_events(
        text_chunks("m1", "a", "b")
        + tool_call_chunks("c2", "search", '{"q"', ":2}", parent_message_id="m1")
    )
    assert_events_equal(out, expected)
    assert consumed(out).messages == consumed(expected).messages


def test_idless_chunk_routed_to_another_lane_like_the_client() -> None:
    # Parent lane holds a blocked call, then a text chunk replaces it; the subagent
    # lane holds an allowed call. An untagged id-less tool chunk now belongs to the
    # subagent's call (the only lane with an open tool item): it must pass.
    events = run_events(
        subagent(
            "s1",
            "helper",
            [ToolCallChunkEvent(tool_call_id="c2", tool_call_name="search", delta="{")],
        )[:2]
        + tool_call_chunks("c1", "internal_x", "{}")
        + [TextMessageChunkEvent(message_id="m1", delta="hi")]
        + [ToolCallChunkEvent(delta="}")]
        + [ToolCallChunkEvent(delta="tail", subagent_run_id="s1")]
        + subagent("s1", "helper")[-1:]
    )
    out = through(DENY, events)
    deltas = [e.delta for e in out if isinstance(e, ToolCallChunkEvent)]
    assert deltas == ["{", "}", "tail"]
    assert "internal_x" not in wire(out)
    consumed(out)


def test_ambiguous_idless_chunk_is_dropped_when_a_candidate_is_blocked() -> None:
    events = [
        *run_started(),
        SubagentStartedEvent(subagent_run_id="s1", name="a"),
        SubagentStartedEvent(subagent_run_id="s2", name="b"),
        ToolCallChunkEvent(tool_call_id="c1", tool_call_name="internal_x", subagent_run_id="s1"),
        ToolCallChunkEvent(tool_call_id="c2", tool_call_name="search", subagent_run_id="s2"),
        ToolCallChunkEvent(delta="which?"),
    ]
    out = through(DENY, events)
    assert not any(getattr(e, "delta", None) == "which?" for e in out)


def test_encrypted_values_of_blocked_calls_are_dropped() -> None:
    events = run_events(
        [
            *tool_call("c1", "internal_x"),
            ReasoningEncryptedValueEvent(subtype="tool-call", entity_id="c1", encrypted_value="E1"),
            ReasoningEncryptedValueEvent(subtype="tool-call", entity_id="c2", encrypted_value="E2"),
            ReasoningEncryptedValueEvent(subtype="message", entity_id="c1", encrypted_value="E3"),
        ]
    )
    values = [e.encrypted_value for e in through(DENY, events) if hasattr(e, "encrypted_value")]
    assert values == ["E2", "E3"]


def _assistant(mid: str, *calls: tuple[str, str], content: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        id=mid,
        content=content,
        tool_calls=[
            ToolCall(id=cid, function=FunctionCall(name=name, arguments="{}"))
            for cid, name in calls
        ]
        or None,
    )


def _history() -> list[object]:
    return [
        UserMessage(id="u1", content="hi"),
        _assistant("a1", ("c1", "internal_x"), ("c2", "search"), content="ok"),
        ToolMessage(id="t1", tool_call_id="c1", content="secret result"),
        ToolMessage(id="t2", tool_call_id="c2", content="public result"),
        _assistant("a2", ("c3", "internal_y")),
        ToolMessage(id="t3", tool_call_id="c3", content="more secret"),
    ]


def test_messages_snapshot_loses_blocked_calls_and_their_tool_messages() -> None:
    events = run_events([MessagesSnapshotEvent(messages=_history())])
    out = through(DENY, events)
    snapshot = out[1]
    assert isinstance(snapshot, MessagesSnapshotEvent)
    shape = [
        (m.id, [c.id for c in getattr(m, "tool_calls", None) or []]) for m in snapshot.messages
    ]
    assert shape == [("u1", []), ("a1", ["c2"]), ("t2", [])]
    text_out = wire(out)
    assert "internal_" not in text_out and "secret" not in text_out
    consumed(out)


def test_snapshot_blocks_later_results_for_the_same_calls() -> None:
    events = run_events(
        [
            MessagesSnapshotEvent(messages=[_assistant("a1", ("c9", "internal_x"))]),
            ToolCallResultEvent(message_id="t9", tool_call_id="c9", content="late"),
        ]
    )
    assert "late" not in wire(through(DENY, events))


def test_run_started_echo_is_cleaned() -> None:
    echo = RunAgentInput(
        thread_id="thread-1",
        run_id="run-1",
        messages=_history(),
        tools=[
            Tool(name="internal_x", description="private"),
            Tool(name="search", description="public"),
        ],
    )
    out = through(DENY, [*run_started(input=echo), *run_finished()])
    cleaned = out[0].input  # type: ignore[attr-defined]
    assert [t.name for t in cleaned.tools] == ["search"]
    assert [m.id for m in cleaned.messages] == ["u1", "a1", "t2"]
    assert "internal_" not in wire(out)


def test_pending_tool_call_ids_lose_blocked_ids() -> None:
    events = [
        *run_started(),
        *tool_call("c1", "internal_x"),
        *tool_call("c2", "search"),
        *run_finished(outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c1", "c2"])),
    ]
    outcome = through(DENY, events)[-1].outcome  # type: ignore[attr-defined]
    assert outcome.pending_tool_call_ids == ["c2"]
    only_blocked = [
        *run_started(),
        *tool_call("c1", "internal_x"),
        *run_finished(outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c1"])),
    ]
    last = through(DENY, only_blocked)[-1]
    assert "c1" not in wire([last])
    assert consumed(through(DENY, only_blocked)).pending_tool_call_ids == []


def test_subagent_spawned_by_a_blocked_call_disappears_with_everything_it_did() -> None:
    nested = subagent("s2", "inner", text("m3", "nested secret"), parent="s1")
    inner = text("m2", "sub secret") + tool_call("c5", "search", "{}", result="r") + nested
    events = [
        *run_started(),
        *tool_call("c1", "internal_delegate"),
        *subagent("s1", "worker", inner, parent_tool_call_id="c1"),
        ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="sub result"),
        MessagesSnapshotEvent(
            messages=[
                UserMessage(id="u1", content="hi"),
                AssistantMessage(id="m2", content="sub secret", subagent_run_id="s1"),
            ]
        ),
        *text("m4", "parent visible"),
        *run_finished(
            outcome=RunFinishedInterruptOutcome(
                interrupts=[
                    Interrupt(id="i1", reason="approve", subagent_run_id="s2", tool_call_id="c1")
                ]
            )
        ),
    ]
    out = through(DENY, events)
    text_out = wire(out)
    for needle in ("internal_delegate", "secret", "s1", "s2", "sub result", '"c1"', '"c5"'):
        assert needle not in text_out, needle
    assert "parent visible" in text_out
    interrupt = out[-1].outcome.interrupts[0]  # type: ignore[attr-defined]
    assert interrupt.id == "i1" and interrupt.subagent_run_id is None
    assert interrupt.tool_call_id is None
    consumed(out)


def test_blocked_ids_reset_at_every_run_started() -> None:
    first = run_events(tool_call("c1", "internal_x", result="hidden"))
    second = run_events(
        [ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="visible")],
        run_id="run-2",
    )
    stage = DENY.fresh()
    out = [e for event in first + second for e in stage.transform(event)]
    assert "hidden" not in wire(out) and "visible" in wire(out)


def test_fresh_instances_do_not_share_state() -> None:
    a = DENY.fresh()
    b = DENY.fresh()
    list(a.transform(tool_call("c1", "internal_x")[0]))
    result = ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="x")
    assert list(a.transform(result)) == []
    assert list(b.transform(result)) == [result]


@pytest.mark.anyio
async def test_same_output_through_chain_apply() -> None:
    out = await through_async(DENY, _stream())
    assert_events_equal(out, _expected())


def test_idless_chunk_of_a_blocked_subagent_found_through_its_lane() -> None:
    # The parent streams a text chunk message; the blocked subagent streams reasoning.
    # An untagged id-less reasoning chunk can only be the subagent's (the only lane with
    # an open reasoning item); an untagged id-less text chunk is the parent's.
    events = run_events(
        [
            *tool_call("c1", "internal_x"),
            TextMessageChunkEvent(message_id="m1", delta="parent "),
            SubagentStartedEvent(subagent_run_id="s1", name="w", parent_tool_call_id="c1"),
            TextMessageChunkEvent(message_id="h1", delta="hidden ", subagent_run_id="s1"),
            ReasoningMessageChunkEvent(message_id="r1", delta="x", subagent_run_id="s1"),
            ReasoningMessageChunkEvent(delta="secret thought"),
            TextMessageChunkEvent(delta="visible"),
            *subagent("s1", "w")[-1:],
        ]
    )
    out = through(DENY, events)
    assert "secret" not in wire(out) and "hidden" not in wire(out)
    assert consumed(out).messages == [
        {"id": "m1", "role": "assistant", "content": "parent visible"}
    ]
