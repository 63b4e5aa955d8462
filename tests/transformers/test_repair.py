"""The Repair stage: one test per fix, the report, and the two properties.

Properties: on every valid stream Repair is the identity (the same event
objects out, an empty report); on the mutated streams of the differential
corpus that the TypeScript client rejects for an ordering reason, Repair's
output is accepted by that client and by our consumer verifier.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    RawEvent,
    RunErrorEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from agui_pipes import Consumer, DecodeError, ProtocolViolation, StreamRejected, VerificationError
from agui_pipes.codecs import decode_all
from agui_pipes.config import load_chain
from agui_pipes.testing import (
    run_events,
    run_finished,
    run_started,
    run_transformer,
    subagent,
    text,
    tool_call,
)
from agui_pipes.transformers import (
    ExpandChunks,
    Repair,
    RepairFix,
    RepairLimitExceeded,
    RepairReport,
)
from agui_pipes.verify import Verifier
from tests._differential import differential_settings
from tests._oracle import to_wire
from tests._wire_streams import mutate, valid_stream

PRODUCERS = Path(__file__).parents[1] / "data" / "producers"


def repaired(events: list[BaseEvent], **options: Any) -> tuple[list[BaseEvent], RepairReport]:
    stage = Repair(**options)
    out = run_transformer(stage, events)
    Verifier("consumer").observe_all(out)  # every repaired stream is valid
    return out, stage.report


def fold(events: list[BaseEvent]) -> list[dict[str, Any]]:
    consumer = Consumer()
    consumer.push_many([to_wire(e) for e in events])
    messages: list[dict[str, Any]] = consumer.finish().messages
    return messages


def types(events: list[BaseEvent]) -> list[str]:
    return [e.type.value for e in events]


def rules(report: RepairReport) -> list[tuple[str, str]]:
    return [(fix.rule, fix.action) for fix in report.fixes]


# -- content after the item's end (pydantic-ai parallel tool calls) -----------


def _sse_events(name: str) -> list[BaseEvent]:
    text_ = (PRODUCERS / name).read_text()
    wires = [json.loads(b[len("data: ") :]) for b in text_.split("\n\n") if b.startswith("data: ")]
    events, _ = decode_all(wires)
    return events


def test_recorded_pydantic_ai_parallel_calls_keep_each_call_its_arguments() -> None:
    events = _sse_events("pydantic-ai-parallel-tools.sse")
    with pytest.raises(VerificationError, match="No active tool call"):
        Verifier("consumer").observe_all(events)
    out, report = repaired(events)
    assert rules(report) == [("content-after-end", "reopened")]
    assert report.fixes[0].index == 8  # the late TOOL_CALL_ARGS
    calls = {
        call["id"]: call["function"]["arguments"]
        for message in fold(out)
        for call in message.get("toolCalls", [])
    }
    assert calls == {
        "call-internal-1": '{"key": "SECRET-ARG-7f3a"}',
        "call-weather-1": '{"city": "Paris"}',
    }
    # The reopened call is closed again before the first event of another kind.
    result = types(out).index("TOOL_CALL_RESULT")
    assert out[result - 1] == ToolCallEndEvent(tool_call_id="call-internal-1")


def test_late_text_content_reopens_the_message_with_its_role_and_owner() -> None:
    events = run_events(
        [
            TextMessageStartEvent(message_id="m1", role="developer", subagent_run_id="s1"),
            TextMessageContentEvent(message_id="m1", delta="a"),
            TextMessageEndEvent(message_id="m1"),
            TextMessageContentEvent(message_id="m1", delta="b"),
            CustomEvent(name="x", value=1),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("content-after-end", "reopened")]
    assert types(out)[4:8] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "CUSTOM",
    ]
    assert out[4] == TextMessageStartEvent(message_id="m1", role="developer", subagent_run_id="s1")
    (message,) = fold(out)
    assert message["content"] == "ab" and message["role"] == "developer"


def test_an_explicit_end_after_late_content_closes_the_reopened_item() -> None:
    events = run_events(
        [
            ToolCallStartEvent(tool_call_id="c1", tool_call_name="f"),
            ToolCallEndEvent(tool_call_id="c1"),
            ToolCallArgsEvent(tool_call_id="c1", delta="{}"),
            ToolCallEndEvent(tool_call_id="c1"),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("content-after-end", "reopened")]
    assert types(out).count("TOOL_CALL_END") == 2
    assert types(out).count("TOOL_CALL_START") == 2


def _call(call_id: str, name: str) -> ToolCallStartEvent:
    return ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id="m")


def test_after_late_content_the_runs_later_ends_wait_for_their_content() -> None:
    # Three parallel calls, each one's last ARGS after its END (pydantic-ai with
    # OpenAI's interleaved deltas). The first late delta can only reopen its call;
    # from then on the run's TOOL_CALL_ENDs are held until the calls' content is
    # done, so each END is sent once, after all of its call's arguments.
    events = run_events(
        [
            _call("c1", "f"),
            ToolCallArgsEvent(tool_call_id="c1", delta='{"a":'),
            ToolCallEndEvent(tool_call_id="c1"),
            _call("c2", "g"),
            ToolCallArgsEvent(tool_call_id="c1", delta="1}"),
            ToolCallArgsEvent(tool_call_id="c2", delta='{"b":'),
            ToolCallEndEvent(tool_call_id="c2"),
            _call("c3", "h"),
            ToolCallArgsEvent(tool_call_id="c2", delta="2}"),
            ToolCallArgsEvent(tool_call_id="c3", delta="{}"),
            ToolCallEndEvent(tool_call_id="c3"),
            ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="x"),
        ]
    )
    out, report = repaired(events)
    assert [(f.rule, f.action, f.index) for f in report.fixes] == [
        ("content-after-end", "reopened", 5),
        ("content-after-end", "moved", 7),  # c2's END, held past its late delta
    ]
    ends = [e.tool_call_id for e in out if isinstance(e, ToolCallEndEvent)]
    assert ends == ["c1", "c2", "c3", "c1"]
    assert types(out)[-4:] == ["TOOL_CALL_END", "TOOL_CALL_END", "TOOL_CALL_RESULT", "RUN_FINISHED"]
    calls = {c["id"]: c["function"]["arguments"] for m in fold(out) for c in m.get("toolCalls", [])}
    assert calls == {"c1": '{"a":1}', "c2": '{"b":2}', "c3": "{}"}


def test_held_ends_are_bounded_by_the_next_event_of_another_kind() -> None:
    late = [
        _call("c1", "f"),
        ToolCallEndEvent(tool_call_id="c1"),
        ToolCallArgsEvent(tool_call_id="c1", delta="{}"),  # hold mode from here
    ]
    # Released at the run's end, at a text message, and when the producer
    # reopens the call itself; a second END while held is a duplicate.
    events = run_events(
        [
            *late,
            _call("c2", "g"),
            ToolCallEndEvent(tool_call_id="c2"),
            ToolCallEndEvent(tool_call_id="c2"),
            _call("c2", "g"),
            ToolCallEndEvent(tool_call_id="c2"),
            *text("m9", "hi"),
        ]
    )
    out, report = repaired(events)
    assert ("duplicate-end", "dropped") in rules(report)
    assert types(out)[3:] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",  # c1 reopened
        "TOOL_CALL_START",
        "TOOL_CALL_END",  # c2, its END released by its own re-open
        "TOOL_CALL_START",
        "TOOL_CALL_END",
        "TOOL_CALL_END",  # c1 (synthesized) and c2 (held) at the text
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    # RAW closes nothing, so it does not release a held END either.
    raw = RawEvent(event={"provider": "delta"})
    events = run_events(
        [
            *late,
            _call("c2", "g"),
            ToolCallEndEvent(tool_call_id="c2"),
            raw,
            ToolCallArgsEvent(tool_call_id="c2", delta="{}"),
        ]
    )
    out, report = repaired(events)
    assert ("content-after-end", "moved") in rules(report)
    assert types(out)[5:] == [
        "TOOL_CALL_START",
        "RAW",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert [e.tool_call_id for e in out[8:10]] == ["c2", "c1"]  # type: ignore[attr-defined]
    truncated = [*run_started(), *late, _call("c2", "g"), ToolCallEndEvent(tool_call_id="c2")]
    out, report = repaired(truncated)
    assert types(out)[-3:] == ["TOOL_CALL_END", "TOOL_CALL_END", "RUN_ERROR"]


def test_content_for_an_item_never_opened() -> None:
    events = run_events(
        [
            TextMessageContentEvent(message_id="m1", delta="hi"),
            ToolCallArgsEvent(tool_call_id="c1", delta="{}"),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [
        ("content-not-started", "synthesized"),
        ("content-not-started", "dropped"),  # a tool call's name cannot be guessed
    ]
    assert fold(out) == [{"id": "m1", "role": "assistant", "content": "hi"}]
    # A lost START is not late content: later ENDs are not held.
    events = run_events(
        [
            TextMessageContentEvent(message_id="m1", delta="hi"),
            TextMessageEndEvent(message_id="m1"),
            TextMessageStartEvent(message_id="m2"),
            TextMessageStartEvent(message_id="m3"),
            TextMessageEndEvent(message_id="m2"),
            TextMessageEndEvent(message_id="m3"),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("content-not-started", "synthesized")]
    assert out[2:] == events[1:]


def test_ends_without_an_open_item_are_dropped() -> None:
    events = run_events(
        [
            *text("m1", "a"),
            TextMessageEndEvent(message_id="m1"),
            ToolCallEndEvent(tool_call_id="nope"),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("duplicate-end", "dropped"), ("end-not-started", "dropped")]
    assert out == [*events[:4], events[-1]]


# -- run lifecycle -----------------------------------------------------------


def test_a_second_terminal_is_dropped() -> None:
    after_error = [*run_started(), RunErrorEvent(message="boom"), *run_finished()]
    out, report = repaired(after_error)
    assert rules(report) == [("second-terminal", "dropped")]
    assert out == after_error[:2]
    twice = [*run_events(), *run_finished()]
    out, report = repaired(twice)
    assert rules(report) == [("second-terminal", "dropped")]
    assert out == twice[:2]


def test_a_late_run_error_after_run_finished_is_valid_and_kept() -> None:
    events = [*run_events(), RunErrorEvent(message="late")]
    out, report = repaired(events)
    assert out == events and report.count == 0


def test_events_after_the_run_ended_are_dropped_but_a_new_run_may_start() -> None:
    events = [
        *run_events(),
        *text("m1", "late"),
        *run_events(run_id="run-2"),
    ]
    out, report = repaired(events)
    assert rules(report) == [("after-run-end", "dropped")] * 3
    assert out == [*events[:2], *events[5:]]


def test_a_run_started_inside_an_active_run_is_dropped() -> None:
    events = [*run_started(), *run_started(run_id="run-2"), *text("m1", "x"), *run_finished()]
    out, report = repaired(events)
    assert rules(report) == [("duplicate-run-started", "dropped")]
    assert out == [events[0], *events[2:]]


def test_a_missing_run_started_takes_the_configured_ids() -> None:
    events = [*text("m1", "hi"), *run_finished()]
    out, report = repaired(events, thread_id="t-req", run_id="r-req")
    assert rules(report) == [("missing-run-started", "synthesized")]
    assert out[0] == RunStartedEvent(thread_id="t-req", run_id="r-req")
    assert out[1:] == events


def test_a_missing_run_started_takes_the_ids_of_an_event_that_carries_them() -> None:
    out, _ = repaired(run_finished("t9", "r9"))
    assert out[0] == RunStartedEvent(thread_id="t9", run_id="r9")
    events = [*text("m1", "hi"), *run_finished("t9", "r9")]
    out, report = repaired(events)
    assert out == [RunStartedEvent(thread_id="t9", run_id="r9"), *events]
    assert report.fixes[0].index == 0


def test_a_missing_run_started_is_looked_for_a_few_events_then_generated() -> None:
    events = [TextMessageStartEvent(message_id="m1")] + [
        TextMessageContentEvent(message_id="m1", delta=str(i)) for i in range(12)
    ]
    out, report = repaired(events)
    started = out[0]
    assert isinstance(started, RunStartedEvent)
    assert started.thread_id.startswith("repair-thread-")
    assert started.run_id.startswith("repair-run-")
    assert out[1:-1] == events
    assert rules(report) == [("missing-run-started", "synthesized"), ("truncated", "synthesized")]
    # Decided after eight events, not at the end of the stream.
    stage = Repair()
    assert list(stage.transform(events[0])) == []
    for event in events[1:7]:
        assert list(stage.transform(event)) == []
    assert len(list(stage.transform(events[7]))) == 9


def test_a_run_started_that_comes_late_is_moved_first() -> None:
    events = run_events(text("m1", "hi"))
    swapped = [events[1], events[0], *events[2:]]
    out, report = repaired(swapped)
    assert out == events
    assert rules(report) == [("missing-run-started", "moved")]
    assert report.fixes[0].index == 1


def test_a_truncated_run_ends_with_a_run_error() -> None:
    events = [*run_started(), *text("m1", "cut")][:-1]
    out, report = repaired(events)
    assert rules(report) == [("truncated", "synthesized")]
    assert report.fixes[0].index == len(events)
    assert out[:-1] == events
    assert out[-1] == RunErrorEvent(
        message="the stream ended before the run finished", code="STREAM_TRUNCATED"
    )


def test_an_empty_stream_stays_empty() -> None:
    assert run_transformer(Repair(), []) == []


# -- items open at the end ---------------------------------------------------


def test_items_open_at_run_finished_are_closed_innermost_first() -> None:
    events = run_events(
        [
            StepStartedEvent(step_name="plan"),
            SubagentStartedEvent(subagent_run_id="s1", name="helper"),
            TextMessageStartEvent(message_id="m1", subagent_run_id="s1"),
            ToolCallStartEvent(tool_call_id="c1", tool_call_name="f"),
            ToolCallArgsEvent(tool_call_id="c1", delta="{}"),
        ]
    )
    out, report = repaired(events)
    assert [fix.rule for fix in report.fixes] == ["open-at-finish"] * 4
    assert types(out)[-5:] == [
        "TEXT_MESSAGE_END",
        "TOOL_CALL_END",
        "STEP_FINISHED",
        "SUBAGENT_FINISHED",
        "RUN_FINISHED",
    ]
    assert out[-5] == TextMessageEndEvent(message_id="m1", subagent_run_id="s1")


def test_items_open_at_run_error_are_left_as_they_are() -> None:
    # 1.0 exempts RUN_ERROR: a run that blew up could not close things, and an
    # invented TOOL_CALL_END would present truncated arguments as complete.
    events = [
        *run_started(),
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="f"),
        RunErrorEvent(message="boom"),
    ]
    out, report = repaired(events)
    assert out == events and report.count == 0


# -- duplicates and owners ---------------------------------------------------


def test_a_duplicate_start_of_an_open_item_is_dropped() -> None:
    events = run_events(
        [
            TextMessageStartEvent(message_id="m1"),
            TextMessageStartEvent(message_id="m1"),
            TextMessageEndEvent(message_id="m1"),
            StepStartedEvent(step_name="s"),
            StepStartedEvent(step_name="s"),
            StepFinishedEvent(step_name="s"),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("duplicate-start", "dropped")] * 2
    assert out == [events[0], events[1], events[3], events[4], events[6], events[7]]


def test_steps_and_subagents_closed_without_an_opener_are_dropped() -> None:
    events = run_events(
        [
            StepFinishedEvent(step_name="never"),
            *subagent("s1", "helper", text("m1", "x")),
            *subagent("s1", "helper")[1:],  # a second SUBAGENT_FINISHED for s1
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("step-not-started", "dropped"), ("subagent-not-started", "dropped")]
    assert types(out).count("SUBAGENT_FINISHED") == 1 and "STEP_FINISHED" not in types(out)


def test_a_continuation_tagged_with_another_owner_keeps_the_openers() -> None:
    events = run_events(
        [
            TextMessageStartEvent(message_id="m1", subagent_run_id="s1"),
            TextMessageContentEvent(message_id="m1", delta="x", subagent_run_id="s2"),
            TextMessageEndEvent(message_id="m1"),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("owner-mismatch", "rewritten")]
    assert out[2] == TextMessageContentEvent(message_id="m1", delta="x")


def test_a_step_finished_under_the_wrong_owner_is_retagged() -> None:
    events = run_events(
        [
            StepStartedEvent(step_name="tools", subagent_run_id="s1"),
            StepFinishedEvent(step_name="tools"),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("owner-mismatch", "rewritten")]
    assert out[2] == StepFinishedEvent(step_name="tools", subagent_run_id="s1")


def test_an_unknown_parent_subagent_is_removed() -> None:
    events = run_events(subagent("s2", "helper", parent="s-never"))
    out, report = repaired(events)
    assert rules(report) == [("unknown-parent-subagent", "rewritten")]
    assert out[1] == SubagentStartedEvent(subagent_run_id="s2", name="helper")


def test_a_chunk_stream_the_expansion_refuses_is_dropped_chunk_by_chunk() -> None:
    events = run_events(
        [
            TextMessageChunkEvent(message_id="m1", delta="a", role="assistant"),
            TextMessageChunkEvent(message_id="m1", delta="b", role="user"),  # conflicting role
            TextMessageChunkEvent(message_id="m1", delta="c"),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("chunk-conflict", "dropped")]
    (message,) = fold(out)
    assert message["content"] == "ac"


# -- state -------------------------------------------------------------------


def _delta(*ops: dict[str, Any]) -> StateDeltaEvent:
    return StateDeltaEvent.model_validate({"delta": list(ops)})


def test_a_replace_of_a_missing_path_becomes_an_add() -> None:
    events = run_events(
        [
            StateSnapshotEvent(snapshot={"a": 1}),
            _delta(
                {"op": "replace", "path": "/status", "value": "done"},
                {"op": "replace", "path": "/a", "value": 2},
            ),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [("state-replace-missing", "rewritten")]
    consumer = Consumer()
    consumer.push_many([to_wire(e) for e in out])
    assert consumer.finish().state == {"a": 2, "status": "done"}


def test_operations_that_cannot_apply_are_dropped_and_an_empty_delta_with_them() -> None:
    events = run_events(
        [
            StateSnapshotEvent(snapshot={"a": 1}),
            _delta({"op": "remove", "path": "/gone"}, {"op": "add", "path": "/b", "value": 1}),
            _delta({"op": "add", "path": "/no/parent", "value": 1}),
        ]
    )
    out, report = repaired(events)
    assert rules(report) == [
        ("state-op-unappliable", "dropped"),
        ("state-op-unappliable", "dropped"),
        ("state-delta-empty", "dropped"),
    ]
    assert types(out) == ["RUN_STARTED", "STATE_SNAPSHOT", "STATE_DELTA", "RUN_FINISHED"]
    delta = out[2]
    assert isinstance(delta, StateDeltaEvent)
    assert [op.model_dump() for op in delta.delta] == [{"op": "add", "path": "/b", "value": 1}]


def test_a_failing_test_operation_is_the_producers_own_condition() -> None:
    events = run_events(
        [
            StateSnapshotEvent(snapshot={"a": 1}),
            _delta(
                {"op": "test", "path": "/a", "value": 2},
                {"op": "replace", "path": "/a", "value": 3},
            ),
            _delta({"op": "replace", "path": "/b", "value": 1}),
        ]
    )
    out, report = repaired(events)
    assert out[2] is events[2]
    # The state is still {"a": 1}: /b is missing, so the next replace is an add.
    assert rules(report) == [("state-replace-missing", "rewritten")]


def test_deltas_before_any_snapshot_apply_to_the_clients_own_state() -> None:
    events = run_events([_delta({"op": "replace", "path": "/x", "value": 1})])
    out, report = repaired(events)
    assert out == events and report.count == 0


def test_an_input_echo_with_state_is_the_base_of_the_deltas() -> None:
    from ag_ui.core import RunAgentInput

    echo = RunAgentInput(
        thread_id="thread-1",
        run_id="run-1",
        messages=[],
        state={"n": 1},
        tools=[],
        context=[],
        forwarded_props={},
    )
    events = [*run_started(input=echo), _delta({"op": "remove", "path": "/m"}), *run_finished()]
    out, report = repaired(events)
    assert rules(report) == [("state-op-unappliable", "dropped"), ("state-delta-empty", "dropped")]
    assert "STATE_DELTA" not in types(out)


# -- the report, the limit, emission, logging, YAML --------------------------


def _three_fixes() -> list[BaseEvent]:
    return [*run_events(), *run_finished(), *run_finished(), *run_finished()]


def test_the_report_is_capped_but_counts_everything() -> None:
    stage = Repair(report_limit=2)
    run_transformer(stage, _three_fixes())
    report = stage.report
    assert report.count == 3 and len(report.fixes) == 2 and report.truncated
    assert report.counts() == {"second-terminal": 3}
    data = report.as_dict()
    assert data["count"] == 3 and data["truncated"] is True
    assert data["fixes"] == [fix.as_dict() for fix in report.fixes]
    assert RepairFix("r", 1, "dropped", "d").as_dict() == {
        "rule": "r",
        "index": 1,
        "action": "dropped",
        "detail": "d",
    }


def test_past_max_fixes_the_stream_is_rejected() -> None:
    stage = Repair(max_fixes=2)
    with pytest.raises(RepairLimitExceeded) as info:
        run_transformer(stage, _three_fixes())
    assert isinstance(info.value, StreamRejected)
    assert info.value.rule == "repair-limit"
    assert "max_fixes" in str(info.value) and info.value.report.count == 3
    assert run_transformer(Repair(max_fixes=None), _three_fixes()) == _three_fixes()[:2]


def test_emitted_fixes_are_custom_events_inside_their_run() -> None:
    events = run_events([ToolCallStartEvent(tool_call_id="c1", tool_call_name="f")])
    out, report = repaired([*events, *run_finished()], emit=True)
    assert types(out) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_END",
        "CUSTOM",
        "RUN_FINISHED",
    ]
    custom = out[3]
    assert isinstance(custom, CustomEvent)
    assert custom.name == "agui_pipes.repair"
    assert custom.value == report.fixes[0].as_dict()
    # The second RUN_FINISHED's fix has no run to carry it: report only.
    assert report.counts() == {"open-at-finish": 1, "second-terminal": 1}


def test_every_fix_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agui_pipes.repair"):
        run_transformer(Repair(), [*run_events(), *run_finished()])
    (record,) = caplog.records
    assert record.name == "agui_pipes.repair" and "second-terminal" in record.getMessage()


def test_bad_options_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="max_fixes"):
        Repair(max_fixes=-1)
    with pytest.raises(ValueError, match="report_limit"):
        Repair(report_limit=-1)


def test_declared_in_yaml() -> None:
    chain = load_chain(
        "transformers:\n  - type: repair\n    max_fixes: 1\n    thread_id: t\n    run_id: r\n"
    )
    events = [*text("m1", "x"), *run_finished("t", "r")]
    assert chain().apply_sync(events)[0] == RunStartedEvent(thread_id="t", run_id="r")
    with pytest.raises(RepairLimitExceeded):
        chain().apply_sync([*events, *run_finished()])


def test_fresh_starts_with_an_empty_report() -> None:
    stage = Repair(emit=True)
    run_transformer(stage, _three_fixes())
    again = stage.fresh()
    assert again.report.count == 0 and stage.report.count == 3


@pytest.mark.anyio
async def test_repairs_the_same_in_an_async_chain() -> None:
    from collections.abc import AsyncIterator

    from agui_pipes import TransformerChain

    events = _sse_events("pydantic-ai-parallel-tools.sse")

    async def source() -> AsyncIterator[BaseEvent]:
        for event in events:
            yield event

    stage = Repair()
    out = [e async for e in TransformerChain([stage]).apply(source())]
    assert out == run_transformer(Repair(), events)
    assert stage.report.counts() == {"content-after-end": 1}


def test_a_tool_result_is_never_touched() -> None:
    events = run_events(tool_call("c1", "f", {"a": 1}, result="ok"))
    assert isinstance(events[-2], ToolCallResultEvent)
    out, report = repaired(events)
    assert out == events and report.count == 0


# -- the conformance corpus --------------------------------------------------

CONFORMANCE = sorted((Path(__file__).parents[1] / "conformance" / "streams").glob("*.json"))


@pytest.mark.parametrize("path", CONFORMANCE, ids=[p.stem for p in CONFORMANCE])
def test_conformance_cases_valid_ones_untouched_ordering_ones_repaired(path: Path) -> None:
    case = json.loads(path.read_text())
    try:
        events, _ = decode_all(case["stream"])
    except DecodeError:
        assert case["expect"]["outcome"] == "failed"
        return  # malformed, not misordered: refused before any stage
    stage = Repair()
    out = run_transformer(stage, events)
    consumer = Consumer()
    consumer.push_many([to_wire(e) for e in out])
    consumer.finish()  # every case decodes to a stream Repair makes acceptable
    if case["expect"]["outcome"] == "completed":
        expanded = run_transformer(ExpandChunks(), events)
        if path.stem == "truncated-run-reported-as-completed":
            assert stage.report.counts() == {"truncated": 1}
            assert out[:-1] == expanded
        else:
            assert stage.report.count == 0
            assert out == expanded
    else:
        assert stage.report.count > 0


# -- property: the identity on valid streams ----------------------------------


def _identity_streams() -> st.SearchStrategy[list[BaseEvent]]:
    from agui_pipes.testing.strategies import streams

    return streams(max_runs=3, reopen=True, leading_run_error=True, late_run_error=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_identity_streams())
def test_on_a_valid_stream_repair_changes_nothing(events: list[BaseEvent]) -> None:
    expanded = run_transformer(ExpandChunks(), events)
    stage = Repair(emit=True, max_fixes=0)
    out = run_transformer(stage, events)
    assert stage.report.count == 0
    # The very same objects: chunk events come out expanded, everything else as it came.
    assert len(out) == len(expanded)
    assert all(a is b or a == b for a, b in zip(out, expanded, strict=True))
    chunk_free = [e for e in events if not e.type.value.endswith("_CHUNK")]
    if len(chunk_free) == len(events):
        assert all(a is b for a, b in zip(out, events, strict=True))


@differential_settings(40)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_on_the_valid_wire_corpus_repair_changes_nothing(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(10):
        wire = valid_stream(rng)
        try:
            consumer = Consumer()
            consumer.push_many(wire)
            consumer.finish()
        except ProtocolViolation:
            continue  # the corpus generator makes a few invalid ones on purpose
        events, _ = decode_all(wire)
        stage = Repair(max_fixes=None)
        out = run_transformer(stage, events)
        state_fixes = {"state-replace-missing", "state-op-unappliable", "state-delta-empty"}
        # The corpus carries deltas that do not apply (a client skips them):
        # those are what Repair rewrites in a valid stream, and nothing else.
        assert set(stage.report.counts()) <= state_fixes
        if not stage.report.count:
            expanded = run_transformer(ExpandChunks(), events)
            assert all(a is b or a == b for a, b in zip(out, expanded, strict=True))


_ITEM_ENDS = (TextMessageEndEvent, ToolCallEndEvent)


def _ends_moved_early(events: list[BaseEvent], rng: random.Random) -> list[BaseEvent]:
    """Each text/tool END moved, at random, to before some of its own item's content."""
    out = list(events)
    for position in range(len(out) - 1, -1, -1):
        end = out[position]
        if not isinstance(end, _ITEM_ENDS) or rng.random() < 0.5:
            continue
        field = "tool_call_id" if isinstance(end, ToolCallEndEvent) else "message_id"
        item = getattr(end, field)
        start = position - 1
        while not (
            isinstance(out[start], (TextMessageStartEvent, ToolCallStartEvent))
            and getattr(out[start], field, None) == item
        ):
            start -= 1
        target = rng.randint(start + 1, position)
        out.insert(target, out.pop(position))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_identity_streams(), seed=st.integers(min_value=0, max_value=2**32 - 1))
