"""Smoke run of benchmarks/bench_auth.py: every figure is measured and the run completes.

Figures are printed by the script, never asserted (no timing holds on a shared box);
tiny sizes keep it to a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_auth_benchmark_measures_every_figure() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_auth.py"),
            "--requests",
            "200",
            "--runs",
            "2",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert set(figures["per_request_us"]) == {"none", "tokens", "jwt"}
    assert set(figures["gateway_cpu_per_event_us"]) == {"none", "none-again", "tokens"}
    assert all(value > 0 for value in figures["gateway_cpu_per_event_us"].values())
    assert figures["events_per_run"] > 100  # whole demo runs went through the gateway
