"""Smoke run of benchmarks/bench_client_hostile.py: every case must keep ending in its error.

Benchmark upkeep, not a performance test: no time or RSS is asserted (neither
holds on a shared box). Small bounds keep it to seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_hostile_case_ends_in_its_named_error(tmp_path: Path) -> None:
    out = tmp_path / "client.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_client_hostile.py"),
            "--max-bytes", "300000",
            "--max-events", "2000",
            "--max-frame-bytes", "100000",
            "--max-idle", "0.3",
            "--json", str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {row["case"]: row for row in json.loads(out.read_text())["rows"]}
    assert {case: row["error"] for case, row in rows.items()} == {
        "endless-stream": "EventLimitExceeded",
        "endless-big-deltas": "ByteLimitExceeded",
        "endless-history": "EventLimitExceeded",
        "100-mb-frame": "FrameLimitExceeded",
        "drip": "IdleLimitExceeded",
        "keepalive-only": "IdleLimitExceeded",
    }
    assert all(row["peak_rss_mib"] >= 0 and row["seconds"] > 0 for row in rows.values())
