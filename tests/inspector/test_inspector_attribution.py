"""The inspector's per-stage attribution (docs/inspector.md, "What a row means").

Stages that hold events back and release them later — Redact, CoalesceDeltas,
Repair, FilterToolCalls — are recorded by identity: each output is matched to the
input it is, or is a copy of, so a redacted delta is *changed* at its own row with
the right JSON Patch, a run of deltas merged into one shows its sources, and
nothing is reported dropped that reached the client. Everything goes through the
public model (``InspectedRun.build``) and the JSON API the page reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from ag_ui.core import BaseEvent, EventType, TextMessageContentEvent
from starlette.testclient import TestClient

from agui_pipes import StreamTransformer, TransformerChain
from agui_pipes.inspector import InspectedRun, inspector_app
from agui_pipes.transformers import (
    CoalesceDeltas,
    Compact,
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    Redact,
    Repair,
    StateDiff,
)

DEMO = Path(__file__).parents[1] / "data" / "demo-run.ndjson"
DEMO_LINES = DEMO.read_bytes().splitlines()
DEMO_EVENTS = [json.loads(line) for line in DEMO_LINES]
GHOST = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "ghost", "delta": "boo"}
BROKEN = [*DEMO_EVENTS[:20], GHOST, *DEMO_EVENTS[20:]]  # content of a message never started


def rows(client: TestClient, stage: int, kind: str = "") -> list[dict[str, Any]]:
    query = f"&kind={kind}" if kind else ""
    response = client.get(f"/api/runs/0/stages/{stage}?limit=1000{query}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total"] == len(body["rows"])
    return list(body["rows"])


def summary(client: TestClient, side: str = "input") -> dict[str, Any]:
    response = client.get(f"/api/runs/0/summary?side={side}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def client_for(events: Iterable[Any], *stages: Any) -> TestClient:
    run = InspectedRun.build(events, "demo", chain=TransformerChain(list(stages)))
    return TestClient(inspector_app(run))


def output_events(client: TestClient, stage: int) -> list[dict[str, Any]]:
    """The stage's output, from the rows: each output index is listed exactly once."""
    by_index: dict[int, dict[str, Any]] = {}
    for row in rows(client, stage):
        if row["kind"] in ("passed", "changed", "added"):
            [out] = row["out"] if row["kind"] != "changed" else row["out"][:1]
            assert out not in by_index, f"output {out} attributed twice"
            if row["kind"] == "changed":
                by_index[out] = jsonpatch.apply_patch(row["event"], row["diff"])
            else:
                by_index[out] = row["event"]
    assert sorted(by_index) == list(range(len(by_index)))
    return [by_index[i] for i in range(len(by_index))]


def test_redact_shows_the_redacted_delta_changed_at_its_own_row_with_no_false_drops() -> None:
    client = client_for(
        DEMO_LINES, FilterToolCalls.deny(["internal_*"]), Redact(["Lisbon"], replacement="[city]")
    )
    stage = summary(client)["stages"][1]
    assert stage["name"] == "Redact" and stage["dropped"] == 0 and stage["added"] == 0
    [lisbon] = [r for r in rows(client, 1) if r["in"] == 9]
    assert lisbon["kind"] == "changed" and lisbon["event"]["delta"] == "Lisbon. "
    assert lisbon["diff"] == [{"op": "replace", "path": "/delta", "value": "[city]. "}]
    assert lisbon["reasons"] and lisbon["reasons"][0]["rule"] == "redacted"
    # The input the old positional view blamed is passed, unchanged, late.
    [innocent] = [r for r in rows(client, 1) if r["in"] == 22]
    assert innocent["kind"] == "passed" and innocent["diff"] is None
    # "Happy to! Let me look into Lisbon for you." was released as one event.
    merged = rows(client, 1, "merged")
    assert merged and {r["type"] for r in merged} == {"TEXT_MESSAGE_CONTENT"}
    [head] = [r for r in rows(client, 1, "changed") if r["in"] == merged[0]["sources"][0]]
    assert head["sources"] == merged[0]["sources"] == [head["in"], *[r["in"] for r in merged]]
    assert jsonpatch.apply_patch(head["event"], head["diff"])["delta"] == (
        "Happy to! Let me look into [city] for you."
    )
    # The rows account for every event the client receives, in order.
    delivered = output_events(client, 1)
    assert len(delivered) == summary(client, "output")["events"]
    for index in (0, 9, len(delivered) - 1):
        sent = client.get(f"/api/runs/0/events/{index}?side=output").json()["json"]
        assert delivered[index] == sent


