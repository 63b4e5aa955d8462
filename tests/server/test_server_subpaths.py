"""An endpoint or gateway with a store, served as an ASGI app of its own or mounted.

Real uvicorn servers: the durable routes answer below the app's root (the root is
the run POST), a served-alone app runs its own lifespan, and a plain ``Route`` is
unchanged. The two-user authorization of these routes is checked in
test_server_tenancy.py, served alone and mounted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from ag_ui.core import RunErrorEvent
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from agui_pipes.server import AgentEndpoint, Gateway, build_app
from tests._durable_http import HEADERS, Gated, get_frames, take_frames
from tests._durable_http import events as frame_events
from tests._servers import run_input, serve

pytestmark = pytest.mark.anyio


async def _stop_mid_run(client: httpx.AsyncClient, post: str, base: str, run_id: str) -> None:
    """POST a run, read three frames, stop it through ``base``; it ends CANCELLED."""
    body = json.dumps(run_input(run_id))
    async with client.stream("POST", post, content=body, headers=HEADERS) as response:
        assert response.status_code == 200, await response.aread()
        buffer = bytearray()
        frames: list[tuple[str | None, bytes]] = []
        stream = response.aiter_raw()
        while len(frames) < 3:
            buffer += await stream.__anext__()
            frames.extend(take_frames(buffer))
        started = time.monotonic()
        stop = await client.post(f"{base}/runs/{run_id}/stop")
        assert stop.status_code == 200, stop.text
        assert stop.json() == {"runId": run_id, "status": "cancelled"}
        assert time.monotonic() - started < 5
        async for chunk in stream:
            buffer += chunk
            frames.extend(take_frames(buffer))
    last = frame_events(frames)[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
    status, replay, _ = await get_frames(client, f"{base}/runs/{run_id}")
    assert status == 200 and replay == frames
    history = await client.get(f"{base}/threads/thread-1")
    assert history.status_code == 200, history.text
    capabilities = await client.get(f"{base}/capabilities")
    assert capabilities.status_code == 200
    routes = capabilities.json()["custom"]["aguiPipes"]["routes"]
    assert routes["stop"] == "POST runs/{runId}/stop"


async def test_an_endpoint_served_alone_is_stopped_resumed_and_read(tmp_path: Path) -> None:
    agent = Gated(before=2)
    database = tmp_path / "runs.db"
    endpoint = AgentEndpoint(agent.run, store=f"sqlite:///{database}", keepalive=None)
    with serve(endpoint) as server:
        # Its own lifespan ran at start-up: the event log is open before any request.
        assert database.exists()
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            await _stop_mid_run(client, "/", "", "alone")
            # Any other path that is not a durable route is still the run POST.
            agent.gate("elsewhere").set()
            answer = await client.post(
                "/agent", content=json.dumps(run_input("elsewhere")), headers=HEADERS
            )
            assert answer.status_code == 200 and b"RUN_FINISHED" in answer.content
            # A run POSTed to a path under runs/ (not a stop) is a run too.
            agent.gate("under-runs").set()
            answer = await client.post(
                "/runs/under-runs", content=json.dumps(run_input("under-runs")), headers=HEADERS
            )
            assert answer.status_code == 200 and b"RUN_FINISHED" in answer.content


async def test_a_mounted_endpoint_is_stopped_resumed_and_read() -> None:
    agent = Gated(before=2)
    endpoint = AgentEndpoint(agent.run, store="memory:", keepalive=None)
    app = Starlette(routes=[Mount("/agent", app=endpoint)], lifespan=endpoint.lifespan)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            await _stop_mid_run(client, "/agent/", "/agent", "mounted")


async def test_a_gateway_served_alone_is_stopped_resumed_and_read() -> None:
    agent = Gated(before=2)
    with serve(build_app(agent=agent.run, path="/agent")) as upstream:
        gateway = Gateway(f"{upstream.url}/agent", store="memory:", keepalive=None)
        with serve(gateway) as server:
            async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
                await _stop_mid_run(client, "/", "", "gatewayed")


async def test_a_plain_route_is_the_run_post_only() -> None:
    """Behind ``Route(path, endpoint)`` the endpoint sees its route's path: a run."""
    agent = Gated(before=1, after=1)
    agent.gate("routed").set()
    endpoint = AgentEndpoint(agent.run, store="memory:", keepalive=None)
    app = Starlette(routes=[Route("/runs/x", endpoint, methods=["POST"])])
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            answer = await client.post(
                "/runs/x", content=json.dumps(run_input("routed")), headers=HEADERS
            )
    assert answer.status_code == 200 and b"RUN_FINISHED" in answer.content
    await endpoint.aclose()
