"""docs/testing.md, "Testing a frontend", stays true to the mock it documents."""

from __future__ import annotations

import re
from pathlib import Path

from agui_pipes.codecs import encode_ndjson
from agui_pipes.testing import load_scenarios, run_events, text
from agui_pipes.testing._mock.faults import BREAKABLE_RULES, FAULT_NAMES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
SECTION = PAGE.read_text(encoding="utf-8").split("## Testing a frontend", 1)[1]


def test_the_reference_example_loads(tmp_path: Path) -> None:
    (example,) = re.findall(r"```yaml\n(.*?)```", SECTION, flags=re.DOTALL)
    (tmp_path / "recordings").mkdir()
    (tmp_path / "recordings" / "greeting.ndjson").write_bytes(
        b"".join(encode_ndjson(e) for e in run_events(text("m1", "hi")))
    )
    (tmp_path / "scenarios.yaml").write_text(example)
    loaded = load_scenarios(tmp_path / "scenarios.yaml")
    assert loaded.seed == 7
    assert [s.name for s in loaded.scenarios][:2] == ["weather-shown", "weather"]


def test_the_faults_table_lists_every_fault_and_rule() -> None:
    table = SECTION.split("### Faults", 1)[1]
    documented = re.findall(r"^\| `([a-z-]+)=", table, flags=re.MULTILINE)
    assert documented == list(FAULT_NAMES)
    rules = table.split("| `break=RULE` |", 1)[1].split("\n", 1)[0]
    assert re.findall(r"`([a-z-]+)`", rules)[: len(BREAKABLE_RULES)] == [
        r.value for r in BREAKABLE_RULES
    ]
