"""Smoke run of benchmarks/bench_verify_all.py: both paths verify the stream to its end.

The script fails when the finding collector reports anything but hygiene on the
benchmark's valid stream; figures are printed, never asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_verify_all_benchmark_runs_both_paths() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_verify_all.py"),
            "--events",
            "2000",
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = done.stdout.splitlines()
    assert line.startswith("consumer") and "first violation" in line and "--all" in line
