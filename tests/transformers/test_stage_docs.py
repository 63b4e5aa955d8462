"""docs/transformers stays true: every page's YAML example loads into a working chain."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agui_pipes.config import load_chain
from agui_pipes.testing import run_events, text, tool_call
from tests.transformers._stage_helpers import consumed

DOCS = Path(__file__).resolve().parents[2] / "docs" / "transformers"
PAGES = sorted(DOCS.glob("*.md"))
_YAML = re.compile(r"```yaml\n(.*?)```", re.S)
_PYTHON = re.compile(r"```python\n(.*?)```", re.S)


def test_there_is_a_page_per_stage() -> None:
    names = {p.stem for p in PAGES}
    assert names >= {
        "filter_tool_calls",
        "tool_result_to_state",
        "subagent_visibility",
        "drop_events",
        "strip_raw_events",
        "coalesce_deltas",
        "redact",
        "state_diff",
        "timestamp",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_yaml_examples_load_and_run(page: Path) -> None:
    blocks = _YAML.findall(page.read_text())
    assert blocks, f"{page.name} has no YAML example"
    for block in blocks:
        # a block may show alternatives ("# or"): load each transformer entry alone
        entries = re.split(r"\n(?=  - type:)", block.split("transformers:\n", 1)[1])
        for entry in entries:
            body = "\n".join(line for line in entry.splitlines() if line.strip() != "# or")
            factory = load_chain(f"transformers:\n{body}\n")
            events = run_events(text("m1", "hi") + tool_call("c1", "search", "{}"))
            out = factory().apply_sync(events)
            consumed(out)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_python_examples_run(page: Path) -> None:
    for block in _PYTHON.findall(page.read_text()):
        namespace: dict[str, object] = {"other_stage": _identity(), "some_stage": _identity()}
        exec(compile(block, str(page), "exec"), namespace)


def _identity() -> object:
    from agui_pipes.transformers import StripRawEvents

    return StripRawEvents()
