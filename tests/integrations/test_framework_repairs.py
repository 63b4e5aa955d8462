"""The framework integrations' repair stages, event by event (no framework needed).

``AgnoRepair`` and ``AgentFrameworkRepair`` are what the producers apply and what a
gateway in front of the framework's own server puts in its chain; the end-to-end
tests (test_agno.py, test_agent_framework.py) show them on real streams, these pin
the cases a scripted run does not reach.
"""

from __future__ import annotations

from ag_ui.core import (
    RawEvent,
    RunErrorEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageStartEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from agui_pipes.integrations.agent_framework import AgentFrameworkRepair
from agui_pipes.integrations.agno import AgnoRepair


def test_agno_repair_drops_only_agnos_raw_events() -> None:
    repair = AgnoRepair()
    agnos = RawEvent(event={"event": "ModelRequestStarted"}, source="agno")
    others = RawEvent(event={"x": 1}, source="my-stage")
    assert list(repair.transform(agnos)) == []
    assert list(repair.transform(others)) == [others]
    assert list(AgnoRepair(keep_raw=True).transform(agnos)) == [agnos]


def test_agno_repair_removes_its_keys_from_snapshots_and_deltas() -> None:
    repair = AgnoRepair()
    snapshot = StateSnapshotEvent(snapshot={"trip": "weekend", "current_run_id": "r"})
    (kept,) = repair.transform(snapshot)
    assert isinstance(kept, StateSnapshotEvent) and kept.snapshot == {"trip": "weekend"}
    assert snapshot.snapshot == {"trip": "weekend", "current_run_id": "r"}  # not mutated
    delta = StateDeltaEvent(
        delta=[
            {"op": "add", "path": "/current_session_id", "value": "t"},
            {"op": "replace", "path": "/current_user_id/name", "value": "x"},
            {"op": "copy", "from": "/current_run_id", "path": "/mine"},
            {"op": "add", "path": "/current_session_ids", "value": "a key of the client's"},
            {"op": "replace", "path": "/trip", "value": "week"},
        ]
    )
    (kept,) = repair.transform(delta)
    assert isinstance(kept, StateDeltaEvent)
    paths = [op.model_dump(by_alias=True)["path"] for op in kept.delta]
    assert paths == ["/current_session_ids", "/trip"]
    only_agnos = StateDeltaEvent(delta=[{"op": "add", "path": "/current_run_id", "value": "r"}])
    assert list(repair.transform(only_agnos)) == []


def test_agent_framework_repair_drops_replayed_tool_call_starts_and_ends() -> None:
    repair = AgentFrameworkRepair()
    events = [
        RunStartedEvent(thread_id="t", run_id="r"),
        TextMessageStartEvent(message_id="m", role="assistant"),
        ToolCallStartEvent(tool_call_id="a", tool_call_name="pick_date", parent_message_id="m"),
        ToolCallStartEvent(tool_call_id="b", tool_call_name="pick_hotel", parent_message_id="m"),
        ToolCallStartEvent(tool_call_id="a", tool_call_name="pick_date", parent_message_id="m"),
        ToolCallStartEvent(tool_call_id="b", tool_call_name="pick_hotel", parent_message_id="m"),
        ToolCallEndEvent(tool_call_id="a"),
        ToolCallEndEvent(tool_call_id="b"),
        ToolCallEndEvent(tool_call_id="a"),
        ToolCallEndEvent(tool_call_id="b"),
    ]
    out = [e for event in events for e in repair.transform(event)]
    assert out == events[:4] + events[6:8]
    # A new run in the same stream starts afresh: the same ids are new calls there.
    again = [RunStartedEvent(thread_id="t", run_id="r2"), events[2], events[6]]
    assert [e for event in again for e in repair.transform(event)] == again


def test_agent_framework_repair_starts_a_bare_run_error_when_it_knows_the_run() -> None:
    error = RunErrorEvent(message="the runner failed", code="RuntimeError")
    started = list(AgentFrameworkRepair("t", "r").transform(error))
    assert [type(e) for e in started] == [RunStartedEvent, RunErrorEvent]
    assert (started[0].thread_id, started[0].run_id) == ("t", "r")  # type: ignore[attr-defined]
    # Without the ids (a chain in front of MAF's server) it is the gateway's repair's job.
    assert list(AgentFrameworkRepair().transform(error)) == [error]
    # After a RUN_STARTED, a RUN_ERROR passes as it is.
    repair = AgentFrameworkRepair("t", "r")
    list(repair.transform(RunStartedEvent(thread_id="t", run_id="r")))
    assert list(repair.transform(error)) == [error]
