"""The runnable agents in examples/agents run, and their streams verify."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from ag_ui.core import EventType

from agui_pipes.testing import collect
from agui_pipes.verify import Verifier

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("name", "agent", "run_input"),
    [
        ("editor", "Editor", {"threadId": "t", "runId": "r", "state": {"revision": 1}}),
        ("approver", "Approver", {"threadId": "t", "runId": "r"}),
        ("supervisor", "Supervisor", {"threadId": "t", "runId": "r"}),
    ],
)
async def test_example_agents_produce_verified_runs(
    name: str, agent: str, run_input: dict[str, object]
) -> None:
    module = load(name)
    events = await collect(getattr(module, agent)(), run_input)
    assert events[-1].type is EventType.RUN_FINISHED
    verifier = Verifier(profile="consumer")
    verifier.observe_all(events)
    verifier.finish()


async def test_example_mains_print_their_runs(capsys: pytest.CaptureFixture[str]) -> None:
    await load("editor").main()
    await load("approver").main("cancelled")
    await load("supervisor").main()
    out = capsys.readouterr().out
    assert 'data: {"type":"RUN_STARTED"' in out
    assert '"snapshot":{"revision":4,"title":"Q3 plan"}' in out
    assert '"delta":"Cancelled."' in out
    assert "SUBAGENT_FINISHED      r-sub-2" in out
