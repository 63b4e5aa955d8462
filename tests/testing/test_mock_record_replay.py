"""Record and replay: the mock proxies a real producer, saves its runs, serves them back.

The round trip is checked on the bytes: what a client received through the
recording proxy is what the replay serves, and — with the ids the producer
mints normalised — what the producer itself serves to the same request.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agui_pipes.codecs import encode_ndjson
from agui_pipes.server import build_app
from agui_pipes.testing import MockServer, ReplayError, run_events, text
from agui_pipes.testing._mock.replay import read_recordings
from tests._servers import serve

pytestmark = pytest.mark.anyio

_KEEPALIVE = re.compile(rb": keep-alive\n\n")


def body(text: str = "hello", run_id: str = "run-1") -> dict[str, Any]:
    return {
        "threadId": "thread-1",
        "runId": run_id,
        "state": {},
        "messages": [{"id": "u1", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def post(url: str, payload: dict[str, Any]) -> bytes:
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream("POST", url, json=payload, headers={"accept": "text/event-stream"}) as r,
    ):
        assert r.status_code == 200, await r.aread()
        return _KEEPALIVE.sub(b"", b"".join([chunk async for chunk in r.aiter_raw()]))


def normalised(sse: bytes) -> bytes:
    """The stream with the values a producer mints per run replaced by their order."""
    seen: dict[str, str] = {}

    def placeholder(found: re.Match[bytes]) -> bytes:
        value = found.group(2).decode()
        seen.setdefault(value, f"id-{len(seen)}")
        return found.group(1) + seen[value].encode() + b'"'

    sse = re.sub(rb'("\w*Id":")([^"]*)"', placeholder, sse)
    return re.sub(rb'"timestamp":\d+', b'"timestamp":0', sse)


def pydantic_ai_app() -> Any:
    from tests.producers.pydantic_ai_scenarios import SCENARIOS

    (scenario,) = [s for s in SCENARIOS if s.name == "parallel-tools"]
    return scenario.app()


def _saved(directory: Path, name: str) -> tuple[Any, list[float]]:
    """The request and offsets of the one run saved in ``directory``, named ``name``."""
    (run_dir,) = directory.iterdir()
    assert run_dir.name == name
    offsets = json.loads((run_dir / "timing.json").read_text())["offsets"]
    return json.loads((run_dir / "request.json").read_bytes()), offsets


@pytest.mark.parametrize("producer", ["agui-pipes-demo", "pydantic-ai"])
async def test_record_then_replay_is_byte_identical(tmp_path: Path, producer: str) -> None:
    if producer == "pydantic-ai":
        app = pydantic_ai_app()
    else:
        from agui_pipes.demo import DemoAgent

        app = build_app(agent=DemoAgent())
    with serve(app) as upstream:
        direct = await post(upstream.url, body("Plan a weekend in Porto", "run-direct"))
        with MockServer(record=tmp_path, upstream=upstream.url) as recorder:
            recorded = await post(recorder.url, body("Plan a weekend in Porto"))
    request, offsets = _saved(tmp_path, "0001-run-1")
    assert request == body("Plan a weekend in Porto")
    assert offsets == sorted(offsets) and len(offsets) == recorded.count(b"\n\n")
    assert normalised(recorded) == normalised(direct)  # the proxy changed nothing

    with MockServer(replay=[tmp_path], speed=float("inf")) as mock:
        replayed = await post(mock.url, body("Plan a weekend in Porto", "run-2"))
        unknown = await post(mock.url, body("something never recorded", "run-3"))
    assert replayed == recorded  # byte for byte, ids and timestamps as recorded
    assert unknown == recorded  # the only recording, served in turn
    assert normalised(replayed) == normalised(direct)


def _stamped_run(path: Path, gap_ms: int) -> Path:
    """Six events, ``gap_ms`` apart by their timestamps."""
    events = run_events(text("m1", "a", "b"))
    lines = [
        encode_ndjson(event.model_copy(update={"timestamp": 1_000_000 + i * gap_ms}))
        for i, event in enumerate(events)
    ]
    path.write_bytes(b"".join(lines))
    return path


async def _timed(url: str) -> tuple[float, bytes]:
    started = anyio.current_time()
    sse = await post(url, body())
    return anyio.current_time() - started, sse


async def test_replay_at_the_recorded_pace_scaled_or_at_once(tmp_path: Path) -> None:
    recording = _stamped_run(tmp_path / "run.ndjson", 80)  # 0.4 s
    with MockServer(replay=[recording]) as paced:
        took, sse = await _timed(paced.url)
    assert took >= 0.4
    assert sse.count(b"\n\n") == 6 and b'"timestamp":1000400' in sse
    with MockServer(replay=[recording], speed=4) as faster:
        took_faster, _ = await _timed(faster.url)
    assert took_faster >= 0.1
    assert took_faster < took
    with MockServer(replay=[recording], speed=float("inf")) as at_once:
        took_at_once, same = await _timed(at_once.url)
    assert same == sse
    assert took_at_once < took


async def test_replayed_files_in_order_and_sse_files(tmp_path: Path) -> None:
    first = tmp_path / "first.ndjson"
    first.write_bytes(b"".join(encode_ndjson(e) for e in run_events(text("m1", "first"))))
    second = tmp_path / "second.sse"
    second.write_bytes(
        b"".join(b"data: " + encode_ndjson(e)[:-1] + b"\n\n" for e in run_events(text("m2", "2")))
    )
    with MockServer(replay=[first, second], speed=float("inf")) as mock:
        answers = [await post(mock.url, body(run_id=f"r{i}")) for i in range(3)]
    assert [b'"delta":"first"' in a for a in answers] == [True, False, True]
    assert b'"messageId":"m2"' in answers[1]


async def test_a_scenario_can_replay_a_file_matched_by_request(tmp_path: Path) -> None:
    (tmp_path / "greeting.ndjson").write_bytes(
        b"".join(encode_ndjson(e) for e in run_events(text("m1", "recorded hello")))
    )
    (tmp_path / "scenarios.yaml").write_text(
        "scenarios:\n"
        "  - name: greet\n"
        "    match: {user: hello}\n"
        "    replay: greeting.ndjson\n"
        "  - name: other\n"
        "    script: [{text: scripted}]\n"
    )
    with MockServer(tmp_path / "scenarios.yaml") as mock:
        replayed = await post(mock.url, body("hello there"))
        scripted = await post(mock.url, body("bye"))
    assert b"recorded hello" in replayed
    assert b'"delta":"scripted"' in scripted


def test_unreadable_recordings_say_which_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ndjson"
    broken.write_text('{"type": "RUN_STARTED", "threadId": 5}\n')
    with pytest.raises(ReplayError, match=r"broken\.ndjson: event 1: "):
        read_recordings([broken])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ReplayError, match="a directory with no recorded runs in it"):
        read_recordings([empty])


async def test_recording_an_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    with MockServer(record=tmp_path / "runs", upstream="http://127.0.0.1:1/") as recorder:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(recorder.url, json=body())
    assert response.status_code == 502
    assert response.json()["error"] == "upstream_unreachable"
    assert not _runs(tmp_path / "runs")


def _runs(directory: Path) -> list[Path]:
    return list(directory.iterdir())
