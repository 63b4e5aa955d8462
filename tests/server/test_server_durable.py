"""Durable runs on the agent endpoint: real uvicorn servers, httpx clients, real stores.

A client cut at a random event and resumed with ``Last-Event-ID`` must get
exactly what it missed (same ids, no duplicate, no gap), also while the run
is still producing; a client that leaves and never comes back has its run
cancelled after the detach grace; a stop cancels at once; bad ids get
400/404/409; a restarted SQLite server gives the thread's history.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from ag_ui.core import BaseEvent, EventType, RunErrorEvent, TextMessageContentEvent
from starlette.applications import Starlette

from agui_pipes import AsyncStreamTransformer, fold
from agui_pipes.demo import DemoAgent, demo_input
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, agent_route, agent_routes, build_app
from agui_pipes.store import MemoryEventLog, open_store
from tests._durable_http import HEADERS, Frames, Gated
from tests._durable_http import events as _events
from tests._durable_http import get_frames as _get
from tests._durable_http import read_frames as _read
from tests._durable_http import seqs as _seqs
from tests._durable_http import take_frames as _frames
from tests._servers import run_input, serve, wait_until
from tests._store_backends import BACKENDS, redis_url, store_url_for
from tests._xproc_server import server_process

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for


async def _post(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], cut: int | None = None
) -> list[tuple[str | None, bytes]]:
    async with client.stream("POST", url, content=json.dumps(body), headers=HEADERS) as response:
        assert response.status_code == 200, await response.aread()
        return await _read(response, cut)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def _app(agent: Any, store: str, grace: float = 5.0) -> tuple[Starlette, AgentEndpoint]:
    routes = agent_routes("/agent", agent, store=store, detach_grace=grace, keepalive=None)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    return Starlette(routes=routes, lifespan=endpoint.lifespan), endpoint


def _following(endpoint: AgentEndpoint, run_id: str) -> bool:
    """The run is live here, its POSTing client has left and one resume reader follows it."""
    assert endpoint.durable is not None
    live = endpoint.durable.live.get(("default", run_id))
    return live is not None and not live.client_attached and live.readers == 1


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_cut_and_resume_while_producing_gives_exactly_the_missed_events(
    store_url: str, seed: int
) -> None:
    agent = Gated()
    app, endpoint = _app(agent.run, store_url)
    cut = random.Random(seed).randint(1, agent.before + 2)  # before the gate: still producing
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            whole = await _post_and_open_gate(client, agent, "whole")
            got = await _post(client, "/agent", run_input("run-cut"), cut=cut)
            assert len(got) == cut
            assert _seqs(got) == list(range(1, cut + 1))
            # The client is gone; the run waits at its gate, live, and takes the resume.
            resumed: list[tuple[str | None, bytes]] = []

            async def resume() -> None:
                status, frames, body = await _get(client, "/agent/runs/run-cut", got[-1][0])
                assert status == 200, body
                resumed.extend(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(resume)
                await wait_until(lambda: _following(endpoint, "run-cut"), 10, "the resume")
                agent.gate("run-cut").set()
            joined = got + resumed
            seqs = _seqs(joined)
            assert seqs == list(range(1, len(joined) + 1)), "a gap or a duplicate"
            assert [e.type for e in _events(joined)] == [e.type for e in _events(whole)]
            assert _events(joined)[-1].type is EventType.RUN_FINISHED
            # The log replays the same bytes, ids included.
            status, replay, _ = await _get(client, "/agent/runs/run-cut")
            assert status == 200 and replay == joined
            # Resuming from the last id of an ended run gives nothing more, cleanly.
            status, rest, _ = await _get(client, "/agent/runs/run-cut", joined[-1][0])
            assert status == 200 and rest == []


async def _post_and_open_gate(
    client: httpx.AsyncClient, agent: Gated, run_id: str
) -> list[tuple[str | None, bytes]]:
    agent.gate(run_id).set()
    frames = await _post(client, "/agent", run_input(run_id))
    assert all(event_id is not None for event_id, _ in frames)
    return frames


async def test_cut_after_the_run_ended_resumes_from_the_log(store_url: str) -> None:
    agent = Gated(before=5, after=5)
    app, _ = _app(agent.run, store_url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            whole = await _post_and_open_gate(client, agent, "r1")
            for cut in (1, len(whole) // 2, len(whole) - 1):
                status, rest, _ = await _get(client, "/agent/runs/r1", whole[cut - 1][0])
                assert status == 200
                assert whole[:cut] + rest == whole
            # ?after= for clients that cannot set headers
            response = await client.get(f"/agent/runs/r1?after={whole[2][0]}")
            buffer = bytearray(response.content)
            assert _frames(buffer) == whole[3:]


async def test_disconnect_without_reconnect_cancels_after_the_grace(store_url: str) -> None:
    agent = Gated(before=3)
    grace = 0.4
    app, endpoint = _app(agent.run, store_url, grace=grace)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            got = await _post(client, "/agent", run_input("left"), cut=2)
            left = time.monotonic()
            assert endpoint.durable is not None
            await wait_until(lambda: "left" in agent.stopped, 10, "the run was cancelled")
            # not before the grace: the client had left a grace before the run stopped
            assert agent.stopped["left"] - left >= grace * 0.9
            gone = ("default", "left")
            await wait_until(lambda: gone not in endpoint.durable.live, 10, "run ended")
            status, frames, _ = await _get(client, "/agent/runs/left")
            assert status == 200
            assert frames[:2] == got
            last = _events(frames)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
            assert "detach grace" in last.message
            assert _seqs(frames) == list(range(1, len(frames) + 1))


async def test_a_resume_reader_holds_the_run_past_the_grace() -> None:
    agent = Gated(before=3, after=4)
    grace = 0.3
    app, endpoint = _app(agent.run, "memory:", grace=grace)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            got = await _post(client, "/agent", run_input("held"), cut=1)
            resumed: list[tuple[str | None, bytes]] = []

            async def resume() -> None:
                status, frames, _ = await _get(client, "/agent/runs/held", got[-1][0])
                assert status == 200
                resumed.extend(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(resume)
                await wait_until(lambda: _following(endpoint, "held"), 10, "the resume")
                # A run its client left later, with no reader: once its grace cancelled
                # it, the grace of "held" has run out too; only the reader holds "held".
                await _post(client, "/agent", run_input("unheld", threadId="thread-2"), cut=1)
                await wait_until(lambda: "unheld" in agent.stopped, 10, "the grace cancel")
                assert "held" not in agent.stopped
                agent.gate("held").set()
            assert _events(resumed)[-1].type is EventType.RUN_FINISHED
            assert _seqs(got + resumed) == list(range(1, len(resumed) + 2))


async def test_without_a_store_a_disconnect_still_cancels_at_once() -> None:
    agent = Gated(before=3)
    app = Starlette(routes=[agent_route("/agent", agent.run, keepalive=None)])
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            got = await _post(client, "/agent", run_input("plain"), cut=2)
            assert all(event_id is None for event_id, _ in got)
            await wait_until(lambda: "plain" in agent.stopped, 5, "cancelled on disconnect")
            response = await client.get("/agent/runs/plain")
            assert response.status_code in (404, 405)


async def test_stop_cancels_at_once_and_the_client_sees_cancelled(store_url: str) -> None:
    agent = Gated(before=2)
    app, _ = _app(agent.run, store_url, grace=30)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            body = json.dumps(run_input("stopped"))
            async with client.stream("POST", "/agent", content=body, headers=HEADERS) as response:
                frames: list[tuple[str | None, bytes]] = []
                buffer = bytearray()
                stream = response.aiter_raw()
                while len(frames) < 3:
                    buffer += await stream.__anext__()
                    frames.extend(_frames(buffer))
                started = time.monotonic()
                stop = await client.post("/agent/runs/stopped/stop")
                assert stop.status_code == 200, stop.text
                assert stop.json() == {"runId": "stopped", "status": "cancelled"}
                assert time.monotonic() - started < 5
                async for chunk in stream:
                    buffer += chunk
                    frames.extend(_frames(buffer))
            last = _events(frames)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
            assert _seqs(frames) == list(range(1, len(frames) + 1))
            status, replay, _ = await _get(client, "/agent/runs/stopped")
            assert status == 200 and replay == frames
            again = await client.post("/agent/runs/stopped/stop")
            assert again.status_code == 409 and again.json()["error"] == "run_ended"


async def test_bad_ids_unknown_runs_and_threads(store_url: str) -> None:
    agent = Gated(before=2, after=1)
    app, _ = _app(agent.run, store_url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            one = await _post_and_open_gate(client, agent, "one")
            await _post_and_open_gate(client, agent, "two")
            status, _, body = await _get(client, "/agent/runs/one", "not an id")
            assert status == 400 and json.loads(body)["error"] == "bad_event_id"
            status, _, body = await _get(client, "/agent/runs/nope")
            assert status == 404 and "nope" in json.loads(body)["message"]
            status, _, body = await _get(client, "/agent/runs/two", one[1][0])
            assert status == 409 and "belongs to run 'one'" in json.loads(body)["message"]
            epoch = str(one[0][0]).split(":", 1)[0]
            other_epoch = ("0" if epoch[0] != "0" else "1") + epoch[1:]
            status, _, body = await _get(client, "/agent/runs/one", f"{other_epoch}:one:1")
            assert status == 409 and "epoch" in json.loads(body)["message"]
            status, _, _ = await _get(client, "/agent/runs/one", f"{epoch}:one:999")
            assert status == 409
            stop = await client.post("/agent/runs/nope/stop")
            assert stop.status_code == 404
            status, _, _ = await _get(client, "/agent/threads/no-such-thread")
            assert status == 404
            # Another request under a recorded run's id (the same one would rejoin it).
            again = await client.post(
                "/agent", content=json.dumps(run_input("one", state={"n": 1})), headers=HEADERS
            )
            assert again.status_code == 409 and again.json()["error"] == "run_exists"


async def test_thread_history_survives_a_sqlite_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    runs: list[list[BaseEvent]] = []
    with serve(build_app(agent=DemoAgent(), store=url, path="/agent")) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            for n, city in enumerate(("Lisbon", "Kyoto")):
                body = demo_input(city, thread_id="t-1", run_id=f"run-{n}")
                frames = await _post(
                    client,
                    "/agent",
                    json.loads(body.model_dump_json(by_alias=True, exclude_none=True)),
                )
                runs.append(_events(frames))
    expected = fold([event for run in runs for event in run])
    with serve(build_app(agent=DemoAgent(), store=url, path="/agent")) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            status, frames, body = await _get(client, "/agent/threads/t-1")
            assert status == 200, body
            history = _events(frames)
            assert [e.type for e in history][0] is EventType.RUN_STARTED
            assert history[-1].type is EventType.RUN_FINISHED
            got = fold(history)
            assert got.messages == expected.messages
            assert got.state == expected.state


async def test_thread_history_then_the_live_runs_tail(store_url: str) -> None:
    agent = Gated(before=3, after=2)
    app, endpoint = _app(agent.run, store_url)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            first = await _post_and_open_gate(client, agent, "done-run")
            got = await _post(client, "/agent", run_input("live-run"), cut=2)
            loaded: list[tuple[str | None, bytes]] = []

            async def load() -> None:
                status, frames, body = await _get(client, "/agent/threads/thread-1")
                assert status == 200, body
                loaded.extend(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(load)
                await wait_until(lambda: _following(endpoint, "live-run"), 10, "the load")
                agent.gate("live-run").set()
            events = _events(loaded)
            types = [e.type for e in events]
            # one history run (no ids), then the live run from its start, with its ids
            assert types[:2] == [EventType.RUN_STARTED, EventType.MESSAGES_SNAPSHOT]
            split = types.index(EventType.RUN_FINISHED) + 1
            assert all(event_id is None for event_id, _ in loaded[:split])
            tail = loaded[split:]
            assert tail[:2] == got
            assert _seqs(tail) == list(range(1, len(tail) + 1))
            assert _events(tail)[-1].type is EventType.RUN_FINISHED
            assert fold(events[:split]).messages == fold(_events(first)).messages


async def test_agent_route_with_a_store_points_to_agent_routes() -> None:
    with pytest.raises(TypeError, match="agent_routes"):
        agent_route("/agent", Gated().run, store="memory:")
    with pytest.raises(ValueError, match="detach_grace"):
        AgentEndpoint(Gated().run, store="memory:", detach_grace=-1)
    with pytest.raises(ValueError, match="owner_timeout"):
        AgentEndpoint(Gated().run, store="memory:", owner_timeout=0)
    endpoint = AgentEndpoint(Gated().run, store=MemoryEventLog(), owner_timeout=2.5)
    assert endpoint.durable is not None
    assert (await endpoint.durable.store()).owner_timeout == 2.5
    with pytest.raises(ValueError, match="sqlite"):
        AgentEndpoint(Gated().run, store="nosuch://x")


@pytest.mark.parametrize("kind", ["redis", "postgres"])
async def test_cut_on_one_server_resumed_on_another_sharing_a_store(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url_for(kind, request, tmp_path)
    agent = Gated(before=6, after=6)
    app_a, _ = _app(agent.run, url, grace=30)
    app_b, _ = _app(agent.run, url, grace=30)
    with serve(app_a) as a, serve(app_b) as b:
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=20) as to_a,
            httpx.AsyncClient(base_url=b.url, timeout=20) as to_b,
        ):
            got = await _post(to_a, "/agent", run_input("shared"), cut=4)
            resumed: list[tuple[str | None, bytes]] = []
            following = anyio.Event()

            async def resume() -> None:
                status, frames, body = await _get(
                    to_b, "/agent/runs/shared", got[-1][0], arrived=following
                )
                assert status == 200, body
                resumed.extend(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(resume)
                # B has sent a frame the run made before its gate: B follows the live run
                with anyio.fail_after(10):
                    await following.wait()
                agent.gate("shared").set()
            joined = got + resumed
            assert _seqs(joined) == list(range(1, len(joined) + 1))
            assert _events(joined)[-1].type is EventType.RUN_FINISHED
            status, replay, _ = await _get(to_a, "/agent/runs/shared")
            assert status == 200 and replay == joined
            # B lists the thread's history from the shared store: the run A made
            status, history, body = await _get(to_b, "/agent/threads/thread-1")
            assert status == 200, body
            told = _events(history)
            assert told[0].type is EventType.RUN_STARTED and told[-1].type is EventType.RUN_FINISHED
            assert fold(told).messages == fold(_events(joined)).messages


class _Peer:
    """A scripted ASGI client: one request; disconnects once ``cut`` frames arrived."""

    def __init__(self, body: bytes = b"", cut: int | None = None) -> None:
        self._body: bytes | None = body
        self._cut = cut
        self._gone = anyio.Event()
        self.status: int | None = None
        self.body = bytearray()
        self.frames: list[tuple[str | None, bytes]] = []

    async def receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self._gone.is_set():
            return  # what uvicorn does with a send after the client left
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        self.body += message.get("body", b"")
        self.frames.extend(_frames(self.body))
        if self._cut is not None and len(self.frames) >= self._cut:
            del self.frames[self._cut :]
            self._gone.set()


def _scope(method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers or [],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


async def test_detach_and_resume_in_process_on_asyncio_and_trio() -> None:
    """The server side on the test's own loop (trio too): detach, resume, grace."""
    agent = Gated(before=4, after=3, pace=0)
    routes = agent_routes("/agent", agent.run, store="memory:", detach_grace=0.2, keepalive=None)
    app = Starlette(routes=routes)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    poster = _Peer(json.dumps(run_input("here")).encode(), cut=2)
    reader = _Peer()
    async with anyio.create_task_group() as tg:
        tg.start_soon(app, _scope("POST", "/agent"), poster.receive, poster.send)
        with anyio.fail_after(10):
            while len(poster.frames) < 2:  # noqa: ASYNC110 - the frames come from send()
                await anyio.sleep(0.01)
        last_id = str(poster.frames[-1][0]).encode()
        tg.start_soon(
            app,
            _scope("GET", "/agent/runs/here", [(b"last-event-id", last_id)]),
            reader.receive,
            reader.send,
        )
        with anyio.fail_after(10):
            while not _following(endpoint, "here"):  # noqa: ASYNC110 - set by the app
                await anyio.sleep(0.01)
        # Without any reader, the same endpoint cancels after its grace: a run left
        # after "here" was, so once it is cancelled the grace of "here" ran out too.
        leaver = _Peer(json.dumps(run_input("gone", threadId="thread-2")).encode(), cut=1)
        with anyio.fail_after(10):
            await app(_scope("POST", "/agent"), leaver.receive, leaver.send)
        assert "gone" in agent.stopped
        assert "here" not in agent.stopped  # the reader holds the run past the grace
        agent.gate("here").set()
    joined = poster.frames + reader.frames
    assert _seqs(joined) == list(range(1, len(joined) + 1))
    assert _events(joined)[-1].type is EventType.RUN_FINISHED
    tail = _Peer()
    await app(_scope("GET", "/agent/runs/gone"), tail.receive, tail.send)
    last = _events(tail.frames)[-1]
    assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
    await endpoint.aclose()


