"""agui_pipes.client against real uvicorn servers, with real TCP cuts.

The cut is made by a small TCP proxy in the test: it forwards the first
connection's response for K bytes, then closes both sides, mid-frame — what a
dropped mobile connection or a restarted load balancer does. The client must
resume through the proxy and yield exactly the run the server logged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import EventType, TextMessageContentEvent
from anyio.abc import SocketAttribute, SocketStream
from starlette.applications import Starlette

from agui_pipes import fold
from agui_pipes.client import Client, ClientError, ResumeFailed, ServerError, run_remote
from agui_pipes.client import history as history_of
from agui_pipes.codecs import SSEDecoder
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import agent_route, agent_routes
from tests._servers import EVENT, run_input, serve

pytestmark = pytest.mark.anyio


class Talker:
    """Streams ``deltas`` deltas, ``pace`` seconds apart; ``hold`` runs wait until stopped."""

    def __init__(self, deltas: int = 40, pace: float = 0.003, hold: bool = False) -> None:
        self.deltas = deltas
        self.pace = pace
        self.hold = hold

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        with ctx.message() as message:
            for n in range(self.deltas):
                message.delta(f"w{n} ")
                await anyio.sleep(self.pace)
            while self.hold:  # noqa: ASYNC110 - a flag the test sets
                await anyio.sleep(0.01)
        return RunOutcome.success()

    def text(self) -> str:
        return "".join(f"w{n} " for n in range(self.deltas))


def _durable_app(agent: Talker, store: str = "memory:") -> Starlette:
    routes = agent_routes("/agent", agent.run, store=store, detach_grace=10, keepalive=None)
    endpoint = routes[0].endpoint
    return Starlette(routes=routes, lifespan=endpoint.lifespan)


@asynccontextmanager
async def cutting_proxy(upstream_port: int, cut_after: list[int]) -> AsyncIterator[str]:
    """A loopback TCP proxy; the n-th connection's response is cut after ``cut_after[n]`` bytes.

    Connections past the list are forwarded whole.
    """
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)
    connections = 0

    async def handle(downstream: SocketStream) -> None:
        nonlocal connections
        limit = cut_after[connections] if connections < len(cut_after) else None
        connections += 1
        upstream = await anyio.connect_tcp("127.0.0.1", upstream_port)

        async def pump(source: SocketStream, sink: SocketStream, budget: int | None) -> None:
            sent = 0
            try:
                while True:
                    data = await source.receive()
                    if budget is not None and sent + len(data) >= budget:
                        await sink.send(data[: budget - sent])
                        break
                    sent += len(data)
                    await sink.send(data)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            tg.cancel_scope.cancel()

        async with downstream, upstream, anyio.create_task_group() as tg:
            tg.start_soon(pump, downstream, upstream, None)
            tg.start_soon(pump, upstream, downstream, limit)

    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, handle)
        yield f"http://127.0.0.1:{port}"
        group.cancel_scope.cancel()


async def _logged(base: str, run_id: str) -> list[Any]:
    """The run as the server's log replays it from its first event."""
    async with httpx.AsyncClient(timeout=20) as http:
        response = await http.get(f"{base}/agent/runs/{run_id}")
        assert response.status_code == 200
        decoder = SSEDecoder()
        return [EVENT.validate_json(p) for p in decoder.feed_bytes(response.content)]


async def test_an_uninterrupted_run_and_its_result() -> None:
    agent = Talker(deltas=10, pace=0)
    with serve(_durable_app(agent)) as server:
        async with run_remote(f"{server.url}/agent", run_input("r-plain")) as events:
            got = [event async for event in events]
            result = events.result()
        assert got[0].type is EventType.RUN_STARTED and got[-1].type is EventType.RUN_FINISHED
        assert events.reconnects == 0 and events.last_event_id.endswith(":r-plain:" + str(len(got)))
        assert result.outcome == "success"
        assert result.messages[-1]["content"] == agent.text()
        assert got == await _logged(server.url, "r-plain")


