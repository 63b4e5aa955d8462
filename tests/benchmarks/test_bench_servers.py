"""Smoke run of benchmarks/bench_servers.py: every installed server, both apps, one round.

A benchmark-upkeep test, not a performance test: the figures are reported by the
script and never asserted (no timing holds on a shared box). It checks that each
server installed here started, streamed whole runs without errors, and that each
figure the docs quote is there; tiny sizes keep it to seconds a server.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("uvicorn")
pytest.importorskip("httpx")


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in modules)


def test_server_benchmark_runs_every_installed_server(tmp_path: Path) -> None:
    expected = ["uvicorn"]
    expected += ["uvicorn-fast"] if _installed("httptools", "uvloop") else []
    expected += ["granian"] if _installed("granian") else []
    expected += ["hypercorn"] if _installed("hypercorn") else []
    out, table = tmp_path / "servers.json", tmp_path / "servers.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_servers.py"),
            *("--rounds", "1", "--clients", "2", "--runs", "1", "--tokens", "30"),
            *("--json", str(out), "--markdown", str(table)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = {row["pair"]: row for row in report["rows"]}
    pairs = {f"{app}/{server}" for app in ("endpoint", "gateway") for server in expected}
    assert set(rows) == pairs | {"gateway/direct"}
    for row in rows.values():
        assert row["errors"] == 0, row
        # RUN_STARTED, TEXT_MESSAGE_START, 30 stamped deltas, END, RUN_FINISHED; 2 runs
        assert row["events"] == 2 * 34, row
        assert None not in row["added_latency_ms"], row
        assert row["server_us_per_event"] >= 0, row
    assert "| endpoint/uvicorn |" in table.read_text()
