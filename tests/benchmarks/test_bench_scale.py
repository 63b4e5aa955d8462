"""Smoke run of benchmarks/bench_scale.py: a handful of paced streams through each process.

A benchmark-upkeep test: figures are never asserted, only that every phase streamed
whole runs without errors and reported each figure the docs' scale table quotes.
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


def test_scale_benchmark_streams_every_phase(tmp_path: Path) -> None:
    out, table = tmp_path / "scale.json", tmp_path / "scale.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_scale.py"),
            *("--streams", "3", "--duration", "0.5", "--json", str(out), "--markdown", str(table)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {row["phase"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"direct", "gateway", "endpoint"}
    for row in rows.values():
        assert row["errors"] == 0, row
        # RUN_STARTED, TEXT_MESSAGE_START, 25 tokens (50/s for 0.5 s), END, RUN_FINISHED
        assert row["events"] == 3 * 29, row
        assert row["memory_kib_per_stream"] is not None, row
    assert "added_latency_ms" in rows["gateway"]
    assert "| gateway | 3 |" in table.read_text()