@pytest.mark.parametrize("max_chars", [None, 20])
def test_coalesced_deltas_list_their_sources_and_drop_nothing(max_chars: int | None) -> None:
    client = client_for(DEMO_LINES, CoalesceDeltas(max_chars=max_chars))
    stage = summary(client)["stages"][0]
    assert stage["dropped"] == 0 and stage["added"] == 0 and stage["merged"] > 0
    assert stage["passed"] + stage["changed"] + stage["merged"] == len(DEMO_LINES)
    for row in rows(client, 0, "changed"):
        sources = row["sources"] or [row["in"]]
        merged = "".join(DEMO_EVENTS[i]["delta"] for i in sources)
        assert row["diff"] == [{"op": "replace", "path": "/delta", "value": merged}]
        assert sources == list(range(sources[0], sources[0] + len(sources)))  # consecutive
    merged_in = sorted(r["in"] for r in rows(client, 0, "merged"))
    listed = sorted(i for r in rows(client, 0, "changed") for i in (r["sources"] or [])[1:])
    assert merged_in == listed

    def text(events: Iterable[dict[str, Any]]) -> str:
        return "".join(e["delta"] for e in events if e["type"].endswith("_CONTENT"))

    assert text(output_events(client, 0)) == text(DEMO_EVENTS)


def test_repair_lists_each_fix_with_its_rule_and_the_output_side_is_accepted() -> None:
    client = client_for(BROKEN, FilterToolCalls.deny(["internal_*"]), Repair())
    received = summary(client, "input")
    assert received["outcome"] == "rejected" and len(received["violations"]) == 1
    delivered = summary(client, "output")
    assert delivered["outcome"] == "finished" and delivered["violations"] == []
    assert delivered["stages"] == received["stages"]  # one pipeline record, both sides
    assert "TOOL_CALL_START" in delivered["types"]
    fixed = [r for r in rows(client, 1) if r["reasons"]]
    assert [(r["in"], r["type"]) for r in fixed] == [(20, "TEXT_MESSAGE_CONTENT")]
    [reason] = fixed[0]["reasons"]
    assert reason["rule"] == "content-not-started" and reason["action"] == "synthesized"
    assert "ghost" in reason["detail"]
    assert summary(client)["stages"][1]["reasons"] == 1
    # The START Repair synthesized is an added event next to that input.
    [start] = [r for r in rows(client, 1, "added") if r["type"] == "TEXT_MESSAGE_START"]
    assert start["in"] == 20 and start["event"]["messageId"] == "ghost"


def test_filter_tool_calls_says_why_each_event_was_dropped_and_the_output_lacks_it() -> None:
    client = client_for(DEMO_LINES, FilterToolCalls.deny(["internal_*"]))
    dropped = rows(client, 0, "dropped")
    assert dropped and all(r["reasons"] for r in dropped)
    assert {reason["rule"] for r in dropped for reason in r["reasons"]} == {"denied-tool"}
    assert "internal_price_lookup" in dropped[0]["reasons"][0]["detail"]
    found = client.get("/api/runs/0/events?q=internal_price_lookup&side=output").json()
    assert found["total"] == 0
    assert client.get("/api/runs/0/events?q=internal_price_lookup").json()["total"] > 0
    last = summary(client, "output")["events"] - 1
    fold = client.get(f"/api/runs/0/fold?at={last}&side=output").json()
    calls = [c["function"]["name"] for m in fold["messages"] for c in m.get("toolCalls") or []]
    assert calls and not any(name.startswith("internal_") for name in calls)


class _Explains(StreamTransformer):
    """Uppercases text and says so through the documented ``explain()`` hook."""

    def __init__(self, broken: bool = False) -> None:
        self.seen = 0
        self.notes: list[dict[str, Any]] = []
        self.broken = broken

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self.seen += 1
        if isinstance(event, TextMessageContentEvent):
            self.notes.append({"index": self.seen - 1, "rule": "shout", "detail": "uppercased"})
            return (event.model_copy(update={"delta": event.delta.upper()}),)
        return (event,)

    def explain(self) -> list[dict[str, Any]]:
        if self.broken:
            raise RuntimeError("no notes today")
        return self.notes


