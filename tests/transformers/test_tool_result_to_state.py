"""ToolResultToState: snapshot / delta / at modes, replacing, robustness, provenance."""

from __future__ import annotations

import json
import logging

import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    RunAgentInput,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextPart,
    ToolCall,
    ToolCallChunkEvent,
    ToolCallResultEvent,
)

from agui_pipes.testing import run_events, run_finished, run_started, subagent, tool_call
from agui_pipes.transformers import ToolResultToState
from tests.transformers._stage_helpers import consumed, through, through_async


def _result_stream(result: object, name: str = "plan", call: str = "c1") -> list[BaseEvent]:
    return run_events(tool_call(call, name, "{}", result=result))


def _state_events(events: list[BaseEvent]) -> list[BaseEvent]:
    return [e for e in events if isinstance(e, StateSnapshotEvent | StateDeltaEvent)]


def test_snapshot_mode_keeps_the_result_then_replaces_state() -> None:
    out = through(ToolResultToState.snapshot("plan"), _result_stream({"steps": [1, 2]}))
    kinds = [type(e).__name__ for e in out[-3:]]
    assert kinds == ["ToolCallResultEvent", "StateSnapshotEvent", "RunFinishedEvent"]
    assert consumed(out).state == {"steps": [1, 2]}


def test_replacing_drops_the_result() -> None:
    stage = ToolResultToState.snapshot("plan").replacing()
    out = through(stage, _result_stream({"a": 1}))
    assert not any(isinstance(e, ToolCallResultEvent) for e in out)
    assert consumed(out).state == {"a": 1}
    assert stage.replace_result and stage.fresh().replace_result


def test_other_tools_are_untouched() -> None:
    events = _result_stream({"a": 1}, name="search")
    assert through(ToolResultToState.snapshot("plan"), events) == events