@pytest.mark.parametrize("cut", [1, 150, 333, 777])
async def test_a_cut_connection_resumes_into_one_unbroken_run(cut: int) -> None:
    agent = Talker()
    with serve(_durable_app(agent)) as server:
        async with cutting_proxy(server.port, [cut]) as proxy, Client(backoff=0.01) as client:
            async with client.run(f"{proxy}/agent", run_input("r-cut")) as events:
                got = [event async for event in events]
                result = events.result()
            assert events.reconnects == 1
        logged = await _logged(server.url, "r-cut")
    assert got == logged, "a duplicate, a gap or a reordering"
    assert got[-1].type is EventType.RUN_FINISHED
    assert result.messages[-1]["content"] == agent.text()


async def test_several_cuts_in_one_run() -> None:
    agent = Talker()
    with serve(_durable_app(agent)) as server:
        async with cutting_proxy(server.port, [500, 400, 300]) as proxy:
            async with run_remote(f"{proxy}/agent", run_input("r-cuts"), backoff=0.01) as events:
                got = [event async for event in events]
            assert events.reconnects == 3
        assert got == await _logged(server.url, "r-cuts")


async def test_a_server_without_ids_makes_the_drop_an_error_saying_so() -> None:
    agent = Talker()
    app = Starlette(routes=[agent_route("/agent", agent.run, keepalive=None)])
    with serve(app) as server:
        async with cutting_proxy(server.port, [400]) as proxy:
            with pytest.raises(ResumeFailed, match="does not support resuming"):
                async with run_remote(f"{proxy}/agent", run_input("r-noid")) as events:
                    async for _ in events:
                        pass


async def test_a_drop_before_the_first_event_without_a_log_is_an_error() -> None:
    agent = Talker()
    app = Starlette(routes=[agent_route("/agent", agent.run, keepalive=None)])
    with serve(app) as server:
        async with cutting_proxy(server.port, [1]) as proxy:
            with pytest.raises(ResumeFailed, match="keeps no log of it") as caught:
                async with run_remote(f"{proxy}/agent", run_input("r-early"), backoff=0) as events:
                    async for _ in events:
                        pass
            assert isinstance(caught.value.__cause__, ServerError)
            assert caught.value.__cause__.status in (404, 405)


async def test_without_verification_and_result_before_the_end() -> None:
    agent = Talker(deltas=3, pace=0)
    with serve(_durable_app(agent)) as server:
        async with run_remote(f"{server.url}/agent", run_input("r-raw"), verify=False) as events:
            first = await events.__aiter__().__anext__()
            assert first.type is EventType.RUN_STARTED
            with pytest.raises(ClientError, match="read to the end"):
                events.result()
            rest = [event async for event in events]
            result = events.result()
        assert [first, *rest] == await _logged(server.url, "r-raw")
        assert result.outcome == "success" and result.messages[-1]["content"] == agent.text()


async def test_resumes_are_bounded_when_the_server_is_gone() -> None:
    agent = Talker(deltas=200, pace=0.01)
    with serve(_durable_app(agent)) as server:
        port = server.port
        async with cutting_proxy(port, [600, 0, 0, 0, 0]) as proxy:
            seen = 0
            with pytest.raises(ResumeFailed, match="max_reconnects=2"):
                async with run_remote(
                    f"{proxy}/agent", run_input("r-gone"), max_reconnects=2, backoff=0.01
                ) as events:
                    async for _ in events:
                        seen += 1
            assert seen > 0


async def test_http_errors_carry_the_servers_code_and_message() -> None:
    agent = Talker(deltas=2, pace=0)
    with serve(_durable_app(agent)) as server:
        url = f"{server.url}/agent"
        async with Client() as client:
            async with client.run(url, run_input("r-twice")) as events:
                first = [_ async for _ in events]
            # The same body again is a retry: it rejoins the run (docs/durable.md, Retries),
            # answered with its join stream, which the client folds to the same result.
            async with client.run(url, run_input("r-twice")) as events:
                again = [_ async for _ in events]
                assert events.result().messages == fold(first).messages
            assert again[0] == first[0] and again[-1] == first[-1]
            with pytest.raises(ServerError) as caught:
                other = run_input("r-twice", forwardedProps={"another": "body"})
                async with client.run(url, other) as events:
                    [_ async for _ in events]
            assert caught.value.status == 409 and caught.value.code == "run_exists"
            assert "409" in str(caught.value)
            with pytest.raises(ServerError) as caught:
                await client.stop(url, "no-such-run")
            assert caught.value.status == 404 and caught.value.code == "not_found"
            with pytest.raises(ServerError) as caught:
                await client.history(url, "no-such-thread")
            assert caught.value.status == 404
    with pytest.raises(ValueError, match="runId"):
        async with run_remote("http://127.0.0.1:9/agent", {"threadId": "t"}):
            pass


