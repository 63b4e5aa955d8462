"""The inspector's JSON API (docs/inspector.md), its model and ``agui-pipes inspect``.

No browser here: the endpoints are called through Starlette's TestClient on the
demo stream (tests/data/demo-run.ndjson, what ``agui-pipes demo`` emits), a
rejected stream and a chain with ``filter_tool_calls``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
from ag_ui.core import BaseEvent, CustomEvent, EventType, TextMessageContentEvent
from starlette.testclient import TestClient

from agui_pipes import (
    AsyncStreamTransformer,
    FunctionTransformer,
    StreamOperator,
    TransformerChain,
    decode,
    fold,
)
from agui_pipes._cli import main
from agui_pipes.config import load_chain
from agui_pipes.inspector import InspectedRun, RecentRuns, inspector_app

DEMO = Path(__file__).parents[1] / "data" / "demo-run.ndjson"
DEMO_LINES = DEMO.read_bytes().splitlines()
FILTER_CHAIN = """\
version: 1
transformers:
  - type: filter_tool_calls
    deny: ["internal_*"]
"""
REJECTED = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
]


def demo_client(**options: Any) -> TestClient:
    return TestClient(inspector_app(InspectedRun.build(DEMO_LINES, "demo", **options)))


@pytest.fixture(scope="module")
def demo() -> TestClient:
    return demo_client()


@pytest.fixture(scope="module")
def filtered(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    path = tmp_path_factory.mktemp("chain") / "chain.yaml"
    path.write_text(FILTER_CHAIN)
    return demo_client(chain=load_chain(path))


def get(client: TestClient, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


def test_runs_lists_the_file_as_run_0(demo: TestClient) -> None:
    (listed,) = get(demo, "/api/runs")["runs"]
    size = listed.pop("bytes")
    assert listed == {
        "id": "0",
        "label": "demo",
        "events": 141,
        "live": False,
        "outcome": "finished",
        "capped": False,
        "request": False,
    }
    assert size > DEMO.stat().st_size  # the events' JSON and what indexes them


def test_summary_of_the_demo_stream(demo: TestClient) -> None:
    summary = get(demo, "/api/runs/0/summary")
    assert summary["events"] == len(DEMO_LINES)
    assert summary["outcome"] == "finished"
    assert summary["timed"] is False and summary["t0"] is None
    assert summary["violations"] == [] and summary["warnings"] == []
    assert summary["stages"] is None
    assert sum(summary["types"].values()) == len(DEMO_LINES)
    assert summary["types"]["TOOL_CALL_START"] == 4
    lanes = {lane["id"]: lane for lane in summary["lanes"]}
    # A lane for every message, tool call and subagent of the stream.
    for line in DEMO_LINES:
        event = json.loads(line)
        if event["type"] == "TEXT_MESSAGE_START":
            assert lanes[f"message:{event['messageId']}"]["kind"] == "message"
        if event["type"] == "TOOL_CALL_START":
            assert lanes[f"tool_call:{event['toolCallId']}"]["label"] == event["toolCallName"]
        if event["type"] == "SUBAGENT_STARTED":
            assert lanes[f"subagent:{event['subagentRunId']}"]["label"] == event["name"]


def test_subagents_nest_under_the_call_that_spawned_them(demo: TestClient) -> None:
    lanes = {lane["id"]: lane for lane in get(demo, "/api/runs/0/summary")["lanes"]}
    order = [lane["id"] for lane in get(demo, "/api/runs/0/summary")["lanes"]]
    expert = lanes["subagent:demo-run-sub-1"]
    assert expert["parent"] == "tool_call:demo-run-call-3"
    assert expert["depth"] == lanes["tool_call:demo-run-call-3"]["depth"] + 1
    weather = lanes["subagent:demo-run-sub-2"]
    assert weather["parent"] == "subagent:demo-run-sub-1"
    assert lanes["tool_call:demo-run-call-4"]["parent"] == "subagent:demo-run-sub-2"
    assert lanes["tool_call:demo-run-call-4"]["owner"] == "demo-run-sub-2"
    # Display order: every lane after its parent.
    for lane in lanes.values():
        if lane["parent"] is not None:
            assert order.index(lane["parent"]) < order.index(lane["id"])
    # The tool call's bar runs to its result, past its subagent's end.
    assert lanes["tool_call:demo-run-call-3"]["end"] > expert["end"]


def test_ticks_are_the_deltas(demo: TestClient) -> None:
    lanes = {lane["id"]: lane for lane in get(demo, "/api/runs/0/summary")["lanes"]}
    final = lanes["message:demo-run-msg-12"]
    deltas = [
        i
        for i, line in enumerate(DEMO_LINES)
        if json.loads(line).get("messageId") == "demo-run-msg-12"
        and json.loads(line)["type"] == "TEXT_MESSAGE_CONTENT"
    ]
    assert final["ticks"] == deltas and final["tick_count"] == len(deltas)
    assert final["start"] < deltas[0] and final["end"] > deltas[-1]


def test_ticks_are_thinned_evenly_past_the_cap() -> None:
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    ]
    events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}] * 5000
    events += [
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    lanes = InspectedRun.build(events, "long").summary()["lanes"]
    message = next(lane for lane in lanes if lane["kind"] == "message")
    assert message["tick_count"] == 5000
    assert len(message["ticks"]) == 2000
    assert message["ticks"][0] == 2 and message["ticks"][-1] == 5001
    assert message["ticks"] == sorted(set(message["ticks"]))


def test_events_page_and_filters(demo: TestClient) -> None:
    page = get(demo, "/api/runs/0/events?offset=10&limit=5")
    assert page["total"] == len(DEMO_LINES) and page["offset"] == 10
    assert [row["index"] for row in page["rows"]] == [10, 11, 12, 13, 14]
    row = page["rows"][0]
    assert set(row) == {"index", "type", "t", "ids", "owner", "summary", "flags"}
    assert row["ids"] == {"messageId": "demo-run-msg-2"} and row["flags"] == []

    starts = get(demo, "/api/runs/0/events?type=TOOL_CALL_START,SUBAGENT_STARTED")
    assert [r["type"] for r in starts["rows"]].count("TOOL_CALL_START") == 4
    assert starts["total"] == 6
    assert [r["index"] for r in starts["rows"]] == sorted(r["index"] for r in starts["rows"])

    by_id = get(demo, "/api/runs/0/events?id=demo-run-sub-2")
    assert by_id["total"] > 0
    assert all(r["owner"] == "demo-run-sub-2" for r in by_id["rows"])
    weather = get(demo, "/api/runs/0/events?q=FORECAST")
    assert weather["total"] >= 1
    assert any(r["ids"].get("toolCallId") == "demo-run-call-4" for r in weather["rows"])
    both = get(demo, "/api/runs/0/events?q=forecast&type=TOOL_CALL_START")
    assert [r["summary"] for r in both["rows"]] == ["toolCallName=get_forecast"]
    assert get(demo, "/api/runs/0/events?q=no-such-text")["total"] == 0
    # Text and id together; a text hit counts its event once, however often it occurs.
    mixed = get(demo, "/api/runs/0/events?q=demo-run&id=demo-run-call-4")
    assert mixed["total"] == by_id_count(demo, "demo-run-call-4")
    assert get(demo, "/api/runs/0/events?q=DEMO-RUN")["total"] == sum(
        b"demo-run" in line for line in DEMO_LINES
    )
    assert get(demo, "/api/runs/0/events?offset=200")["rows"] == []


def by_id_count(client: TestClient, ident: str) -> int:
    total: int = get(client, f"/api/runs/0/events?id={ident}")["total"]
    return total


def test_untagged_continuations_inherit_their_owner() -> None:
    events = [json.loads(line) for line in DEMO_LINES]
    for event in events:
        if event["type"] == "TEXT_MESSAGE_CONTENT":
            event.pop("subagentRunId", None)
    client = TestClient(inspector_app(InspectedRun.build(events, "untagged")))
    rows = get(client, "/api/runs/0/events?id=demo-run-msg-9&type=TEXT_MESSAGE_CONTENT")["rows"]
    assert rows and all(r["owner"] == "demo-run-sub-2" for r in rows)
    assert all("subagentRunId" not in r["ids"] for r in rows)


def test_one_event(demo: TestClient) -> None:
    event = get(demo, "/api/runs/0/events/60")
    assert event["type"] == "SUBAGENT_STARTED"
    assert event["json"] == json.loads(DEMO_LINES[60])
    assert event["violations"] == [] and event["warnings"] == []


def test_fold_at_several_indexes_matches_a_full_fold() -> None:
    # A small checkpoint interval, so most answers are a checkpoint plus a replay.
    client = demo_client(checkpoint_every=16)
    events = [decode(line).event for line in DEMO_LINES]
    for at in (0, 5, 15, 16, 17, 59, 100, len(DEMO_LINES) - 1):
        answer = get(client, f"/api/runs/0/fold?at={at}")
        expected = fold([e for e in events[: at + 1] if e is not None])
        assert answer == {"at": at, "messages": expected.messages, "state": expected.state}
    assert get(client, "/api/runs/0/fold?at=0") == {"at": 0, "messages": [], "state": {}}
    final = get(client, f"/api/runs/0/fold?at={len(DEMO_LINES) - 1}")
    assert final["state"]["status"] == "ready"
    assert any(m.get("subagentRunId") == "demo-run-sub-2" for m in final["messages"])


def test_fold_from_checkpoints_over_a_long_conversation() -> None:
    # Five runs in one stream: the conversation grows, checkpoints share unchanged
    # messages and space out; every answer must still be the plain fold of the prefix.
    lines = DEMO_LINES * 5
    run = InspectedRun.build(lines, "five", checkpoint_every=8)
    events = [decode(line).event for line in lines]
    for at in range(0, len(lines), 7):
        expected = fold([e for e in events[: at + 1] if e is not None])
        assert run.fold_at(at) == {
            "at": at,
            "messages": expected.messages,
            "state": expected.state,
        }, at


def test_fold_after_a_rejection_goes_on_from_the_consumers_fold() -> None:
    # Rejected at event 70, checkpoints before and after: the fold at any index is
    # still the plain fold of the prefix (the refused event applied best effort).
    bad = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"nowhere","delta":"x"}'
    lines = [*DEMO_LINES[:70], bad, *DEMO_LINES[70:]] * 2
    run = InspectedRun.build(lines, "bad", checkpoint_every=8)
    assert run.outcome == "rejected" and run.violations[0]["index"] == 70
    events = [decode(line).event for line in lines]
    for at in [*range(0, len(lines), 9), len(lines) - 1]:
        expected = fold([e for e in events[: at + 1] if e is not None])
        assert run.fold_at(at) == {
            "at": at,
            "messages": expected.messages,
            "state": expected.state,
        }, at


def test_fold_through_chunks_expands_them() -> None:
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "Hel"},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "lo"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    run = InspectedRun.build(events, "chunks", checkpoint_every=1)
    assert run.fold_at(2)["messages"] == [{"id": "m", "role": "assistant", "content": "Hello"}]
    lanes = run.summary()["lanes"]
    assert [lane["id"] for lane in lanes] == ["run:r", "message:m"]
    assert lanes[1]["ticks"] == [1, 2] and lanes[1]["end"] == 3


def test_rejected_stream_shows_the_violation_at_its_event() -> None:
    client = TestClient(inspector_app(InspectedRun.build(REJECTED, "bad")))
    summary = get(client, "/api/runs/0/summary")
    assert summary["outcome"] == "rejected"
    [violation] = summary["violations"]
    assert violation["index"] == 3 and violation["rule"]
    assert "RUN_FINISHED" in violation["message"]
    row = get(client, "/api/runs/0/events?offset=3&limit=1")["rows"][0]
    assert row["flags"] == ["violation"]
    assert get(client, "/api/runs/0/events/3")["violations"] == [violation]
    # The events after it are still listed and folded, best effort.
    assert get(client, "/api/runs/0/events")["total"] == 5
    assert get(client, "/api/runs/0/fold?at=4")["messages"][0]["content"] == "Hi"


def test_decode_errors_and_warnings_are_placed_at_their_events() -> None:
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "extra": 1},
        {"type": "SOMETHING_NEW", "x": 1},
        {"type": "TEXT_MESSAGE_START", "messageId": 5},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    run = InspectedRun.build(events, "odd")
    summary = run.summary()
    codes = {(w["index"], w["code"]) for w in summary["warnings"]}
    assert (0, "unknown-property") in codes and (1, "unknown-event-type") in codes
    assert summary["violations"][0]["index"] == 2
    assert summary["types"]["SOMETHING_NEW"] == 1
    assert run.row(1)["flags"] == ["warning"]


def test_truncated_stream_outcome_and_open_lanes() -> None:
    run = InspectedRun.build(REJECTED[:3], "cut")
    summary = run.summary()
    assert summary["outcome"] == "truncated" and summary["violations"] == []
    assert [w["code"] for w in summary["warnings"]] == ["truncated"]
    assert all(lane["end"] is None for lane in summary["lanes"])


def test_timestamps() -> None:
    events = [dict(e, timestamp=1000 + 10 * i) for i, e in enumerate(REJECTED[:2])]
    summary = InspectedRun.build(events, "timed").summary()
    assert summary["timed"] is True and summary["t0"] == 1000
    assert InspectedRun.build(events, "timed").row(1)["t"] == 1010


def test_pipeline_with_filter_tool_calls_lists_dropped_events(filtered: TestClient) -> None:
    [stage] = get(filtered, "/api/runs/0/summary")["stages"]
    internal = [
        i
        for i, line in enumerate(DEMO_LINES)
        if json.loads(line).get("toolCallId") == "demo-run-call-2"
    ]
    assert stage["name"] and stage["in"] == len(DEMO_LINES)
    assert stage["dropped"] == len(internal)
    assert stage["passed"] + stage["changed"] == len(DEMO_LINES) - len(internal)
    assert stage["out"] == stage["in"] - stage["dropped"] + stage["added"]
    dropped = get(filtered, "/api/runs/0/stages/0?kind=dropped")
    assert dropped["total"] == len(internal)
    assert [row["in"] for row in dropped["rows"]] == internal
    for row in dropped["rows"]:
        assert row["kind"] == "dropped" and row["out"] == [] and row["diff"] is None
        assert row["event"]["toolCallId"] == "demo-run-call-2"
    everything = get(filtered, "/api/runs/0/stages/0?limit=1000")
    assert everything["total"] == len(DEMO_LINES) + stage["added"]
    passed = [r for r in everything["rows"] if r["kind"] == "passed"]
    assert passed[0] == {
        "kind": "passed",
        "in": 0,
        "out": [0],
        "type": "RUN_STARTED",
        "summary": passed[0]["summary"],
        "diff": None,
        "sources": None,
        "reasons": [],
        "event": json.loads(DEMO_LINES[0]),
    }


def test_pipeline_rows_changed_dropped_added_across_two_stages() -> None:
    def shout(event: BaseEvent) -> BaseEvent | None:
        if isinstance(event, TextMessageContentEvent):
            return event.model_copy(update={"delta": event.delta.upper()})
        if event.type is EventType.STATE_SNAPSHOT:
            return None
        return event

    def announce(event: BaseEvent) -> list[BaseEvent]:
        if event.type is EventType.RUN_STARTED:
            return [event, CustomEvent(name="hello", value=1)]
        return [event]

    chain = TransformerChain([FunctionTransformer(shout), FunctionTransformer(announce)])
    client = TestClient(inspector_app(InspectedRun.build(DEMO_LINES, "demo", chain=chain)))
    first, second = get(client, "/api/runs/0/summary")["stages"]
    contents = [
        i for i, line in enumerate(DEMO_LINES) if json.loads(line)["type"] == "TEXT_MESSAGE_CONTENT"
    ]
    snapshots = [
        i for i, line in enumerate(DEMO_LINES) if json.loads(line)["type"] == "STATE_SNAPSHOT"
    ]
    assert first == {
        "name": "shout",
        "in": 141,
        "out": 141 - len(snapshots),
        "passed": 141 - len(contents) - len(snapshots),
        "changed": len(contents),
        "dropped": len(snapshots),
        "added": 0,
        "merged": 0,
        "reasons": 0,
        "error": None,
    }
    assert second["in"] == first["out"] and second["added"] == 1
    assert second["out"] == first["out"] + 1
    changed = get(client, "/api/runs/0/stages/0?kind=changed&limit=1")
    assert changed["total"] == len(contents)
    [row] = changed["rows"]
    assert row["in"] == contents[0] and row["event"] == json.loads(DEMO_LINES[contents[0]])
    delta = row["event"]["delta"]
    assert row["diff"] == [{"op": "replace", "path": "/delta", "value": delta.upper()}]
    assert jsonpatch.apply_patch(row["event"], row["diff"])["delta"] == delta.upper()
    dropped = get(client, "/api/runs/0/stages/0?kind=dropped")
    assert [r["in"] for r in dropped["rows"]] == snapshots
    [added] = get(client, "/api/runs/0/stages/1?kind=added")["rows"]
    assert added["in"] == 0 and added["out"] == [1] and added["type"] == "CUSTOM"
    assert added["event"] == {"type": "CUSTOM", "name": "hello", "value": 1}


def test_a_failing_stage_is_reported_with_what_it_did_before() -> None:
    def boom(event: BaseEvent) -> BaseEvent:
        if event.type is EventType.STEP_STARTED:
            raise RuntimeError("no steps here")
        return event

    chain = TransformerChain([FunctionTransformer(boom)])
    run = InspectedRun.build(DEMO_LINES, "demo", chain=chain)
    [stage] = run.summary()["stages"]
    assert stage["error"] is not None and "no steps here" in stage["error"]
    step = next(i for i, line in enumerate(DEMO_LINES) if b"STEP_STARTED" in line)
    # It got the events up to the failing one, passed those before it, and stopped.
    assert stage["passed"] == step and stage["in"] == step + 1 and stage["out"] == step


def test_outputs_keep_the_order_the_stage_emitted_them() -> None:
    def before(event: BaseEvent) -> list[BaseEvent]:
        if event.type is EventType.STEP_STARTED:
            return [CustomEvent(name="before", value=None), event]
        return [event]

    def rename(event: BaseEvent) -> BaseEvent:
        if isinstance(event, CustomEvent):
            return event.model_copy(update={"name": "renamed"})
        return event

    chain = TransformerChain([FunctionTransformer(before), FunctionTransformer(rename)])
    run = InspectedRun.build(DEMO_LINES, "demo", chain=chain)
    client = TestClient(inspector_app(run))
    step = next(i for i, line in enumerate(DEMO_LINES) if b"STEP_STARTED" in line)
    first = get(client, "/api/runs/0/stages/0?limit=1000")["rows"]
    added = next(r for r in first if r["kind"] == "added")
    passed = next(r for r in first if r["in"] == step and r["kind"] == "passed")
    assert added["in"] == step and added["out"] == [step] and passed["out"] == [step + 1]
    # The second stage saw the custom event at the position it was emitted at.
    [changed] = get(client, "/api/runs/0/stages/1?kind=changed")["rows"]
    assert changed["in"] == step and changed["event"]["name"] == "before"
    assert changed["diff"] == [{"op": "replace", "path": "/name", "value": "renamed"}]


class _AsyncUpper(AsyncStreamTransformer):
    async def transform(self, event: BaseEvent) -> list[BaseEvent]:
        if isinstance(event, TextMessageContentEvent):
            return [event.model_copy(update={"delta": event.delta.upper()})]
        return [event]


class _DropSteps(StreamOperator):
    async def run(self, source: Any, emit: Any) -> None:
        async for event in source:
            if event.type not in (EventType.STEP_STARTED, EventType.STEP_FINISHED):
                await emit(event)


def test_async_stages_and_operators_are_recorded_too() -> None:
    chain = TransformerChain([_AsyncUpper(), _DropSteps()])
    first, second = InspectedRun.build(DEMO_LINES, "demo", chain=chain).summary()["stages"]
    contents = sum(b"TEXT_MESSAGE_CONTENT" in line for line in DEMO_LINES)
    assert first["changed"] == contents and first["passed"] == 141 - contents
    assert second["in"] == 141 and second["dropped"] == 2 and second["out"] == 139
    assert second["passed"] == 139 and first["error"] is None and second["error"] is None


def test_errors(demo: TestClient, filtered: TestClient) -> None:
    assert "known runs: 0" in get(demo, "/api/runs/7/summary", 404)["error"]
    assert "141 events" in get(demo, "/api/runs/0/events/141", 404)["error"]
    assert get(demo, "/api/runs/0/events/x", 400)["error"]
    assert "`at`" in get(demo, "/api/runs/0/fold", 400)["error"]
    assert "`at`" in get(demo, "/api/runs/0/fold?at=141", 400)["error"]
    assert "integer" in get(demo, "/api/runs/0/fold?at=end", 400)["error"]
    assert "`limit`" in get(demo, "/api/runs/0/events?limit=1001", 400)["error"]
    assert "`offset`" in get(demo, "/api/runs/0/events?offset=-1", 400)["error"]
    assert "--config" in get(demo, "/api/runs/0/stages/0", 404)["error"]
    assert "1 stages" in get(filtered, "/api/runs/0/stages/1", 404)["error"]
    assert "`kind`" in get(filtered, "/api/runs/0/stages/0?kind=gone", 400)["error"]
    assert get(demo, "/api/nothing", 404)["error"]


def test_recent_runs_ring_is_bounded_and_newest_first() -> None:
    runs = RecentRuns(keep=2, max_events=3)
    recorder = runs.recorder()
    streaming = [recorder.fresh() for _ in range(3)]  # held: their streams go on
    for stage in streaming:
        for line in DEMO_LINES[:5]:
            stage.transform(decode(line).event)
    client = TestClient(inspector_app(runs))
    listed = get(client, "/api/runs")["runs"]
    assert [r["id"] for r in listed] == ["3", "2"]
    assert all(r["live"] and r["outcome"] == "live" and r["events"] == 3 for r in listed)
    assert "recording-capped" in {w["code"] for w in get(client, "/api/runs/3/summary")["warnings"]}
    # A live run is searched too (event by event: it is still growing).
    assert get(client, "/api/runs/3/events?q=REASONING")["total"] == 2
    get(client, "/api/runs/1/summary", 404)


# -- the command line ---------------------------------------------------------


def test_cli_prints_the_url_and_opens_the_browser(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import webbrowser

    import uvicorn

    served: list[Any] = []
    opened: list[str] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets: served.append(self.config))
    monkeypatch.setattr(webbrowser, "open", opened.append)
    assert main(["inspect", str(DEMO)]) == 0
    out = capsys.readouterr().out
    assert "141 events, outcome finished" in out
    assert opened and opened[0] in out and opened[0].startswith("http://127.0.0.1:")
    assert served


@pytest.mark.parametrize(
    ("content", "config", "message"),
    [
        (None, None, "cannot open input"),
        (b"", None, "empty"),
        (b"[1, 2", None, "not valid JSON"),
        (b"hello\nworld\n", None, "not an AG-UI event stream"),
        (DEMO.read_bytes(), "transformers: [{type: no_such_stage}]", "invalid chain"),
    ],
)
def test_cli_errors_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes | None,
    config: str | None,
    message: str,
) -> None:
    path = tmp_path / "run.json" if content == b"[1, 2" else tmp_path / "run.ndjson"
    if content is not None:
        path.write_bytes(content)
    argv = ["inspect", str(path), "--no-open"]
    if config is not None:
        (tmp_path / "chain.yaml").write_text(f"version: 1\n{config}\n")
        argv += ["--config", str(tmp_path / "chain.yaml")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_serve_inspect_refuses_an_agent_path_it_would_hide(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--demo", "--inspect", "--path", "/inspect/agent"]) == 2
    assert "hidden by --inspect" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_cli_serves_the_api_in_a_real_process(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(FILTER_CHAIN)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agui_pipes",
            "inspect",
            str(DEMO),
            "--config",
            str(chain),
            "--no-open",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        url = line.rsplit(" ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:"), line
        # At once, no retry: the URL is printed only once the socket listens (a browser
        # opened on it must not be refused while the server starts).
        summary = httpx.get(url + "api/runs/0/summary", timeout=10).json()
        assert summary["stages"][0]["dropped"] > 0
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=15)


def test_serve_inspect_records_the_runs_it_serves() -> None:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agui_pipes", "serve", "--demo", "--inspect", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.communicate()[1].decode()
            try:
                if httpx.get(f"{base}/healthz", timeout=1).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.1)
        body = {
            "threadId": "t1",
            "runId": "r1",
            "state": {},
            "messages": [],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        streamed = httpx.post(f"{base}/", json=body, timeout=30)
        assert streamed.status_code == 200
        sent = [line for line in streamed.text.splitlines() if line.startswith("data:")]
        listed = httpx.get(f"{base}/inspect/api/runs", timeout=10).json()["runs"]
        assert len(listed) == 1
        assert listed[0]["events"] == len(sent) and listed[0]["outcome"] == "finished"
        summary = httpx.get(f"{base}/inspect/api/runs/{listed[0]['id']}/summary").json()
        assert any(lane["kind"] == "subagent" for lane in summary["lanes"])
        assert httpx.get(f"{base}/inspect").status_code in (307, 200)
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=15)
