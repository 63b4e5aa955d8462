"""Smoke run of benchmarks/load_check.py, scaled down: the harness must keep working.

Correctness only (every answer 200, every log byte-equal, every follower to the end),
never a timing or the RSS (neither holds on a shared box): 20 clients x 2 waves, 50
followers, a 2 s pause, against a real ``agui-pipes serve`` on SQLite and on Redis.
The full-size check is run by hand (docs/benchmarks.md). The frame checks the harness
judges by are tested on broken logs too, so a pass cannot be vacuous.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._redis_server import NO_REDIS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _load_sse import check_log, complete_frames, first_difference  # noqa: E402

SMALL = ["--clients", "20", "--waves", "2", "--followers", "50", "--pause", "2"]
SMALL += ["--pace-followers", "0.05", "--no-rss-check"]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_the_scaled_down_load_check_passes(backend: str, tmp_path: Path) -> None:
    if backend == "redis" and shutil.which("redis-server") is None:
        pytest.skip(NO_REDIS)
    where = ["--start-redis"] if backend == "redis" else ["--store", f"sqlite:///{tmp_path}/r.db"]
    out = tmp_path / "report.json"
    argv = [sys.executable, str(ROOT / "benchmarks" / "load_check.py"), *where, *SMALL]
    done = subprocess.run(
        [*argv, "--json", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    checks = {check["name"].split(":")[0]: check for check in report["checks"]}
    assert report["ok"] and list(checks) == ["waves", "followers", "pause"]
    for wave in ("wave1", "wave2"):
        figures = checks["waves"]["figures"][wave]
        # 20% of 20 cut, each well before the demo's last frame, so each resumed.
        assert (figures["logs_equal"], figures["resumed"], figures["http_errors"]) == (20, 4, 0)
    followers = checks["followers"]["figures"]
    assert (followers["attached_while_live"], followers["http_errors"]) == (50, 0)
    assert followers["events"] > 100
    assert any(line.startswith("the follower: all") for line in checks["pause"]["lines"])


def _frame(seq: int, data: str, run: str = "r1") -> bytes:
    return f"id: ep:{run}:{seq}\ndata: {data}".encode()


def test_a_whole_log_passes_and_every_kind_of_broken_log_is_named() -> None:
    events = ['{"type":"RUN_STARTED"}', '{"type":"CUSTOM"}', '{"type":"RUN_FINISHED"}']
    whole = [_frame(n, data) for n, data in enumerate(events, 1)]
    assert check_log(whole, "r1").ok
    assert "frame 2 has seq 3" in check_log([whole[0], whole[2]], "r1").problem  # a gap
    assert "frame 2 has seq 1" in check_log([whole[0], *whole], "r1").problem  # a duplicate
    assert "no id" in check_log([whole[0], b'data: {"type":"RUN_FINISHED"}'], "r1").problem
    assert "of run 'r2'" in check_log([whole[0], _frame(2, events[2], "r2")], "r1").problem
    assert "no terminal" in check_log(whole[:2], "r1").problem
    error = _frame(3, '{"type":"RUN_ERROR","code":"RUN_LOST"}')
    assert "RUN_ERROR RUN_LOST" in check_log([*whole[:2], error], "r1").problem
    assert first_difference(whole, whole) == ""
    assert "frame 2 differs" in first_difference(whole, [whole[0], error, whole[2]])
    assert "got 2 frames" in first_difference(whole[:2], whole)


def test_keepalives_are_dropped_and_a_frame_cut_half_way_is_not_kept() -> None:
    raw = (
        b": keepalive\n\nid: ep:r1:1\ndata: {}\n\n: ping\nid: ep:r1:2\ndata: {}\n\nid: ep:r1:3\nda"
    )
    frames, used = complete_frames(raw)
    assert frames == [b"id: ep:r1:1\ndata: {}", b"id: ep:r1:2\ndata: {}"]
    assert raw[:used].endswith(b"data: {}\n\n") and b"ep:r1:3" not in raw[:used]
