"""FilterToolCalls leaves no trace with real producers' streams (hardening issue, items 8-10).

* pydantic-ai sends a REASONING_ENCRYPTED_VALUE (``subtype: "message"``) naming
  the *result message* of every retried or failed tool;
* producers that wrap tool calls in a TEXT_MESSAGE_START / END leave an empty
  assistant message when every call of it is removed;
* a RUN_ERROR written upstream of the filter (a Verify with
  ``on_violation="run_error"``, the run driver) may quote a removed call.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningMessageChunkEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from agui_pipes import TransformerChain
from agui_pipes.config import load_chain
from agui_pipes.testing import assert_events_equal, run_events, run_transformer, text, tool_call
from agui_pipes.transformers import ExpandChunks, FilterToolCalls, Verify
from tests.transformers._stage_helpers import consumed, through, wire

DENY = FilterToolCalls.deny(["internal_*"])

YAML = """
transformers:
  - type: filter_tool_calls
    deny: ["internal_*"]
"""


def _yaml_through(events: list[BaseEvent], yaml: str = YAML) -> list[BaseEvent]:
    return list(load_chain(yaml)().apply_sync(events))


def _encrypted(entity_id: str, subtype: Any = "message") -> BaseEvent:
    return ReasoningEncryptedValueEvent(
        subtype=subtype, entity_id=entity_id, encrypted_value="opaque-blob"
    )


# -- item 9: encrypted values naming a removed result message ----------------------------


def _retried_tool_stream() -> list[BaseEvent]:
    # What pydantic-ai sends after a tool asked for a retry: the result message,
    # then an encrypted value for that message.
    return run_events(
        [
            *tool_call(
                "internal-call-7",
                "internal_lookup",
                '{"user": 42}',
                result="retry: user 42 is not in the index",
                result_message_id="res-internal",
            ),
            _encrypted("res-internal"),
            *tool_call(
                "call-2", "search", '{"q": "x"}', result="found", result_message_id="res-search"
            ),
            _encrypted("res-search"),
            *text("m1", "Done"),
        ]
    )


@pytest.mark.parametrize("path", ["stage", "yaml"])
def test_encrypted_value_of_a_removed_result_message_is_dropped(path: str) -> None:
    events = _retried_tool_stream()
    out = through(DENY, events) if path == "stage" else _yaml_through(events)
    encrypted = [e for e in out if isinstance(e, ReasoningEncryptedValueEvent)]
    assert [e.entity_id for e in encrypted] == ["res-search"]
    assert "res-internal" not in wire(out)


def test_encrypted_value_of_a_tool_message_removed_from_a_snapshot_is_dropped() -> None:
    from ag_ui.core import (
        AssistantMessage,
        FunctionCall,
        MessagesSnapshotEvent,
        ToolCall,
        ToolMessage,
    )

    snapshot = MessagesSnapshotEvent(
        messages=[
            AssistantMessage(
                id="a1",
                tool_calls=[
                    ToolCall(
                        id="c1",
                        function=FunctionCall(name="internal_lookup", arguments="{}"),
                    )
                ],
            ),
            ToolMessage(id="t1", tool_call_id="c1", content="secret"),
        ]
    )
    out = through(DENY, run_events([snapshot, _encrypted("t1"), _encrypted("a1")]))
    assert not [e for e in out if isinstance(e, ReasoningEncryptedValueEvent)]


# -- item 10: the empty assistant message a removed call leaves --------------------------


def _wrapped(message_id: str, *calls: list[BaseEvent], end_first: bool = False) -> list[BaseEvent]:
    start = TextMessageStartEvent(message_id=message_id, role="assistant")
    end = TextMessageEndEvent(message_id=message_id)
    body = [e for call in calls for e in call]
    return [start, end, *body] if end_first else [start, *body, end]


@pytest.mark.parametrize("end_first", [False, True], ids=["calls-inside", "calls-after-end"])
@pytest.mark.parametrize("path", ["stage", "yaml"])
def test_an_assistant_message_emptied_of_its_calls_is_removed(end_first: bool, path: str) -> None:
    events = run_events(
        [
            *_wrapped(
                "asst-1",
                tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1"),
                tool_call("c2", "internal_audit", "{}", parent_message_id="asst-1"),
                end_first=end_first,
            ),
            _encrypted("asst-1"),
            *text("m2", "Here you go"),
        ]
    )
    out = through(DENY, events) if path == "stage" else _yaml_through(events)
    assert_events_equal(out, run_events(text("m2", "Here you go")))
    assert "asst-1" not in wire(out)
    assert [m["id"] for m in consumed(out).messages] == ["m2"]


@pytest.mark.parametrize("end_first", [False, True], ids=["calls-inside", "calls-after-end"])
def test_a_message_keeping_an_allowed_call_keeps_its_start_and_end(end_first: bool) -> None:
    allowed = tool_call("c2", "search", "{}", parent_message_id="asst-1")
    events = run_events(
        _wrapped(
            "asst-1",
            tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1"),
            allowed,
            end_first=end_first,
        )
    )
    expected = run_events(_wrapped("asst-1", allowed, end_first=end_first))
    out = through(DENY, events)
    assert_events_equal(out, expected)
    messages = consumed(out).messages
    assert [c["id"] for c in messages[0]["toolCalls"]] == ["c2"]


def test_messages_with_content_or_without_removed_calls_are_untouched() -> None:
    empty = [
        TextMessageStartEvent(message_id="empty", role="assistant"),
        TextMessageEndEvent(message_id="empty"),
    ]
    events = run_events(
        [
            *empty,
            *text("m1", "Let me check"),
            *tool_call("c1", "internal_lookup", "{}", parent_message_id="m1"),
            *text("m2", "Done"),
        ]
    )
    out = through(DENY, events)
    assert_events_equal(out, run_events([*empty, *text("m1", "Let me check"), *text("m2", "Done")]))


@pytest.mark.parametrize("path", ["stage", "yaml"])
def test_state_updates_between_a_removed_call_and_the_end_do_not_keep_the_empty_message(
    path: str,
) -> None:
    # Regression (the case left open when item 10 landed): an agent that publishes
    # state after its internal tool, before closing the message that wrapped the call
    # (LangGraph does), released the held START, and the empty message went out.
    delta = StateDeltaEvent(delta=[{"op": "add", "path": "/n", "value": 1}])
    snapshot = StateSnapshotEvent(snapshot={"n": 2})
    events = run_events(
        [
            *_wrapped(
                "asst-1",
                [
                    *tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1"),
                    delta,
                    snapshot,
                ],
            ),
            *text("m2", "Here you go"),
        ]
    )
    out = through(DENY, events) if path == "stage" else _yaml_through(events)
    assert_events_equal(out, run_events([delta, snapshot, *text("m2", "Here you go")]))
    assert "asst-1" not in wire(out)
    assert consumed(out).state == {"n": 2}


def test_a_message_with_content_after_a_state_update_keeps_its_start_first() -> None:
    # The held START goes out before the message's first kept event, after the
    # state events that passed while it was held.
    delta = StateDeltaEvent(delta=[{"op": "add", "path": "/n", "value": 1}])
    start = TextMessageStartEvent(message_id="asst-1", role="assistant")
    events = run_events(
        [
            start,
            *tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1"),
            delta,
            TextMessageContentEvent(message_id="asst-1", delta="hi"),
            TextMessageEndEvent(message_id="asst-1"),
        ]
    )
    out = through(DENY, events)
    assert_events_equal(
        out,
        run_events(
            [
                delta,
                start,
                TextMessageContentEvent(message_id="asst-1", delta="hi"),
                TextMessageEndEvent(message_id="asst-1"),
            ]
        ),
    )


def test_a_held_start_is_released_at_the_end_of_the_stream() -> None:
    # A stream cut after an assistant message start: nothing is lost.
    events = [*run_events()[:1], TextMessageStartEvent(message_id="m1", role="assistant")]
    assert_events_equal(through(DENY, events), events)


# -- item 8 (stage side): a RUN_ERROR quoting a removed call ------------------------------


def _interleaved_parallel_calls() -> list[BaseEvent]:
    """pydantic-ai with OpenAI parallel tool calls: a new part ends the previous call,
    then a late argument delta for the earlier call arrives (ARGS after END)."""
    return run_events(
        [
            ToolCallStartEvent(
                tool_call_id="internal-call-7",
                tool_call_name="internal_lookup",
                parent_message_id="resp-1",
            ),
            ToolCallArgsEvent(tool_call_id="internal-call-7", delta='{"acct":'),
            ToolCallEndEvent(tool_call_id="internal-call-7"),
            ToolCallStartEvent(
                tool_call_id="call-9", tool_call_name="search", parent_message_id="resp-1"
            ),
            ToolCallArgsEvent(tool_call_id="internal-call-7", delta=' "A-1"}'),
            ToolCallArgsEvent(tool_call_id="call-9", delta='{"q": "x"}'),
            ToolCallEndEvent(tool_call_id="call-9"),
        ]
    )


@pytest.mark.parametrize("path", ["stage", "yaml"])
def test_a_run_error_from_a_verifier_before_the_filter_does_not_name_the_removed_call(
    path: str,
) -> None:
    events = _interleaved_parallel_calls()
    if path == "stage":
        chain = TransformerChain([Verify(on_violation="run_error"), DENY.fresh()])
        out = run_transformer(chain, events)
    else:
        out = _yaml_through(
            events,
            "transformers:\n  - type: verify\n    on_violation: run_error\n"
            + YAML.split("transformers:\n", 1)[1],
        )
    error = out[-1]
    assert error.type.value == "RUN_ERROR"
    assert "[hidden]" in error.message  # type: ignore[attr-defined]
    assert "internal-call-7" not in wire(out)
    assert "internal_lookup" not in wire(out)


def test_run_error_scrubbing_replaces_whole_ids_only() -> None:
    events = run_events(
        tool_call("c1", "internal_lookup", "{}"),
        error="call c1 failed; c12 and xc1 are other calls",
    )
    out = through(DENY, events)
    assert out[-1].message == "call [hidden] failed; c12 and xc1 are other calls"  # type: ignore[attr-defined]


# -- item 10 with chunks: a message a TEXT_MESSAGE_CHUNK opened ---------------------------
#
# A chunk carrying no content only opens its message: it is the message's START, so the
# stage must treat it as one whether or not ExpandChunks ran before it.


def _expanded_through(events: list[BaseEvent]) -> list[BaseEvent]:
    return through(ExpandChunks() | DENY, events)


def _folds_as_if_expanded(out: list[BaseEvent], events: list[BaseEvent]) -> list[dict[str, Any]]:
    messages = consumed(out).messages
    assert messages == consumed(_expanded_through(events)).messages
    return messages


def test_a_message_opened_by_a_bare_chunk_and_emptied_of_its_call_is_removed() -> None:
    # Regression (hypothesis, test_removing_stage_folds_like_it_does_on_expanded_chunks):
    # the bare chunk passed straight through and the client folded an empty message
    # msg-1, a trace of the removed call, which the expanded stream did not have.
    events = run_events(
        [
            RawEvent(event={"note": "naïve "}),
            ReasoningMessageChunkEvent(message_id="reasoning-1"),
            RawEvent(event=""),
            TextMessageChunkEvent(message_id="msg-1", metadata={"usage": 7}),
            *tool_call("call-1", "internal_debug", " world", parent_message_id="msg-1"),
        ]
    )
    out = through(DENY, events)
    assert "msg-1" not in wire(out)
    assert [m["id"] for m in _folds_as_if_expanded(out, events)] == ["reasoning-1"]


@pytest.mark.parametrize("tag", [None, "sub-1"], ids=["parent", "subagent"])
@pytest.mark.parametrize("call_form", ["events", "chunk"])
def test_a_bare_chunk_message_is_removed_whatever_form_the_removed_call_takes(
    tag: str | None, call_form: str
) -> None:
    call: list[BaseEvent]
    if call_form == "events":
        call = [
            ToolCallStartEvent(
                tool_call_id="c1",
                tool_call_name="internal_lookup",
                parent_message_id="asst-1",
                subagent_run_id=tag,
            ),
            ToolCallArgsEvent(tool_call_id="c1", delta="{}", subagent_run_id=tag),
            ToolCallEndEvent(tool_call_id="c1", subagent_run_id=tag),
        ]
    else:
        call = [
            ToolCallChunkEvent(
                tool_call_id="c1",
                tool_call_name="internal_lookup",
                parent_message_id="asst-1",
                delta='{"q":',
                subagent_run_id=tag,
            ),
            ToolCallChunkEvent(delta=' "x"}', subagent_run_id=tag),
        ]
    events = run_events(
        [
            TextMessageChunkEvent(message_id="asst-1", subagent_run_id=tag),
            # an id-less continuation carrying nothing goes with the message it continues
            TextMessageChunkEvent(subagent_run_id=tag),
            *call,
            *text("m2", "Here you go"),
        ]
    )
    out = through(DENY, events)
    assert_events_equal(out, run_events(text("m2", "Here you go")))
    assert [m["id"] for m in _folds_as_if_expanded(out, events)] == ["m2"]


def test_a_chunk_with_an_empty_delta_is_content_and_keeps_its_message() -> None:
    # An empty delta still expands to a TEXT_MESSAGE_CONTENT, which keeps the message
    # in the expanded stream too; only a chunk without any delta is a bare START.
    chunk = TextMessageChunkEvent(message_id="asst-1", delta="")
    events = run_events(
        [chunk, *tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1")]
    )
    out = through(DENY, events)
    assert_events_equal(out, run_events([chunk]))
    assert [m["id"] for m in _folds_as_if_expanded(out, events)] == ["asst-1"]


@pytest.mark.parametrize("call_form", ["events", "chunk"])
def test_a_bare_chunk_message_keeping_an_allowed_call_is_kept(call_form: str) -> None:
    opener = TextMessageChunkEvent(message_id="asst-1")
    allowed: list[BaseEvent] = (
        tool_call("c2", "search", "{}", parent_message_id="asst-1")
        if call_form == "events"
        else [
            ToolCallChunkEvent(
                tool_call_id="c2", tool_call_name="search", parent_message_id="asst-1", delta="{}"
            )
        ]
    )
    events = run_events(
        [opener, *tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1"), *allowed]
    )
    out = through(DENY, events)
    # The removed call closed the opener's lane, so it goes out as the START and END
    # the expanded stream has (a chunk would leave the message open downstream).
    start_end = [
        TextMessageStartEvent(message_id="asst-1", role="assistant"),
        TextMessageEndEvent(message_id="asst-1"),
    ]
    assert_events_equal(out, run_events([*start_end, *allowed]))
    messages = _folds_as_if_expanded(out, events)
    assert [c["id"] for c in messages[0]["toolCalls"]] == ["c2"]


def test_content_in_a_bare_chunk_message_keeps_it_and_its_chunks_unchanged() -> None:
    # Content after the opener releases it in place: the id-less continuation still
    # continues it downstream, so no chunk needs its ids filled in.
    events = run_events(
        [
            TextMessageChunkEvent(message_id="asst-1"),
            TextMessageChunkEvent(),
            TextMessageChunkEvent(delta="Let me check"),
            *tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1"),
        ]
    )
    out = through(DENY, events)
    assert_events_equal(out, run_events(events[1:4]))
    assert _folds_as_if_expanded(out, events)[0]["content"] == "Let me check"


def test_content_reopening_the_message_after_the_removed_call_keeps_it() -> None:
    events = run_events(
        [
            TextMessageChunkEvent(message_id="asst-1"),
            ToolCallChunkEvent(
                tool_call_id="c1",
                tool_call_name="internal_lookup",
                parent_message_id="asst-1",
                delta="{}",
            ),
            TextMessageChunkEvent(message_id="asst-1", delta="Done"),
        ]
    )
    out = through(DENY, events)
    assert_events_equal(out, run_events([TextMessageChunkEvent(message_id="asst-1", delta="Done")]))
    assert _folds_as_if_expanded(out, events) == [
        {"id": "asst-1", "role": "assistant", "content": "Done"}
    ]


def test_a_started_message_emptied_while_a_chunk_stream_is_open_is_removed() -> None:
    # The same hold for an explicit START: it used to be skipped while any chunk lane
    # was open, so an open reasoning chunk let the empty message through.
    events = run_events(
        [
            ReasoningMessageChunkEvent(message_id="r1", delta="thinking"),
            *_wrapped(
                "asst-1", tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1")
            ),
            ReasoningMessageChunkEvent(message_id="r2", delta="more"),
        ]
    )
    out = through(DENY, events)
    assert "asst-1" not in wire(out)
    assert [m["id"] for m in _folds_as_if_expanded(out, events)] == ["r1", "r2"]


def test_a_bare_chunk_released_after_its_lane_closed_goes_out_as_start_and_end() -> None:
    # Released after a state update closed its lane, the chunk would open asst-1 again
    # downstream and leave it open: a later id-less chunk of the subagent's message (the
    # only open text message in the input) would join asst-1 instead. The expanded
    # stream's START and END go out instead, and the id-less chunk passes unchanged.
    state = StateSnapshotEvent(snapshot={"n": 1})
    events = run_events(
        [
            TextMessageChunkEvent(message_id="sub-msg", delta="a", subagent_run_id="sub-1"),
            TextMessageChunkEvent(message_id="asst-1", metadata={"usage": 3}),
            state,
            RawEvent(event="released here"),
            TextMessageChunkEvent(delta="b"),
        ]
    )
    out = through(DENY, events)
    messages = _folds_as_if_expanded(out, events)
    assert {m["id"]: m["content"] for m in messages} == {"sub-msg": "ab", "asst-1": ""}
    start = TextMessageStartEvent(message_id="asst-1", role="assistant", metadata={"usage": 3})
    end = TextMessageEndEvent(message_id="asst-1")
    assert_events_equal(out, run_events([events[1], state, start, end, *events[4:6]]))


def test_an_id_opened_again_after_a_released_bare_chunk_stays_valid() -> None:
    # Ids may be reused (content appends). Released as a chunk, asst-1 would still be
    # open downstream, and the user chunk would contradict its role (an invalid stream).
    events = run_events(
        [
            TextMessageChunkEvent(message_id="asst-1"),
            StateSnapshotEvent(snapshot={}),
            TextMessageChunkEvent(message_id="asst-1", role="user", delta="hi"),
        ]
    )
    out = through(DENY, events)
    assert _folds_as_if_expanded(out, events) == [
        {"id": "asst-1", "role": "assistant", "content": "hi"}
    ]


@pytest.mark.parametrize("form", ["chunk", "start"])
def test_messages_held_at_once_are_bounded(form: str) -> None:
    # 64 messages are held at most: the 65th opener passes at once and releases the
    # others first, so the first one, emptied only later, stays (memory is bounded).
    def opener(i: int) -> BaseEvent:
        if form == "chunk":
            return TextMessageChunkEvent(message_id=f"asst-{i}", subagent_run_id=f"sub-{i}")
        return TextMessageStartEvent(message_id=f"asst-{i}", role="assistant")

    removed_call = [
        ToolCallStartEvent(
            tool_call_id="c1",
            tool_call_name="internal_lookup",
            parent_message_id="asst-0",
            subagent_run_id="sub-0" if form == "chunk" else None,
        ),
        ToolCallEndEvent(tool_call_id="c1"),
    ]
    ends = (
        [] if form == "chunk" else [TextMessageEndEvent(message_id=f"asst-{i}") for i in range(65)]
    )
    few = through(DENY, run_events([opener(0), *removed_call, *ends[:1]]))
    assert "asst-0" not in wire(few)
    many = run_events([*(opener(i) for i in range(65)), *removed_call, *ends])
    out = through(DENY, many)
    assert_events_equal(out, [e for e in many if e not in removed_call])


def test_content_less_continuations_held_with_a_message_are_bounded() -> None:
    empty = TextMessageChunkEvent()
    events = run_events([_BARE, *[empty] * 200, TextMessageChunkEvent(delta="hi")])
    out = through(DENY, events)
    assert len(out) < 70
    assert _folds_as_if_expanded(out, events) == [
        {"id": "asst-1", "role": "assistant", "content": "hi"}
    ]
    removed = tool_call("c1", "internal_x", "{}", parent_message_id="asst-1")
    emptied = run_events([_BARE, *[empty] * 200, *removed])
    assert_events_equal(through(DENY, emptied), run_events())


_SUB_REASONING = ReasoningMessageChunkEvent(message_id="r1", delta="hm", subagent_run_id="s1")
_BARE = TextMessageChunkEvent(message_id="asst-1")


@pytest.mark.parametrize(
    "between",
    [
        # closes the subagent's reasoning chunk (an implicit REASONING_MESSAGE_END)
        [StateSnapshotEvent(snapshot={"n": 1}, subagent_run_id="s1")],
        # a removed call in the subagent's lane closes it as well
        [
            ToolCallStartEvent(
                tool_call_id="c9", tool_call_name="internal_other", subagent_run_id="s1"
            ),
            ToolCallEndEvent(tool_call_id="c9", subagent_run_id="s1"),
        ],
        # a chunk carrying nothing expands to no event at all
        [ReasoningMessageChunkEvent(subagent_run_id="s1")],
        [],
    ],
    ids=[
        "state-closes-other-lane",
        "removed-call-closes-other-lane",
        "empty-continuation",
        "run-end-closes-both",
    ],
)
def test_what_adds_nothing_to_a_held_message_does_not_release_it(
    between: list[BaseEvent],
) -> None:
    # Expanded, each of these puts a REASONING_MESSAGE_END of r1 (or nothing) between the
    # held START and the removed call; an end of another item used to release the START,
    # so whether the emptied message stayed depended on lane order.
    events = run_events(
        [
            _SUB_REASONING,
            _BARE,
            *between,
            ToolCallChunkEvent(
                tool_call_id="c1",
                tool_call_name="internal_lookup",
                parent_message_id="asst-1",
                delta="{}",
                subagent_run_id="s2",
            ),
        ]
    )
    out = through(DENY, events)
    assert "asst-1" not in wire(out)
    assert [m["id"] for m in _folds_as_if_expanded(out, events)] == ["r1"]
    assert "asst-1" not in wire(_expanded_through(events))


def test_the_end_of_another_message_passes_a_held_start() -> None:
    other_start = TextMessageStartEvent(message_id="m0", role="assistant")
    other = [other_start, TextMessageContentEvent(message_id="m0", delta="hi")]
    other_end = TextMessageEndEvent(message_id="m0")
    events = run_events(
        [
            *other,
            TextMessageStartEvent(message_id="asst-1", role="assistant"),
            other_end,
            *tool_call("c1", "internal_lookup", "{}", parent_message_id="asst-1"),
            TextMessageEndEvent(message_id="asst-1"),
        ]
    )
    out = through(DENY, events)
    assert_events_equal(out, run_events([*other, other_end]))


def test_a_reused_id_still_open_downstream_is_continued_not_started_again() -> None:
    # m3 stays open downstream in the subagent's lane (the removed call that closed it
    # in the input is gone); the bare chunk opening m3 again must continue it there,
    # as the lane mirror does for any chunk, not send a second START for m3.
    events = run_events(
        [
            TextMessageChunkEvent(message_id="m3", delta="hi", subagent_run_id="s1"),
            ToolCallStartEvent(
                tool_call_id="c2", tool_call_name="internal_a", subagent_run_id="s1"
            ),
            ToolCallEndEvent(tool_call_id="c2", subagent_run_id="s1"),
            TextMessageChunkEvent(message_id="m3"),
        ]
    )
    out = through(DENY, events)
    assert not any(e.type == EventType.TEXT_MESSAGE_START for e in out)
    assert _folds_as_if_expanded(out, events) == [
        {"id": "m3", "role": "assistant", "content": "hi", "subagentRunId": "s1"}
    ]