async def test_history_and_stop() -> None:
    agent = Talker(deltas=5, pace=0)
    with serve(_durable_app(agent)) as server:
        url = f"{server.url}/agent"
        async with Client() as client:
            async with client.run(url, run_input("h1")) as events:
                [_ async for _ in events]
            got = await client.history(url, "thread-1")
            assert got.result.outcome == "success"
            assert [m["content"] for m in got.result.messages] == [agent.text()]
            assert got.events[1].type is EventType.MESSAGES_SNAPSHOT
            same = await history_of(url, "thread-1")
            assert same.result.messages == got.result.messages

            agent.hold = True
            async with client.run(url, run_input("h2")) as events:
                deltas = 0
                async for event in events:
                    if isinstance(event, TextMessageContentEvent):
                        deltas += 1
                        if deltas == 5:
                            answer = await client.stop(url, "h2")
                            assert answer["status"] == "cancelled"
                result = events.result()
            assert result.outcome == "error"
            assert result.run_error is not None and result.run_error.get("code") == "CANCELLED"


class Stateful(Talker):
    """A Talker that also keeps a counter in the state (snapshots, then deltas)."""

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        ctx.set_state({"count": 0})
        with ctx.message() as message:
            for n in range(self.deltas):
                message.delta(f"w{n} ")
                if n % 5 == 4:
                    ctx.set_state({"count": n + 1})
                await anyio.sleep(self.pace)
        return RunOutcome.success()


def _frame_ends(raw: bytes) -> list[int]:
    """The offsets just past each complete SSE frame of ``raw``."""
    ends, at = [], raw.find(b"\n\n")
    while at >= 0:
        ends.append(at + 2)
        at = raw.find(b"\n\n", at + 2)
    return ends


async def test_the_ts_http_agent_accepts_history_and_resumed_streams(
    ts_oracle: Any,
) -> None:
    agent = Stateful(deltas=20, pace=0.001)
    with serve(_durable_app(agent)) as server:
        url = f"{server.url}/agent"
        async with Client() as client:
            async with client.run(url, run_input("ts-1")) as events:
                [_ async for _ in events]
                expected = events.result()
            # What a client cut after K frames had seen, and the id it resumes from.
            raw = (await client.http.get(f"{url}/runs/ts-1")).content
            cut = _frame_ends(raw)[6]
            prefix = raw[:cut]
            decoder = SSEDecoder()
            decoder.feed_bytes(prefix)
            last_id = decoder.dispatched_event_id
            assert last_id.endswith(":ts-1:7")
            history = await client.history(url, "thread-1")
        cases = [
            {"url": f"{url}/threads/thread-1", "method": "GET", "threadId": "thread-1"},
            {
                "url": f"{url}/runs/ts-1",
                "method": "GET",
                "headers": {"Last-Event-ID": last_id},
                "prefixSse": prefix.decode(),
                "threadId": "thread-1",
            },
            {"url": f"{url}/runs/ts-1", "method": "GET", "threadId": "thread-1"},
        ]
        results = await anyio.to_thread.run_sync(ts_oracle, cases)
    assert expected.state == {"count": 20}
    for case, result in zip(cases, results, strict=True):
        assert result["outcome"] == "completed", (case, result["error"])
        assert result["state"] == expected.state, case
        assert [(m["role"], m.get("content")) for m in result["messages"]] == [
            (m["role"], m.get("content")) for m in expected.messages
        ], case
    assert history.result.messages == expected.messages
    # The resumed case saw every event exactly once, in order.
    resumed = [e["type"] for e in results[1]["events"]]
    whole = [e["type"] for e in results[2]["events"]]
    assert resumed == whole and resumed[0] == "RUN_STARTED" and resumed[-1] == "RUN_FINISHED"