class _Shout(AsyncStreamTransformer):
    """An async stage: the chain then runs over the driver's events, not in a sink."""

    async def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        await anyio.lowlevel.checkpoint()
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta.upper()}),)
        return (event,)


async def test_an_async_chain_is_recorded_resumed_and_stopped() -> None:
    agent = Gated(before=5, after=3)
    routes = agent_routes(
        "/agent",
        agent.run,
        chain=lambda: _Shout(),
        store="memory:",
        detach_grace=30,
        keepalive=None,
    )
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    app = Starlette(routes=routes, lifespan=endpoint.lifespan)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            got = await _post(client, "/agent", run_input("chained"), cut=3)
            resumed: list[tuple[str | None, bytes]] = []

            async def resume() -> None:
                status, frames, body = await _get(client, "/agent/runs/chained", got[-1][0])
                assert status == 200, body
                resumed.extend(frames)

            async with anyio.create_task_group() as tg:
                tg.start_soon(resume)
                await wait_until(lambda: _following(endpoint, "chained"), 10, "the resume")
                agent.gate("chained").set()
            joined = _events(got + resumed)
            assert _seqs(got + resumed) == list(range(1, len(joined) + 1))
            assert joined[-1].type is EventType.RUN_FINISHED
            deltas = [e.delta for e in joined if isinstance(e, TextMessageContentEvent)]
            assert deltas and all(d == d.upper() for d in deltas)
            # stop, on the async chain path: the agent hangs at its gate
            got = await _post(client, "/agent", run_input("chained-stop"), cut=2)
            stop = await client.post("/agent/runs/chained-stop/stop")
            assert stop.status_code == 200 and stop.json()["status"] == "cancelled"
            status, frames, _ = await _get(client, "/agent/runs/chained-stop")
            assert status == 200 and frames[:2] == got
            last = _events(frames)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"


