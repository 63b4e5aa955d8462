"""A server's shutdown stops its live runs: ``stop_runs``, then ``aclose``, on the test's loop.

A run whose agent does not respond to cancellation is abandoned after the
timeout, named in the log, and the store is not closed under it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from ag_ui.core import EventType, RunErrorEvent
from starlette.applications import Starlette

from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, agent_routes
from agui_pipes.store import EventLog, MemoryEventLog, RunStatus
from tests._servers import EVENT, run_input


class _Peer:
    """A scripted ASGI client of one POST: it sends the body, then reads until the end."""

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body
        self._never = anyio.Event()
        self.body = bytearray()

    async def receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._never.wait()
        return {"type": "http.disconnect"}  # pragma: no cover - the client never leaves

    async def send(self, message: dict[str, Any]) -> None:
        self.body += message.get("body", b"")


def _scope() -> Any:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/agent",
        "raw_path": b"/agent",
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


class _Paced:
    """Streams a delta, then waits for ``release``: shielded from cancellation if ``stubborn``."""

    def __init__(self, stubborn: bool) -> None:
        self.stubborn = stubborn
        self.started = anyio.Event()
        self.release = anyio.Event()

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        with ctx.message() as message:
            message.delta("hello ")
            self.started.set()
            with anyio.CancelScope(shield=self.stubborn):
                await self.release.wait()
            message.delta("world")
        return RunOutcome.success()


def _served(agent: _Paced, store: EventLog | str = "memory:") -> tuple[Starlette, AgentEndpoint]:
    routes = agent_routes("/agent", agent.run, store=store, keepalive=None, shutdown_timeout=0.2)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    return Starlette(routes=routes), endpoint


def _last_event(peer: _Peer) -> Any:
    data = bytes(peer.body).strip().rsplit(b"data: ", 1)[1]
    return EVENT.validate_json(data)


@pytest.mark.anyio
async def test_stop_runs_ends_a_live_run_with_a_recorded_cancel() -> None:
    agent = _Paced(stubborn=False)
    app, endpoint = _served(agent)
    peer = _Peer(json.dumps(run_input("r-stop")).encode())
    async with anyio.create_task_group() as tg:
        tg.start_soon(app, _scope(), peer.receive, peer.send)
        with anyio.fail_after(10):
            await agent.started.wait()
        assert await endpoint.stop_runs() == []
    last = _last_event(peer)
    assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
    store = await _durable_store(endpoint)
    record = await store.run("r-stop")
    assert record is not None and record.status is RunStatus.CANCELLED
    await endpoint.aclose()


@pytest.mark.anyio
async def test_a_run_ignoring_cancellation_is_abandoned_and_the_store_left_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = _Paced(stubborn=True)
    app, endpoint = _served(agent)
    peer = _Peer(json.dumps(run_input("r-stubborn")).encode())
    with caplog.at_level(logging.WARNING, logger="agui_pipes.server"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(app, _scope(), peer.receive, peer.send)
            with anyio.fail_after(10):
                await agent.started.wait()
            assert await endpoint.stop_runs(0.1) == ["r-stubborn"]
            await endpoint.aclose()  # abandoned again: the store stays open under the run
            agent.release.set()  # the agent comes back: its end is still recorded
    logged = caplog.text
    assert "run r-stubborn did not end within 0.1 s" in logged
    assert "abandoned" in logged
    assert "the event log is left open" in logged
    assert "could not mark" not in logged and "is closed" not in logged
    store = await _durable_store(endpoint)
    record = await store.run("r-stubborn")
    assert record is not None and record.status.ended
    await endpoint.aclose()  # nothing live: now the store is closed


async def _durable_store(endpoint: AgentEndpoint) -> Any:
    assert endpoint.durable is not None
    return await endpoint.durable.store()


@pytest.mark.anyio
async def test_a_run_posted_during_the_shutdown_is_stopped_as_it_starts() -> None:
    agent = _Paced(stubborn=False)
    app, endpoint = _served(agent)
    assert await endpoint.stop_runs() == []  # the shutdown has begun; nothing was live
    peer = _Peer(json.dumps(run_input("r-late")).encode())
    with anyio.fail_after(10):
        await app(_scope(), peer.receive, peer.send)
    last = _last_event(peer)
    assert isinstance(last, RunErrorEvent) and last.code == "CANCELLED"
    store = await _durable_store(endpoint)
    record = await store.run("r-late")
    assert record is not None and record.status is RunStatus.CANCELLED
    await endpoint.aclose()


@pytest.mark.anyio
async def test_a_lifespan_started_again_after_a_shutdown_serves_runs() -> None:
    agent = _Paced(stubborn=False)
    agent.release.set()  # every run finishes by itself
    async with MemoryEventLog() as store:  # the caller's store: it outlives the lifespans
        app, endpoint = _served(agent, store)
        async with endpoint.lifespan(app):
            pass  # a shutdown: stop_runs (nothing live)
        async with endpoint.lifespan(app):
            peer = _Peer(json.dumps(run_input("r-again")).encode())
            with anyio.fail_after(10):
                await app(_scope(), peer.receive, peer.send)
            assert _last_event(peer).type is EventType.RUN_FINISHED


@pytest.mark.parametrize("bad", [0, -1.0, "10"])
def test_a_shutdown_timeout_that_cannot_work_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="shutdown_timeout must be a positive number of seconds"):
        AgentEndpoint(_Paced(stubborn=False).run, store="memory:", shutdown_timeout=bad)