def test_a_stage_explains_itself_through_the_hook() -> None:
    client = client_for(DEMO_LINES, _Explains())
    changed = rows(client, 0, "changed")
    contents = [i for i, e in enumerate(DEMO_EVENTS) if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert [r["in"] for r in changed] == contents
    assert all(
        r["reasons"] == [{"rule": "shout", "action": None, "detail": "uppercased"}] for r in changed
    )
    assert all(not r["reasons"] for r in rows(client, 0, "passed"))


def test_a_hook_that_raises_is_reported_not_fatal() -> None:
    client = client_for(DEMO_LINES, _Explains(broken=True))
    noted = [reason for r in rows(client, 0) for reason in r["reasons"]]
    assert [n["rule"] for n in noted] == ["explain-failed"]
    assert "no notes today" in noted[0]["detail"]


class _HoldStartsRebuildLater(StreamTransformer):
    """Holds each TEXT_MESSAGE_START and emits a fresh copy of it before its first content."""

    def __init__(self) -> None:
        self.held: dict[str, BaseEvent] = {}

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.type is EventType.TEXT_MESSAGE_START:
            self.held[event.message_id] = event  # type: ignore[attr-defined]
            return ()
        start = self.held.pop(getattr(event, "message_id", None) or "", None)
        if start is not None:
            return (start.model_copy(update={"timestamp": 1}), event)
        return (event,)


def test_a_held_event_released_as_a_copy_is_changed_at_its_own_row() -> None:
    client = client_for(DEMO_LINES, _HoldStartsRebuildLater())
    starts = [i for i, e in enumerate(DEMO_EVENTS) if e["type"] == "TEXT_MESSAGE_START"]
    changed = rows(client, 0, "changed")
    assert [r["in"] for r in changed] == starts
    assert all(r["diff"] == [{"op": "add", "path": "/timestamp", "value": 1}] for r in changed)
    stage = summary(client)["stages"][0]
    assert stage["dropped"] == 0 and stage["added"] == 0
    # The content whose call released the copy is passed, not blamed for it.
    for start in starts:
        [after] = [r for r in rows(client, 0) if r["in"] == start + 1]
        assert after["kind"] == "passed"


def test_without_a_chain_both_sides_are_the_stream_and_side_is_validated() -> None:
    client = TestClient(inspector_app(InspectedRun.build(DEMO_LINES, "demo")))
    assert summary(client, "output") == summary(client, "input")
    response = client.get("/api/runs/0/summary?side=client")
    assert response.status_code == 400 and "`side`" in response.json()["error"]


CHAINS = {
    "redact+coalesce": lambda: [Redact(["Lisbon", "weather"]), CoalesceDeltas(max_chars=12)],
    "coalesce+redact": lambda: [CoalesceDeltas(), Redact(["Lisbon"], hold_back=8)],
    "filter+repair": lambda: [FilterToolCalls.deny(["internal_*"]), Repair()],
    "expand+compact": lambda: [ExpandChunks(), Compact()],
    "statediff+drop": lambda: [StateDiff(), DropEvents(["step", "reasoning"])],
}


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("stream", ["demo", "broken"])
def test_every_output_is_attributed_once_and_the_rows_rebuild_it(name: str, stream: str) -> None:
    events = DEMO_LINES if stream == "demo" else [json.dumps(e).encode() for e in BROKEN]
    stages = CHAINS[name]()
    run = InspectedRun.build(events, "demo", chain=TransformerChain(stages))
    client = TestClient(inspector_app(run))
    for number, record in enumerate(run.stages or []):
        assert record.error is None
        rebuilt = output_events(client, number)
        assert rebuilt == [json.loads(raw) for raw in record.outputs]
        inputs = summary(client)["stages"][number]["in"]
        counted = summary(client)["stages"][number]
        assert counted["passed"] + counted["changed"] + counted["merged"] + counted["dropped"] == (
            inputs
        )


def test_a_stage_of_ones_own_named_like_a_built_in_is_not_read_as_one() -> None:
    class Repair(StreamTransformer):  # no report: the built-in reading must not apply
        def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
            return (event,)

    client = client_for(DEMO_LINES, Repair())
    assert summary(client)["stages"][0]["reasons"] == 0
