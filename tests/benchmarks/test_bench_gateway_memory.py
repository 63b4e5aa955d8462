"""Smoke runs of benchmarks/bench_gateway_memory.py and bench_process.py: they must keep working.

Benchmark-upkeep tests, not performance tests: no RSS or timing is asserted
(neither can hold on a shared CI box). They check that the real servers
started, every run streamed whole, the in-server diagnostics came back with
each figure the docs quote, and that the whole-process comparison ran both
commands. Tiny streams keep them to seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("uvicorn")
pytest.importorskip("httpx")


def test_memory_benchmark_streams_every_run_and_reads_the_gateway(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_gateway_memory.py"),
            "--runs",
            "2",
            "--events",
            "300",
            "--fresh-ids",
            "--diagnose",
            "--trim-probe",
            "--tracemalloc",
            "--run-rss-events",
            "300,600",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    runs = report["gateway"]["runs"]
    assert [row["run"] for row in runs] == [1, 2]
    assert all(row["finished"] for row in runs), runs
    assert runs[0]["frames"] == runs[1]["frames"] > 0
    for row in runs:
        assert row["rss_kib"] > 0
        diagnostics = row["diagnostics"]
        assert diagnostics["objects"] > 0
        assert "linecache.cache" in diagnostics["caches"]
        if diagnostics["mallinfo"] is not None:  # glibc only
            assert diagnostics["rss_after_trim_kib"] > 0
    # pymalloc's figures exist until tracing hooks the allocator (at the first dump);
    # from then on the dumps have allocation sites to compare
    assert "arenas_now" in runs[0]["diagnostics"]["pymalloc"]
    assert "grown" not in runs[0]["diagnostics"]
    assert isinstance(runs[1]["diagnostics"]["grown"], list)
    assert set(report["run_peak_rss_kib"]) == {"300", "600"}


def _install_bench_ts() -> None:
    """``npm ci`` in benchmarks/ts when its pinned packages are missing: a failure is an error."""
    bench_ts = ROOT / "benchmarks" / "ts"
    if (bench_ts / "node_modules" / "@ag-ui" / "client").exists():
        return
    npm = shutil.which("npm")
    assert npm is not None, "node is installed but npm is not: cannot install benchmarks/ts"
    done = subprocess.run(
        [
            npm,
            "ci",
            "--prefer-offline",
            "--ignore-scripts",
            "--no-progress",
            "--no-audit",
            "--no-fund",
        ],
        cwd=bench_ts,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, (
        "`npm ci` in benchmarks/ts failed: the process benchmark needs @ag-ui/client 1.0.0 "
        "from the npm registry\n" + (done.stdout + done.stderr)[-3000:]
    )


@pytest.mark.node
@pytest.mark.skipif(
    shutil.which("node") is None, reason="node/npm not found: the TS reference cannot run"
)
def test_process_benchmark_times_both_commands(tmp_path: Path) -> None:
    _install_bench_ts()
    out = tmp_path / "process.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_process.py"),
            "--events",
            "300",
            "--rounds",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["cpu_s"]) == {"ours", "reference", "ours start-up", "reference start-up"}
    assert all(len(values) == 1 and values[0] > 0 for values in report["cpu_s"].values())
    assert report["events"] > 0
