"""``agui-pipes serve --agent module:attr``: the documented command, run as a subprocess.

``agui-pipes serve --agent examples.frameworks.langgraph_app:graph --store
sqlite:///…`` from the repository's root serves the example LangGraph graph
durably: a run answers, is recorded (its replay and the thread's history read
back), and the server shuts down cleanly on SIGTERM. An object nothing serves
is a usage error naming what is accepted.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("ag_ui_langgraph", reason="the producers extra is not installed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "agui_pipes", "serve", *args]


def test_the_documented_command_serves_a_durable_langgraph_agent(tmp_path: Path) -> None:
    port = _free_port()
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    server = subprocess.Popen(
        _command(
            "--agent",
            "examples.frameworks.langgraph_app:graph",
            "--store",
            store,
            "--port",
            str(port),
        ),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": ""},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stdout.read().decode()  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        run = {
            "threadId": "t-1",
            "runId": "r-1",
            "messages": [{"id": "u-1", "role": "user", "content": "Weather in Lisbon?"}],
        }
        answer = httpx.post(url, json=run, headers={"accept": "text/event-stream"}, timeout=30)
        assert answer.status_code == 200
        assert '"type":"TOOL_CALL_START"' in answer.text and "It is sunny" in answer.text
        assert answer.text.rstrip().splitlines()[-1].startswith('data: {"type":"RUN_FINISHED"')
        replay = httpx.get(f"{url}/runs/r-1", timeout=30)
        assert replay.status_code == 200 and replay.text == answer.text  # recorded as sent
        history = httpx.get(f"{url}/threads/t-1", timeout=30)
        assert history.status_code == 200 and "sunny in Lisbon" in history.text
    finally:
        server.send_signal(signal.SIGTERM)
        output = server.communicate(timeout=30)[0].decode()
    assert server.returncode == 0, output
    assert "examples.frameworks.langgraph_app:graph (CompiledStateGraph, in-process)" in output


def test_an_object_nothing_serves_is_a_usage_error() -> None:
    done = subprocess.run(
        _command("--agent", "json:dumps"), cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "cannot be served" in done.stderr and "a compiled LangGraph graph" in done.stderr
    assert "a producer (producer(run_input, principal)" in done.stderr