# An END carrying metadata moved before content that carries the same key: the
# END's value must still be the last write (seed 2 moves the END before the ARGS).
@example(
    events=run_events(
        [
            ToolCallStartEvent(tool_call_id="c1", tool_call_name="search"),
            ToolCallArgsEvent(tool_call_id="c1", delta="{}", metadata={"usage": " is"}),
            ToolCallEndEvent(tool_call_id="c1", metadata={"usage": None}),
        ]
    ),
    seed=2,
)
# The END a closer stands in for is the latest one: here it carries no metadata, and
# the earlier END's (before a MESSAGES_SNAPSHOT dropped the message) must not return.
@example(
    events=run_events(
        [
            TextMessageStartEvent(message_id="m1", role="assistant"),
            TextMessageContentEvent(message_id="m1", delta="a"),
            TextMessageEndEvent(message_id="m1", metadata={"trace": 1}),
            MessagesSnapshotEvent(messages=[]),
            TextMessageStartEvent(message_id="m1", role="assistant"),
            TextMessageContentEvent(message_id="m1", delta="b"),
            TextMessageEndEvent(message_id="m1"),
        ]
    ),
    seed=2,
)
def test_ends_sent_before_their_content_fold_as_the_producer_meant(
    events: list[BaseEvent], seed: int
) -> None:
    # The pydantic-ai breakage generalised: text and tool-call ENDs sent before
    # some of their own content. Repaired, the stream folds into the very
    # messages and state the well-ordered stream does.
    expanded = run_transformer(ExpandChunks(), events)
    early = _ends_moved_early(expanded, random.Random(seed))
    out, _ = repaired(early, max_fixes=None)
    Verifier("consumer").finish()
    mine, meant = Consumer(), Consumer()
    mine.push_many([to_wire(e) for e in out])
    meant.push_many([to_wire(e) for e in expanded])
    got, want = mine.finish(), meant.finish()
    assert json.dumps(got.messages, sort_keys=True) == json.dumps(want.messages, sort_keys=True)
    assert json.dumps(got.state, sort_keys=True) == json.dumps(want.state, sort_keys=True)


