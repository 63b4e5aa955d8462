"""Smoke run of benchmarks/bench_interrupts.py: each pending count is measured, both ways."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_interrupt_benchmark_measures_every_row() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_interrupts.py"), "--requests", "5"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["1", "10", "100"]
