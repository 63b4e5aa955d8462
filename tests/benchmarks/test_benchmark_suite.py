"""CI smoke run of the benchmark suite on the 10k stream: it must keep working.

Timings are reported by the suite, never asserted here; this checks that every
measurement ran and produced a figure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_suite_smoke_run(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    size = report["sizes"]["10k"]
    names = [row["name"] for row in size["rows"]]
    assert names[0].startswith("floor")
    assert "gateway path (agui_pipes)" in names
    assert any(name.startswith("stage SubagentVisibility") for name in names)
    assert "fold alone" in names
    assert "driver (agent emit → consumer)" in names
    assert all(row["us_per_event"] > 0 for row in size["rows"])
    if shutil.which("node") and shutil.which("npm"):
        assert size["reference"] is not None, size["reference_note"]
    assert report["memory"]["10k"] > 0
    assert "gateway vs TS reference" in done.stdout or size["reference"] is None
