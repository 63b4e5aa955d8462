"""Ids a client sends, through real servers: bounded, parsed without surprises, never reused.

Run and thread ids over 256 characters, empty, with control characters or a
dot segment are 422 ``bad_id`` on every route of the endpoint and the
gateway, with and without a store, and the answer stays small whatever was
sent (a 1 MiB runId once turned into a 331 MB response). A ``Last-Event-ID``
or ``?after=`` that is not an id the server issued is 400 ``bad_event_id``
(a seq of 2**63 once raised OverflowError on a live SQLite run). An id past
the end of a live run is 409, as past the end of an ended one. A run id used
again after retention deleted its run is a new run whose ids the old ones
are not (a generation in every SSE id).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import EventType
from starlette.applications import Starlette

from agui_pipes.demo import DemoAgent
from agui_pipes.server import AgentEndpoint, agent_routes, build_app
from agui_pipes.store import open_store
from tests._durable_http import HEADERS, Gated
from tests._durable_http import events as _events
from tests._durable_http import get_frames as _get
from tests._durable_http import read_frames as _read
from tests._durable_http import seqs as _seqs
from tests._servers import RecordedUpstream, run_input, serve, wait_until
from tests._store_backends import BACKENDS, redis_url, store_url_for

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

SMALL = 1024
"""No refusal of an id is longer than this, whatever the request held."""

BAD_IDS = {
    "257 characters": "r" * 257,
    "1 MiB": "r" * (1 << 20),
    "empty": "",
    "a dot": ".",
    "two dots": "..",
    "a dot segment": "a/../b",
    "a line break": "run\nid: forged",
    "a NUL": "run\x00",
    "DEL": "run\x7f",
    "a C1 control": "run\x85",
}


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def _with(url: str, options: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{options}"


def _endpoint(agent: Any, store: Any) -> tuple[Starlette, AgentEndpoint]:
    routes = agent_routes("/agent", agent, store=store, detach_grace=5.0, keepalive=None)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    return Starlette(routes=routes, lifespan=endpoint.lifespan), endpoint


async def _refused(response: httpx.Response, status: int, error: str) -> str:
    body = await response.aread()
    assert response.status_code == status, body[:300]
    assert len(body) < SMALL, f"{len(body)} bytes answered a refused id"
    payload = json.loads(body)
    assert payload["error"] == error, payload
    return str(payload["message"])


async def _post_bad_ids(client: httpx.AsyncClient, path: str) -> None:
    for what, bad in BAD_IDS.items():
        for field, body in (
            ("runId", run_input(bad)),
            ("threadId", run_input("ok-run", threadId=bad)),
        ):
            response = await client.post(path, content=json.dumps(body), headers=HEADERS)
            message = await _refused(response, 422, "bad_id")
            assert f"the {field} " in message, (what, message)


@pytest.mark.parametrize("store", ["none", *BACKENDS])
async def test_bad_ids_are_422_on_the_endpoints_post(
    store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = None if store == "none" else store_url_for(store, request, tmp_path)
    app = build_app(agent=DemoAgent(), path="/agent", store=url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            await _post_bad_ids(client, "/agent")
            if url is not None:  # nothing was recorded
                listed = await client.get("/agent/threads")
                assert listed.json() == {"threads": [], "next": None}
            ok = await client.post(
                "/agent", content=json.dumps(run_input("r" * 256)), headers=HEADERS
            )
            assert ok.status_code == 200  # 256 characters are fine


@pytest.mark.parametrize("store", ["none", "memory", "sqlite"])
async def test_bad_ids_are_422_on_the_gateways_post_and_never_go_upstream(
    store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    posts: list[bytes] = []
    body = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'

    class Counting(RecordedUpstream):
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return  # uvicorn's lifespan probe
            posts.append(b"")
            await super().__call__(scope, receive, send)

    url = None if store == "none" else store_url_for(store, request, tmp_path)
    with serve(Counting(body)) as upstream:
        gateway = build_app(upstream=f"{upstream.url}/", path="/chat", store=url)
        with serve(gateway) as server:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                await _post_bad_ids(client, "/chat")
    assert posts == []


@pytest.mark.parametrize("gateway", [False, True])
async def test_bad_ids_are_422_on_every_durable_route(store_url: str, gateway: bool) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if gateway:
            upstream = stack.enter_context(serve(build_app(agent=DemoAgent(), path="/agent")))
            app = build_app(upstream=f"{upstream.url}/agent", path="/agent", store=store_url)
        else:
            app = build_app(agent=DemoAgent(), path="/agent", store=store_url)
        server = stack.enter_context(serve(app))
        client = await stack.enter_async_context(httpx.AsyncClient(base_url=server.url, timeout=30))
        for bad in ("r" * 257, "r" * 8_000, "run%0Aid", "run%0D", "run%00", "run%01", "run%7F"):
            for method, route in (
                ("GET", f"/agent/runs/{bad}"),
                ("POST", f"/agent/runs/{bad}/stop"),
                ("GET", f"/agent/threads/{bad}"),
            ):
                response = await client.request(method, route)
                message = await _refused(response, 422, "bad_id")
                assert len(message) < 300 and ("run id" in message or "thread id" in message)


async def _started(
    client: httpx.AsyncClient, endpoint: AgentEndpoint, agent: Gated, run_id: str, cut: int
) -> list[tuple[str | None, bytes]]:
    """POST ``run_id`` and read ``cut`` frames; the run waits, live, at its gate."""
    async with client.stream(
        "POST", "/agent", content=json.dumps(run_input(run_id)), headers=HEADERS
    ) as response:
        assert response.status_code == 200
        frames = await _read(response, cut)
    assert endpoint.durable is not None
    await wait_until(
        lambda: (
            (live := endpoint.durable.live.get(("default", run_id))) is not None  # type: ignore[union-attr]
            # RUN_STARTED, TEXT_MESSAGE_START and the deltas before the gate
            and live.recorder.next_seq - 1 >= agent.before + 2
        ),
        10,
        "the run to reach its gate",
    )
    return frames


async def test_bad_event_ids_are_400_on_a_live_run(store_url: str) -> None:
    agent = Gated(before=4, after=2)
    app, endpoint = _endpoint(agent.run, store_url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            got = await _started(client, endpoint, agent, "live", cut=2)
            head = str(got[0][0]).rpartition(":")[0]  # "<epoch>.<generation>:live"
            for bad in (
                f"{head}:{2**63}",  # once an OverflowError on a live SQLite run
                f"{head}:{10**30}",
                f"{head}:{'9' * 300}",
                f"{head}:-1",
                f"{head}:abc",
                f"{head}:",
                "not an id",
                "x" * 5000,
            ):
                for headers, params in (({"last-event-id": bad}, {}), ({}, {"after": bad})):
                    response = await client.get("/agent/runs/live", headers=headers, params=params)
                    message = await _refused(response, 400, "bad_event_id")
                    assert len(message) < 400
            raw = await client.get("/agent/runs/live", headers={"last-event-id": b"\xff\xfe:1"})
            assert "not UTF-8" in await _refused(raw, 400, "bad_event_id")
            # The run itself is unharmed: resumed from its second frame, it ends well.
            agent.gate("live").set()
            status, rest, body = await _get(client, "/agent/runs/live", got[1][0])
            assert status == 200, body
            assert _seqs(got + rest) == list(range(1, len(got) + len(rest) + 1))
            assert _events(rest)[-1].type is EventType.RUN_FINISHED


async def test_an_id_past_the_end_of_a_live_run_is_409(store_url: str) -> None:
    agent = Gated(before=4, after=2)
    app, endpoint = _endpoint(agent.run, store_url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            got = await _started(client, endpoint, agent, "live", cut=1)
            head = str(got[0][0]).rpartition(":")[0]
            assert endpoint.durable is not None
            numbered = endpoint.durable.live[("default", "live")].recorder.next_seq - 1
            for past in (numbered + 1, 10**6, 2**63 - 1):
                status, frames, body = await _get(client, "/agent/runs/live", f"{head}:{past}")
                assert status == 409, (past, frames[:2])
                message = json.loads(body)["message"]
                assert "past the end of live run 'live'" in message
            # The last numbered id is a good one: it waits for the rest of the run.
            agent.gate("live").set()
            status, rest, body = await _get(client, "/agent/runs/live", f"{head}:{numbered}")
            assert status == 200, body
            assert _events(rest)[-1].type is EventType.RUN_FINISHED
            last = str(rest[-1][0])
            after_end = f"{head}:{_seqs(rest)[-1] + 1}"
            status, _, body = await _get(client, "/agent/runs/live", after_end)
            assert status == 409 and "past the end of run 'live'" in json.loads(body)["message"]
            status, nothing, _ = await _get(client, "/agent/runs/live", last)
            assert status == 200 and nothing == []


async def test_an_id_past_the_end_of_a_run_served_elsewhere_is_409(tmp_path: Path) -> None:
    """Server B shares A's SQLite file: B cannot count A's frames, so it waits, then refuses."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    agent = Gated(before=4, after=2)
    app_a, endpoint_a = _endpoint(agent.run, url)
    store_b = open_store(url)
    store_b.resume_wait = 0.5
    app_b, _ = _endpoint(DemoAgent(), store_b)
    with serve(app_a) as a, serve(app_b) as b:
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=30) as client_a,
            httpx.AsyncClient(base_url=b.url, timeout=30) as client_b,
        ):
            got = await _started(client_a, endpoint_a, agent, "live", cut=1)
            head = str(got[0][0]).rpartition(":")[0]
            status, _, body = await _get(client_b, "/agent/runs/live", f"{head}:1000")
            assert status == 409
            assert "past the end of live run 'live'" in json.loads(body)["message"]
            agent.gate("live").set()
            status, rest, body = await _get(client_b, "/agent/runs/live", got[0][0])
            assert status == 200, body
            assert _events(rest)[-1].type is EventType.RUN_FINISHED


