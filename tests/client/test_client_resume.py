"""``Client.resume`` and ``SyncClient`` against a real durable endpoint (uvicorn, a store).

``resume`` is what a client process that restarted does: it has the run's id
and perhaps the last id it saw, and none of its earlier state. Read from the
start, the run is verified and folded whole; read after an id, only what
follows is yielded, with the ids still checked. ``SyncClient`` is the same
client for code without an event loop.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from ag_ui.core import EventType
from starlette.applications import Starlette

from agui_pipes.client import Client, ResumeFailed, ServerError, SyncClient
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import agent_routes
from tests._servers import run_input, serve


class Talker:
    """Streams ``deltas`` deltas; while ``gate`` is unset it waits after the first five."""

    def __init__(self, deltas: int = 20) -> None:
        self.deltas = deltas
        self.gate = threading.Event()
        self.gate.set()

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        with ctx.message() as message:
            for n in range(self.deltas):
                message.delta(f"w{n} ")
                while n == 5 and not self.gate.is_set():  # noqa: ASYNC110 - set by the test's thread
                    await anyio.sleep(0.01)
        return RunOutcome.success()

    def text(self) -> str:
        return "".join(f"w{n} " for n in range(self.deltas))


def _app(agent: Talker) -> Starlette:
    routes = agent_routes("/agent", agent.run, store="memory:", detach_grace=10, keepalive=None)
    return Starlette(routes=routes, lifespan=routes[0].endpoint.lifespan)


@pytest.mark.anyio
async def test_a_run_picked_up_by_id_from_its_start_and_after_an_id() -> None:
    agent = Talker()
    with serve(_app(agent)) as server:
        url = f"{server.url}/agent"
        async with Client() as client:
            async with client.run(url, run_input("r1")) as events:
                whole = [event async for event in events]
                ids_seen = events.last_event_id
            assert ids_seen.endswith(":r1:" + str(len(whole)))
            # A new process with only the run id: the whole run, verified.
            async with client.resume(url, "r1") as events:
                again = [event async for event in events]
                result = events.result()
            assert again == whole and result.messages[-1]["content"] == agent.text()
            # With the id of the 4th frame kept: the events after it only,
            # and (verifying) the fold of the whole run.
            fourth = ids_seen.rsplit(":", 1)[0] + ":4"
            async with client.resume(url, "r1", last_event_id=fourth) as events:
                tail = [event async for event in events]
                result = events.result()
            assert tail == whole[4:] and result.messages[-1]["content"] == agent.text()
            async with client.resume(url, "r1", last_event_id=fourth, verify=False) as events:
                raw_tail = [event async for event in events]
            assert raw_tail == whole[4:] and events.last_event_id == ids_seen
            # The last id of an ended run: nothing more to come, a whole fold.
            async with client.resume(url, "r1", last_event_id=ids_seen) as events:
                assert [event async for event in events] == []
                assert events.result().outcome == "success"
            async with client.resume(url, "r1", last_event_id=ids_seen, verify=False) as events:
                assert [event async for event in events] == []
                assert events.reconnects == 0


@pytest.mark.anyio
async def test_resume_refuses_ids_that_do_not_name_a_place_in_the_run() -> None:
    agent = Talker(deltas=3)
    with serve(_app(agent)) as server:
        url = f"{server.url}/agent"
        async with Client() as client:
            async with client.run(url, run_input("r2")) as events:
                [_ async for _ in events]
                last = events.last_event_id
            epoch = last.split(":", 1)[0]
            with pytest.raises(ValueError, match="belongs to run 'other'"):
                async with client.resume(url, "r2", last_event_id=f"{epoch}:other:1"):
                    pass
            with pytest.raises(ResumeFailed, match="past the end"):
                async with client.resume(url, "r2", last_event_id=f"{epoch}:r2:999") as events:
                    [_ async for _ in events]
            with pytest.raises(ResumeFailed, match="another store epoch"):
                async with client.resume(url, "r2", last_event_id="old:r2:2") as events:
                    [_ async for _ in events]
            with pytest.raises(ServerError) as caught:  # the server refuses it itself
                async with client.resume(
                    url, "r2", last_event_id="old:r2:2", verify=False
                ) as events:
                    [_ async for _ in events]
            assert caught.value.status == 409
            with pytest.raises(ServerError) as caught:
                async with client.resume(url, "no-such-run") as events:
                    [_ async for _ in events]
            assert caught.value.status == 404 and caught.value.code == "not_found"


@pytest.mark.anyio
async def test_a_live_run_is_followed_by_id_to_its_end() -> None:
    agent = Talker()
    agent.gate.clear()
    with serve(_app(agent)) as server:
        url = f"{server.url}/agent"
        with anyio.fail_after(20):
            await _follow(url, agent)


async def _follow(url: str, agent: Talker) -> None:
    async with Client() as client:
        seen: list[Any] = []
        async with anyio.create_task_group() as group:

            async def first_client() -> None:
                async with client.run(url, run_input("r3")) as events:
                    async for event in events:
                        seen.append(event)

            group.start_soon(first_client)
            while len(seen) < 1:  # noqa: ASYNC110 - the other task fills it
                await anyio.sleep(0.01)
            async with client.resume(url, "r3") as events:
                followed = []
                async for event in events:
                    followed.append(event)
                    if len(followed) == 5:
                        agent.gate.set()  # the run goes on while it is followed
            assert followed[-1].type is EventType.RUN_FINISHED
        assert followed == seen


def test_the_sync_client_from_plain_code() -> None:
    agent = Talker(deltas=5)
    with serve(_app(agent)) as server, SyncClient() as client:
        url = f"{server.url}/agent"
        with client.run(url, run_input("s1")) as events:
            got = list(events)
            result = events.result()
        assert got[0].type is EventType.RUN_STARTED and got[-1].type is EventType.RUN_FINISHED
        assert result.messages[-1]["content"] == agent.text()
        with client.resume(url, "s1", last_event_id=events.last_event_id) as again:
            assert list(again) == []
        assert client.history(url, "thread-1").result.messages == result.messages
        with pytest.raises(ServerError) as caught:
            client.stop(url, "s1")
        assert caught.value.code == "run_ended"
    with SyncClient(backend="trio") as client:
        # An id that is none of the server's, against no server: checked before sending.
        resumed = client.resume("http://127.0.0.1:9/agent", "s1", last_event_id="e:s1:x")
        with pytest.raises(ValueError, match="not an agui"), resumed:
            pass


def test_the_sync_client_refuses_to_block_a_running_loop() -> None:
    async def inside() -> None:
        with SyncClient() as client:
            client.history("http://127.0.0.1:9/agent", "t")

    with pytest.raises(RuntimeError, match="inside a running event loop"):
        anyio.run(inside)
