"""``agui-pipes inspect --target URL``: the page's runs go to an AG-UI endpoint over HTTP.

Against a real ``agui-pipes serve --demo`` subprocess: a run sent through the
inspector's ``POST api/send`` streams from the target and is recorded as a run with
its request; ``--target-header`` goes with every run (a target with ``--auth-tokens``
refuses without it); a target that is not there is a 502 saying so; a URL that is
not http(s) or a malformed header is refused at start with exit status 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agui_pipes._cli import main
from tests._browser import Inspector
from tests.cli.test_cli_serve import Served, free_port, start, stop

TOKEN = "target-token-0123456789"
RUN = {
    "threadId": "t-target",
    "runId": "r-target",
    "messages": [{"id": "u1", "role": "user", "content": "Lisbon?"}],
    "tools": [],
    "context": [],
    "state": {},
    "forwardedProps": {},
}


@pytest.fixture(scope="module")
def demo() -> Iterator[Served]:
    served = start("--demo", "--path", "/agent")
    yield served
    stop(served)


def _send(inspector: Inspector, run: dict[str, object]) -> httpx.Response:
    origin = inspector.url.rstrip("/")
    return httpx.post(
        inspector.url + "api/send",
        content=json.dumps(run),
        headers={"origin": origin, "content-type": "application/json"},
        timeout=60,
    )


def test_a_run_sent_to_the_target_is_recorded_with_its_request(demo: Served) -> None:
    inspector = Inspector(None, "--target", f"{demo.url}/agent")
    try:
        listed = httpx.get(inspector.url + "api/runs").json()
        assert listed["send"] is True and listed["sendsTo"] == f"{demo.url}/agent"
        answer = _send(inspector, RUN)
        assert answer.status_code == 200, answer.text
        assert answer.json()["threadId"] == "t-target" and answer.json()["events"] > 10
        (run,) = httpx.get(inspector.url + "api/runs").json()["runs"]
        assert run["label"] == "t-target / r-target" and run["outcome"] == "finished"
        assert run["events"] == answer.json()["events"] and run["request"] is True
        summary = httpx.get(inspector.url + f"api/runs/{run['id']}/summary").json()
        assert summary["request"]["messages"][0]["content"] == "Lisbon?"
        assert summary["violations"] == []
    finally:
        inspector.close()


def test_a_file_and_a_target_together(demo: Served, tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[1] / "data" / "demo-run.ndjson"
    copy = tmp_path / "demo-run.ndjson"
    copy.write_bytes(source.read_bytes())
    inspector = Inspector(copy, "--target", f"{demo.url}/agent")
    try:
        assert _send(inspector, RUN).status_code == 200
        runs = httpx.get(inspector.url + "api/runs").json()["runs"]
        assert [r["label"] for r in runs] == ["t-target / r-target", "demo-run.ndjson"]
    finally:
        inspector.close()


def test_the_target_header_goes_with_every_run(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} alice\n", encoding="utf-8")
    guarded = start("--demo", "--path", "/agent", "--auth-tokens", str(tokens))
    try:
        without = Inspector(None, "--target", f"{guarded.url}/agent")
        try:
            refused = _send(without, RUN)
            assert refused.status_code == 401, refused.text
            assert "the target refused the run" in refused.json()["error"]
            assert httpx.get(without.url + "api/runs").json()["runs"] == []
        finally:
            without.close()
        header = f"Authorization: Bearer {TOKEN}"
        bearing = Inspector(None, "--target", f"{guarded.url}/agent", "--target-header", header)
        try:
            assert _send(bearing, RUN).status_code == 200
            (run,) = httpx.get(bearing.url + "api/runs").json()["runs"]
            assert run["outcome"] == "finished"
        finally:
            bearing.close()
    finally:
        stop(guarded)


def test_an_unreachable_target_is_a_502_saying_so() -> None:
    gone = f"http://127.0.0.1:{free_port()}/agent"
    inspector = Inspector(None, "--target", gone)
    try:
        answer = _send(inspector, RUN)
        assert answer.status_code == 502
        assert f"cannot reach the target {gone}" in answer.json()["error"]
        assert "is it running" in answer.json()["error"]
        assert httpx.get(inspector.url + "api/runs").json()["runs"] == []
    finally:
        inspector.close()


def test_a_target_that_is_not_an_event_stream_is_a_502_saying_so(demo: Served) -> None:
    inspector = Inspector(None, "--target", f"{demo.url}/healthz")
    try:
        answer = _send(inspector, RUN)
        assert answer.status_code in (405, 502), answer.text
        assert "target" in answer.json()["error"]
    finally:
        inspector.close()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--target", "ftp://example.com/agent"], "http:// or https:// URL"),
        (["--target", "localhost:8000/agent"], "http:// or https:// URL"),
        (["--target", "http:///agent"], "http:// or https:// URL"),
        (["--target", "http://h/a", "--target-header", "no colon"], "'Name: value'"),
        (["--target", "http://h/a", "--target-header", "Bad Name: x"], "'Name: value'"),
        (["--target-header", "A: b"], "needs --target"),
        ([], "give a FILE to inspect, or --target URL"),
    ],
)
def test_bad_target_options_are_refused_at_start(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", "--no-open", *args]) == 2
    assert says in capsys.readouterr().err
