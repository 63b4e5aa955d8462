"""The Redis event log under load and faults, through a real server and a real redis-server.

Each test starts its own ``redis-server`` (some kill, restart or stall it) and
talks HTTP to a real server (``tests._servers.serve``): 120 followers of one
quiet live run on the default pool, a pool too small for the crowd (503
before any stream), a pause longer than the blocking read, Redis restarted
empty under two stores, ``DEBUG SLEEP`` and a killed Redis.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from ag_ui.core import EventType
from starlette.applications import Starlette

from agui_pipes.server import AgentEndpoint, agent_routes
from agui_pipes.store import (
    RedisEventLog,
    RunBroken,
    UnknownRun,
    WrongRun,
    format_event_id,
    open_store,
)
from tests._durable_http import HEADERS, Frames, Gated, events, get_frames, read_frames, seqs
from tests._redis_server import NO_REDIS
from tests._servers import run_input, serve, wait_until

pytestmark = pytest.mark.anyio


class Redis:
    """A ``redis-server`` on a fixed free port that a test can kill, restart (empty) or stall."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip(NO_REDIS)
        self.binary = binary
        self.directory = directory
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port: int = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *(self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""),
                *("--appendonly", "no", "--dir", str(self.directory), "--loglevel", "warning"),
                *("--enable-debug-command", "local"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if self.command("PING").startswith(b"+PONG"):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def stalled(self) -> bool:
        """Whether Redis is busy (in a ``DEBUG SLEEP``): a PING gets no answer in 0.1 s."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.1) as sock:
                sock.sendall(b"PING\r\n")
                return not sock.recv(16)
        except TimeoutError:
            return True

    def command(self, *words: str) -> bytes:
        """One inline command on a fresh connection; its raw reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            sock.sendall(" ".join(words).encode() + b"\r\n")
            return sock.recv(4096)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[Redis]:
    server = Redis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def _app(agent: Gated, store: RedisEventLog) -> Starlette:
    routes = agent_routes("/agent", agent.run, store=store, detach_grace=30, keepalive=None)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    return Starlette(routes=routes, lifespan=endpoint.lifespan)


def _client(url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=400)
    return httpx.AsyncClient(base_url=url, timeout=60, limits=limits)


@contextmanager
def _no_tracebacks(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail if the server logged a traceback: every store fault is said in one line."""
    caplog.set_level(logging.WARNING)
    yield
    traced = [r for r in caplog.records if r.exc_info and r.name.startswith("agui_pipes")]
    assert not traced, [r.getMessage() for r in traced]


async def _post_until(
    client: httpx.AsyncClient, body: dict[str, Any], frames: Frames, started: anyio.Event
) -> None:
    async with client.stream("POST", "/agent", content=json.dumps(body), headers=HEADERS) as got:
        assert got.status_code == 200, await got.aread()
        frames.extend(await read_frames(got, arrived=started))


def _whole(frames: Frames) -> None:
    """One whole run: seqs 1..N without a gap or a duplicate, ending in RUN_FINISHED."""
    assert seqs(frames) == list(range(1, len(frames) + 1))
    assert events(frames)[-1].type is EventType.RUN_FINISHED


async def test_120_followers_of_a_quiet_live_run_all_follow_it_to_the_end(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    # The default pool and a short block, so the run is quiet for several reads.
    store = RedisEventLog(redis.url, block=0.3)
    agent = Gated(before=3, after=5)
    followers = 120
    with _no_tracebacks(caplog), serve(_app(agent, store)) as server:
        async with _client(server.url) as client:
            own: Frames = []
            started = anyio.Event()
            results: list[tuple[int, Frames, bytes]] = []
            arrived = [anyio.Event() for _ in range(followers)]

            async def follow(n: int) -> None:
                results.append(await get_frames(client, "/agent/runs/q", arrived=arrived[n]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(_post_until, client, run_input("q"), own, started)
                with anyio.fail_after(20):
                    await started.wait()
                for n in range(followers):
                    tg.start_soon(follow, n)
                with anyio.fail_after(60):
                    for event in arrived:
                        await event.wait()
                fanout = store._fanout
                assert fanout is not None and fanout.watched == 1  # one stream, one XREAD
                reads = fanout.reads
                # Quiet: the reader's blocking read ends empty a few times before the gate.
                await wait_until(lambda: fanout.reads >= reads + 3, 20, "three quiet reads")
                agent.gate("q").set()
    _whole(own)
    assert len(results) == followers
    for status, frames, body in results:
        assert status == 200, body
        assert frames == own  # the whole run, the same bytes and ids as its own client got


async def test_a_pool_too_small_for_the_crowd_answers_503_before_any_stream(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisEventLog(redis.url, max_connections=2, pool_timeout=0.2, socket_timeout=10)
    agent = Gated(before=2, after=2)
    with _no_tracebacks(caplog), serve(_app(agent, store)) as server:
        async with _client(server.url) as client:
            agent.gate("done").set()
            own: Frames = []
            await _post_until(client, run_input("done"), own, anyio.Event())
            _whole(own)
            answers: list[tuple[int, Frames, bytes]] = []
            posts: list[httpx.Response] = []

            async def stall() -> None:
                # Every command waits behind the sleep: the two pooled connections
                # stay busy, the other requests wait for one, then are refused.
                await anyio.to_thread.run_sync(redis.command, "DEBUG", "SLEEP", "2")

            async def resume() -> None:
                answers.append(await get_frames(client, "/agent/runs/done"))

            async def post(n: int) -> None:
                body = json.dumps(run_input(f"new{n}", threadId=f"t{n}"))
                posts.append(await client.post("/agent", content=body, headers=HEADERS))

            for n in range(6):
                agent.gate(f"new{n}").set()  # a POST that got through runs to its end
            async with anyio.create_task_group() as tg:
                tg.start_soon(stall)
                await wait_until(redis.stalled, 5, "Redis asleep")
                for n in range(6):
                    tg.start_soon(resume)
                    tg.start_soon(post, n)
    refused = [body for status, _, body in answers if status == 503]
    refused += [post.content for post in posts if post.status_code == 503]
    assert refused, "no request waited past the pool's timeout"
    for body in refused:
        answer = json.loads(body)
        assert answer["error"] == "store_unavailable"
        assert "no connection of 2 was free within 0.2 s" in answer["message"]
        assert "127.0.0.1" not in answer["message"]
    for status, frames, _ in answers:
        assert status in (200, 503)
        if status == 200:
            assert frames == own  # a resume that got a connection is whole
    assert all(post.status_code in (200, 503) for post in posts)


async def test_a_follower_outlives_a_pause_far_longer_than_the_socket_timeout(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    # The bug: a blocking read of 5 s on a socket timing out at 5 s. Here the
    # command timeout (0.2 s) is shorter than the block (0.5 s) and the agent
    # pauses for several blocks: the reader's own timeout is block + 0.2 s.
    store = RedisEventLog(redis.url, block=0.5, socket_timeout=0.2)
    agent = Gated(before=2, after=3)
    with _no_tracebacks(caplog), serve(_app(agent, store)) as server:
        async with _client(server.url) as client:
            own: Frames = []
            started = anyio.Event()
            followed: list[tuple[int, Frames, bytes]] = []
            arrived = anyio.Event()

            async def follow() -> None:
                followed.append(await get_frames(client, "/agent/runs/p", arrived=arrived))

            async with anyio.create_task_group() as tg:
                tg.start_soon(_post_until, client, run_input("p"), own, started)
                with anyio.fail_after(20):
                    await started.wait()
                tg.start_soon(follow)
                with anyio.fail_after(20):
                    await arrived.wait()
                fanout = store._fanout
                assert fanout is not None
                reads = fanout.reads
                await wait_until(lambda: fanout.reads >= reads + 4, 20, "a 2 s pause")
                agent.gate("p").set()
    _whole(own)
    [(status, frames, body)] = followed
    assert status == 200, body
    assert frames == own


async def test_redis_restarted_empty_every_store_takes_the_one_new_epoch(redis: Redis) -> None:
    async with open_store(redis.url) as first:
        assert isinstance(first, RedisEventLog)
        await first.append("t", "live", [b'{"type":"RUN_STARTED"}'])
        old = first.epoch
        redis.kill()
        redis.start()  # empty: no persistence
        # The first writer after the restart sets the new epoch; a store
        # opened later reads it; the first store follows on its next lookup.
        assert await first.create_run("t2", "fresh")
        assert first.epoch != old
        async with open_store(redis.url) as second:
            assert second.epoch == first.epoch
            # An append to the run Redis forgot is refused, never re-created from seq 1.
            with pytest.raises(RunBroken, match="restarted empty"):
                await first.append("t", "live", [b'{"type":"TEXT_MESSAGE_START"}'])
            assert await second.run("live") is None
            redis.kill()
            redis.start()
            # Now a reader first: the second store's lookup sets the epoch, the
            # first adopts it on its own next lookup.
            assert await second.run("fresh") is None
            assert await first.run("fresh") is None
            assert first.epoch == second.epoch
            await second.append("t3", "again", [b'{"type":"RUN_STARTED"}'])
            record = await second.run("again")
            assert record is not None
            id_on_second = format_event_id(second.epoch, "again", 1, record.generation)
            assert await first.resume_after("again", id_on_second) == 1


async def test_debug_sleep_past_the_timeout_is_503_and_a_clear_end_for_followers(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisEventLog(redis.url, block=0.3, socket_timeout=0.5)
    agent = Gated(before=2, after=3)
    with _no_tracebacks(caplog), serve(_app(agent, store)) as server:
        async with _client(server.url) as client:
            own: Frames = []
            started = anyio.Event()
            followed: list[tuple[int, Frames, bytes]] = []
            arrived = anyio.Event()
            refused: list[httpx.Response] = []

            async def follow() -> None:
                followed.append(await get_frames(client, "/agent/runs/s", arrived=arrived))

            async with anyio.create_task_group() as tg:
                tg.start_soon(_post_until, client, run_input("s"), own, started)
                with anyio.fail_after(20):
                    await started.wait()
                tg.start_soon(follow)
                with anyio.fail_after(20):
                    await arrived.wait()
                agent.gate("during").set()  # should the POST get through, it ends
                async with anyio.create_task_group() as stall:
                    stall.start_soon(anyio.to_thread.run_sync, redis.command, "DEBUG", "SLEEP", "3")
                    await wait_until(redis.stalled, 5, "Redis asleep")
                    body = json.dumps(run_input("during", threadId="other"))
                    refused.append(await client.post("/agent", content=body, headers=HEADERS))
                    await wait_until(lambda: bool(followed), 20, "the follower's end")
                agent.gate("s").set()
            [(status, frames, _)] = followed
            assert status == 200
            *head, last = frames
            end = events([last])[0]
            assert end.type is EventType.RUN_ERROR and end.code == "STORE_UNAVAILABLE"
            assert "did not answer within 0.5 s" in end.message
            # Resumed after the stall from its last id: the rest, no gap, no duplicate.
            status, rest, body = await get_frames(client, "/agent/runs/s", last_id=head[-1][0])
            assert status == 200, body
            assert head + rest == own
    _whole(own)
    [answer] = refused
    assert answer.status_code == 503
    assert answer.json()["error"] == "store_unavailable"


async def test_a_killed_redis_is_503_for_new_runs_and_a_clear_end_for_followers(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisEventLog(redis.url, block=0.3, socket_timeout=0.5)
    agent = Gated(before=2, after=3)
    with _no_tracebacks(caplog), serve(_app(agent, store)) as server:
        async with _client(server.url) as client:
            own: Frames = []
            started = anyio.Event()
            followed: list[tuple[int, Frames, bytes]] = []
            arrived = anyio.Event()

            async def follow() -> None:
                followed.append(await get_frames(client, "/agent/runs/k", arrived=arrived))

            async with anyio.create_task_group() as tg:
                tg.start_soon(_post_until, client, run_input("k"), own, started)
                with anyio.fail_after(20):
                    await started.wait()
                tg.start_soon(follow)
                with anyio.fail_after(20):
                    await arrived.wait()
                redis.kill()
                await wait_until(lambda: bool(followed), 20, "the follower's end")
                body = json.dumps(run_input("after", threadId="other"))
                answer = await client.post("/agent", content=body, headers=HEADERS)
                agent.gate("k").set()
            [(status, frames, _)] = followed
            assert status == 200
            end = events(frames[-1:])[0]
            assert end.type is EventType.RUN_ERROR and end.code == "STORE_UNAVAILABLE"
            assert "cannot be reached; retry later" in end.message
            assert answer.status_code == 503
            assert answer.json()["error"] == "store_unavailable"
            assert "127.0.0.1" not in answer.json()["message"]


def _event(n: int) -> bytes:
    return json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": str(n)}).encode()


async def test_1000_followers_share_one_reader_on_a_pool_of_4(
    redis: Redis, anyio_backend: str
) -> None:
    # Under trio every waiting follower holds a bridge thread: 120 there, 1,000 on asyncio.
    followers = 1000 if anyio_backend == "asyncio" else 120
    # A long block: the reader's XREADs are then the appends' (and a few wake-ups), never
    # quiet ones, however slowly this machine hands 1,000 followers their events.
    store = RedisEventLog(redis.url, block=30, max_connections=4, pool_timeout=30)
    async with store:
        await store.append("t", "crowd", [_event(0)])
        got: list[list[int]] = [[] for _ in range(followers)]

        async def follow(n: int) -> None:
            async for seq, _ in store.follow("crowd"):
                got[n].append(seq)

        async with anyio.create_task_group() as tg:
            for n in range(followers):
                tg.start_soon(follow, n)
            await wait_until(lambda: all(got), 60, "every follower has the first event")
            fanout = store._fanout
            assert fanout is not None
            reads = fanout.reads
            for n in range(1, 21):
                await store.append("t", "crowd", [_event(n)])
            await store.end_run("crowd")
        assert all(seqs_of == list(range(1, 22)) for seqs_of in got)
        # One XREAD per append and the end marker, a few wake-ups: not one per follower.
        assert fanout.reads - reads <= 21 + 10


def _commands(redis: Redis) -> int:
    info = redis.command("INFO", "stats").decode()
    return int(info.split("total_commands_processed:")[1].split()[0])


async def test_a_run_written_again_after_a_reset_is_followed_without_a_busy_loop(
    redis: Redis,
) -> None:
    store = RedisEventLog(redis.url, block=0.2)
    async with store, open_store(redis.url) as writer:  # two processes: one follows, one writes
        await writer.append("t", "again", [_event(0)])
        old: list[int] = []
        new: list[int] = []

        async def follow(into: list[int]) -> None:
            # The old follower may see the run gone, or (past #3) find its position is
            # past the end of the run written again: WrongRun, never a silent end.
            with contextlib.suppress(UnknownRun, WrongRun):
                async for seq, _ in store.follow("again"):
                    into.append(seq)

        async with anyio.create_task_group() as tg:
            # A follower keeps the reader watching the stream, up to seq 30.
            tg.start_soon(follow, old)
            await wait_until(lambda: old == [1], 10, "the first event")
            await writer.append("t", "again", [_event(n) for n in range(1, 30)])
            await wait_until(lambda: len(old) == 30, 10, "30 events")
            # Redis forgets it all; a run of the same id starts again (a new
            # writer), quiet after 2 events.
            redis.command("FLUSHALL")
            async with open_store(redis.url) as again:
                await again.append("t", "again", [_event(1), _event(2)])
                tg.start_soon(follow, new)
                await wait_until(lambda: new == [1, 2], 10, "the new run's two events")
                fanout = store._fanout
                assert fanout is not None
                before, reads = _commands(redis), fanout.reads
                await wait_until(lambda: fanout.reads >= reads + 3, 10, "three quiet reads")
                # A quiet follower costs a few commands per block, not a loop of
                # reads against the head the reader saw before the reset.
                assert _commands(redis) - before < 40
                await again.append("t", "again", [_event(3)])
                await again.end_run("again")
        assert new == [1, 2, 3]
        assert old[:30] == list(range(1, 31))
