"""examples/chains/*.yaml: each one checks, and runs over a recorded stream doing its job.

The recording (tests/data/demo-run.ndjson) is the demo agent's run: reasoning, text,
tool calls including internal_price_lookup, a subagent with a nested subagent, state.
Outputs are consumed by the full consumer pipeline (decode, expand, verify, fold), so
"runs" means "a 1.0 client accepts what comes out".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agui_pipes import Consumer, RunResult

ROOT = Path(__file__).resolve().parents[2]
CHAINS = ROOT / "examples" / "chains"
RECORDED = Path(__file__).parents[1] / "data" / "demo-run.ndjson"
EXAMPLES = sorted(CHAINS.glob("*.yaml"))


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agui_pipes", *args],
        capture_output=True,
        text=True,
        env=full_env,
        check=False,
        timeout=120,
    )


def run_example(name: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    done = cli("run", "--config", str(CHAINS / name), str(RECORDED), env=env)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def consumed(events: list[dict[str, Any]]) -> RunResult:
    consumer = Consumer()
    for event in events:
        consumer.push(event)
    return consumer.finish()


def test_there_are_examples_for_the_common_needs() -> None:
    assert {p.name for p in EXAMPLES} >= {
        "pre-subagent-client.yaml",
        "hide-internal-tools.yaml",
        "tool-results-to-state.yaml",
        "production-gateway.yaml",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_checks(path: Path) -> None:
    done = cli("check", str(path))
    assert done.returncode == 0, done.stderr
    assert f"{path}: ok" in done.stdout


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_output_is_accepted_by_a_client(path: Path) -> None:
    result = consumed(run_example(path.name))
    assert result.succeeded


def test_pre_subagent_client_sees_no_subagents_but_the_same_conversation() -> None:
    original = consumed([json.loads(line) for line in RECORDED.read_text().splitlines()])
    events = run_example("pre-subagent-client.yaml")
    assert not [e for e in events if e["type"].startswith("SUBAGENT_")]
    assert not [e for e in events if "subagentRunId" in e]
    inlined = consumed(events)
    assert inlined.state == original.state

    def untagged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in m.items() if k != "subagentRunId"} for m in messages]

    assert untagged(inlined.messages) == untagged(original.messages)


def test_hide_internal_tools_leaves_no_trace() -> None:
    recorded = RECORDED.read_text()
    assert "internal_price_lookup" in recorded
    events = run_example("hide-internal-tools.yaml")
    assert "internal_" not in json.dumps(events)
    names = {e.get("toolCallName") for e in events if e["type"] == "TOOL_CALL_START"}
    assert names == {"search_places", "ask_local_expert", "get_forecast"}
    # The environment adds a name to the deny list.
    more = run_example("hide-internal-tools.yaml", env={"HIDDEN_TOOLS": "get_*"})
    names = {e.get("toolCallName") for e in more if e["type"] == "TOOL_CALL_START"}
    assert names == {"search_places", "ask_local_expert"}


def test_tool_results_are_promoted_to_state() -> None:
    events = run_example("tool-results-to-state.yaml")
    state_events = [e for e in events if e["type"] in ("STATE_SNAPSHOT", "STATE_DELTA")]
    original = [json.loads(line) for line in RECORDED.read_text().splitlines() if '"STATE_' in line]
    assert len(state_events) > len(original)
    result = consumed(events)
    assert result.state["forecast"] == {"saturday": "sunny, 24°C", "sunday": "showers, 19°C"}
    assert [p["name"] for p in result.state["places"]][0] == "Old town walking tour"
    assert any(e["type"] == "TOOL_CALL_RESULT" for e in events)  # results are kept


def test_production_gateway_with_its_environment_knobs() -> None:
    events = run_example("production-gateway.yaml")
    assert "internal_" not in json.dumps(events)
    assert not [e for e in events if e["type"] == "RAW"]
    hidden = run_example("production-gateway.yaml", env={"SUBAGENT_MODE": "hidden"})
    assert not [e for e in hidden if e["type"].startswith("SUBAGENT_")]
    assert not [e for e in hidden if "subagentRunId" in e]
    assert consumed(hidden).succeeded
    done = cli("check", str(CHAINS / "production-gateway.yaml"), env={"SUBAGENT_MODE": "inlined"})
    assert done.returncode == 2
    assert "did you mean `inline`?" in done.stderr


def test_demo_runs_through_its_default_chain() -> None:
    done = cli("demo", env={"NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    assert "internal_price_lookup" not in done.stdout
    assert "→ search_places(" in done.stdout
    # The default chain promoted the search result into the state at /places; the
    # agent's own next publish (baseline = what left the pipeline) does not resend it.
    state_lines = [line for line in done.stdout.splitlines() if line.startswith("state ")]
    assert [line for line in state_lines if "/places" in line] == [
        next(line for line in state_lines if line.startswith("state replace /places = "))
    ]
    assert "┌ subagent local_expert" in done.stdout
    assert done.stdout.rstrip().endswith("● run finished: success")
