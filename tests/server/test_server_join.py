"""Joining a live run from a stock client: the join stream, a retried POST, a reload.

The official ``@ag-ui/client`` ``HttpAgent`` (the TypeScript oracle, under node)
is the client: it never sends ``Last-Event-ID``, so a client that lost its
connection or its page must be given a stream it accepts from a cold start.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from agui_pipes import Consumer
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, Gateway, agent_routes
from agui_pipes.transformers import Redact
from tests._durable_http import events as _events
from tests._durable_http import get_frames
from tests._servers import serve, wait_until
from tests._store_backends import BACKENDS, redis_url, store_url_for

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

USER = {"id": "u-1", "role": "user", "content": "A weekend in Porto"}


class Planner:
    """State, a step, a tool call and a text message, held open at a gate mid-text."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}

    def gate(self, run_id: str) -> threading.Event:
        return self.gates.setdefault(run_id, threading.Event())

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        gate = self.gate(ctx.run_id)
        ctx.set_state({"city": "Porto", "days": []})
        ctx.publish_state()
        with ctx.step("plan"):
            with ctx.tool_call("weather") as call:
                call.args('{"city": ')
                call.args('"Porto"}')
            with ctx.message() as message:
                for n in range(6):
                    message.delta(f"day{n} ")
                while not gate.is_set():  # noqa: ASYNC110 - set from the test's thread
                    await anyio.sleep(0.005)
                ctx.update_state(lambda s: {**s, "days": ["Sat", "Sun"]})
                ctx.publish_state()
                for n in range(6):
                    message.delta(f"more{n} ")
        return RunOutcome.success()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def _app(agent: Any, store: str) -> tuple[Starlette, AgentEndpoint]:
    routes = agent_routes("/agent", agent, store=store, detach_grace=10.0, keepalive=None)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    return Starlette(routes=routes, lifespan=endpoint.lifespan), endpoint


def _readers(endpoint: AgentEndpoint, run_id: str) -> int:
    assert endpoint.durable is not None
    live = endpoint.durable.live.get(("default", run_id))
    return 0 if live is None else live.readers


