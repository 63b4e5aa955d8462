"""Smoke run of benchmarks/bench_inspector.py: it must keep working (figures are not asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_inspector_benchmark_reports_every_figure() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_inspector.py"),
            "--events",
            "3000",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    for figure in (
        "build:",
        "build + --config:",
        "memory, build:",
        "GET /api/runs/0/summary",
        "GET stages/0?kind=dropped",
        "fold at",
    ):
        assert figure in done.stdout, done.stdout
