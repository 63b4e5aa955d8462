"""Smoke run of benchmarks/bench_join.py: every reader joins and reads the run to its end.

The script fails when a reader ends before the run's RUN_FINISHED; figures are
printed, never asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_join_benchmark_runs_every_reader_to_the_end() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_join.py"),
            "--events",
            "50",
            "--readers",
            "1",
            "5",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["1", "5"]
