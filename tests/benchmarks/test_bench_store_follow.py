"""Smoke run of benchmarks/bench_store_follow.py: every backend is measured and the run completes.

A benchmark-upkeep test, not a performance test: figures are printed by the
script and never asserted. Tiny sizes keep it short; the script starts its own
PostgreSQL and redis-server (the suite's helpers), and skips loudly without them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._postgres import NO_POSTGRES, postgres_binary
from tests._redis_server import NO_REDIS

ROOT = Path(__file__).resolve().parents[2]


def test_store_follow_benchmark_measures_every_backend() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip(NO_REDIS)
    if postgres_binary("initdb") is None:
        pytest.skip(NO_POSTGRES.format(why="no initdb on PATH or in the server's directories"))
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_store_follow.py"),
            *("--events", "64", "--rounds", "1", "--batch", "1,32", "--samples", "5"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tables = done.stdout.split("\n\n")
    append = next(table for table in tables if table.startswith("append"))
    follow = next(table for table in tables if table.startswith("follow"))
    backends = ("sqlite", "postgres", "pg-nosync", "redis")
    assert [tuple(row.split()[:2]) for row in append.splitlines()[1:] if row.strip()] == [
        (backend, batch) for backend in backends for batch in ("1", "32")
    ]
    assert [tuple(row.split()[:2]) for row in follow.splitlines()[1:] if row.strip()] == [
        (backend, where) for backend in backends for where in ("same", "other")
    ]