async def test_a_run_id_used_again_after_pruning_refuses_the_old_ids(store_url: str) -> None:
    url = _with(store_url, "max_runs_per_thread=1&retention_interval=0")
    app = build_app(agent=DemoAgent(), path="/agent", store=url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:

            async def run(run_id: str) -> list[tuple[str | None, bytes]]:
                async with client.stream(
                    "POST", "/agent", content=json.dumps(run_input(run_id)), headers=HEADERS
                ) as response:
                    assert response.status_code == 200
                    return await _read(response)

            old = await run("reused")
            await run("second")
            await run("third")  # its creation prunes "reused" (one ended run kept)
            status, _, _ = await _get(client, "/agent/runs/reused")
            assert status == 404
            new = await run("reused")  # the id is free again: a new run
            old_id, new_id = str(old[2][0]), str(new[2][0])
            assert old_id.rpartition(":")[2] == new_id.rpartition(":")[2]
            assert old_id != new_id  # same run id, same seq, another generation
            status, frames, body = await _get(client, "/agent/runs/reused", old_id)
            assert status == 409, f"an old id resumed the new run: {len(frames)} frames"
            assert "earlier run of that id" in json.loads(body)["message"]
            status, rest, _ = await _get(client, "/agent/runs/reused", new_id)
            assert status == 200 and rest == new[3:]
