"""DropEvents / KeepEvents, StripRawEvents, Timestamp, StateDiff."""

from __future__ import annotations

import pytest
from ag_ui.core import (
    ActivitySnapshotEvent,
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    EventType,
    FunctionCall,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningMessage,
    RunAgentInput,
    RunFinishedSuccessOutcome,
    StateDeltaEvent,
    StateSnapshotEvent,
    ToolCall,
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
from agui_pipes.transformers import DropEvents, KeepEvents, StateDiff, StripRawEvents, Timestamp
from agui_pipes.transformers.drop_events import FAMILIES
from tests.transformers._stage_helpers import consumed, through, through_async


def _rich() -> list[BaseEvent]:
    return run_events(
        step(
            "work",
            reasoning("r1", "hmm")
            + text("m1", "hi")
            + text_chunks("m2", "a", "b")
            + tool_call("c1", "search", "{}", result="ok")
            + [
                RawEvent(event={"x": 1}),
                CustomEvent(name="c", value=1),
                ActivitySnapshotEvent(message_id="a1", activity_type="plan", content={"k": 1}),
                StateSnapshotEvent(snapshot={"s": 1}),
            ],
        )
        + subagent("s1", "w", text("m3", "sub"))
    )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_dropping_any_family_stays_valid(family: str) -> None:
    out = through(DropEvents([family]), _rich())
    assert not {e.type for e in out} & FAMILIES[family]
    consumed(out)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_keep_keeps_exactly_the_family_and_the_run(family: str) -> None:
    out = through(KeepEvents([family]), _rich())
    allowed = FAMILIES[family] | {EventType.RUN_STARTED, EventType.RUN_FINISHED}
    assert out == [e for e in _rich() if e.type in allowed]
    consumed(out)


def test_drop_reasoning_folds_without_reasoning() -> None:
    out = through(DropEvents("reasoning"), _rich())
    assert {m["role"] for m in consumed(out).messages} == {"assistant", "tool", "activity"}


def test_dropped_families_leave_snapshots_and_echo() -> None:
    history = [
        UserMessage(id="u1", content="q"),
        ReasoningMessage(id="r1", content="thinking"),
        AssistantMessage(
            id="a1", tool_calls=[ToolCall(id="c1", function=FunctionCall(name="s", arguments=""))]
        ),
        ToolMessage(id="t1", tool_call_id="c1", content="x"),
        AssistantMessage(
            id="a2",
            content="answer",
            tool_calls=[ToolCall(id="c2", function=FunctionCall(name="s", arguments=""))],
        ),
    ]
    echo = RunAgentInput(thread_id="thread-1", run_id="run-1", messages=history)
    events = [
        *run_started(input=echo),
        MessagesSnapshotEvent(messages=history),
        *run_finished(outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["c2"])),
    ]
    out = through(DropEvents(["reasoning", "tool_call"]), events)
    assert [m.id for m in out[0].input.messages] == ["u1", "a2"]  # type: ignore[attr-defined]
    assert [m.id for m in out[1].messages] == ["u1", "a2"]  # type: ignore[attr-defined]
    assert out[1].messages[1].tool_calls is None  # type: ignore[attr-defined]
    assert out[2].outcome.pending_tool_call_ids is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("families", "needle"), [([], "at least one"), (["run"], "cannot be"), (["txt"], "unknown")]
)
def test_family_errors(families: list[str], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        DropEvents(families)
    with pytest.raises(ValueError, match=needle):
        KeepEvents(families)


def test_strip_raw_events() -> None:
    events = run_events(text("m1", "x"))
    events[2] = events[2].model_copy(update={"raw_event": {"key": "sk-123"}})
    events.insert(1, RawEvent(event={"provider": "secret"}))
    out = through(StripRawEvents(), events)
    assert not any(isinstance(e, RawEvent) for e in out)
    assert all(e.raw_event is None for e in out)
    assert len(out) == len(events) - 1
    assert consumed(out).messages == consumed(events).messages


def test_timestamp_stamps_only_missing() -> None:
    ticks = iter(range(100, 200))
    events = run_events(text("m1", "x"))
    events[1] = events[1].model_copy(update={"timestamp": 5})
    out = through(Timestamp(clock=lambda: next(ticks)), events)
    assert [e.timestamp for e in out] == [100, 5, 101, 102, 103]
    assert all(isinstance(e.timestamp, int) for e in through(Timestamp(), events))


def _state_run(*snapshots: object) -> list[BaseEvent]:
    return run_events([StateSnapshotEvent(snapshot=s) for s in snapshots])


def test_state_diff_sends_smaller_deltas_and_folds_the_same() -> None:
    big = {"items": list(range(50)), "title": "a"}
    changed = {"items": list(range(50)), "title": "b"}
    events = _state_run(big, changed, {"x": 1})
    out = through(StateDiff(), events)
    kinds = [type(e).__name__ for e in out[1:-1]]
    assert kinds == ["StateSnapshotEvent", "StateDeltaEvent", "StateSnapshotEvent"]
    assert consumed(out).state == consumed(events).state


def test_state_diff_never_confuses_true_and_one() -> None:
    events = _state_run({"flag": 1, "pad": "x" * 100}, {"flag": True, "pad": "x" * 100})
    out = through(StateDiff(), events)
    assert consumed(out).state == {"flag": True, "pad": "x" * 100}


def test_state_diff_follows_deltas_and_resets_per_run() -> None:
    base = {"pad": "x" * 100, "n": 0}
    events = run_events(
        [
            StateSnapshotEvent(snapshot=base),
            StateDeltaEvent(delta=[{"op": "replace", "path": "/n", "value": 1}]),
            StateSnapshotEvent(snapshot={**base, "n": 2}, subagent_run_id="s1"),
        ]
    ) + _state_run({**base, "n": 3})
    out = through(StateDiff(), events)
    delta = out[3]
    assert isinstance(delta, StateDeltaEvent) and delta.subagent_run_id == "s1"
    assert delta.delta[0].model_dump(by_alias=True) == {"op": "replace", "path": "/n", "value": 2}
    assert isinstance(out[6], StateSnapshotEvent)  # first snapshot of run 2 stays whole


@pytest.mark.anyio
async def test_small_stages_through_chain_apply() -> None:
    stages = DropEvents(["reasoning"]) | StripRawEvents() | Timestamp(clock=lambda: 1)
    out = await through_async(stages | StateDiff(), _rich())
    assert all(e.timestamp == 1 for e in out)
    consumed(out)
