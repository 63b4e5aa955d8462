"""Smoke run of benchmarks/bench_ratios.py: every row of issue 33's table is measured and
printed (the figures themselves are never asserted)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ROWS = {
    "run_vs_ts",
    "run_vs_floor",
    "run_vs_sdk",
    "startup",
    "endpoint",
    "state:STATE_DELTA",
    "state:STATE_SNAPSHOT",
    "state:MESSAGES_SNAPSHOT",
    "state:ACTIVITY_SNAPSHOT",
    "state:ACTIVITY_DELTA",
    "gateway_state_vs_ts",
    "http_gateway",
}
NODE_ROWS = {"run_vs_ts", "gateway_state_vs_ts"}


def test_ratio_benchmark_measures_and_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "ratios.json"
    argv = [sys.executable, str(ROOT / "benchmarks" / "bench_ratios.py"), "--smoke"]
    has_node = bool(shutil.which("node") and shutil.which("npm"))
    if not has_node:
        argv.append("--no-reference")
    done = subprocess.run(
        [*argv, "--json", str(out)], capture_output=True, text=True, check=False, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["rows"]) == ROWS
    for key, row in report["rows"].items():
        if key in NODE_ROWS and not has_node:
            assert row["now"] is None and row["note"] == "--no-reference"
            continue
        assert len(row["rounds"]) == 1, key
        assert row["now"] > 0, key
        assert row["met"] in (True, False), key
    assert "| ratio | now | target | met? |" in done.stdout
    for row in report["rows"].values():
        assert f"| {row['label']} |" in done.stdout
