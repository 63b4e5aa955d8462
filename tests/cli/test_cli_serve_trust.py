"""``agui-pipes serve --allow-tools / --history``: a real process refuses what the flags say."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agui_pipes._cli import main
from tests.cli.test_cli_serve import start, stop


def _tool(name: str) -> dict[str, object]:
    return {"name": name, "description": "a frontend tool", "parameters": {"type": "object"}}


def test_allow_tools_and_server_history_are_enforced(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    served = start(
        "--demo", "--store", url, "--allow-tools", "ui_*", "--allow-tools", "search",
        "--history", "server", "--path", "/agent",
    )  # fmt: skip
    try:
        user = {"id": "u1", "role": "user", "content": "Plan a weekend in Porto"}
        body = {"threadId": "t", "runId": "r1", "messages": [user], "tools": [_tool("shell")]}
        refused = httpx.post(f"{served.url}/agent", json=body, timeout=20)
        assert refused.status_code == 422
        assert refused.json()["error"] == "tool_not_allowed"
        body["tools"] = [_tool("ui_map"), _tool("search")]
        assert httpx.post(f"{served.url}/agent", json=body, timeout=20).status_code == 200
        edited = {"threadId": "t", "runId": "r2", "messages": [{**user, "content": "Lisbon"}]}
        mismatch = httpx.post(f"{served.url}/agent", json=edited, timeout=20)
        assert mismatch.status_code == 409
        assert mismatch.json()["details"] == [{"index": 0}]
    finally:
        code, err = stop(served)
    assert code == 0, err


def test_server_history_needs_a_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--demo", "--history", "server"]) == 2
    assert "add --store URL" in capsys.readouterr().err