# -- property: accepted by the TS client after repair --------------------------

ORDERING_BATCHES = 3
ORDERING_PER_BATCH = 300


def _ordering_rejects(
    rng: random.Random,
) -> list[tuple[list[dict[str, Any]], list[BaseEvent], list[str]]]:
    """Mutated corpus streams that decode and that our consumer refuses for their order."""
    out = []
    for _ in range(ORDERING_PER_BATCH):
        wire, names = mutate(rng, valid_stream(rng))
        try:
            events, _ = decode_all(wire)
        except DecodeError:
            continue  # malformed, not misordered
        if not events:
            continue
        try:
            consumer = Consumer()
            consumer.push_many(wire)
            consumer.finish()
        except VerificationError:
            out.append((wire, events, names))
        except ProtocolViolation:
            continue
    return out


@pytest.mark.node
@settings(
    max_examples=ORDERING_BATCHES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_streams_the_reference_rejects_for_their_order_are_accepted_after_repair(
    seed: int, ts_oracle: Callable[..., list[dict[str, Any]]]
) -> None:
    candidates = _ordering_rejects(random.Random(seed))
    verdicts = ts_oracle([wire for wire, _, _ in candidates])
    # Ordering reasons: the reference's own verifier wording, not validator issues.
    rejected = [
        (wire, events, names)
        for (wire, events, names), theirs in zip(candidates, verdicts, strict=True)
        if theirs["outcome"] == "failed" and not str(theirs["error"]).startswith("[")
    ]
    assert len(rejected) >= 20, "the corpus should yield ordering rejections"
    outputs = []
    for _, events, _ in rejected:
        out = run_transformer(Repair(max_fixes=None), events)
        Verifier("consumer").observe_all(out)
        Verifier("consumer").finish()
        outputs.append([to_wire(e) for e in out])
    results = ts_oracle(outputs)
    problems = [
        f"mutations={names}: {theirs['error']}\n in:  {json.dumps(wire)}\n out: {json.dumps(out)}"
        for (wire, _, names), out, theirs in zip(rejected, outputs, results, strict=True)
        if theirs["outcome"] != "completed"
    ]
    assert not problems, f"{len(problems)} repaired streams rejected; first:\n" + problems[0]
    # And both clients fold the repaired streams into the same messages.
    for out, theirs in zip(outputs, results, strict=True):
        consumer = Consumer()
        consumer.push_many(out)
        mine = consumer.finish().messages
        assert json.dumps(mine, sort_keys=True) == json.dumps(theirs["messages"], sort_keys=True)


@pytest.mark.node
def test_the_ts_client_folds_the_repaired_pydantic_ai_stream_as_the_producer_meant(
    ts_oracle: Callable[..., list[dict[str, Any]]],
) -> None:
    events = _sse_events("pydantic-ai-parallel-tools.sse")
    ours = fold(run_transformer(Repair(), events))
    (theirs,) = ts_oracle([[to_wire(e) for e in run_transformer(Repair(), events)]])
    assert theirs["outcome"] == "completed", theirs["error"]
    assert json.dumps(theirs["messages"], sort_keys=True) == json.dumps(ours, sort_keys=True)
    calls = {
        c["id"]: c["function"]["arguments"]
        for m in theirs["messages"]
        for c in m.get("toolCalls", [])
    }
    assert calls == {
        "call-internal-1": '{"key": "SECRET-ARG-7f3a"}',
        "call-weather-1": '{"city": "Paris"}',
    }
