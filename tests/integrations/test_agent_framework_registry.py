"""``serve --agent`` pointed at a Microsoft Agent Framework object, in MAF's own venv.

The framework cannot share the test venv (tests/integrations/test_agent_framework.py
says why), so the CLI runs with that venv's python (tests/_framework_venv.py): a
bare ``Agent`` and a ``Workflow`` over the scripted chat client
(tests/integrations/_maf_targets.py) are served with the integration's defaults —
the tool call, the answer, a whole run. An object nothing serves is still the
usage error, now naming the Agent Framework among the accepted kinds.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._cli_serve import ROOT, post_run, serving
from tests._framework_venv import framework_python
from tests.integrations._maf_pins import EXTRAS, NO_DEPS, REQUIREMENTS

BODY: dict[str, Any] = {
    "threadId": "t-1",
    "runId": "r-1",
    "messages": [{"id": "u-1", "role": "user", "content": "Where should I go?"}],
}


@pytest.fixture(scope="module")
def maf_python() -> Path:
    return framework_python("agent-framework", REQUIREMENTS, NO_DEPS, EXTRAS)


def test_a_bare_agent_is_served(maf_python: Path) -> None:
    with serving("--agent", "tests.integrations._maf_targets:agent", python=maf_python) as (
        url,
        output,
    ):
        events = post_run(url, BODY)
    types = [event["type"] for event in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
    assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == ["weather"]
    text = "".join(event.get("delta", "") for event in events if event["type"].startswith("TEXT"))
    assert text == "A weekend in Lisbon is sunny."
    assert "tests.integrations._maf_targets:agent (Agent, in-process)" in output[0]


def test_a_workflow_is_served(maf_python: Path) -> None:
    args = ("--agent", "tests.integrations._maf_targets:workflow")
    with serving(*args, python=maf_python) as (url, output):
        events = post_run(url, BODY)
    types = [event["type"] for event in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
    assert "(Workflow, in-process)" in output[0]


def test_an_object_nothing_serves_names_the_agent_framework(maf_python: Path) -> None:
    done = subprocess.run(
        [str(maf_python), "-m", "agui_pipes", "serve", "--agent", "json:dumps"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "cannot be served" in done.stderr
    assert "a Microsoft Agent Framework agent or Workflow" in done.stderr
