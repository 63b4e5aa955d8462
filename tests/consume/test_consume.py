"""ExpandChunks, the Verify stage, fold/Consumer/consume and the in-place JSON Patch."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    RunErrorEvent,
    StateDeltaEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
)
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes import (
    Consumer,
    ProtocolViolation,
    TransformerChain,
    VerificationError,
    consume,
    decode,
    fold,
)
from agui_pipes._foundation.json_patch import PatchError, apply_patch, json_equal
from agui_pipes.testing import (
    reasoning,
    run_events,
    run_started,
    subagent,
    text,
    text_chunks,
    tool_call,
    tool_call_chunks,
)
from agui_pipes.transformers import ExpandChunks, Verify
from agui_pipes.verify import Rule

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire


def expand(events: list[BaseEvent]) -> list[BaseEvent]:
    return TransformerChain([ExpandChunks()]).apply_sync(events)


def kinds(events: list[BaseEvent]) -> list[str]:
    return [e.type.value for e in events]


# -- ExpandChunks ------------------------------------------------------------


def test_chunks_expand_to_the_triad_closed_by_the_run_terminal() -> None:
    out = expand(run_events(text_chunks("m", "a", "b", role="user")))
    assert kinds(out) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    start = out[1]
    assert isinstance(start, TextMessageStartEvent)
    assert start.role == "user"


def test_text_chunk_without_role_opens_an_assistant_message() -> None:
    out = expand(run_events(text_chunks("m", "a")))
    assert out[1].role == "assistant"  # type: ignore[attr-defined]


def test_a_new_id_in_the_lane_closes_the_previous_item() -> None:
    out = expand(run_events(text_chunks("m1", "a") + text_chunks("m2", "b")))
    assert kinds(out)[1:-1] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]


def test_lanes_per_subagent_do_not_close_each_other() -> None:
    events = [
        *run_started(),
        *text_chunks("p", "parent-1"),
        *text_chunks("s", "sub-1", subagent="s1"),
        TextMessageChunkEvent(delta="parent-2"),
        TextMessageChunkEvent(delta="sub-2", subagent_run_id="s1"),
    ]
    out = expand(events)
    contents = [(e.message_id, e.delta) for e in out if isinstance(e, TextMessageContentEvent)]
    assert contents == [("p", "parent-1"), ("s", "sub-1"), ("p", "parent-2"), ("s", "sub-2")]
    assert not any(isinstance(e, TextMessageEndEvent) for e in out)


def test_explicit_event_closes_only_its_own_lane_and_subagent_end_closes_its_lane() -> None:
    events = [
        *run_started(),
        *text_chunks("p", "x"),
        *text_chunks("s", "y", subagent="s1"),
        TextMessageStartEvent(message_id="other", subagent_run_id="s1"),
    ]
    out = expand(events)
    assert kinds(out)[-2:] == ["TEXT_MESSAGE_END", "TEXT_MESSAGE_START"]
    assert out[-2].subagent_run_id == "s1"  # type: ignore[attr-defined]
    out = expand([*run_started(), *subagent("s1", "n", text_chunks("s", "y"))])
    assert kinds(out)[-2:] == ["TEXT_MESSAGE_END", "SUBAGENT_FINISHED"]


def test_untagged_continuation_goes_to_the_only_open_lane_else_ambiguous() -> None:
    sub = text_chunks("s", "y", subagent="s1")
    out = expand([*run_started(), *sub, TextMessageChunkEvent(delta="more")])
    assert out[-1].message_id == "s"  # type: ignore[attr-defined]
    with pytest.raises(VerificationError) as info:
        expand(
            [
                *run_started(),
                *sub,
                *text_chunks("t", "z", subagent="s2"),
                TextMessageChunkEvent(delta="which?"),
            ]
        )
    assert info.value.rule is Rule.CHUNK_AMBIGUOUS
    assert "Ambiguous TEXT_MESSAGE_CHUNK" in str(info.value)


@pytest.mark.parametrize(
    ("events", "rule", "wording"),
    [
        (
            [TextMessageChunkEvent(delta="x")],
            Rule.CHUNK_INCOMPLETE,
            "First TEXT_MESSAGE_CHUNK must have a messageId",
        ),
        (
            [ToolCallChunkEvent(tool_call_id="c", delta="x")],
            Rule.CHUNK_INCOMPLETE,
            "First TOOL_CALL_CHUNK must have a toolCallName",
        ),
        (
            [
                *text_chunks("m", "a", role="user"),
                TextMessageChunkEvent(delta="b", role="assistant"),
            ],
            Rule.CHUNK_CONFLICT,
            "does not match the open stream's role",
        ),
        (
            [*tool_call_chunks("c", "search", "{"), ToolCallChunkEvent(tool_call_name="other")],
            Rule.CHUNK_CONFLICT,
            "chunk toolCallName 'other' does not match",
        ),
        (
            [
                *text_chunks("m", "a", subagent="s1"),
                TextMessageChunkEvent(message_id="m", delta="b", subagent_run_id="s2"),
            ],
            Rule.OWNER_MISMATCH,
            "does not match the open stream's subagent 's1'",
        ),
    ],
)
def test_fatal_chunk_streams(events: list[BaseEvent], rule: Rule, wording: str) -> None:
    with pytest.raises(VerificationError) as info:
        expand([*run_started(), *events])
    assert info.value.rule is rule
    assert wording in str(info.value)


def test_chunk_metadata_and_raw_event_are_carried() -> None:
    events = [
        *run_started(),
        TextMessageChunkEvent(message_id="m", delta="a", metadata={"k": 1}, raw_event={"r": 1}),
        TextMessageChunkEvent(metadata={"k": 2}),
    ]
    out = expand(events)
    assert out[1].metadata == {"k": 1}
    assert out[1].raw_event is None
    assert (out[2].metadata, out[2].raw_event) == ({"k": 1}, {"r": 1})
    assert (out[3].metadata, out[3].delta) == ({"k": 2}, "")  # type: ignore[attr-defined]


def test_non_chunk_events_pass_as_the_same_object() -> None:
    events = run_events(text("m", "a"))
    assert all(a is b for a, b in zip(expand(events), events, strict=True))


# -- Verify stage --------------------------------------------------------------

BROKEN = [*run_started(), TextMessageContentEvent(message_id="x", delta="?"), *text("m", "after")]


def test_verify_stage_raise() -> None:
    with pytest.raises(VerificationError):
        TransformerChain([Verify()]).apply_sync(BROKEN)


def test_verify_stage_run_error_replaces_and_ends_cleanly() -> None:
    out = TransformerChain([Verify(on_violation="run_error")]).apply_sync(BROKEN)
    assert kinds(out) == ["RUN_STARTED", "RUN_ERROR"]
    assert isinstance(out[-1], RunErrorEvent)
    assert out[-1].code == "PROTOCOL_VIOLATION"
    assert "not-open" in out[-1].message
    # A truncated stream gets its RUN_ERROR at the end.
    out = TransformerChain([Verify(on_violation="run_error")]).apply_sync(run_started())
    assert kinds(out) == ["RUN_STARTED", "RUN_ERROR"]
    # The output is itself a valid stream.
    TransformerChain([Verify()]).apply_sync(out)


def test_verify_stage_warn_logs_and_passes(caplog: pytest.LogCaptureFixture) -> None:
    stage = Verify(on_violation="warn", allow_truncated=True)
    with caplog.at_level(logging.WARNING, logger="agui_pipes.verify"):
        out = TransformerChain([stage]).apply_sync(BROKEN)
    assert len(out) == len(BROKEN)
    assert [v.rule for v in stage.violations] == [Rule.NOT_OPEN]
    assert "not-open" in caplog.text


def test_verify_stage_disabled_and_bad_policy() -> None:
    out = TransformerChain([Verify(enabled=False)]).apply_sync(BROKEN)
    assert len(out) == len(BROKEN)
    with pytest.raises(ValueError, match="run_error"):
        Verify(on_violation="ignore")  # type: ignore[arg-type]


def test_verify_stage_fresh_per_run() -> None:
    stage = Verify(profile="producer", allow_truncated=True)
    assert repr(stage.fresh()) == repr(stage)


# -- fold ----------------------------------------------------------------------


def test_fold_tool_calls_results_and_placement() -> None:
    events = run_events(
        [
            *text("a1", "Looking."),
            *tool_call(
                "c1",
                "search",
                '{"q":',
                '"x"}',
                result="found",
                parent_message_id="a1",
                result_message_id="t1",
            ),
            *text("a2", "Done."),
        ]
    )
    result = fold(events)
    assert [m["id"] for m in result.messages] == ["a1", "t1", "a2"]
    assert result.messages[0]["toolCalls"] == [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}
    ]
    assert result.tool_calls == [
        {
            "id": "c1",
            "name": "search",
            "arguments": '{"q":"x"}',
            "parentMessageId": "a1",
            "result": "found",
        }
    ]
    assert result.outcome == "success"
    assert result.succeeded


def test_fold_creates_the_parent_message_when_missing() -> None:
    result = fold(run_events(tool_call("c1", "t", parent_message_id="p")))
    assert result.messages == [
        {
            "id": "p",
            "role": "assistant",
            "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "t", "arguments": ""}}
            ],
        }
    ]
    assert result.pending_tool_call_ids == ["c1"]


def test_fold_outcomes_interrupts_usage_and_runs() -> None:
    finished = decode(
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r2",
            "outcome": {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]},
            "usage": [{"model": "m", "inputTokens": 3}],
        }
    ).event
    assert finished is not None
    events = [*run_events(error="boom"), *run_started(run_id="r2"), finished]
    result = fold(events)
    assert result.outcome == "interrupt"
    assert result.interrupts == [{"id": "i1", "reason": "approval"}]
    assert result.usage == [{"model": "m", "inputTokens": 3}]
    assert result.run_error == {"message": "boom"}
    assert [(r.run_id, r.outcome) for r in result.runs] == [("run-1", "error"), ("r2", "interrupt")]
    assert fold(run_started()).outcome == "truncated"
    assert fold([]).outcome is None


def test_fold_state_delta_atomic_and_failure_keeps_state() -> None:
    snapshot = decode({"type": "STATE_SNAPSHOT", "snapshot": {"n": 1, "items": []}}).event
    good = decode(
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "add", "path": "/items/-", "value": {"deep": 1}},
                {"op": "replace", "path": "/n", "value": 2},
            ],
        }
    ).event
    bad = decode(
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "replace", "path": "/n", "value": 99},
                {"op": "remove", "path": "/missing"},
            ],
        }
    ).event
    assert snapshot and good and bad
    result = fold([*run_started(), snapshot, good, bad])
    assert result.state == {"n": 2, "items": [{"deep": 1}]}
    assert [w.code for w in result.warnings] == ["state-patch-failed"]
    # The events were not mutated by later patches.
    assert isinstance(good, StateDeltaEvent)
    assert good.delta[0].value == {"deep": 1}  # type: ignore[union-attr]


def test_fold_messages_snapshot_reconciles_and_keeps_client_only_messages() -> None:
    snap = decode(
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [
                {"id": "a", "role": "assistant", "content": "replaced"},
                {"id": "n", "role": "user", "content": "new"},
            ],
        }
    ).event
    activity = decode(
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "act", "activityType": "k", "content": {"x": 1}}
    ).event
    assert snap and activity
    events = [
        *run_started(),
        *text("a", "old"),
        *text("gone", "bye"),
        activity,
        *reasoning("r", "hmm"),
        snap,
    ]
    result = fold(events)
    assert [(m["id"], m.get("content")) for m in result.messages] == [
        ("a", "replaced"),
        ("act", {"x": 1}),
        ("r", "hmm"),
        ("n", "new"),
    ]


def test_fold_result_is_a_copy() -> None:
    consumer = Consumer(allow_truncated=True)
    for event in run_started() + text("m", "a"):
        consumer.push(event)
    first = consumer.snapshot()
    first.messages[0]["content"] = "mutated"
    assert consumer.snapshot().messages[0]["content"] == "a"


def test_long_message_in_many_deltas() -> None:
    deltas = [f"w{i} " for i in range(20000)]
    result = fold(run_events(text("m", *deltas)))
    assert result.messages[0]["content"] == "".join(deltas)


# -- Consumer / consume -----------------------------------------------------------


def test_consumer_reports_the_source_index_and_stays_failed() -> None:
    consumer = Consumer()
    consumer.push({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    consumer.push({"type": "UNKNOWN"})
    with pytest.raises(VerificationError) as info:
        consumer.push({"type": "TEXT_MESSAGE_END", "messageId": "m"})
    assert info.value.index == 2
    with pytest.raises(VerificationError):
        consumer.push({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    with pytest.raises(VerificationError):
        consumer.finish()


@pytest.mark.anyio
async def test_consume_async_source_and_truncation() -> None:
    wires: list[Any] = [
        e.model_dump(by_alias=True, mode="json") for e in run_events(text("m", "hi"))
    ]

    async def source() -> AsyncIterator[Any]:
        for wire in wires:
            yield wire

    result = await consume(source())
    assert result.messages == [{"id": "m", "role": "assistant", "content": "hi"}]
    with pytest.raises(ProtocolViolation) as info:
        await consume(wires[:-1])
    assert isinstance(info.value, VerificationError)
    assert info.value.rule is Rule.TRUNCATED
    result = await consume(wires[:-1], allow_truncated=True)
    assert result.outcome == "truncated"
    with pytest.raises(TypeError, match="iterable of events"):
        await consume(b"{}")


@pytest.mark.anyio
@pytest.mark.parametrize("allow_truncated", [False, True])
@pytest.mark.parametrize(
    ("source", "wording", "where"),
    [
        ([], "no events at all", "[end of stream]"),
        ([{"type": "NOT_AN_AG_UI_TYPE"}], "none of its 1 items", "[end of stream after 1 event]"),
    ],
)
async def test_a_stream_with_no_event_is_rejected_not_an_outcome_of_none(
    allow_truncated: bool, source: list[Any], wording: str, where: str
) -> None:
    # consume([]) used to return outcome=None, none of the documented outcomes.
    with pytest.raises(VerificationError) as info:
        await consume(source, allow_truncated=allow_truncated)
    assert info.value.rule is Rule.FIRST_EVENT
    assert wording in str(info.value)
    assert str(info.value).endswith(where)


def test_end_of_stream_is_after_the_events_not_one_more() -> None:
    # A 3-event stream was reported "[end of stream after 4 events]".
    consumer = Consumer()
    wires = [e.model_dump(by_alias=True, mode="json") for e in run_events(text("m", "hi"))]
    for wire in wires[:3]:
        consumer.push(wire)
    with pytest.raises(VerificationError) as info:
        consumer.finish()
    assert info.value.index == 2  # the last event's, 0-based
    assert str(info.value).endswith("[end of stream after 3 events]")


def test_a_malformed_event_is_reported_at_its_own_position() -> None:
    # It has no decoded event, which used to read as "end of stream after 3 events".
    consumer = Consumer()
    wires = [e.model_dump(by_alias=True, mode="json") for e in run_events(text("m", "hi"))]
    consumer.push(wires[0])
    consumer.push(wires[1])
    with pytest.raises(ProtocolViolation) as info:
        consumer.push({**wires[2], "delta": 5})
    assert info.value.index == 2
    assert str(info.value).endswith("[event #2]")
    assert "end of stream" not in str(info.value)


# -- JSON Patch --------------------------------------------------------------------


class Op:
    def __init__(self, op: str, path: str, value: Any = None, from_: str | None = None):
        self.op, self.path, self.value, self.from_ = op, path, value, from_


def test_patch_semantics() -> None:
    doc: Any = {"a": [1, 2], "b": {"c": 1}}
    doc = apply_patch(
        doc,
        [
            Op("add", "/a/0", 0),
            Op("move", "/b/c", from_="/a/2"),
            Op("copy", "/d", from_="/b"),
            Op("test", "/a", [0, 1]),
            Op("add", "/a/-", 9),
            Op("add", "/e~1f", 1),
        ],
    )
    assert doc == {"a": [0, 1, 9], "b": {"c": 2}, "d": {"c": 2}, "e/f": 1}
    assert apply_patch(doc, [Op("replace", "", [1])]) == [1]
    assert apply_patch({"x": 1}, [Op("remove", "")]) is None


@pytest.mark.parametrize(
    "op",
    [
        Op("remove", "/nope"),
        Op("replace", "/a/5", 1),
        Op("add", "/a/9", 1),
        Op("add", "/z/y", 1),
        Op("test", "/flag", 1),
        Op("add", "/a/x", 1),
        Op("move", "/q", from_="/nope"),
        Op("remove", "/a/-"),
    ],
)
def test_patch_failures_roll_back(op: Op) -> None:
    doc = {"a": [1, 2], "flag": True, "k": "v"}
    before = {"a": [1, 2], "flag": True, "k": "v"}
    with pytest.raises(PatchError):
        apply_patch(doc, [Op("add", "/a/0", 0), Op("remove", "/k"), Op("add", "/new", 1), op])
    assert doc == before


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=3),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_json_equal_is_reflexive_and_strict_about_booleans(value: Any) -> None:
    assert json_equal(value, value)
    assert not json_equal(True, 1)
    assert json_equal(1, 1.0)


@given(
    st.lists(st.text(max_size=5), min_size=1, max_size=6),
    st.lists(st.text(alphabet='{}:"ab1', max_size=4), min_size=1, max_size=4),
    st.sampled_from([None, "s1"]),
)
def test_chunk_form_folds_like_the_explicit_form(
    deltas: list[str], args: list[str], owner: str | None
) -> None:
    explicit = run_events(
        [
            *text("m", *deltas, subagent=owner),
            *tool_call("c", "t", *args, parent_message_id="m", subagent=owner),
        ]
    )
    chunked = run_events(
        [
            *text_chunks("m", *deltas, subagent=owner),
            *tool_call_chunks("c", "t", *args, parent_message_id="m", subagent=owner),
        ]
    )
    assert fold(expand(chunked)).messages == fold(explicit).messages
    consumer = Consumer()
    consumer.push_many(chunked)
    assert consumer.finish().messages == fold(explicit).messages


def test_lookups_follow_list_order_when_a_result_reuses_a_message_id() -> None:
    # The tool message "m3" is inserted *before* the assistant message "m3", so a
    # later reference to "m3" finds the tool message first (as the reference does):
    # a tool call naming it as parent gets a fresh assistant message of its own.
    result = fold(
        [
            *run_started(),
            *tool_call("c1", "search", parent_message_id="m2"),
            *tool_call("c4", "search", parent_message_id="m3"),
            ToolCallResultEvent(message_id="m3", tool_call_id="c1", content="ok"),
            *tool_call("c9", "lookup", parent_message_id="m3"),
        ]
    )
    assert [(m["id"], m["role"]) for m in result.messages] == [
        ("m2", "assistant"),
        ("m3", "tool"),
        ("m3", "assistant"),
        ("c9", "assistant"),
    ]
