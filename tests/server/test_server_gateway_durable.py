"""Durable runs through the gateway: a real upstream, a real gateway, real stores.

The upstream is an agent endpoint without a store, served by uvicorn; the
gateway in front of it records each run (``store=``). On both of the
gateway's paths — the relay (byte batches of frames) and the apply path (an
async chain) — a client cut at a random event while the upstream still
produces, resumed with ``Last-Event-ID``, must get exactly what it missed; a
client that leaves for good has the upstream request closed after the grace
and the run recorded as cancelled; a stop cancels at once; bad ids get
400/404/409.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from ag_ui.core import EventType, RunErrorEvent
from starlette.applications import Starlette

from agui_pipes import AsyncStreamTransformer
from agui_pipes.server import Gateway, agent_route, build_app, gateway_route
from tests._durable_http import HEADERS, Frames, Gated
from tests._durable_http import events as _events
from tests._durable_http import get_frames as _get
from tests._durable_http import read_frames as _read
from tests._durable_http import seqs as _seqs
from tests._durable_http import take_frames as _take_frames
from tests._servers import Running, run_input, serve, wait_until
from tests._store_backends import BACKENDS, redis_url, store_url_for

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for


async def _post(client: httpx.AsyncClient, run_id: str, cut: int | None = None) -> Frames:
    body = json.dumps(run_input(run_id))
    async with client.stream("POST", "/chat", content=body, headers=HEADERS) as response:
        assert response.status_code == 200, await response.aread()
        return await _read(response, cut)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


@pytest.fixture(params=["relay", "apply"])
def mode(request: pytest.FixtureRequest) -> str:
    """The gateway's relay path (no chain: byte batches) or apply path (an async chain)."""
    return str(request.param)


@pytest.fixture
def upstream_agent() -> Iterator[tuple[Gated, Running]]:
    # bursts of 3 deltas between sleeps: the relay gets reads holding several frames
    agent = Gated(pace=0.003, burst=3)
    app = Starlette(routes=[agent_route("/agent", agent.run, keepalive=None)])
    with serve(app) as server:
        yield agent, server


def _gateway(upstream: Running, store: str, mode: str, grace: float = 5.0) -> Gateway:
    chain = AsyncStreamTransformer if mode == "apply" else None
    return Gateway(
        f"{upstream.url}/agent", chain=chain, store=store, detach_grace=grace, keepalive=None
    )


def _app(gateway: Gateway) -> Starlette:
    return Starlette(routes=gateway.routes("/chat"), lifespan=gateway.lifespan)


def _following(gateway: Gateway, run_id: str) -> bool:
    """The run is live here, its POSTing client has left and one resume reader follows it."""
    assert gateway.durable is not None
    live = gateway.durable.live.get(("default", run_id))
    return live is not None and not live.client_attached and live.readers == 1


