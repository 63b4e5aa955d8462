"""Smoke run of benchmarks/bench_durable.py: every variant is measured and the run completes.

Figures are printed by the script, never asserted (no timing holds on a shared
box); tiny sizes keep it to a few seconds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._redis_server import NO_REDIS

ROOT = Path(__file__).resolve().parents[2]


def test_durable_benchmark_measures_every_variant() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip(NO_REDIS)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_durable.py"),
            "--events",
            "200",
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
    rows = [line.split() for line in done.stdout.splitlines()[1:] if line.strip()]
    assert [row[0] for row in rows] == ["none", "memory", "sqlite", "redis"]
    assert all(float(row[1]) > 0 for row in rows)


def test_durable_benchmark_measures_the_gateway_path() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip(NO_REDIS)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_durable.py"),
            "--gateway",
            "--events",
            "200",
            "--rounds",
            "1",
            "--frames-per-read",
            "4",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("gateway (4 frames/read)")
    rows = [line.split() for line in lines[1:] if line.strip()]
    assert [row[0] for row in rows] == ["none", "memory", "sqlite", "redis"]
    assert all(float(row[1]) > 0 for row in rows)
