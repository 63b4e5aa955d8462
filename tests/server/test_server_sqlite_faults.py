"""The server over a SQLite event log that fails for real: a full disk, a stalled (frozen) disk,
the database file deleted mid-run — answered over HTTP (issue 27, "SQLite that holds").

Regressions: a full disk gave each new POST a 503 whose message named the database file
(and a traceback in the log), with no ``retry-after`` and ``/healthz`` answering ok; a
frozen disk left new POSTs without an answer for 30 s while ``/healthz`` said ok; a
deleted database file gave no error and no log line.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import EventType

from agui_pipes.demo import DemoAgent
from agui_pipes.server import build_app
from tests._fs_faults import fill, loop_ext4, small_tmpfs
from tests._servers import post_run, run_input, serve, sse_events

pytestmark = pytest.mark.anyio


def _body(run_id: str) -> dict[str, Any]:
    return run_input(
        run_id,
        threadId=f"thread-{run_id}",
        messages=[{"id": "m", "role": "user", "content": "hi"}],
    )


def _check_unavailable(response: httpx.Response, where: Path) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) > 0
    body = response.json()
    assert body["error"] == "store_unavailable"
    assert str(where) not in response.text and "sqlite" not in response.text.lower()


def _no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        if record.name.startswith("agui_pipes"):
            assert record.exc_info is None, record.getMessage()


async def test_a_full_disk_answers_new_runs_503_and_healthz_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with small_tmpfs("2m") as disk:
        app = build_app(agent=DemoAgent(), path="/agent", store=f"sqlite:///{disk}/runs.db")
        with serve(app) as server:
            async with httpx.AsyncClient(timeout=30) as client:
                response, events = await post_run(client, server.url + "/agent", _body("r1"))
                assert response.status_code == 200 and events[-1].type is EventType.RUN_FINISHED
                filler = fill(disk)
                answers = []
                for n in range(20):  # the WAL's spare room takes a run or two first
                    response, events = await post_run(
                        client, server.url + "/agent", _body(f"full-{n}")
                    )
                    answers.append(response.status_code)
                    if response.status_code != 200:
                        break
                    assert events[-1].type is EventType.RUN_FINISHED  # stored, or broken: whole
                _check_unavailable(response, disk)
                assert "the disk is full" in response.json()["message"]
                health = await client.get(server.url + "/healthz")
                assert health.status_code == 503
                assert health.json() == {"status": "unavailable", "store": "the disk is full"}
                filler.unlink()
                response, events = await post_run(client, server.url + "/agent", _body("r2"))
                assert response.status_code == 200 and events[-1].type is EventType.RUN_FINISHED
                assert (await client.get(server.url + "/healthz")).text == "ok"
    assert any("the disk is full" in r.getMessage() for r in caplog.records)
    _no_tracebacks(caplog)


async def test_a_stalled_disk_answers_503_in_bounded_time_and_healthz_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with loop_ext4() as disk:
        url = f"sqlite:///{disk.directory}/runs.db?timeout=0.5"
        app = build_app(agent=DemoAgent(), path="/agent", store=url)
        with serve(app) as server:
            async with httpx.AsyncClient(timeout=30) as client:
                response, _ = await post_run(client, server.url + "/agent", _body("r1"))
                assert response.status_code == 200
                disk.freeze()
                try:
                    with anyio.fail_after(20):  # an answer, not a hang (the store's 0.5 s)
                        response, _ = await post_run(client, server.url + "/agent", _body("r2"))
                        health = await client.get(server.url + "/healthz")
                    _check_unavailable(response, disk.directory)
                    assert health.status_code == 503
                    assert health.json()["status"] == "unavailable"
                    assert "0.5 s" in health.json()["store"]
                finally:
                    disk.thaw()
                with anyio.fail_after(30):
                    while (await client.get(server.url + "/healthz")).status_code != 200:  # noqa: ASYNC110
                        await anyio.sleep(0.1)
                response, events = await post_run(client, server.url + "/agent", _body("r3"))
                assert response.status_code == 200 and events[-1].type is EventType.RUN_FINISHED
    assert any("did not return within 0.5 s" in r.getMessage() for r in caplog.records)
    _no_tracebacks(caplog)


async def test_the_database_deleted_mid_run_is_reported_and_refuses_new_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.db"
    app = build_app(agent=DemoAgent(pace=0.02), path="/agent", store=f"sqlite:///{path}")
    with serve(app) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            seen = []
            async with client.stream(
                "POST",
                server.url + "/agent",
                json=_body("r1"),
                headers={"accept": "text/event-stream"},
            ) as response:
                assert response.status_code == 200
                async for event in sse_events(response):
                    seen.append(event.type)
                    if len(seen) == 3:
                        for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
                            (tmp_path / name).unlink(missing_ok=True)
            # The live stream goes on to its own end (the run is no longer recorded).
            assert seen[-1] is EventType.RUN_FINISHED
            response, _ = await post_run(client, server.url + "/agent", _body("r2"))
            _check_unavailable(response, tmp_path)
            assert "deleted" in response.json()["message"]
            health = await client.get(server.url + "/healthz")
            assert health.status_code == 503 and "deleted" in health.json()["store"]
    gone = [r for r in caplog.records if "was deleted" in r.getMessage() and r.levelname == "ERROR"]
    assert gone, "the deletion must be logged"
    _no_tracebacks(caplog)


async def test_a_disk_stalled_mid_run_ends_a_follower_with_store_unavailable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After the stream started there is no status to answer: the follower's stream ends
    with the documented RUN_ERROR, the POSTing client's goes on to its own end."""
    with loop_ext4() as disk:
        url = f"sqlite:///{disk.directory}/runs.db?timeout=0.5"
        app = build_app(agent=DemoAgent(pace=0.02), path="/agent", store=url)
        with serve(app) as server:
            async with httpx.AsyncClient(timeout=30) as client:
                live: list[EventType] = []
                followed: list[Any] = []

                async def post() -> None:
                    async with client.stream(
                        "POST",
                        server.url + "/agent",
                        json=_body("r1"),
                        headers={"accept": "text/event-stream"},
                    ) as response:
                        async for event in sse_events(response):
                            live.append(event.type)

                async def follow() -> None:
                    async with client.stream("GET", server.url + "/agent/runs/r1") as response:
                        assert response.status_code == 200
                        async for event in sse_events(response):
                            followed.append(event)
                            if len(followed) == 3:
                                disk.freeze()

                try:
                    with anyio.fail_after(60):
                        async with anyio.create_task_group() as tasks:
                            tasks.start_soon(post)
                            while not live:  # noqa: ASYNC110 (the server's thread)
                                await anyio.sleep(0.01)
                            tasks.start_soon(follow)
                finally:
                    disk.thaw()
    assert live[-1] is EventType.RUN_FINISHED
    end = followed[-1]
    assert end.type is EventType.RUN_ERROR and end.code == "STORE_UNAVAILABLE", end
    assert str(disk.directory) not in end.message and "sqlite" not in end.message.lower()
    _no_tracebacks(caplog)


async def test_the_gateway_refuses_new_runs_and_fails_healthz_alike(tmp_path: Path) -> None:
    """The 503 and the health probe are the durable layer's, shared by the gateway."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    from tests._servers import RecordedUpstream

    body = (
        b'data: {"type":"RUN_STARTED","threadId":"thread-g","runId":"g"}\n\n'
        b'data: {"type":"RUN_FINISHED","threadId":"thread-g","runId":"g"}\n\n'
    )
    upstream = Starlette(routes=[Route("/agent", RecordedUpstream(body), methods=["POST"])])
    with serve(upstream) as agent:
        app = build_app(upstream=agent.url + "/agent", store=f"sqlite:///{tmp_path}/runs.db")
        with serve(app) as server:
            async with httpx.AsyncClient(timeout=30) as client:
                assert (await client.get(server.url + "/healthz")).text == "ok"
                for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
                    (tmp_path / name).unlink(missing_ok=True)
                health = await client.get(server.url + "/healthz")
                assert health.status_code == 503 and "deleted" in health.json()["store"]
                response, _ = await post_run(client, server.url + "/", _body("g"))
                _check_unavailable(response, tmp_path)
