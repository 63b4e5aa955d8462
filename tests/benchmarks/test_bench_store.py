"""Smoke run of benchmarks/bench_store.py: every backend is measured and the run completes.

A benchmark-upkeep test, not a performance test: figures are printed by the
script and never asserted (no timing holds on a shared CI box). Tiny sizes
keep it to a few seconds; the script starts its own redis-server.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._redis_server import NO_REDIS

ROOT = Path(__file__).resolve().parents[2]


def test_store_benchmark_measures_every_backend() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip(NO_REDIS)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_store.py"),
            "--events",
            "300",
            "--rounds",
            "1",
            "--batch",
            "1,32",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tables = done.stdout.split("\n\n")
    append = next(table for table in tables if table.startswith("append"))
    gateway = next(table for table in tables if table.startswith("gateway"))
    assert [tuple(row.split()[:2]) for row in append.splitlines()[1:]] == [
        (backend, batch) for backend in ("memory", "sqlite", "redis") for batch in ("1", "32")
    ]
    assert [row.split()[0] for row in gateway.splitlines()[1:] if row.strip()] == [
        "none",
        "memory",
        "sqlite",
        "redis",
    ]
