"""Smoke run of benchmarks/bench_serving.py (real servers on loopback): it must keep working.

A benchmark-upkeep test, not a performance test: the figures are reported by the
script and never asserted here (no timing assertion can hold on a shared CI box).
It checks that every path started, streamed whole runs without errors and
produced each figure the docs quote. Tiny sizes keep it to a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("uvicorn")
pytest.importorskip("httpx")


def test_serving_benchmark_quick_mode_runs_every_path(tmp_path: Path) -> None:
    out, table = tmp_path / "serving.json", tmp_path / "serving.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_serving.py"),
            "--quick",
            "--events",
            "300",
            "--replay-runs",
            "1",
            "--replay-clients",
            "2",
            "--clients",
            "1,3",
            "--tokens",
            "20",
            "--target",
            "40",
            "--json",
            str(out),
            "--markdown",
            str(table),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = {(row["phase"], row["clients"]): row for row in report["rows"]}
    assert set(rows) == {
        ("direct", 2),
        ("proxy", 2),
        ("gateway", 2),
        ("endpoint/demo", 1),
        ("endpoint/demo", 3),
        ("endpoint/tokens", 1),
        ("endpoint/tokens", 3),
        ("driver/tokens", 1),
    }
    for row in report["rows"]:
        assert row["errors"] == 0, row
        assert row["events"] > 0 and row["runs"] > 0, row
    # every streamed run ends in RUN_FINISHED, so each client-side figure exists
    for key, row in rows.items():
        if key[0] != "driver/tokens":
            assert None not in row["ttfe_ms"], row
    # only the token agent stamps its events, so only it has a per-event latency
    assert None not in rows["endpoint/tokens", 3]["latency_ms"]
    assert rows["endpoint/demo", 3]["latency_ms"] == [None, None]
    # the bare proxy relays every byte: as many events as the upstream sent
    assert rows["proxy", 2]["events"] == rows["direct", 2]["events"]
    assert "| gateway | 2 |" in table.read_text()
