"""Smoke run of benchmarks/bench_mock.py: every client gets every event, to the last one.

The script fails when a connection's count of frames or its last frame is not the
stream's; figures are printed, never asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mock_benchmark_delivers_every_event_on_every_connection() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_mock.py"),
            "--events",
            "300",
            "--connections",
            "1",
            "3",
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines()[1:] if line.strip()]
    assert [(row[0], row[1]) for row in rows] == [
        ("scripted", "1"),
        ("scripted", "3"),
        ("replay", "1"),
        ("replay", "3"),
    ]
