"""``CrewAIRepair`` event by event (no framework needed; test_crewai.py shows it on real streams).

It is what ``crewai_producer`` applies and what a gateway in front of ag-ui-crewai's
own server puts in its chain; these pin the cases a scripted run does not reach.
"""

from __future__ import annotations

from ag_ui.core import StateDeltaEvent, StateSnapshotEvent, TextMessageStartEvent

from agui_pipes.integrations.crewai import CREWAI_INPUT_KEYS, CrewAIRepair


def test_crewai_repair_removes_the_run_inputs_from_snapshots() -> None:
    repair = CrewAIRepair()
    state = {"trip": "weekend", **{key: "echoed" for key in CREWAI_INPUT_KEYS}}
    snapshot = StateSnapshotEvent(snapshot=state)
    (kept,) = repair.transform(snapshot)
    assert isinstance(kept, StateSnapshotEvent) and kept.snapshot == {"trip": "weekend"}
    assert snapshot.snapshot == state  # not mutated
    clean = StateSnapshotEvent(snapshot={"trip": "weekend"})
    assert list(repair.transform(clean)) == [clean]
    not_a_dict = StateSnapshotEvent(snapshot=["messages"])
    assert list(repair.transform(not_a_dict)) == [not_a_dict]


def test_crewai_repair_removes_operations_on_the_run_inputs_from_deltas() -> None:
    repair = CrewAIRepair()
    delta = StateDeltaEvent(
        delta=[
            {"op": "add", "path": "/messages/-", "value": {"role": "user"}},
            {"op": "replace", "path": "/id", "value": "t"},
            {"op": "copy", "from": "/copilotkit/actions", "path": "/mine"},
            {"op": "add", "path": "/ag-ui", "value": {}},
            {"op": "add", "path": "/messages_seen", "value": "a key of the client's"},
            {"op": "replace", "path": "/trip", "value": "week"},
        ]
    )
    (kept,) = repair.transform(delta)
    assert isinstance(kept, StateDeltaEvent)
    paths = [op.model_dump(by_alias=True)["path"] for op in kept.delta]
    assert paths == ["/messages_seen", "/trip"]
    only_inputs = StateDeltaEvent(delta=[{"op": "remove", "path": "/context"}])
    assert list(repair.transform(only_inputs)) == []
    other = TextMessageStartEvent(message_id="m-1", role="assistant")
    assert list(repair.transform(other)) == [other]
