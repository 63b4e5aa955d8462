"""``POST api/send``: a run composed on the inspector's page, sent to the served agent.

Through the public app (``build_app`` with the demo agent, the inspector mounted
with ``send_to``): the run is recorded like any other; a request that is not
same-origin JSON is refused (403) so another site cannot start runs; a bad input
is 400 saying what is wrong; an inspector with nowhere to send says so (404).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agui_pipes import TransformerChain
from agui_pipes.demo import DemoAgent
from agui_pipes.inspector import InspectedRun, RecentRuns, inspector_app, with_inspector
from agui_pipes.server import build_app

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo-run.ndjson"
SAME_ORIGIN = {"origin": "http://testserver", "content-type": "application/json"}
RUN = {
    "threadId": "t-send",
    "runId": "r-send",
    "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    "tools": [],
    "context": [],
    "state": {},
    "forwardedProps": {},
}


@pytest.fixture
def served() -> tuple[TestClient, RecentRuns]:
    runs = RecentRuns()
    recorder = runs.recorder()
    app = build_app(
        agent=DemoAgent(pace=0), path="/agent", chain=lambda: TransformerChain([recorder.fresh()])
    )
    inspector = inspector_app(runs, send_to=(app, "/agent"))
    return TestClient(with_inspector(app, inspector)), runs


def _send(client: TestClient, body: Any, headers: dict[str, str]) -> Any:
    return client.post("/inspect/api/send", content=body, headers=headers)


def test_a_sent_run_is_served_and_recorded_like_any_other(
    served: tuple[TestClient, RecentRuns],
) -> None:
    client, runs = served
    answer = _send(client, json.dumps(RUN), SAME_ORIGIN)
    assert answer.status_code == 200, answer.text
    assert [run.label for run in runs.newest_first()] == ["t-send / r-send"]
    body = answer.json()
    assert body["status"] == 200 and body["threadId"] == "t-send" and body["runId"] == "r-send"
    listed = client.get("/inspect/api/runs").json()
    assert listed["send"] is True
    (run,) = listed["runs"]
    assert run["label"] == "t-send / r-send" and run["outcome"] == "finished"
    assert run["events"] == body["events"] > 10


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"content-type": "application/json"}, "Origin header"),
        ({"origin": "https://evil.example", "content-type": "application/json"}, "Origin header"),
        ({"origin": "http://testserver", "content-type": "text/plain"}, "application/json"),
    ],
)
def test_a_request_that_is_not_same_origin_json_is_refused(
    served: tuple[TestClient, RecentRuns], headers: dict[str, str], says: str
) -> None:
    client, runs = served
    answer = _send(client, json.dumps(RUN), headers)
    assert answer.status_code == 403 and says in answer.json()["error"]
    assert runs.newest_first() == []  # nothing was started
    assert client.get("/inspect/api/send").status_code == 404  # a GET sends nothing
    assert runs.newest_first() == []


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not JSON"),
        (b'{"threadId": "t"}', "not a RunAgentInput: runId"),
        (b"[]", "not a RunAgentInput"),
        (b'{"threadId": "t", "runId": "r", "messages": "hi"}', "messages"),
    ],
)
def test_a_bad_run_input_is_400_with_what_is_wrong(
    served: tuple[TestClient, RecentRuns], body: bytes, says: str
) -> None:
    client, runs = served
    answer = _send(client, body, SAME_ORIGIN)
    assert answer.status_code == 400 and says in answer.json()["error"], answer.text
    assert runs.newest_first() == []


def test_an_inspector_of_a_file_sends_nowhere() -> None:
    run = InspectedRun.build(DEMO.read_bytes().splitlines(), "demo")
    client = TestClient(inspector_app(run))
    assert client.get("/api/runs").json()["send"] is False
    answer = client.post("/api/send", json=RUN, headers={"origin": "http://testserver"})
    assert answer.status_code == 404 and "serve --inspect" in answer.json()["error"]


def test_a_run_exports_as_the_ndjson_it_was_read_from_and_reads_back_the_same() -> None:
    from agui_pipes.transformers import FilterToolCalls

    lines = DEMO.read_bytes().splitlines()
    chain = TransformerChain([FilterToolCalls(deny=["internal_*"])])
    run = InspectedRun.build(lines, "demo", chain=chain)
    client = TestClient(inspector_app(run))
    exported = client.get("/api/runs/0/export")
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert 'filename="run-0.ndjson"' in exported.headers["content-disposition"]
    assert exported.content.splitlines() == [line.strip() for line in lines]
    output = client.get("/api/runs/0/export?side=output")
    assert 'filename="run-0-output.ndjson"' in output.headers["content-disposition"]
    again = InspectedRun.build(output.content.splitlines(), "again")
    assert again.summary()["types"] == client.get("/api/runs/0/summary?side=output").json()["types"]
    assert "internal_price_lookup" not in output.text
    assert client.get("/api/runs/9/export").status_code == 404
    assert client.get("/api/runs/0/export?side=sideways").status_code == 400
