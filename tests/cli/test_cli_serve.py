"""``agui-pipes serve``: real processes on 127.0.0.1 — the demo agent and a gateway to it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from ag_ui.core import EventType, TextMessageContentEvent

from agui_pipes._cli import main
from tests._servers import post_run

CHAIN = """\
version: 1
transformers:
  - type: expand_chunks
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Served:
    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.url = f"http://127.0.0.1:{port}"


def start(*args: str) -> Served:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agui_pipes", "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            _, err = process.communicate()
            raise AssertionError(f"serve exited early: {err.decode()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).text == "ok":
                return Served(process, port)
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("serve did not come up")
        time.sleep(0.1)


def stop(served: Served) -> tuple[int, str]:
    served.process.send_signal(signal.SIGINT)
    try:
        _, err = served.process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        served.process.kill()
        raise
    return served.process.returncode, err.decode()


@pytest.fixture(scope="module")
def chain_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("serve") / "chain.yaml"
    path.write_text(CHAIN)
    return path


@pytest.fixture(scope="module")
def demo_and_gateway(chain_file: Path) -> Iterator[tuple[Served, Served]]:
    demo = start("--demo", "--config", str(chain_file))
    try:
        gateway = start("--upstream", demo.url + "/", "--config", str(chain_file))
    except BaseException:
        stop(demo)
        raise
    yield demo, gateway
    # Shutting down is part of the contract: Ctrl-C exits 0.
    gateway_code, gateway_log = stop(gateway)
    demo_code, _ = stop(demo)
    assert (gateway_code, demo_code) == (0, 0)
    assert "gateway run gw-run" in gateway_log


RUN = {
    "threadId": "t",
    "runId": "gw-run",
    "messages": [{"id": "u1", "role": "user", "content": "Plan a weekend in Porto"}],
}


@pytest.mark.anyio
async def test_demo_served_directly_and_through_the_gateway(
    demo_and_gateway: tuple[Served, Served],
) -> None:
    demo, gateway = demo_and_gateway
    async with httpx.AsyncClient(timeout=30) as client:
        _, direct = await post_run(client, demo.url + "/", RUN)
        _, relayed = await post_run(client, gateway.url + "/", RUN)
    assert direct[0].type is EventType.RUN_STARTED
    assert direct[-1].type is EventType.RUN_FINISHED
    # The demo is deterministic and the chain passes everything: same stream.
    assert [e.model_dump() for e in relayed] == [e.model_dump() for e in direct]
    text = "".join(e.delta for e in relayed if isinstance(e, TextMessageContentEvent))
    assert "Porto" in text


def test_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["serve"]) == 2
    assert "--upstream URL" in capsys.readouterr().err
    assert main(["serve", "--demo", "--path", "agent"]) == 2
    assert "must start with '/'" in capsys.readouterr().err
    assert main(["serve", "--upstream", "ftp://x/"]) == 2
    assert "http(s) URL" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntransformers:\n  - type: no_such_stage\n")
    assert main(["serve", "--demo", "--config", str(bad)]) == 2
    assert "invalid chain" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--demo", "--upstream", "http://127.0.0.1:1/"])
    assert exit_info.value.code == 2


def test_serve_demo_with_a_store_records_and_serves_history(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    served = start("--demo", "--store", url, "--detach-grace", "5", "--path", "/agent")
    try:
        body = {"threadId": "cli-t", "runId": "cli-r", "messages": []}
        response = httpx.post(f"{served.url}/agent", json=body, timeout=20)
        assert response.status_code == 200
        assert response.text.startswith("id: ")
        history = httpx.get(f"{served.url}/agent/threads/cli-t", timeout=20)
        assert history.status_code == 200
        assert '"type":"MESSAGES_SNAPSHOT"' in history.text
        missing = httpx.get(f"{served.url}/agent/runs/nope", timeout=20)
        assert missing.status_code == 404
    finally:
        code, err = stop(served)
    assert code == 0, err


@pytest.mark.parametrize("concurrency", ["reject", "supersede"])
def test_serve_concurrency_refuses_or_supersedes_a_second_run_on_a_thread(
    tmp_path: Path, concurrency: str
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    served = start(
        "--demo",
        "--store",
        url,
        "--pace",
        "0.2",
        "--detach-grace",
        "0.5",
        "--concurrency",
        concurrency,
    )
    try:
        with httpx.Client(base_url=served.url, timeout=20) as client:
            first = {"threadId": "cc-t", "runId": "cc-1", "messages": []}
            with client.stream("POST", "/", json=first) as response:
                assert response.status_code == 200
                next(response.iter_raw())  # the run is live
                second = client.post("/", json={**first, "runId": "cc-2"})
            if concurrency == "reject":
                assert second.status_code == 409
                assert second.json()["error"] == "thread_busy"
            else:
                assert second.status_code == 200
                replay = client.get("/runs/cc-1")
                assert '"code":"CANCELLED"' in replay.text.rsplit("data: ", 1)[1]
    finally:
        code, err = stop(served)
    assert code == 0, err


def test_serve_gateway_with_a_store_records_and_serves_history(tmp_path: Path) -> None:
    demo = start("--demo")
    try:
        url = f"sqlite:///{tmp_path / 'gateway.db'}"
        gateway = start(
            "--upstream", f"{demo.url}/", "--store", url, "--detach-grace", "5", "--path", "/chat"
        )
        try:
            body = {"threadId": "gw-t", "runId": "gw-r", "messages": []}
            response = httpx.post(f"{gateway.url}/chat", json=body, timeout=20)
            assert response.status_code == 200
            frames = [f for f in response.text.split("\n\n") if f]
            assert frames and all(f.startswith("id: ") and ":gw-r:" in f for f in frames)
            again = httpx.post(f"{gateway.url}/chat", json=body, timeout=20)
            # A retry of the same request rejoins the run: its join stream, self-contained,
            # ending on the run's own last frame (same id, same bytes).
            assert again.status_code == 200
            joined = [f for f in again.text.split("\n\n") if f]
            assert '"type":"RUN_STARTED"' in joined[0] and '"MESSAGES_SNAPSHOT"' in again.text
            assert joined[-1] == frames[-1]
            other = httpx.post(f"{gateway.url}/chat", json={**body, "state": {"n": 1}}, timeout=20)
            assert other.status_code == 409
            assert other.json()["error"] == "run_exists"
            resumed = httpx.get(f"{gateway.url}/chat/runs/gw-r", timeout=20)
            assert resumed.text == response.text
            history = httpx.get(f"{gateway.url}/chat/threads/gw-t", timeout=20)
            assert '"type":"MESSAGES_SNAPSHOT"' in history.text
        finally:
            code, err = stop(gateway)
        assert code == 0, err
    finally:
        stop(demo)
