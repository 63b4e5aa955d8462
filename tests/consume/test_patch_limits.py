"""State and activity documents stay within Limits: fold, Consumer, the stages, the driver.

The hostile case the limits exist for: after ``STATE_SNAPSHOT {"a": ["x"]}``
one small STATE_DELTA of repeated ``copy /a -> /a/-`` doubles the document per
operation. Everything here goes through the public surface (fold / Consumer /
consume, StateDiff, ToolResultToState, run) and asserts on node counts, the
named limit and the state left behind — never on time.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    EventType,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import (
    Consumer,
    LimitExceeded,
    Limits,
    ProtocolViolation,
    RunContext,
    RunOutcome,
    VerificationError,
    consume,
    fold,
    using_limits,
)
from agui_pipes.testing import collect
from agui_pipes.transformers import StateDiff, ToolResultToState
from agui_pipes.verify import Rule

COPY_A = {"op": "copy", "from": "/a", "path": "/a/-"}
"""The amplifying operation of the report: each one doubles ``/a``."""

RUN = [RunStartedEvent(thread_id="t", run_id="r")]
END = [RunFinishedEvent(thread_id="t", run_id="r")]


def nodes(value: Any) -> int:
    """Every value counts one (objects, arrays, scalars), counted without recursion."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def depth(value: Any) -> int:
    """Containers on the deepest path (a scalar is 0, ``[1]`` is 1)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            level += 1
            deepest = max(deepest, level)
            stack.extend(
                (child, level) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def nested(levels: int) -> Any:
    """``[[[...]]]`` with ``levels`` arrays, built without recursion."""
    root: list[Any] = []
    node = root
    for _ in range(levels - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def shape(value: Any) -> list[Any]:
    """The value as a flat list of tokens (iterative), so deep values compare without recursion."""
    out: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(("{", sorted(item)))
            stack.extend(item[k] for k in sorted(item))
        elif isinstance(item, list):
            out.append(("[", len(item)))
            stack.extend(item)
        else:
            out.append((type(item).__name__, item))
    return out


def delta(*operations: dict[str, Any]) -> StateDeltaEvent:
    return StateDeltaEvent.model_validate({"delta": list(operations)})


def codes(warnings: Any) -> list[str]:
    return [w.code for w in warnings]


# -- the reported case ------------------------------------------------------------


@pytest.mark.parametrize("copies", [22, 40])
def test_the_reported_copy_amplification_is_refused_and_the_state_kept(copies: int) -> None:
    consumer = Consumer()
    for event in [*RUN, StateSnapshotEvent(snapshot={"a": ["x"]}), delta(*[COPY_A] * copies), *END]:
        consumer.push(event)
    result = consumer.finish()

    assert result.state == {"a": ["x"]}
    assert codes(result.warnings) == ["state-limit-exceeded"]
    message = str(result.warnings[0])
    assert "Limits.max_nodes = 1,000,000" in message
    assert "previous state is kept" in message


def test_the_producer_profile_rejects_the_amplification_with_a_named_rule() -> None:
    consumer = Consumer(profile="producer", limits=Limits(max_nodes=1000))
    consumer.push(RUN[0])
    consumer.push(StateSnapshotEvent(snapshot={"a": ["x"]}))
    with pytest.raises(VerificationError) as caught:
        consumer.push(delta(*[COPY_A] * 22))
    assert caught.value.rule is Rule.LIMIT_EXCEEDED
    assert caught.value.index == 2
    assert "Limits.max_nodes = 1,000" in str(caught.value)
    with pytest.raises(ProtocolViolation):  # the consumer stays failed
        consumer.finish()


@pytest.mark.anyio
async def test_consume_takes_limits_and_keeps_the_state_within_them() -> None:
    limits = Limits(max_nodes=100)
    events: list[BaseEvent] = [*RUN, StateSnapshotEvent(snapshot={"a": ["x"]})]
    events += [delta(COPY_A) for _ in range(10)]
    events += END
    result = await consume(events, limits=limits)
    # 1 + 2**(k+1) values after k copies: k = 5 fits in 100 (65), k = 6 would not (129).
    assert nodes(result.state) == 65
    assert codes(result.warnings) == ["state-limit-exceeded"] * 5


def test_a_snapshot_past_the_limits_is_skipped_like_a_delta() -> None:
    limits = Limits(max_nodes=10, max_bytes=60)
    result = fold(
        [
            StateSnapshotEvent(snapshot={"ok": 1}),
            StateSnapshotEvent(snapshot={"list": list(range(20))}),
            StateSnapshotEvent(snapshot={"text": "y" * 100}),
        ],
        limits=limits,
    )
    assert result.state == {"ok": 1}
    assert codes(result.warnings) == ["state-limit-exceeded"] * 2
    assert "Limits.max_nodes" in str(result.warnings[0])
    assert "Limits.max_bytes" in str(result.warnings[1])


def test_the_limits_in_effect_apply_when_none_are_given() -> None:
    with using_limits(Limits(max_nodes=5)):
        result = fold([StateSnapshotEvent(snapshot=list(range(10)))])
    assert result.state == {}
    assert codes(result.warnings) == ["state-limit-exceeded"]


def test_a_seed_state_past_the_limits_is_a_clear_error() -> None:
    with pytest.raises(LimitExceeded, match=r"Limits\.max_nodes"):
        fold([], state=list(range(10)), limits=Limits(max_nodes=5))


def test_an_activity_document_is_bounded_too() -> None:
    limits = Limits(max_nodes=50)
    events: list[BaseEvent] = [
        ActivitySnapshotEvent(message_id="act", activity_type="plan", content={"a": ["x"]}),
        ActivityDeltaEvent.model_validate(
            {"messageId": "act", "activityType": "plan", "patch": [COPY_A] * 10}
        ),
        ActivityDeltaEvent.model_validate(
            {
                "messageId": "act",
                "activityType": "plan",
                "patch": [{"op": "add", "path": "/b", "value": 1}],
            }
        ),
        ActivitySnapshotEvent(
            message_id="big", activity_type="plan", content={"list": list(range(60))}
        ),
    ]
    result = fold(events, limits=limits)
    assert [m["id"] for m in result.messages] == ["act"]
    assert result.messages[0]["content"] == {"a": ["x"], "b": 1}
    assert codes(result.warnings) == ["activity-limit-exceeded"] * 2


def test_copying_or_moving_the_whole_document_into_itself() -> None:
    limits = Limits(max_nodes=40)
    result = fold(
        [
            StateSnapshotEvent(snapshot={"a": ["x"]}),
            delta({"op": "move", "from": "", "path": "/a/-"}),
            *[delta({"op": "copy", "from": "", "path": "/a/-"}) for _ in range(5)],
        ],
        limits=limits,
    )
    assert codes(result.warnings) == [
        "state-patch-failed",
        "state-limit-exceeded",
        "state-limit-exceeded",
    ]
    assert nodes(result.state) == 24  # 3 -> 6 -> 12 -> 24; 48 would not fit in 40
    assert nodes(result.state) <= limits.max_nodes


# -- nesting ------------------------------------------------------------------------


def test_state_as_deep_as_max_depth_is_folded_and_deeper_is_refused() -> None:
    limit = Limits().max_depth
    deepest = {"a": nested(limit - 1)}  # 1 + 1023 = 1024 levels
    result = fold([StateSnapshotEvent(snapshot=deepest)])
    assert result.warnings == []
    assert depth(result.state) == limit
    assert shape(result.state) == shape(deepest)

    too_deep = fold(
        [StateSnapshotEvent(snapshot={"ok": 1}), StateSnapshotEvent(snapshot=nested(2000))]
    )
    assert too_deep.state == {"ok": 1}
    assert codes(too_deep.warnings) == ["state-limit-exceeded"]
    assert "Limits.max_depth = 1,024" in str(too_deep.warnings[0])


def test_a_patch_that_would_nest_past_max_depth_is_refused() -> None:
    start = {"a": nested(1000)}
    deep_path = "/a" + "/0" * 999  # the innermost array
    result = fold(
        [
            StateSnapshotEvent(snapshot=start),
            delta({"op": "copy", "from": "/a", "path": deep_path + "/-"}),
            delta({"op": "add", "path": "/b", "value": nested(1024)}),
            delta({"op": "add", "path": "/c", "value": nested(1020)}),
        ]
    )
    assert codes(result.warnings) == ["state-limit-exceeded"] * 2
    assert all("Limits.max_depth" in str(w) for w in result.warnings)
    assert set(result.state) == {"a", "c"}
    assert depth(result.state) == 1021


def test_a_deep_state_survives_snapshots_of_the_result() -> None:
    consumer = Consumer(allow_truncated=True)
    consumer.push(RUN[0])
    consumer.push(StateSnapshotEvent(snapshot={"a": nested(1000)}))
    # snapshot() copies the state; that copy must not recurse out either.
    assert depth(consumer.snapshot().state) == 1001


# -- properties: patch programs ------------------------------------------------------


_keys = st.sampled_from(["a", "b", "k"])
_values = st.recursive(
    st.none() | st.integers(-1000, 1000) | st.text(alphabet="xyz", max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=6,
)
_targets = st.sampled_from(
    ["/a", "/a/0", "/a/1", "/a/-", "/b", "/b/k", "/b/k/-", "/a/0/k", "/c", "/b/k/0"]
)
_sources = st.sampled_from(["/a", "/a/0", "/a/1", "/b", "/b/k", "/c", "/b/k/0"])
_operations = st.one_of(
    st.builds(lambda s, t: {"op": "copy", "from": s, "path": t}, _sources, _targets),
    st.builds(lambda s, t: {"op": "copy", "from": s, "path": t}, _sources, _targets),
    st.just(COPY_A),
    st.builds(lambda s, t: {"op": "move", "from": s, "path": t}, _sources, _targets),
    st.builds(lambda t, v: {"op": "add", "path": t, "value": v}, _targets, _values),
    st.builds(lambda t, v: {"op": "replace", "path": t, "value": v}, _targets, _values),
    st.builds(lambda v: {"op": "replace", "path": "", "value": v}, _values),
    st.builds(lambda t: {"op": "remove", "path": t}, _targets),
)
_documents = st.fixed_dictionaries(
    {"a": st.lists(_values, max_size=3), "b": st.dictionaries(_keys, _values, max_size=3)}
)
_programs = st.lists(st.lists(_operations, min_size=1, max_size=6), min_size=1, max_size=4)


def _reference(document: Any, program: list[list[dict[str, Any]]], max_nodes: int) -> Any:
    """The ``jsonpatch`` package applied op by op, with the documented checks around it.

    Each operation's result must hold at most ``max_nodes`` values, and one
    patch may copy at most ``max_nodes`` values in total; a patch that fails
    either check, or does not apply, is skipped whole.
    """
    warnings: list[str] = []
    state: Any = {}
    if nodes(document) > max_nodes:
        warnings.append("state-limit-exceeded")
    else:
        state = copy.deepcopy(document)
    for operations in program:
        candidate = copy.deepcopy(state)
        copied = 0
        outcome = None
        for operation in operations:
            try:
                source = (
                    jsonpatch.JsonPointer(operation["from"]).resolve(candidate)
                    if operation["op"] == "copy"
                    else None
                )
                candidate = jsonpatch.JsonPatch([operation]).apply(candidate, in_place=False)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
                outcome = "state-patch-failed"
                break
            if source is not None:
                copied += nodes(source)
            if nodes(candidate) > max_nodes or copied > max_nodes:
                outcome = "state-limit-exceeded"
                break
        if outcome is None:
            state = candidate
        else:
            warnings.append(outcome)
    return state, warnings


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents, _programs, st.integers(8, 120))
def test_patch_programs_match_jsonpatch_within_the_node_limit(
    document: dict[str, Any], program: list[list[dict[str, Any]]], max_nodes: int
) -> None:
    limits = Limits(max_nodes=max_nodes, max_bytes=1 << 30, max_depth=200)
    events = [StateSnapshotEvent(snapshot=document), *[delta(*ops) for ops in program]]
    result = fold(events, limits=limits)

    expected_state, expected_warnings = _reference(document, program, max_nodes)
    assert nodes(result.state) <= max_nodes
    assert codes(result.warnings) == expected_warnings
    assert json.dumps(result.state, sort_keys=True) == json.dumps(expected_state, sort_keys=True)


@settings(max_examples=200, deadline=None)
@given(_documents, _programs, st.integers(20, 300))
def test_a_refused_delta_leaves_the_state_exactly_as_it_was(
    document: dict[str, Any], program: list[list[dict[str, Any]]], max_bytes: int
) -> None:
    limits = Limits(max_nodes=60, max_bytes=max_bytes, max_depth=6)
    consumer = Consumer(allow_truncated=True, limits=limits)
    consumer.push(RUN[0])
    consumer.push(StateSnapshotEvent(snapshot=document))
    before = consumer.snapshot().state
    for operations in program:
        warned = len(consumer.warnings)
        consumer.push(delta(*operations))
        after = consumer.snapshot().state
        text = json.dumps(after, separators=(",", ":"))
        assert len(text) <= max_bytes
        assert nodes(after) <= limits.max_nodes
        assert depth(after) <= limits.max_depth
        if len(consumer.warnings) > warned:
            assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True)
        before = after


# -- the stages ----------------------------------------------------------------------


def _through(stage: Any, events: list[BaseEvent]) -> list[BaseEvent]:
    out: list[BaseEvent] = []
    for event in events:
        out.extend(stage.transform(event))
    return out


def test_state_diff_skips_an_amplifying_delta_like_the_client_and_diffs_correctly() -> None:
    limits = Limits(max_nodes=200)
    stage = StateDiff(limits=limits)
    final = {"a": ["x"], "n": 1, "notes": "x" * 100}
    events: list[BaseEvent] = [
        *RUN,
        StateSnapshotEvent(snapshot={"a": ["x"], "n": 0, "notes": "x" * 100}),
        delta(*[COPY_A] * 22),
        StateSnapshotEvent(snapshot=final),
        *END,
    ]
    out = _through(stage, events)

    assert codes(stage.warnings) == ["state-limit-exceeded"]
    assert "Limits.max_nodes = 200" in str(stage.warnings[0])
    assert out[2] is events[2]  # the delta passes; the client decides (and skips it too)
    assert isinstance(out[3], StateDeltaEvent)  # diffed against what the client holds
    assert fold(out, limits=limits).state == final


def test_state_diff_passes_a_snapshot_past_the_limits_and_keeps_its_baseline() -> None:
    stage = StateDiff(limits=Limits(max_nodes=20))
    big = StateSnapshotEvent(snapshot={"list": list(range(50))})
    out = _through(
        stage,
        [
            *RUN,
            StateSnapshotEvent(snapshot={"a": 1, "b": "x" * 30}),
            big,
            StateSnapshotEvent(snapshot={"a": 2, "b": "x" * 30}),
        ],
    )
    assert out[2] is big
    assert isinstance(out[3], StateDeltaEvent)
    assert codes(stage.warnings) == ["state-limit-exceeded"]


def test_state_diff_takes_the_limits_in_effect_at_construction() -> None:
    with using_limits(Limits(max_nodes=20)):
        stage = StateDiff()
    assert stage.limits == Limits(max_nodes=20)
    assert stage.fresh().limits == Limits()  # outside the scope: the defaults again


def _call(call_id: str, tool: str, result: str) -> list[BaseEvent]:
    return [
        ToolCallStartEvent(tool_call_id=call_id, tool_call_name=tool, parent_message_id="m"),
        ToolCallEndEvent(tool_call_id=call_id),
        ToolCallResultEvent(message_id=f"r{call_id}", tool_call_id=call_id, content=result),
    ]


def test_tool_result_to_state_at_follows_the_state_within_the_limits() -> None:
    limits = Limits(max_nodes=100)
    stage = ToolResultToState.at("search", "/results", limits=limits)
    events: list[BaseEvent] = [
        *RUN,
        StateSnapshotEvent(snapshot={"a": ["x"]}),
        delta(*[COPY_A] * 30),
        *_call("c1", "search", json.dumps(["hit"])),
        *END,
    ]
    out = _through(stage, events)
    assert codes(stage.warnings) == ["state-limit-exceeded"]
    state_events = [e for e in out if isinstance(e, StateDeltaEvent)]
    assert len(state_events) == 2
    result = fold(out, limits=limits)
    assert result.state == {"a": ["x"], "results": ["hit"]}
    assert codes(result.warnings) == ["state-limit-exceeded"]


def test_tool_result_to_state_makes_no_state_event_from_a_result_past_the_limits() -> None:
    limits = Limits(max_nodes=20, max_depth=10)
    for stage in (
        ToolResultToState.snapshot("plan", limits=limits),
        ToolResultToState.at("plan", "/plan", limits=limits),
    ):
        out = _through(
            stage,
            [
                *RUN,
                *_call("c1", "plan", json.dumps(list(range(30)))),
                *_call("c2", "plan", json.dumps(nested(11))),
                *END,
            ],
        )
        assert not [e for e in out if e.type in (EventType.STATE_SNAPSHOT, EventType.STATE_DELTA)]
        assert codes(stage.warnings) == ["tool-result-too-large"] * 2
        assert "Limits.max_nodes = 20" in str(stage.warnings[0])
        assert "Limits.max_depth = 10" in str(stage.warnings[1])


def test_tool_result_to_state_replacing_keeps_its_limits() -> None:
    stage = ToolResultToState.at("s", "/x", limits=Limits(max_nodes=7)).replacing()
    assert stage.limits == Limits(max_nodes=7)
    assert stage.fresh().limits == Limits(max_nodes=7)


# -- the driver -----------------------------------------------------------------------

INPUT = RunAgentInput(
    thread_id="t", run_id="r", state=None, messages=[], tools=[], context=[], forwarded_props=None
)


@pytest.mark.anyio
async def test_the_driver_refuses_to_publish_a_state_past_its_limits() -> None:
    caught: list[str] = []

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.set_state({"items": list(range(10))})
        try:
            ctx.set_state({"items": list(range(100))})
        except Exception as exc:  # the agent may recover: nothing was sent
            caught.append(str(exc))
        ctx.set_state({"items": list(range(11))})
        return RunOutcome.success()

    events = await collect(agent, INPUT, limits=Limits(max_nodes=50))
    assert events[-1].type is EventType.RUN_FINISHED
    assert len(caught) == 1 and "limit-exceeded" in caught[0]
    assert "Limits.max_nodes = 50" in caught[0]
    assert fold(events).state == {"items": list(range(11))}


@pytest.mark.anyio
async def test_the_driver_fails_a_run_whose_state_events_would_cross_its_limits() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.emit(StateSnapshotEvent(snapshot={"a": ["x"]}))
        ctx.emit(delta(*[COPY_A] * 22))
        return RunOutcome.success()

    events = await collect(agent, INPUT, limits=Limits(max_nodes=1000))
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.STATE_SNAPSHOT,
        EventType.RUN_ERROR,
    ]
    error = events[-1]
    assert getattr(error, "code", None) == "PROTOCOL_VIOLATION"
    assert "limit-exceeded" in error.message  # type: ignore[attr-defined]
    assert "Limits.max_nodes = 1,000" in error.message  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_stages_built_by_the_driver_default_to_the_runs_limits() -> None:
    built: list[StateDiff] = []

    def factory() -> StateDiff:
        built.append(StateDiff())
        return built[-1]

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        return RunOutcome.success()

    await collect(agent, INPUT, transformers=factory, limits=Limits(max_nodes=33))
    assert [stage.limits.max_nodes for stage in built] == [33]


@pytest.mark.parametrize("result", ["NaN", '{"x": Infinity}', "[1e400]", "[" * 1100 + "]" * 1100])
def test_tool_result_to_state_refuses_non_portable_json_as_a_warning(result: str) -> None:
    # A state event made from NaN, an overflowing number or nesting past the one depth
    # limit could not be written by any encoder: the stage passes the result on and warns.
    stage = ToolResultToState.snapshot("plan")
    out = _through(stage, [*RUN, *_call("c1", "plan", result), *END])
    assert not [e for e in out if e.type is EventType.STATE_SNAPSHOT]
    assert codes(stage.warnings) == ["tool-result-not-json"]
    assert [e for e in out if e.type is EventType.TOOL_CALL_RESULT]
