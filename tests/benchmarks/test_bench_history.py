"""Smoke run of benchmarks/bench_history.py on a short thread.

The script fails when a history read is not answered 200 or when the page a
restarted server serves from the stored snapshot differs from the first
server's; figures are printed, never asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_history_benchmark_serves_the_same_page_after_a_restart() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_history.py"),
            *("--runs", "70", "--deltas", "3", "--readers", "2"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    phases = [line.split("|")[1].strip() for line in done.stdout.splitlines() if "readers" in line]
    assert phases == [
        "cold, no snapshot yet, 2 readers",
        "warm, 2 readers",
        "cold after a restart (snapshot), 2 readers",
    ]