def test_delta_mode_applies_a_patch() -> None:
    patch = [{"op": "add", "path": "/items/-", "value": 3}]
    events = run_events(
        [
            StateSnapshotEvent(snapshot={"items": [1, 2]}),
            *tool_call("c1", "edit", "{}", result=patch),
        ]
    )
    out = through(ToolResultToState.delta("edit"), events)
    assert consumed(out).state == {"items": [1, 2, 3]}


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("not json at all", "tool-result-not-json"),
        ('{"op": "add"}', "tool-result-not-a-patch"),
        ('[{"op": "frobnicate", "path": "/a"}]', "tool-result-not-a-patch"),
    ],
)
def test_unparsable_delta_passes_through_with_a_warning(
    content: str, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    events = run_events(tool_call("c1", "edit", "{}", result=content))
    stage = ToolResultToState.delta("edit").replacing()
    with caplog.at_level(logging.WARNING, logger="agui_pipes.transformers.tool_result_to_state"):
        out = through(stage, events)
    assert out == events  # untouched, even though replacing
    assert any("'c1'" in r.getMessage() for r in caplog.records)
    fresh = stage.fresh()
    list(map(fresh.transform, events))
    assert [w.code for w in fresh.warnings] == [code]


def test_unparsable_snapshot_passes_through() -> None:
    events = run_events(tool_call("c1", "plan", "{}", result="Sorry, I could not plan that."))
    assert through(ToolResultToState.snapshot("plan"), events) == events


def test_content_parts_use_their_text_parts() -> None:
    result = ToolCallResultEvent(
        message_id="r1",
        tool_call_id="c1",
        content=[TextPart(text='{"a":'), TextPart(text=" 1}")],
    )
    events = run_events([*tool_call("c1", "plan"), result])
    assert consumed(through(ToolResultToState.snapshot("plan"), events)).state == {"a": 1}


def test_at_mode_sets_a_value_and_creates_parents() -> None:
    events = run_events(
        [
            StateSnapshotEvent(snapshot={"keep": True, "search": {"old": 1}}),
            *tool_call("c1", "search", "{}", result=["r1", "r2"]),
            *tool_call("c2", "lookup", "{}", result={"x": 1}),
        ]
    )
    out = through(ToolResultToState.at("search", "/search/results"), events)
    assert consumed(out).state == {"keep": True, "search": {"old": 1, "results": ["r1", "r2"]}}
    out = through(ToolResultToState.at("lookup", "/a/b~1c/d"), events)
    state = consumed(out).state
    assert state["a"] == {"b/c": {"d": {"x": 1}}}


def test_at_mode_replaces_an_existing_value_and_follows_the_state() -> None:
    events = run_events(
        [
            *run_started()[1:],
            StateSnapshotEvent(snapshot={"list": [0, 1]}),
            *tool_call("c1", "pick", "{}", result=9),
            StateDeltaEvent(delta=[{"op": "remove", "path": "/list"}]),
            *tool_call("c2", "pick", "{}", result=7),
        ]
    )
    out = through(ToolResultToState.at("pick", "/list/1"), events)
    deltas = [e for e in out if isinstance(e, StateDeltaEvent)]
    assert deltas[0].delta[0].op == "replace"
    # /list was removed in between: the second value cannot be placed in a missing array's
    # index, so a parent object is created instead
    assert consumed(out).state == {"list": {"1": 7}}


def test_at_mode_root_pointer_and_uncontainable_parent() -> None:
    events = run_events(
        [StateSnapshotEvent(snapshot={"a": "text"}), *tool_call("c1", "t", "{}", result={"z": 1})]
    )
    assert consumed(through(ToolResultToState.at("t", ""), events)).state == {"z": 1}
    stage = ToolResultToState.at("t", "/a/b")
    out = through(stage, events)
    assert consumed(out).state == {"a": "text"}
    assert not _state_events(out)[1:]


def test_run_started_echo_state_is_the_baseline() -> None:
    echo = RunAgentInput(thread_id="thread-1", run_id="run-1", messages=[], state={"s": {}})
    events = [
        *run_started(input=echo),
        *tool_call("c1", "t", "{}", result=5),
        *run_finished(),
    ]
    out = through(ToolResultToState.at("t", "/s/v"), events)
    ops = _state_events(out)[0].delta  # type: ignore[attr-defined]
    assert [(o.op, o.path) for o in ops] == [("add", "/s/v")]


def test_at_most_one_promotion_per_call() -> None:
    events = run_events(
        [
            *tool_call("c1", "plan", "{}", result={"a": 1}),
            ToolCallResultEvent(message_id="r2", tool_call_id="c1", content='{"a": 2}'),
        ]
    )
    out = through(ToolResultToState.snapshot("plan"), events)
    assert len(_state_events(out)) == 1


def test_calls_known_from_chunks_and_snapshots() -> None:
    call = ToolCall(id="c7", function=FunctionCall(name="plan", arguments="{}"))
    events = run_events(
        [
            ToolCallChunkEvent(tool_call_id="c6", tool_call_name="plan", delta="{}"),
            ToolCallResultEvent(message_id="r6", tool_call_id="c6", content='{"n": 6}'),
            MessagesSnapshotEvent(messages=[AssistantMessage(id="a1", tool_calls=[call])]),
            ToolCallResultEvent(message_id="r7", tool_call_id="c7", content='{"n": 7}'),
        ]
    )
    out = through(ToolResultToState.snapshot("plan"), events)
    assert [e.snapshot for e in _state_events(out)] == [{"n": 6}, {"n": 7}]  # type: ignore[attr-defined]


def test_subagent_result_tags_its_state_event() -> None:
    events = run_events(subagent("s1", "w", tool_call("c1", "plan", "{}", result={"a": 1})))
    out = through(ToolResultToState.snapshot("plan"), events)
    assert _state_events(out)[0].subagent_run_id == "s1"  # type: ignore[attr-defined]
    consumed(out)


def test_state_resets_per_run() -> None:
    events = run_events(tool_call("c1", "plan", "{}")) + run_events(
        [ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="{}")], run_id="run-2"
    )
    assert not _state_events(through(ToolResultToState.snapshot("plan"), events))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("", "snapshot"), "non-empty"),
        (("t", "merge"), "not one of"),
        (("t", "at"), "needs a pointer"),
        (("t", "at", "a/b"), "start with '/'"),
        (("t", "at", "/a~2"), "bare '~'"),
        (("t", "snapshot", "/a"), "only applies"),
    ],
)
def test_configuration_errors(args: tuple[str, ...], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        ToolResultToState(*args)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_through_chain_apply() -> None:
    out = await through_async(ToolResultToState.snapshot("plan"), _result_stream([1]))
    assert json.dumps(consumed(out).state) == "[1]"
