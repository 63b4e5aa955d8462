"""``serve --agent`` pointed at a Google ADK object, run as a subprocess.

A bare ``LlmAgent`` is served with the integration's defaults: the caller is the
ADK user, sessions are in memory, and ``adk_chain()`` runs first, so ag-ui-adk's
own ``_ag_ui_*`` keys never reach the client. An ``adk_producer(...)`` built with
options in the module (the documented way to pass them) is served as it is, with
the same chain first and ``--config``'s stages after it. (Agent Framework, which
needs a venv of its own: tests/integrations/test_agent_framework_registry.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._cli_serve import post_run, serving

pytest.importorskip("ag_ui_adk", reason="ag-ui-adk (the test extra) is missing")

RUN = {
    "threadId": "t-1",
    "runId": "r-1",
    "messages": [{"id": "u-1", "role": "user", "content": "Weather in Lisbon?"}],
    "state": {"city": "Lisbon"},
}


def _snapshots(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event["snapshot"] for event in events if event["type"] == "STATE_SNAPSHOT"]


def test_a_bare_adk_agent_is_served_with_the_integrations_chain() -> None:
    with serving("--agent", "tests.integrations._adk_targets:agent") as (url, output):
        events = post_run(url, RUN)
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in [event["type"] for event in events]
    snapshots = _snapshots(events)
    assert snapshots, "ADK sent no state snapshot"
    for snapshot in snapshots:
        assert snapshot.get("city") == "Lisbon"
        assert not [key for key in snapshot if key.startswith("_ag_ui_")], snapshot
    assert "tests.integrations._adk_targets:agent (LlmAgent, in-process)" in output[0]


def test_an_adk_producer_with_options_is_served_as_it_is(tmp_path: Path) -> None:
    config = tmp_path / "chain.yaml"
    config.write_text(
        "version: 1\ntransformers:\n  - type: redact\n    patterns: [sunny]\n"
        "    replacement: '[weather]'\n"
    )
    args = ("--agent", "tests.integrations._adk_targets:trips", "--config", str(config))
    with serving(*args) as (url, output):
        events = post_run(url, RUN)
    assert events[-1]["type"] == "RUN_FINISHED"
    text = "".join(event.get("delta", "") for event in events)
    assert "[weather]" in text and "sunny" not in text  # --config's stage ran
    for snapshot in _snapshots(events):
        assert not [key for key in snapshot if key.startswith("_ag_ui_")], snapshot
    assert "(ADKProducer, in-process)" in output[0]
