"""An exported run carries its request; ``POST api/import`` adds an export to the runs.

The export's first line is ``{"type": "agui_pipes.request", "input": RunAgentInput}``
when the request is known (a run sent from the page); ``agui-pipes inspect FILE`` and
``POST api/import`` read it back as the run's request. Import is same-origin NDJSON
only (403 otherwise), capped (413), refuses bad content with the fix (400), and the
imported run is the importing principal's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agui_pipes import TransformerChain
from agui_pipes._cli.inspect import load_run
from agui_pipes.demo import DemoAgent
from agui_pipes.inspector import InspectedRun, RecentRuns, inspector_app, with_inspector
from agui_pipes.inspector._app import MAX_IMPORT_BYTES
from agui_pipes.server import build_app
from agui_pipes.server.auth import TokenFile

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo-run.ndjson"
SAME_ORIGIN = {"origin": "http://testserver", "content-type": "application/json"}
NDJSON = {"origin": "http://testserver", "content-type": "application/x-ndjson"}
RUN = {
    "threadId": "t-exp",
    "runId": "r-exp",
    "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    "tools": [{"name": "lookup", "description": "looks up", "parameters": {"type": "object"}}],
    "context": [],
    "state": {"city": "Lisbon"},
    "forwardedProps": {"mode": "x"},
}


def _served(**options: Any) -> tuple[TestClient, RecentRuns]:
    runs = RecentRuns()
    recorder = runs.recorder()
    authorize = options.pop("authorize", None)
    app = build_app(
        agent=DemoAgent(pace=0),
        path="/agent",
        chain=lambda: TransformerChain([recorder.fresh()]),
        authorize=authorize,
    )
    inspector = inspector_app(runs, send_to=(app, "/agent"), authorize=authorize, **options)
    return TestClient(with_inspector(app, inspector)), runs


def _args(path: Path) -> argparse.Namespace:
    return argparse.Namespace(
        input=str(path),
        input_format="auto",
        max_events=1_000_000,
        max_mib=64,
        config=None,
        allow_imports=False,
    )


def test_a_sent_run_exports_with_its_request_and_reads_back(tmp_path: Path) -> None:
    client, _ = _served()
    assert client.post("/inspect/api/send", content=json.dumps(RUN), headers=SAME_ORIGIN).is_success
    (listed,) = client.get("/inspect/api/runs").json()["runs"]
    assert listed["request"] is True
    summary = client.get(f"/inspect/api/runs/{listed['id']}/summary").json()
    assert summary["request"]["threadId"] == "t-exp" and summary["request"]["state"] == RUN["state"]
    exported = client.get(f"/inspect/api/runs/{listed['id']}/export").content.splitlines()
    first = json.loads(exported[0])
    assert first["type"] == "agui_pipes.request"
    assert first["input"]["tools"][0]["name"] == "lookup"
    assert first["input"]["forwardedProps"] == {"mode": "x"}
    assert len(exported) == listed["events"] + 1
    path = tmp_path / "exported.ndjson"
    path.write_bytes(b"\n".join(exported) + b"\n")
    again = load_run(_args(path))
    assert again.request == first["input"] and len(again) == listed["events"]
    assert again.outcome == "finished" and not again.warnings  # the request is no event


def test_a_run_streamed_by_another_client_exports_without_a_request() -> None:
    client, _ = _served()
    with client.stream("POST", "/agent", json=RUN) as response:
        assert response.status_code == 200
        response.read()
    (listed,) = client.get("/inspect/api/runs").json()["runs"]
    assert listed["request"] is False
    exported = client.get(f"/inspect/api/runs/{listed['id']}/export").content.splitlines()
    assert json.loads(exported[0])["type"] == "RUN_STARTED"


def test_an_imported_run_is_listed_with_its_request() -> None:
    client, _ = _served()
    body = json.dumps({"type": "agui_pipes.request", "input": RUN}).encode() + b"\n"
    body += DEMO.read_bytes()
    answer = client.post("/inspect/api/import?name=demo.ndjson", content=body, headers=NDJSON)
    assert answer.status_code == 200, answer.text
    imported = answer.json()
    assert imported["label"] == "demo.ndjson" and imported["request"] is True
    (listed,) = client.get("/inspect/api/runs").json()["runs"]
    assert listed["id"] == imported["id"] and listed["outcome"] == "finished"
    assert listed["events"] == len(DEMO.read_bytes().splitlines())
    summary = client.get(f"/inspect/api/runs/{listed['id']}/summary").json()
    assert summary["request"] == RUN
    exported = client.get(f"/inspect/api/runs/{listed['id']}/export").content.splitlines()
    assert json.loads(exported[0]) == {"type": "agui_pipes.request", "input": RUN}
    assert exported[1:] == DEMO.read_bytes().splitlines()  # the events as they were


def test_the_inspector_of_a_file_imports_beside_it() -> None:
    run = InspectedRun.build(DEMO.read_bytes().splitlines(), "demo")
    client = TestClient(inspector_app(run))
    answer = client.post("/api/import", content=DEMO.read_bytes(), headers=NDJSON)
    assert answer.status_code == 200, answer.text
    ids = [r["id"] for r in client.get("/api/runs").json()["runs"]]
    assert ids == [answer.json()["id"], "0"]


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"content-type": "application/x-ndjson"}, "Origin header"),
        ({"origin": "https://evil.example", "content-type": "application/x-ndjson"}, "Origin"),
        ({"origin": "http://testserver", "content-type": "text/plain"}, "application/x-ndjson"),
    ],
)
def test_an_import_that_is_not_same_origin_ndjson_is_refused(
    headers: dict[str, str], says: str
) -> None:
    client, runs = _served()
    answer = client.post("/inspect/api/import", content=DEMO.read_bytes(), headers=headers)
    assert answer.status_code == 403 and says in answer.json()["error"]
    assert runs.newest_first() == []


def test_an_import_past_the_cap_is_413_and_not_read_whole() -> None:
    client, runs = _served(max_import_bytes=4096)
    answer = client.post("/inspect/api/import", content=DEMO.read_bytes(), headers=NDJSON)
    assert answer.status_code == 413 and "more than 4,096 bytes" in answer.json()["error"]
    assert "agui-pipes inspect FILE" in answer.json()["error"]
    assert runs.newest_first() == []
    assert MAX_IMPORT_BYTES == 8 * 1024 * 1024


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "no events"),
        (b"\xff\xfe not utf-8", "not UTF-8"),
        (b"<html><body>a page</body></html>\n", "not NDJSON of AG-UI events"),
        (b'{"type": "agui_pipes.request", "input": {"threadId": "t"}}\n', "runId"),
        (b'{"type": "agui_pipes.request", "input": []}\n{"type": "RUN_STARTED"}\n', "not a JSON"),
        (json.dumps({"type": "agui_pipes.request", "input": RUN}).encode(), "no events"),
    ],
)
def test_bad_content_is_400_with_the_fix(body: bytes, says: str) -> None:
    client, runs = _served()
    answer = client.post("/inspect/api/import", content=body, headers=NDJSON)
    assert answer.status_code == 400 and says in answer.json()["error"], answer.text
    assert runs.newest_first() == []


def test_an_imported_run_is_the_importing_principals(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("token-a alice\ntoken-b bob\n", encoding="utf-8")
    authorize = TokenFile(tokens)
    client, _ = _served(authorize=authorize)
    alice = {**NDJSON, "authorization": "Bearer token-a"}
    bob = {"authorization": "Bearer token-b"}
    answer = client.post("/inspect/api/import", content=DEMO.read_bytes(), headers=alice)
    assert answer.status_code == 200, answer.text
    run_id = answer.json()["id"]
    assert [r["id"] for r in client.get("/inspect/api/runs", headers=alice).json()["runs"]] == [
        run_id
    ]
    assert client.get("/inspect/api/runs", headers=bob).json()["runs"] == []
    assert client.get(f"/inspect/api/runs/{run_id}/summary", headers=bob).status_code == 404
    assert (
        client.post("/inspect/api/import", content=DEMO.read_bytes(), headers=NDJSON).status_code
        == 401
    )


def test_a_sent_run_keeps_its_request_with_a_store(tmp_path: Path) -> None:
    """With a store the run is served from a recording task: the request still reaches it."""
    runs = RecentRuns()
    recorder = runs.recorder()
    app = build_app(
        agent=DemoAgent(pace=0),
        path="/agent",
        chain=lambda: TransformerChain([recorder.fresh()]),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
    )
    with TestClient(with_inspector(app, inspector_app(runs, send_to=(app, "/agent")))) as client:
        sent = client.post("/inspect/api/send", content=json.dumps(RUN), headers=SAME_ORIGIN)
        assert sent.status_code == 200, sent.text
        (listed,) = client.get("/inspect/api/runs").json()["runs"]
        assert listed["outcome"] == "finished" and listed["request"] is True