@pytest.mark.parametrize("seed", [1, 2])
async def test_cut_and_resume_while_the_upstream_produces(
    upstream_agent: tuple[Gated, Running], store_url: str, mode: str, seed: int
) -> None:
    agent, upstream = upstream_agent
    gateway = _gateway(upstream, store_url, mode)
    cut = random.Random(seed).randint(1, agent.before + 2)  # before the gate: still producing
    with serve(_app(gateway)) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            agent.gate("whole").set()
            whole = await _post(client, "whole")
            assert _seqs(whole) == list(range(1, len(whole) + 1))
            got = await _post(client, "run-cut", cut=cut)
            assert _seqs(got) == list(range(1, cut + 1))
            resumed: Frames = []

            async def resume() -> None:
                status, frames, body = await _get(client, "/chat/runs/run-cut", got[-1][0])
                assert status == 200, body
                resumed.extend(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(resume)
                await wait_until(lambda: _following(gateway, "run-cut"), 10, "the resume")
                # (were the upstream closed on detach, the joined run would not equal `whole`)
                assert "run-cut" not in agent.stopped, "the upstream was closed on detach"
                agent.gate("run-cut").set()
            joined = got + resumed
            assert _seqs(joined) == list(range(1, len(joined) + 1)), "a gap or a duplicate"
            # The same run as an uninterrupted one: the same events at the same seqs.
            # (The upstream names its message after the run id.)
            assert [data.replace(b"run-cut", b"whole") for _, data in joined] == [
                data for _, data in whole
            ]
            assert _events(joined)[-1].type is EventType.RUN_FINISHED
            status, replay, _ = await _get(client, "/chat/runs/run-cut")
            assert status == 200 and replay == joined


async def test_cut_on_one_gateway_resumed_on_another_sharing_redis(
    upstream_agent: tuple[Gated, Running],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    mode: str,
) -> None:
    """Two gateways behind a load balancer: the run lives on A, the resume lands on B."""
    agent, upstream = upstream_agent
    url = store_url_for("redis", request, tmp_path)
    with (
        serve(_app(_gateway(upstream, url, mode, grace=30))) as a,
        serve(_app(_gateway(upstream, url, mode, grace=30))) as b,
    ):
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=20) as to_a,
            httpx.AsyncClient(base_url=b.url, timeout=20) as to_b,
        ):
            got = await _post(to_a, "shared", cut=3)
            resumed: Frames = []
            following = anyio.Event()

            async def resume() -> None:
                status, frames, body = await _get(
                    to_b, "/chat/runs/shared", got[-1][0], arrived=following
                )
                assert status == 200, body
                resumed.extend(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(resume)
                # B has sent a frame the run made before its gate: B follows A's live run
                with anyio.fail_after(10):
                    await following.wait()
                agent.gate("shared").set()
            joined = got + resumed
            assert _seqs(joined) == list(range(1, len(joined) + 1)), "a gap or a duplicate"
            assert _events(joined)[-1].type is EventType.RUN_FINISHED
            for client in (to_a, to_b):
                status, replay, _ = await _get(client, "/chat/runs/shared")
                assert status == 200 and replay == joined


async def test_disconnect_without_reconnect_closes_the_upstream_after_the_grace(
    upstream_agent: tuple[Gated, Running], store_url: str, mode: str
) -> None:
    agent, upstream = upstream_agent
    grace = 0.4
    gateway = _gateway(upstream, store_url, mode, grace=grace)
    assert gateway.durable is not None
    live = gateway.durable.live
    with serve(_app(gateway)) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            got = await _post(client, "left", cut=2)
            left = time.monotonic()
            await wait_until(lambda: "left" in agent.stopped, 10, "the upstream was closed")
            # not before the grace: the client had left a grace before the upstream closed
            assert agent.stopped["left"] - left >= grace * 0.9
            await wait_until(lambda: ("default", "left") not in live, 10, "the run ended")
            status, frames, _ = await _get(client, "/chat/runs/left")
            assert status == 200 and frames[:2] == got
            last = _events(frames)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
            assert "detach grace" in last.message
            assert _seqs(frames) == list(range(1, len(frames) + 1))


async def test_stop_cancels_at_once(
    upstream_agent: tuple[Gated, Running], store_url: str, mode: str
) -> None:
    agent, upstream = upstream_agent
    gateway = _gateway(upstream, store_url, mode, grace=30)
    with serve(_app(gateway)) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            body = json.dumps(run_input("stopped"))
            async with client.stream("POST", "/chat", content=body, headers=HEADERS) as response:
                frames: Frames = []
                buffer = bytearray()
                stream = response.aiter_raw()
                while len(frames) < 3:
                    buffer += await stream.__anext__()
                    frames.extend(_take_frames(buffer))
                started = time.monotonic()
                stop = await client.post("/chat/runs/stopped/stop")
                assert stop.status_code == 200, stop.text
                assert stop.json() == {"runId": "stopped", "status": "cancelled"}
                assert time.monotonic() - started < 5
                async for chunk in stream:
                    buffer += chunk
                    frames.extend(_take_frames(buffer))
            last = _events(frames)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
            assert _seqs(frames) == list(range(1, len(frames) + 1))
            await wait_until(lambda: "stopped" in agent.stopped, 10, "the upstream was closed")
            status, replay, _ = await _get(client, "/chat/runs/stopped")
            assert status == 200 and replay == frames
            again = await client.post("/chat/runs/stopped/stop")
            assert again.status_code == 409 and again.json()["error"] == "run_ended"


async def test_bad_ids_unknown_runs_and_a_reused_run_id(
    upstream_agent: tuple[Gated, Running], store_url: str
) -> None:
    agent, upstream = upstream_agent
    gateway = _gateway(upstream, store_url, "relay")
    with serve(_app(gateway)) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            agent.gate("one").set()
            agent.gate("two").set()
            one = await _post(client, "one")
            await _post(client, "two")
            status, _, body = await _get(client, "/chat/runs/one", "not an id")
            assert status == 400 and json.loads(body)["error"] == "bad_event_id"
            status, _, _ = await _get(client, "/chat/runs/nope")
            assert status == 404
            status, _, body = await _get(client, "/chat/runs/two", one[1][0])
            assert status == 409 and "belongs to run 'one'" in json.loads(body)["message"]
            assert (await client.post("/chat/runs/nope/stop")).status_code == 404
            status, _, _ = await _get(client, "/chat/threads/no-such-thread")
            assert status == 404
            # Another request under a recorded run's id (the same one would rejoin it).
            again = await client.post(
                "/chat", content=json.dumps(run_input("one", state={"n": 1})), headers=HEADERS
            )
            assert again.status_code == 409 and again.json()["error"] == "run_exists"
            # Nothing was forwarded for the refused run: the upstream saw two runs.
            assert sorted(agent.stopped) == ["one", "two"]
            status, history, _ = await _get(client, "/chat/threads/thread-1")
            assert status == 200
            kinds = [e.type for e in _events(history)]
            assert EventType.MESSAGES_SNAPSHOT in kinds


async def test_upstream_failure_is_recorded_as_the_runs_end(store_url: str) -> None:
    closed = "http://127.0.0.1:9/agent"  # discard port: nothing listens
    gateway = Gateway(closed, store=store_url, keepalive=None)
    with serve(_app(gateway)) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            frames = await _post(client, "failed")
            last = _events(frames)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "UPSTREAM_UNREACHABLE"
            assert _seqs(frames) == list(range(1, len(frames) + 1))
            status, replay, _ = await _get(client, "/chat/runs/failed")
            assert status == 200 and replay == frames


async def test_build_app_serves_the_gateway_routes(upstream_agent: tuple[Gated, Running]) -> None:
    agent, upstream = upstream_agent
    app = build_app(upstream=f"{upstream.url}/agent", store="memory:", path="/chat", keepalive=None)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            agent.gate("built").set()
            frames = await _post(client, "built")
            assert all(event_id is not None for event_id, _ in frames)
            status, replay, _ = await _get(client, "/chat/runs/built")
            assert status == 200 and replay == frames


def test_gateway_store_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="detach_grace"):
        Gateway("http://127.0.0.1:1/", store="memory:", detach_grace=-1)
    with pytest.raises(ValueError, match="sqlite"):
        Gateway("http://127.0.0.1:1/", store="mongodb://x")
    with pytest.raises(TypeError, match=r"routes\(path\)"):
        gateway_route("/chat", "http://127.0.0.1:1/", store="memory:")
