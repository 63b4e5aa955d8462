"""The ``agui_mock_server`` pytest fixture (registered by the package's pytest11 plugin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agui_pipes.testing import MockServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def agui_mock_scenarios() -> str:
    return "scenarios:\n  - name: hi\n    match: {user: hi}\n    script: [{text: hello}]\n"


def _run(url: str, text: str) -> list[str]:
    body = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "u", "role": "user", "content": text}],
    }
    response = httpx.post(url, json=body)
    return [line for line in response.text.split("\n\n") if line]


def test_the_fixture_serves_the_overridden_scenarios_on_loopback(
    agui_mock_server: MockServer,
) -> None:
    assert agui_mock_server.url.startswith("http://127.0.0.1:")
    assert agui_mock_server.port != 0
    frames = _run(agui_mock_server.url, "hi")
    assert '"delta":"hello"' in frames[2]
    assert agui_mock_server.requests[-1].messages[-1].content == "hi"


def test_use_swaps_the_scenarios_of_the_running_server(agui_mock_server: MockServer) -> None:
    agui_mock_server.use({"scenarios": [{"name": "bye", "script": [{"text": "bye"}]}]})
    assert '"delta":"bye"' in _run(agui_mock_server.url, "hi")[2]


async def test_the_fixture_serves_async_tests_on_either_backend(
    agui_mock_server: MockServer,
) -> None:
    body = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "u", "role": "user", "content": "hi"}],
    }
    async with httpx.AsyncClient() as http:
        response = await http.post(agui_mock_server.url, json=body)
    assert response.text.count("\n\n") == 5


async def test_the_server_is_an_async_context_manager_too(agui_mock_scenarios: str) -> None:
    async with MockServer(agui_mock_scenarios) as server, httpx.AsyncClient() as http:
        response = await http.post(server.url, json={"threadId": "t", "runId": "r", "messages": []})
    assert '"code":"MOCK_NO_MATCH"' in response.text
    assert server.port != 0


def test_by_default_no_scenario_matches(tmp_path: Path) -> None:
    # In a project of its own (outside this suite's conftest), the fixture as installed.
    (tmp_path / "test_it.py").write_text(
        "import httpx\n"
        "\n"
        "def test_no_match(agui_mock_server):\n"
        "    body = {'threadId': 't', 'runId': 'r', 'messages': []}\n"
        "    text = httpx.post(agui_mock_server.url, json=body).text\n"
        '    assert \'"code":"MOCK_NO_MATCH"\' in text\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
