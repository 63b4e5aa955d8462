"""Smoke run of benchmarks/bench_startup.py: it must keep working (figures are not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_startup_benchmark_reports_every_ratio(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_startup.py"),
            "--repeat",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert set(result["ratios"]) == {
        "version_vs_pass",
        "help_vs_pass",
        "run_empty_vs_ag_ui_core",
        "run_gateway_vs_ag_ui_core",
    }
    assert all(value > 0 for value in result["cpu_ms"].values())
    assert "run_empty_vs_ag_ui_core" in done.stdout
