"""Smoke run of benchmarks/bench_producers.py: every setup serves its runs to the end.

The script fails when a run does not end with RUN_FINISHED after its deltas;
figures are printed, never asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("pydantic_ai", reason="the producers extra is not installed")
pytest.importorskip("ag_ui_langgraph", reason="the producers extra is not installed")


def test_producer_benchmark_serves_every_setup_to_the_end() -> None:
    script = str(ROOT / "benchmarks" / "bench_producers.py")
    done = subprocess.run(
        [sys.executable, script, "--events", "5", "--runs", "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split()[:2] for line in done.stdout.splitlines()[2:] if line.strip()]
    assert rows == [
        [framework, setup]
        for framework in ("pydantic-ai", "langgraph")
        for setup in ("own", "gateway", "in-process")
    ]
