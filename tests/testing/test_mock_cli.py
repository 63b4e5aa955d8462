"""``agui-pipes mock``: bad files and flags exit 2 with a pointed message; it serves."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agui_pipes._cli import main

GOOD = "scenarios:\n  - name: hi\n    script: [{text: hello}]\n"


def write(tmp_path: Path, text: str, name: str = "scenarios.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "scenarios:\n  - name: hi\n    scrip: []\n",
            "scenarios.yaml:3:5: scenarios[0].scrip: unknown key `scrip`\n  did you mean `script`?",
        ),
        (
            "scenarios:\n  - match: {user: '('}\n",
            "scenarios.yaml:2:19: scenarios[0].match.user: not a valid regular expression: "
            "missing ), unterminated subpattern at position 0",
        ),
        (
            "scenarios:\n  - script:\n      - txt: hi\n",
            "scenarios.yaml:3:9: scenarios[0].script[0].txt: unknown step `txt`\n"
            "  did you mean `text`?",
        ),
        (
            "scenarios:\n  - outcome: {interrupt: {message: hi}}\n",
            "scenarios.yaml:2:26: scenarios[0].outcome.interrupt.reason: expected a string, "
            "got null",
        ),
        (
            "scenarios:\n  - fault: break=chunk-conflict\n",
            "scenarios.yaml:2:12: scenarios[0].fault: fault `break` cannot break "
            "`chunk-conflict`; it breaks: first-event,",
        ),
        ("scenarios: [\n", "scenarios.yaml:2:1: malformed YAML"),
    ],
    ids=["key", "regex", "step", "missing", "fault", "yaml"],
)
def test_a_bad_scenario_file_exits_2_at_its_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = write(tmp_path, text)
    assert main(["mock", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"agui-pipes mock: invalid scenario file: {tmp_path}/")
    assert message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give a scenario file, --replay FILE... or --record DIR --upstream URL"),
        (["--record", "out"], "--record DIR and --upstream URL go together"),
        (["SCEN", "--speed", "0"], "--speed must be > 0 (inf: as fast as possible), got 0.0"),
        (["SCEN", "--port", "70000"], "--port must be 0 to 65535, got 70000"),
        (["--replay", "missing.ndjson"], "missing.ndjson: No such file or directory"),
        (["missing.yaml"], "config file not found"),
        (
            ["SCEN", "--record", "out", "--upstream", "http://x"],
            "--record proxies the upstream: it takes no scenarios or --replay",
        ),
    ],
)
def test_bad_flags_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    scenarios = write(tmp_path, GOOD)
    argv = [scenarios if a == "SCEN" else a for a in argv]
    assert main(["mock", *argv]) == 2
    assert message in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    command = [
        sys.executable, "-m", "agui_pipes", "mock", write(tmp_path, GOOD),
        "--port", str(port), "--seed", "3", "--log-level", "warning", "--durable",
    ]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "healthz", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the mock did not start: {process.stderr}") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
        assert "agui-pipes mock: 1 scenario(s), 0 recording(s)" in err


def test_the_command_serves_the_scenarios(served: str) -> None:
    body = {"threadId": "t", "runId": "r", "messages": []}
    response = httpx.post(served, json=body, headers={"x-agui-mock-fault": "duplicate=1"})
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [frame.split("\n") for frame in response.text.split("\n\n") if frame]
    assert [f[0].rsplit(":", 1)[1] for f in frames] == [str(n) for n in range(1, 7)]  # --durable
    payloads = [f[1].removeprefix("data: ") for f in frames]
    assert [json.loads(p)["type"] for p in payloads] == [
        "RUN_STARTED", "RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END", "RUN_FINISHED",
    ]  # fmt: skip
