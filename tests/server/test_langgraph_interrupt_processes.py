"""A LangGraph approval across two ``agui-pipes serve`` processes: one store, one checkpointer.

The graph of tests/integrations/_langgraph_approver.py pauses in
``interrupt()`` with its state in LangGraph's ``AsyncSqliteSaver`` on a file
both processes open, and the run log is a SQLite or Redis store both share.
Served both ways ag-ui-langgraph speaks: the compiled graph (its defaults,
the legacy ``CUSTOM on_interrupt``, made canonical by the ``interrupt_bridge``
stage of ``--config``), and a ``LangGraphAgent`` with
``emit_interrupt_outcome``. The official TypeScript client's first run
ends with the interrupt on process one; new input while it is pending and
an answer to a wrong id are refused by process two; the client's resume is
answered by process two — the graph, read back from the shared checkpointer,
resumes and completes — and a second answer is refused by process one. An
interrupt whose ``expiresAt`` passed is refused when resolved, and
cancelling it moves the thread on (the graph reads the cancellation).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._store_backends import redis_url, store_url_for

pytest.importorskip("ag_ui_langgraph", reason="the producers extra is not installed")
pytest.importorskip(
    "langgraph.checkpoint.sqlite", reason="langgraph-checkpoint-sqlite (the test extra) is missing"
)

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.integrations._langgraph_approver"
USER = {"id": "u-1", "role": "user", "content": "Book me a flight to Lisbon."}
BRIDGE = "transformers:\n  - type: interrupt_bridge\n    dialect: langgraph\n"
DIALECTS = {
    # dialect: the object served, and whether the chain needs the bridge
    "legacy": ("graph", True),
    "canonical": ("agent", False),
}


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_process(args: list[str], checkpoints: Path) -> Iterator[str]:
    """``agui-pipes serve ARGS --path /agent`` in a process of its own: its endpoint's URL."""
    port = _free_port()
    command = [sys.executable, "-m", "agui_pipes", "serve", *args]
    command += ["--port", str(port), "--path", "/agent", "--keepalive", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGUI_PIPES_TEST_CHECKPOINTS": str(checkpoints)}
    log = checkpoints.with_name(f"serve-{port}.log")
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited ({process.returncode}): {log.read_text()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start: {log.read_text()}")
            time.sleep(0.1)
        yield f"{url}/agent"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


@contextmanager
def two_servers(dialect: str, store_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    attr, bridged = DIALECTS[dialect]
    args = ["--agent", f"{MODULE}:{attr}", "--store", store_url]
    if bridged:
        chain = tmp_path / "chain.yaml"
        chain.write_text(BRIDGE)
        args += ["--config", str(chain)]
    checkpoints = tmp_path / "checkpoints.db"
    with serve_process(args, checkpoints) as one, serve_process(args, checkpoints) as two:
        yield one, two


def _post(client: httpx.Client, url: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(url, content=json.dumps(body), headers={"accept": "text/event-stream"})


def _refusal(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


def _interrupt_of(run: dict[str, Any]) -> dict[str, Any]:
    finished = [e for e in run["events"] if e["type"] == "RUN_FINISHED"][-1]
    [interrupt] = finished["outcome"]["interrupts"]
    assert isinstance(interrupt, dict)
    return interrupt


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_langgraph_approval_across_two_processes(
    dialect: str, store_url: str, tmp_path: Path, ts_oracle: Any
) -> None:
    with two_servers(dialect, store_url, tmp_path) as (one, two):
        (asked,) = ts_oracle(
            [{"url": one, "threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}]
        )
        assert asked["outcome"] == "completed", asked["error"]
        interrupt = _interrupt_of(asked)
        assert (interrupt["reason"], interrupt["message"]) == (
            "tool_approval",
            "Book the flight to Lisbon?",
        )
        legacy = [e["name"] for e in asked["events"] if e["type"] == "CUSTOM"]
        assert legacy == (["on_interrupt"] if dialect == "legacy" else [])
        approve = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        history = asked["messages"]
        with httpx.Client(timeout=30) as client:
            typed = {"id": "u-2", "role": "user", "content": "Never mind."}
            body = {"threadId": "t-1", "runId": "r-x", "messages": [*history, typed]}
            assert _refusal(_post(client, two, body)) == (409, "interrupt_pending")
            wrong = {**body, "messages": history, "resume": [{**approve[0], "interruptId": "x"}]}
            assert _refusal(_post(client, two, wrong)) == (422, "unknown_interrupt")
        # Process two never saw the run: the graph's pause comes from the shared file.
        (resumed,) = ts_oracle(
            [
                {
                    "url": two,
                    "threadId": "t-1",
                    "runId": "r-2",
                    "initialMessages": history,
                    "resume": approve,
                }
            ],
        )
        assert resumed["outcome"] == "completed", resumed["error"]
        assert resumed["messages"][-1]["content"] == "Booked."
        finished = [e for e in resumed["events"] if e["type"] == "RUN_FINISHED"][-1]
        assert (finished.get("outcome") or {}).get("type", "success") == "success"
        with httpx.Client(timeout=30) as client:
            again = {"threadId": "t-1", "runId": "r-3", "messages": history, "resume": approve}
            refused = _post(client, one, again)
            assert _refusal(refused) == (409, "interrupt_answered")
            assert "'r-2'" in refused.json()["message"]
            for run_id in ("r-x", "r-3"):  # nothing was written for the refused requests
                assert client.get(f"{one}/runs/{run_id}").status_code == 404


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_an_expired_langgraph_interrupt_across_two_processes(
    dialect: str, store_url: str, tmp_path: Path
) -> None:
    with (
        two_servers(dialect, store_url, tmp_path) as (one, two),
        httpx.Client(timeout=60) as client,
    ):
        first = {"threadId": "expired-1", "runId": "r-1", "messages": [USER]}
        asked = _post(client, one, first)
        assert asked.status_code == 200, asked.text
        assert '"expiresAt":"2020-01-01T00:00:00Z"' in asked.text
        recorded = client.get(f"{two}/runs/r-1").text
        interrupt_id = json.loads(recorded.strip().splitlines()[-1].removeprefix("data: "))[
            "outcome"
        ]["interrupts"][0]["id"]
        resolved = [
            {"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": True}}
        ]
        late = {**first, "runId": "r-2", "resume": resolved}
        assert _refusal(_post(client, two, late)) == (409, "interrupt_expired")
        cancelled = [{"interruptId": interrupt_id, "status": "cancelled"}]
        moved = _post(client, two, {**late, "resume": cancelled})
        assert moved.status_code == 200 and "Cancelled." in moved.text, moved.text