class _HeldLog(MemoryEventLog):
    """A memory log whose appends of events wait until ``release()``: a store falling behind."""

    def __init__(self) -> None:
        super().__init__()
        self.released = False

    async def append(
        self, thread_id: str, run_id: str, payloads: Sequence[bytes], *, scope: str = "default"
    ) -> list[int]:
        while payloads and not self.released:  # noqa: ASYNC110 - released by the test task
            await anyio.sleep(0.01)
        return await super().append(thread_id, run_id, payloads, scope=scope)


async def test_a_store_falling_behind_holds_the_agent_and_keeps_the_order() -> None:
    """More events than the recorder queues (10,000) while the store takes none."""
    count = 10_300
    # The recorder queues 10,000 events: RUN_STARTED, TEXT_MESSAGE_START and 9,998
    # deltas. The agent's await after delta 9,999 is the first one it must be held at.
    held_at = 9_999
    at_the_hold = anyio.Event()
    released_when_resumed: dict[int, bool] = {}

    async def burst(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.message() as message:
            for n in range(count):
                message.delta(f"{n} ")
                if n % 1000 == 999:
                    if n == held_at:
                        at_the_hold.set()
                    await anyio.lowlevel.checkpoint()
                    released_when_resumed[n] = log.released
        return RunOutcome.success()

    async with _HeldLog() as log:
        routes = agent_routes("/agent", burst, store=log, keepalive=None)
        app = Starlette(routes=routes)
        poster = _Peer(json.dumps(run_input("burst")).encode())
        async with anyio.create_task_group() as tg:
            tg.start_soon(app, _scope("POST", "/agent"), poster.receive, poster.send)
            with anyio.fail_after(30):
                await at_the_hold.wait()
                while len(poster.frames) < 10_000:  # noqa: ASYNC110 - frames come from send()
                    await anyio.sleep(0.01)
                # Every other task waits: the agent's await has completed, so the agent
                # is either held there or has gone on (and recorded the log as held).
                await anyio.wait_all_tasks_blocked()
            # the recorder's queue is full and the store took nothing: no frame beyond it
            assert len(poster.frames) == 10_000
            assert held_at not in released_when_resumed
            log.released = True
        # the agent stayed at that await until the store took events (it is not timed)
        assert released_when_resumed[held_at] is True
        assert not any(released_when_resumed[n] for n in range(999, held_at, 1000))
        assert len(poster.frames) == count + 4
        assert _seqs(poster.frames) == list(range(1, count + 5))
        deltas = [e.delta for e in _events(poster.frames) if isinstance(e, TextMessageContentEvent)]
        assert deltas == [f"{n} " for n in range(count)]
        stored = await log.read("burst")
        assert [data for _, data in stored] == [data for _, data in poster.frames]


async def test_a_run_cut_by_a_server_shutdown_is_logged_as_cancelled(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    agent = Gated(before=2)
    app, _ = _app(agent.run, url, grace=30)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            got = await _post(client, "/agent", run_input("shut"), cut=2)
    # uvicorn gave up on the detached run at shutdown and cancelled it
    app, _ = _app(agent.run, url, grace=30)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            status, frames, body = await _get(client, "/agent/runs/shut")
            assert status == 200, body
            assert frames[:2] == got
            last = _events(frames)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
            assert _seqs(frames) == list(range(1, len(frames) + 1))


async def test_a_broken_run_is_410_and_left_out_of_the_history() -> None:
    agent = Gated(before=2, after=1, pace=0)
    async with MemoryEventLog() as log:
        app = Starlette(routes=agent_routes("/agent", agent.run, store=log, keepalive=None))
        for run_id in ("kept", "lost"):
            agent.gate(run_id).set()
            poster = _Peer(json.dumps(run_input(run_id)).encode())
            await app(_scope("POST", "/agent"), poster.receive, poster.send)
            assert _events(poster.frames)[-1].type is EventType.RUN_FINISHED
        await log.mark_broken("lost", "the disk filled up")
        reader = _Peer()
        await app(_scope("GET", "/agent/runs/lost"), reader.receive, reader.send)
        assert reader.status == 410
        assert json.loads(bytes(reader.body))["error"] == "run_broken"
        assert "the disk filled up" in json.loads(bytes(reader.body))["message"]
        history = _Peer()
        await app(_scope("GET", "/agent/threads/thread-1"), history.receive, history.send)
        assert history.status == 200
        events = _events(history.frames)
        assert events[0].run_id == "history:kept"  # type: ignore[attr-defined]
        assert events[-1].type is EventType.RUN_FINISHED


# -- several server processes sharing one store ------------------------------------------


@pytest.fixture(params=["redis", "sqlite", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


async def _follow_for(
    client: httpx.AsyncClient, url: str, last_id: str | None, count: int
) -> tuple[Frames, bool]:
    """Follow ``url`` for ``count`` frames: the frames, and whether the stream ended first."""
    got: Frames = []
    headers = {} if last_id is None else {"last-event-id": last_id}
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        buffer = bytearray()
        async for chunk in response.aiter_raw():
            buffer += chunk
            got.extend(_frames(buffer))
            if len(got) >= count:
                return got[:count], False
    return got, True


async def _wait_for_the_end(store_url: str, run_id: str, within: float) -> None:
    """Poll the shared store (it does not follow the run, so it holds nothing) until it ended."""
    async with open_store(store_url) as store:
        with anyio.fail_after(within):
            while True:
                record = await store.run(run_id)
                if record is not None and record.status.ended:
                    return
                await anyio.sleep(0.05)


async def test_a_reader_on_another_process_holds_the_run_past_the_grace(
    shared_store: str,
) -> None:
    grace = 1.0
    with (
        server_process(shared_store, grace, 5.0) as (a, _),
        server_process(shared_store, grace, 5.0) as (b, _),
    ):
        async with (
            httpx.AsyncClient(base_url=a, timeout=20) as to_a,
            httpx.AsyncClient(base_url=b, timeout=20) as to_b,
        ):
            got = await _post(to_a, "/agent", run_input("held"), cut=3)
            # B follows while the run makes three graces' worth of deltas (one per 20 ms
            # at most): A must not cancel the run meanwhile.
            three_graces = int(3 * grace / 0.02) + 10
            with anyio.fail_after(30):
                followed, ended = await _follow_for(
                    to_b, "/agent/runs/held", got[-1][0], three_graces
                )
            assert not ended, _events(followed)[-1:]
            assert _seqs(got + followed) == list(range(1, len(got) + len(followed) + 1))
            # The reader left: A cancels the run one grace after its last mark. (Any
            # reader holds the run, so look only once the store says it ended.)
            await _wait_for_the_end(shared_store, "held", 20)
            with anyio.fail_after(20):
                status, whole, body = await _get(to_b, "/agent/runs/held")
            assert status == 200, body
            # the run went on after the reader left (one delta per 20 ms at most)
            assert len(whole) > len(got) + len(followed) + 10
            last = _events(whole)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
            assert "detach grace" in last.message  # the token carries the reason
            assert whole[: len(got) + len(followed)] == got + followed


async def test_a_stop_sent_to_another_process_stops_the_run(shared_store: str) -> None:
    with (
        server_process(shared_store, 30.0, 5.0) as (a, _),
        server_process(shared_store, 30.0, 5.0) as (b, _),
    ):
        async with (
            httpx.AsyncClient(base_url=a, timeout=20) as to_a,
            httpx.AsyncClient(base_url=b, timeout=20) as to_b,
        ):
            live: Frames = []

            async def watch() -> None:
                async with to_a.stream(
                    "POST", "/agent", content=json.dumps(run_input("stopped")), headers=HEADERS
                ) as response:
                    live.extend(await _read(response))

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(watch)
                    while True:  # the run is in the store once its first events are
                        probe = await to_b.get("/agent/runs/stopped?after=x")
                        if probe.status_code != 404:
                            break
                        await anyio.sleep(0.05)
                    stop = await to_b.post("/agent/runs/stopped/stop")
                    assert stop.status_code == 200, stop.text
                    assert stop.json() == {"runId": "stopped", "status": "cancelled"}
            last = _events(live)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
            assert "POST runs/{runId}/stop" in last.message
            again = await to_b.post("/agent/runs/stopped/stop")
            assert again.status_code == 409 and again.json()["error"] == "run_ended"


async def test_a_follower_of_a_killed_owner_ends_with_run_lost(shared_store: str) -> None:
    owner_timeout = 1.5
    with (
        server_process(shared_store, 30.0, owner_timeout) as (a, process),
        server_process(shared_store, 30.0, owner_timeout) as (b, _),
    ):
        async with (
            httpx.AsyncClient(base_url=a, timeout=20) as to_a,
            httpx.AsyncClient(base_url=b, timeout=20) as to_b,
        ):
            got = await _post(to_a, "/agent", run_input("doomed"), cut=3)
            followed: Frames = []
            killed = anyio.Event()
            done_at: list[float] = []

            async def follow() -> None:
                async with to_b.stream(
                    "GET", "/agent/runs/doomed", headers={"last-event-id": str(got[-1][0])}
                ) as response:
                    assert response.status_code == 200
                    buffer = bytearray()
                    async for chunk in response.aiter_raw():
                        buffer += chunk
                        followed.extend(_frames(buffer))
                        if len(followed) >= 5 and not killed.is_set():
                            process.kill()  # SIGKILL: no shutdown, no last write
                            killed.set()
                done_at.append(time.monotonic())

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    await killed.wait()
                    killed_at = time.monotonic()
            assert done_at and done_at[0] - killed_at <= owner_timeout * 2 + 5
            last = _events(followed)[-1]
            assert isinstance(last, RunErrorEvent) and last.code == "RUN_LOST", last
            assert "stopped heartbeating" in last.message
            seqs = _seqs(got + followed[:-1])
            assert seqs == list(range(1, len(seqs) + 1))  # no gap before the error
            stop = await to_b.post("/agent/runs/doomed/stop")
            assert stop.status_code == 409 and "lost" in stop.json()["message"]
            status, replay, _ = await _get(to_b, "/agent/runs/doomed")
            assert status == 200 and replay[:-1] == got + followed[:-1]
