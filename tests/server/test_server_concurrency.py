"""One run per thread and idempotent retries on the durable endpoint: real servers, real stores.

While a run of a thread is live, a POST of another run on that thread is
refused with 409 ``thread_busy`` (``concurrency="reject"``) or stops the live
run first (``"supersede"``), in one process and across two processes sharing
a store; a POST retried with the same body rejoins its run (the same frames,
ids included) and another body under its runId is 409 ``run_exists``; 50
simultaneous POSTs of one runId run the agent once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import EventType, RunErrorEvent
from starlette.applications import Starlette

from agui_pipes import fold
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, agent_routes
from agui_pipes.store import RunStatus, open_store
from tests._durable_http import HEADERS, Frames, Gated
from tests._durable_http import events as _events
from tests._durable_http import get_frames as _get
from tests._durable_http import read_frames as _read
from tests._servers import run_input, serve, wait_until
from tests._store_backends import BACKENDS, redis_url, store_url_for
from tests._xproc_server import server_process

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def _app(agent: Any, store: str, **options: Any) -> tuple[Starlette, AgentEndpoint]:
    routes = agent_routes("/agent", agent, store=store, keepalive=None, **options)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    return Starlette(routes=routes, lifespan=endpoint.lifespan), endpoint


async def _post(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], cut: int | None = None
) -> tuple[int, Frames, Any]:
    """POST a run: its status, its frames (the first ``cut``), and the JSON of an error."""
    async with client.stream("POST", url, content=json.dumps(body), headers=HEADERS) as response:
        if response.status_code != 200:
            return response.status_code, [], json.loads(await response.aread())
        return 200, await _read(response, cut), None


def _live(endpoint: AgentEndpoint, run_id: str) -> bool:
    assert endpoint.durable is not None
    return ("default", run_id) in endpoint.durable.live


async def test_a_second_run_on_a_live_thread_is_refused_naming_the_live_run(
    store_url: str,
) -> None:
    agent = Gated(before=3, after=3)
    app, endpoint = _app(agent.run, store_url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            first: list[Frames] = []

            async def post_first() -> None:
                status, frames, _ = await _post(client, "/agent", run_input("first"))
                assert status == 200
                first.append(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(post_first)
                await wait_until(lambda: _live(endpoint, "first"), 10, "the first run")
                status, _, error = await _post(client, "/agent", run_input("second"))
                assert status == 409
                assert error["error"] == "thread_busy"
                assert error["details"] == [{"runId": "first"}]
                assert "'first'" in error["message"]
                # Another thread is not held by it.
                other = run_input("elsewhere", threadId="thread-2")
                agent.gate("elsewhere").set()
                status, frames, _ = await _post(client, "/agent", other)
                assert status == 200 and _events(frames)[-1].type is EventType.RUN_FINISHED
                agent.gate("first").set()
            assert _events(first[0])[-1].type is EventType.RUN_FINISHED
            assert "second" not in agent.stopped  # it never ran
            # The thread is free once its run ended.
            agent.gate("third").set()
            status, frames, _ = await _post(client, "/agent", run_input("third"))
            assert status == 200 and _events(frames)[-1].type is EventType.RUN_FINISHED


async def test_supersede_stops_the_live_run_before_the_new_one_starts(store_url: str) -> None:
    agent = Gated(before=3, after=3)
    app, endpoint = _app(agent.run, store_url, concurrency="supersede", detach_grace=30)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            status, _, _ = await _post(client, "/agent", run_input("old"), cut=1)
            assert status == 200 and _live(endpoint, "old")  # its client left; it goes on
            agent.gate("new").set()
            status, frames, _ = await _post(client, "/agent", run_input("new"))
            assert status == 200 and _events(frames)[-1].type is EventType.RUN_FINISHED
            assert "old" in agent.stopped and agent.stopped["old"] < agent.stopped["new"]
            status, old, _ = await _get(client, "/agent/runs/old")
            assert status == 200
            end = _events(old)[-1]
            assert isinstance(end, RunErrorEvent) and end.code == "CANCELLED"
            assert "superseded" in end.message
    async with open_store(store_url) as store:
        if not store_url.startswith("memory"):
            record = await store.run("old")
            assert record is not None and record.status is RunStatus.CANCELLED


async def test_a_retried_post_rejoins_its_run_and_another_body_is_refused(
    store_url: str,
) -> None:
    agent = Gated(before=6, after=4)
    app, _ = _app(agent.run, store_url, detach_grace=30)
    body = run_input("retried", messages=[{"id": "m1", "role": "user", "content": "hi"}])
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            status, cut, _ = await _post(client, "/agent", body, cut=3)
            assert status == 200 and len(cut) == 3
            # The same body again (keys in another order: the digest is of canonical JSON).
            reordered = dict(reversed(list(body.items())))
            rejoined: list[Frames] = []

            async def retry() -> None:
                status, frames, _ = await _post(client, "/agent", reordered)
                assert status == 200
                rejoined.append(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(retry)
                await wait_until(lambda: "retried" in agent.gates, 10, "the run")
                agent.gate("retried").set()
            # The retry is answered with the run's join stream: self-contained, it folds
            # to the whole run, and its last frame is the run's last, same id and bytes.
            status, replay, _ = await _get(client, "/agent/runs/retried")
            assert status == 200
            assert _events(rejoined[0])[0].type is EventType.RUN_STARTED
            assert fold(_events(rejoined[0])).messages == fold(_events(replay)).messages
            assert rejoined[0][-1] == replay[-1]
            assert _events(replay)[-1].type is EventType.RUN_FINISHED
            assert list(agent.stopped) == ["retried"]  # the agent ran once
            # Once ended, the same body still rejoins; another body is a conflict.
            status, again, _ = await _post(client, "/agent", body)
            assert status == 200 and again[-1] == replay[-1]
            assert fold(_events(again)).messages == fold(_events(replay)).messages
            changed = {**body, "messages": []}
            status, _, error = await _post(client, "/agent", changed)
            assert status == 409 and error["error"] == "run_exists"


async def test_fifty_simultaneous_posts_of_one_run_id_run_the_agent_once(
    store_url: str,
) -> None:
    invocations: list[str] = []

    async def counted(ctx: RunContext[Any]) -> RunOutcome:
        invocations.append(ctx.run_id)
        with ctx.message() as message:
            for n in range(5):
                message.delta(f"d{n} ")
                await anyio.sleep(0.01)
        return RunOutcome.success()

    app, _ = _app(counted, store_url, detach_grace=30)
    answers: list[Frames] = []
    with serve(app) as server:
        limits = httpx.Limits(max_connections=60)
        async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits) as client:

            async def post() -> None:
                status, frames, error = await _post(client, "/agent", run_input("once"))
                assert status == 200, error
                answers.append(frames)

            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(post)
            status, replay, _ = await _get(client, "/agent/runs/once")
    assert status == 200
    assert invocations == ["once"]
    # The one that started the run streamed it; the others rejoined it, each answered
    # the run's join stream: all fold to the run and end on its last frame.
    assert len(answers) == 50
    whole = fold(_events(replay)).messages
    assert all(fold(_events(frames)).messages == whole for frames in answers)
    assert all(frames[-1] == replay[-1] for frames in answers)
    assert _events(replay)[-1].type is EventType.RUN_FINISHED


# -- two server processes sharing Redis -----------------------------------------------


@pytest.fixture
def shared_redis(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for("redis", request, tmp_path)


async def test_one_run_per_thread_across_two_processes(shared_redis: str) -> None:
    with (
        server_process(shared_redis, 30.0, 5.0) as (a, _),
        server_process(shared_redis, 30.0, 5.0) as (b, _),
    ):
        async with (
            httpx.AsyncClient(base_url=a, timeout=20) as to_a,
            httpx.AsyncClient(base_url=b, timeout=20) as to_b,
        ):
            status, _, _ = await _post(to_a, "/agent", run_input("ticking"), cut=2)
            assert status == 200  # it goes on ticking on process a, its client gone
            status, _, error = await _post(to_b, "/agent", run_input("short-b"))
            assert status == 409 and error["details"] == [{"runId": "ticking"}]
            stopped = await to_b.post("/agent/runs/ticking/stop")
            assert stopped.status_code == 200, stopped.text
            status, frames, error = await _post(to_b, "/agent", run_input("short-b"))
            assert status == 200, error
            assert _events(frames)[-1].type is EventType.RUN_FINISHED


async def test_supersede_across_two_processes_cancels_the_first(shared_redis: str) -> None:
    with (
        server_process(shared_redis, 30.0, 5.0, "supersede") as (a, _),
        server_process(shared_redis, 30.0, 5.0, "supersede") as (b, _),
    ):
        async with (
            httpx.AsyncClient(base_url=a, timeout=20) as to_a,
            httpx.AsyncClient(base_url=b, timeout=20) as to_b,
        ):
            status, _, _ = await _post(to_a, "/agent", run_input("ticking"), cut=2)
            assert status == 200
            status, frames, error = await _post(to_b, "/agent", run_input("short-b"))
            assert status == 200, error
            assert _events(frames)[-1].type is EventType.RUN_FINISHED
            status, old, _ = await _get(to_b, "/agent/runs/ticking")
            assert status == 200
            end = _events(old)[-1]
            assert isinstance(end, RunErrorEvent) and end.code == "CANCELLED"
            assert "superseded" in end.message
    async with open_store(shared_redis) as store:
        record = await store.run("ticking")
        assert record is not None and record.status is RunStatus.CANCELLED