async def test_a_stock_client_cut_mid_run_retries_its_post_and_a_fresh_tab_joins(
    store_url: str, ts_oracle: Any
) -> None:
    agent = Planner()
    app, endpoint = _app(agent.run, store_url)
    with serve(app) as server:
        url = f"{server.url}/agent"
        stock = {"threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}
        # The first POST is cut by its own client (abortRun) while the agent is held.
        (cut,) = await anyio.to_thread.run_sync(
            ts_oracle, [{**stock, "url": url, "abortAfterEvents": 5}]
        )
        assert len(cut["events"]) >= 5  # delivered in batches: at least the 5 asked for
        assert "RUN_FINISHED" not in [event["type"] for event in cut["events"]]
        retried: list[Any] = []
        joined: list[Any] = []

        async def retry() -> None:  # the same HttpAgent call again: same runId, same body
            retried.extend(await anyio.to_thread.run_sync(ts_oracle, [{**stock, "url": url}]))

        async def fresh_tab() -> None:  # nothing but the thread id, as a reloaded page has
            case = {"url": f"{url}/threads/t-1?join=1", "method": "GET", "threadId": "t-1"}
            joined.extend(await anyio.to_thread.run_sync(ts_oracle, [case]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(retry)
            tg.start_soon(fresh_tab)
            # Two node processes start: on a loaded machine that alone takes seconds.
            await wait_until(lambda: _readers(endpoint, "r-1") == 2, 90, "both readers")
            agent.gate("r-1").set()
        # A client that watched from the start: the stored log replayed in full.
        (watcher,) = await anyio.to_thread.run_sync(
            ts_oracle, [{**stock, "url": f"{url}/runs/r-1", "method": "GET"}]
        )
        assert watcher["outcome"] == "completed", watcher["error"]
        assert watcher["messages"][0] == USER and len(watcher["messages"]) >= 2
        assert watcher["state"] == {"city": "Porto", "days": ["Sat", "Sun"]}
        for name, result in (("retried", retried[0]), ("joined", joined[0])):
            assert result["outcome"] == "completed", result["error"]
            assert result["messages"] == watcher["messages"], name
            assert result["state"] == watcher["state"]
        # One run, not two: the retry did not start the agent again.
        assert list(agent.gates) == ["r-1"]


async def test_join_of_a_run_after_its_end_is_the_whole_run_in_short(store_url: str) -> None:
    agent = Planner()
    agent.gate("r-1").set()
    app, _ = _app(agent.run, store_url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            body = {"threadId": "t-1", "runId": "r-1", "messages": [USER]}
            response = await client.post(
                "/agent", json=body, headers={"accept": "text/event-stream"}
            )
            assert response.status_code == 200
            status, whole, _ = await get_frames(client, "/agent/runs/r-1")
            status, joined, _ = await get_frames(client, "/agent/runs/r-1?join=1")
            assert status == 200
            assert len(joined) < len(whole)
            # Only the last frame carries an id: the id of the run's last entry.
            assert [i for i, _ in joined] == [None] * (len(joined) - 1) + [whole[-1][0]]
            assert _fold(_events(joined)) == _fold(_events(whole))


async def test_a_join_at_every_point_of_a_live_run_folds_like_the_run(store_url: str) -> None:
    """Joins taken while the run is held, then read to the end: all fold alike."""
    agent = Planner()
    app, endpoint = _app(agent.run, store_url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            body = {"threadId": "t-1", "runId": "r-1", "messages": [USER]}
            results: list[Any] = []

            async def post() -> None:
                async with client.stream(
                    "POST", "/agent", json=body, headers={"accept": "text/event-stream"}
                ) as response:
                    await response.aread()

            async def join() -> None:
                status, frames, error = await get_frames(client, "/agent/runs/r-1?join=1")
                assert status == 200, error
                results.append(_fold(_events(frames)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(post)
                await wait_until(
                    lambda: (
                        _readers(endpoint, "r-1") == 0
                        and bool(endpoint.durable and endpoint.durable.live)
                    ),
                    20,
                    "the run",
                )
                for _ in range(3):
                    tg.start_soon(join)
                await wait_until(lambda: _readers(endpoint, "r-1") == 3, 90, "three joiners")
                agent.gate("r-1").set()
            _, whole, _ = await get_frames(client, "/agent/runs/r-1")
            expected = _fold(_events(whole))
            assert results == [expected] * 3


async def test_capabilities_say_what_the_server_offers(tmp_path: Path) -> None:
    with_store, _ = _app(Planner().run, f"sqlite:///{tmp_path / 'x.db'}")
    without = Starlette(routes=agent_routes("/agent", Planner().run))
    with serve(with_store) as server, serve(without) as plain:
        async with httpx.AsyncClient(timeout=10) as client:
            durable = (await client.get(f"{server.url}/agent/capabilities")).json()
            bare = (await client.get(f"{plain.url}/agent/capabilities")).json()
    assert durable["transport"] == {"streaming": True, "resumable": True}
    ours = durable["custom"]["aguiPipes"]
    assert ours["routes"]["join"] == "GET runs/{runId}?join=1"
    assert ours["joinThreadProps"] == {"aguiPipes": {"join": "thread"}}
    assert bare["transport"] == {"streaming": True, "resumable": False}
    assert bare["custom"]["aguiPipes"]["routes"] == {}


async def test_a_post_with_the_join_flag_takes_up_the_threads_live_run(
    store_url: str, ts_oracle: Any
) -> None:
    agent = Planner()
    app, endpoint = _app(agent.run, store_url)
    with serve(app) as server:
        url = f"{server.url}/agent"
        stock = {"threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}
        await anyio.to_thread.run_sync(ts_oracle, [{**stock, "url": url, "abortAfterEvents": 3}])
        reloaded: list[Any] = []

        async def reload() -> None:  # a new page: a fresh HttpAgent, a new runId, the flag
            case = {
                "url": url,
                "threadId": "t-1",
                "runId": "page-load",
                "forwardedProps": {"aguiPipes": {"join": "thread"}},
            }
            reloaded.extend(await anyio.to_thread.run_sync(ts_oracle, [case]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reload)
            await wait_until(lambda: _readers(endpoint, "r-1") == 1, 90, "the reloaded page")
            agent.gate("r-1").set()
        (watcher,) = await anyio.to_thread.run_sync(
            ts_oracle, [{**stock, "url": f"{url}/runs/r-1", "method": "GET"}]
        )
        assert reloaded[0]["outcome"] == "completed", reloaded[0]["error"]
        assert reloaded[0]["messages"] == watcher["messages"]
        assert reloaded[0]["state"] == watcher["state"]
        assert list(agent.gates) == ["r-1"]  # the flag started no run


def _fold(events: list[Any]) -> tuple[Any, Any, Any]:
    consumer = Consumer()
    for event in events:
        consumer.push(event)
    result = consumer.finish()
    return result.messages, result.state, result.outcome


@pytest.mark.parametrize("chain", [None, "redact"], ids=["relay", "apply"])
async def test_through_the_gateway_a_retried_post_and_a_fresh_tab_join_the_run(
    store_url: str, ts_oracle: Any, chain: str | None
) -> None:
    agent = Planner()
    upstream = Starlette(routes=agent_routes("/agent", agent.run, keepalive=None))
    with serve(upstream) as up:
        gateway = Gateway(
            f"{up.url}/agent",
            chain=None if chain is None else (lambda: Redact(patterns=["Lisbon"])),
            store=store_url,
            detach_grace=10.0,
            keepalive=None,
        )
        app = Starlette(routes=gateway.routes("/chat"), lifespan=gateway.lifespan)
        with serve(app) as server:
            url = f"{server.url}/chat"
            stock = {"threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}
            (cut,) = await anyio.to_thread.run_sync(
                ts_oracle, [{**stock, "url": url, "abortAfterEvents": 5}]
            )
            assert "RUN_FINISHED" not in [event["type"] for event in cut["events"]]
            retried: list[Any] = []
            joined: list[Any] = []

            async def retry() -> None:
                retried.extend(await anyio.to_thread.run_sync(ts_oracle, [{**stock, "url": url}]))

            async def fresh_tab() -> None:
                case = {"url": f"{url}/runs/r-1?join=1", "method": "GET", "threadId": "t-1"}
                joined.extend(await anyio.to_thread.run_sync(ts_oracle, [case]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(retry)
                tg.start_soon(fresh_tab)
                await wait_until(lambda: _gateway_readers(gateway, "r-1") == 2, 90, "readers")
                agent.gate("r-1").set()
            (watcher,) = await anyio.to_thread.run_sync(
                ts_oracle, [{**stock, "url": f"{url}/runs/r-1", "method": "GET"}]
            )
    assert watcher["outcome"] == "completed", watcher["error"]
    for name, result in (("retried", retried[0]), ("joined", joined[0])):
        assert result["outcome"] == "completed", (name, result["error"])
        assert result["messages"] == watcher["messages"], name
        assert result["state"] == watcher["state"], name
    assert list(agent.gates) == ["r-1"]


def _gateway_readers(gateway: Gateway, run_id: str) -> int:
    assert gateway.durable is not None
    live = gateway.durable.live.get(("default", run_id))
    return 0 if live is None else live.readers


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
async def test_a_run_started_on_one_server_is_joined_on_another(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, ts_oracle: Any
) -> None:
    """Two servers sharing one store: the run is served by A, a fresh tab joins it on B."""
    url = store_url_for(kind, request, tmp_path)
    agent = Planner()
    app_a, _ = _app(agent.run, url)
    app_b, _ = _app(agent.run, url)
    with serve(app_a) as a, serve(app_b) as b:
        stock = {"threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}
        await anyio.to_thread.run_sync(
            ts_oracle, [{**stock, "url": f"{a.url}/agent", "abortAfterEvents": 5}]
        )
        arrived = anyio.Event()
        joined: list[Any] = []

        async def fresh_tab() -> None:
            async with httpx.AsyncClient(base_url=b.url, timeout=30) as client:
                status, frames, error = await get_frames(
                    client, "/agent/threads/t-1?join=1", arrived=arrived
                )
            assert status == 200, error
            joined.append(frames)

        async with anyio.create_task_group() as tg:
            tg.start_soon(fresh_tab)
            await arrived.wait()  # B is following the run A serves
            agent.gate("r-1").set()
        (watcher,) = await anyio.to_thread.run_sync(
            ts_oracle, [{**stock, "url": f"{a.url}/agent/runs/r-1", "method": "GET"}]
        )
    assert watcher["outcome"] == "completed", watcher["error"]
    messages, state, outcome = _fold(_events(joined[0]))
    assert outcome == "success"
    assert messages == watcher["messages"]
    assert state == watcher["state"]
    assert list(agent.gates) == ["r-1"]
