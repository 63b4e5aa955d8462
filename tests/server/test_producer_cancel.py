"""A producer's run ends when its client leaves, and when it stays silent too long.

Real uvicorn (tests/_servers.py) and, for ``--timeout``, ``agui-pipes serve
--agent`` as a subprocess. A client that leaves a run with no store cancels the
producer where it awaits; with a store the run is only detached and a stop
cancels it, recorded. ``producer_timeout`` ends a silent producer's run with
RUN_ERROR ``AGENT_TIMEOUT`` — sent, and recorded in the log — and the producer
is cancelled where it awaits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_pipes.server import build_app
from tests._cli_serve import post_run, serving
from tests._servers import run_input, serve, sse_events, wait_until
from tests.server._producers import Silent

pytestmark = pytest.mark.anyio


async def _leave_after_first_delta(url: str, run_id: str) -> None:
    """POST a run, read until its first delta, then close the connection."""
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", url, json=run_input(run_id)) as response,
    ):
        assert response.status_code == 200
        async for event in sse_events(response):
            if event.type.value == "TEXT_MESSAGE_CONTENT":
                return
    raise AssertionError("the run ended before its first delta")  # pragma: no cover


async def test_a_client_that_leaves_cancels_the_producer_where_it_awaits() -> None:
    producer = Silent()
    with serve(build_app(producer=producer, keepalive=None)) as server:
        await _leave_after_first_delta(server.url, "r-1")
        await wait_until(producer.ended.is_set, 10, "the producer was cancelled")
        assert producer.ended_by == "CancelledError"
        await wait_until(lambda: server.open_tasks == 0, 10, "the run's task ended")


async def test_with_a_store_a_client_that_leaves_detaches_and_a_stop_cancels(
    tmp_path: Path,
) -> None:
    producer = Silent()
    app = build_app(producer=producer, keepalive=None, store=f"sqlite:///{tmp_path / 'r.db'}")
    with serve(app) as server:
        await _leave_after_first_delta(server.url, "r-1")
        # The server saw the client go (its connection is closed), and the run was
        # only detached: the producer still awaits.
        await wait_until(lambda: server.open_connections == 0, 10, "the connection closed")
        assert not producer.ended.is_set()
        async with httpx.AsyncClient(timeout=30) as client:
            stopped = await client.post(f"{server.url}/runs/r-1/stop")
            assert stopped.status_code in (200, 202), stopped.text
            await wait_until(producer.ended.is_set, 10, "the stop cancelled the producer")
            replay = await client.get(f"{server.url}/runs/r-1")
    assert producer.ended_by == "CancelledError"
    last = replay.text.rstrip().splitlines()[-1]
    assert '"type":"RUN_ERROR"' in last and '"code":"CANCELLED"' in last


@pytest.mark.parametrize("store", [False, True], ids=["no-store", "sqlite"])
async def test_a_silent_producer_times_out_and_is_cancelled(store: bool, tmp_path: Path) -> None:
    producer = Silent()
    options = {"store": f"sqlite:///{tmp_path / 'r.db'}"} if store else {}
    app = build_app(producer=producer, keepalive=None, producer_timeout=0.3, **options)
    with serve(app) as server:
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream("POST", server.url, json=run_input("r-1")) as response,
        ):
            events = [event async for event in sse_events(response)]
        if store:
            async with httpx.AsyncClient(timeout=30) as client:
                replay = (await client.get(f"{server.url}/runs/r-1")).text
            last = replay.rstrip().splitlines()[-1]
            assert '"code":"AGENT_TIMEOUT"' in last  # recorded as sent
    error = events[-1]
    assert error.type.value == "RUN_ERROR"
    assert error.code == "AGENT_TIMEOUT"  # type: ignore[attr-defined]
    assert "0.3s after 3 events" in error.message  # type: ignore[attr-defined]
    assert producer.ended.is_set() and producer.ended_by == "CancelledError"


def test_serve_timeout_is_the_producer_s_longest_silence() -> None:
    args = ("--agent", "tests.server._producers:silent", "--timeout", "0.5")
    with serving(*args) as (url, _output):
        events = post_run(url, run_input("r-1"))
    assert [event["type"] for event in events][-1] == "RUN_ERROR"
    assert events[-1]["code"] == "AGENT_TIMEOUT" and "0.5s" in events[-1]["message"]


async def test_a_producer_that_raises_is_recorded_with_one_run_error(tmp_path: Path) -> None:
    # Regression: the failure is now the stream's own RUN_ERROR (through the chain);
    # the server must not add a second one, live or in the log.
    async def raises(run_input: Any, principal: Any) -> Any:
        yield {"type": "RUN_STARTED", "threadId": run_input.thread_id, "runId": run_input.run_id}
        raise RuntimeError("the key sk-123 expired")

    app = build_app(producer=raises, keepalive=None, store=f"sqlite:///{tmp_path / 'r.db'}")
    with serve(app) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            live = await client.post(server.url, json=run_input("r-1"))
            replay = await client.get(f"{server.url}/runs/r-1")
    for body in (live.text, replay.text):
        assert body.count('"type":"RUN_ERROR"') == 1, body
        assert '"code":"AGENT_ERROR"' in body and "sk-123" not in body
    assert replay.text == live.text  # recorded as sent


def test_a_stop_of_a_recorded_run_whose_client_stalls_is_recorded_as_cancelled(
    tmp_path: Path,
) -> None:
    from tests._slow_clients import poll, stalled_client, wait_until_held
    from tests.server.test_producer_backpressure import Flood

    producer = Flood(100_000)
    store = f"sqlite:///{tmp_path / 'r.db'}"
    app = build_app(producer=producer, store=store, keepalive=None, send_buffer=65536)
    with serve(app) as server, stalled_client(server.port):
        poll(lambda: producer.yielded > 0, 10, "the producer started")
        wait_until_held(lambda: producer.yielded)
        stopped = httpx.post(f"{server.url}/runs/r/stop", timeout=30)
        assert producer.ended.wait(10), "the stop did not close the producer"
    assert stopped.json()["status"] == "cancelled", stopped.text
