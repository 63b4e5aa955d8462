"""Runs and threads keyed by scope in every event log backend, and 0.1's logs as the default scope.

A scope is a tenant: another scope's run is one this scope does not hold, a run
id another scope used names a new run here, and a thread belongs to the scope
whose run created it. Logs written before scopes existed (a SQLite file of
layout 1, Redis keys of 0.1) read as the default scope's.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from pathlib import Path

import anyio
import pytest

from agui_pipes.store import (
    RunStatus,
    ThreadTaken,
    UnknownRun,
    WrongRun,
    format_event_id,
    open_store,
)
from tests._store_backends import BACKENDS, redis_url, store_url_for

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

pytestmark = pytest.mark.anyio

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def payloads(tag: str, count: int) -> list[bytes]:
    return [b'{"type":"CUSTOM","name":"%s","value":%d}' % (tag.encode(), n) for n in range(count)]


async def test_a_run_id_in_two_scopes_names_two_runs(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t-alice", "r", payloads("alice", 3), scope="alice")
        await store.append("t-bob", "r", payloads("bob", 2), scope="bob")
        alice = await store.read("r", scope="alice")
        bob = await store.read("r", scope="bob")
        assert [data for _, data in alice] == payloads("alice", 3)
        assert [data for _, data in bob] == payloads("bob", 2)
        record = await store.run("r", scope="bob")
        assert record is not None and (record.scope, record.thread_id) == ("bob", "t-bob")
        assert await store.run("r") is None  # the default scope holds no run "r"
        with pytest.raises(UnknownRun):
            await store.read("r", scope="carol")


async def test_another_scopes_run_cannot_be_ended_stopped_or_followed(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("a", 1), scope="alice")
        with pytest.raises(UnknownRun):
            await store.end_run("r", RunStatus.CANCELLED, scope="bob")
        with pytest.raises(UnknownRun):
            await store.resume_after("r", None, scope="bob")
        with pytest.raises(UnknownRun):
            async for _ in store.follow("r", scope="bob"):
                pass
        await store.request_stop("r", "bob wants it stopped", scope="bob")
        assert await store.stop_requested("r", scope="alice") is None
        record = await store.run("r", scope="alice")
        assert record is not None and record.status is RunStatus.LIVE


async def test_a_thread_belongs_to_the_scope_that_created_it(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("shared", "r1", payloads("a", 1), scope="alice")
        with pytest.raises(ThreadTaken) as refused:
            await store.append("shared", "r2", payloads("b", 1), scope="bob")
        assert refused.value.http_status == 404
        assert await store.run("r2", scope="bob") is None  # nothing was created
        assert await store.thread_runs("shared", scope="bob") == []
        assert [r.run_id for r in await store.thread_runs("shared", scope="alice")] == ["r1"]
        assert await store.thread_scope("shared") == "alice"
        assert await store.thread_scope("nowhere") is None
        await store.append("shared", "r2", payloads("a", 1), scope="alice")
        assert [r.run_id for r in await store.thread_runs("shared", scope="alice")] == ["r1", "r2"]


async def test_threads_are_listed_per_scope_newest_first_by_pages(store_url: str) -> None:
    async with open_store(store_url) as store:
        for n in range(5):
            await store.append(f"a{n}", f"r{n}", [], scope="alice")
            await store.append(f"a{n}", f"s{n}", [], scope="alice")  # a second run: one thread
        await store.append("b0", "r0", [], scope="bob")
        first = await store.threads(scope="alice", limit=2)
        assert [t.thread_id for t in first] == ["a4", "a3"]
        second = await store.threads(scope="alice", limit=2, before=first[-1].cursor)
        assert [t.thread_id for t in second] == ["a2", "a1"]
        last = await store.threads(scope="alice", limit=2, before=second[-1].cursor)
        assert [t.thread_id for t in last] == ["a0"]
        assert [t.thread_id for t in await store.threads(scope="bob")] == ["b0"]
        assert await store.threads(scope="carol") == []
        assert all(t.created > 0 for t in first)
        with pytest.raises(ValueError, match="limit"):
            await store.threads(scope="alice", limit=501)


async def test_pruning_a_threads_last_run_frees_the_thread(store_url: str) -> None:
    from agui_pipes.store import Retention

    url = store_url + ("&" if "?" in store_url else "?") + "max_runs=1"
    async with open_store(url) as store:
        await store.append("old", "r1", [], scope="alice")
        await store.end_run("r1", scope="alice")
        await store.append("new", "r2", [], scope="bob")
        await store.end_run("r2", scope="bob")
        assert store.retention == Retention(max_runs=1)
        assert await store.prune() == 1
        assert await store.thread_scope("old") is None
        assert await store.threads(scope="alice") == []
        await store.append("old", "r3", [], scope="bob")  # no one's thread now
        assert await store.thread_scope("old") == "bob"


async def test_sse_ids_carry_no_scope_and_resume_in_the_asking_scope(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("a", 4), scope="alice")
        await store.end_run("r", scope="alice")
        record = await store.run("r", scope="alice")
        assert record is not None
        event_id = format_event_id(store.epoch, "r", 2, record.generation)
        assert "alice" not in event_id
        after = await store.resume_after("r", event_id, scope="alice")
        rest = [seq async for seq, _ in store.follow("r", after, scope="alice")]
        assert rest == [3, 4]
        with pytest.raises(UnknownRun):
            await store.resume_after("r", event_id, scope="bob")


# -- logs written before scopes --------------------------------------------------------


async def test_a_sqlite_file_written_by_0_1_is_migrated_to_the_default_scope(
    tmp_path: Path,
) -> None:
    # tests/data/store-0.1.sqlite was written by agui_pipes 0.1's SQLite store (layout
    # 1): thread-a holds run-1 (finished, 4 events) and run-2 (live, 3 events, a
    # heartbeat); thread-b holds run-3 (error, 2 events).
    path = tmp_path / "old.db"
    shutil.copy(DATA / "store-0.1.sqlite", path)
    async with open_store(f"sqlite:///{path}") as store:
        assert store.epoch == "fbf134ce7a06"  # the file's own, kept
        runs = await store.thread_runs("thread-a")
        assert [(r.run_id, r.status, r.last_seq, r.scope) for r in runs] == [
            ("run-1", RunStatus.FINISHED, 4, "default"),
            ("run-2", RunStatus.LIVE, 3, "default"),
        ]
        assert len(await store.read("run-1")) == 4
        assert await store.heartbeat_seen("run-2") is not None
        # 0.1's ids carry no run generation: refused (a client reads the run from its
        # start); the ids a server gives now resume.
        with pytest.raises(WrongRun, match="carries no run generation"):
            await store.resume_after("run-1", format_event_id(store.epoch, "run-1", 2))
        record = await store.run("run-1")
        assert record is not None
        new_id = format_event_id(store.epoch, "run-1", 2, record.generation)
        assert await store.resume_after("run-1", new_id) == 2
        assert [t.thread_id for t in await store.threads()] == ["thread-b", "thread-a"]
        assert await store.thread_scope("thread-a") == "default"
        with pytest.raises(ThreadTaken):
            await store.append("thread-a", "run-9", [], scope="alice")
        assert await store.append("thread-a", "run-2", payloads("x", 1)) == [4]
        await store.append("t-alice", "run-1", [], scope="alice")  # a new run of alice
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("2",)
    async with open_store(f"sqlite:///{path}") as store:  # opens again without migrating
        assert len(await store.read("run-2")) == 4
        assert (await store.run("run-1", scope="alice")) is not None


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the raw client is asyncio's
async def test_redis_keys_written_by_0_1_read_as_the_default_scope(redis_url: str) -> None:
    import redis.asyncio

    prefix = f"old{uuid.uuid4().hex[:8]}:"
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        # The 0.1 layout: a run hash, its events stream, the thread's and the store's
        # sorted sets, the order counter and the epoch — and no owner, listing or layout.
        data = b'{"type":"CUSTOM","name":"old","value":0}{"type":"CUSTOM","name":"old","value":1}'
        await client.set(f"{prefix}epoch", "0123456789ab")
        await client.set(f"{prefix}order", 1)
        await client.hset(
            f"{prefix}run:old-run",
            mapping={
                "thread": "old-thread",
                "status": "finished",
                "created": "100.5",
                "updated": "101",
                "ended": "101",
                "last_seq": 2,
                "order": 1,
            },
        )
        await client.xadd(f"{prefix}events:old-run", {"f": 1, "d": data, "l": b"40,40"}, id="0-2")
        await client.zadd(f"{prefix}thread:old-thread", {"old-run": 1})
        await client.zadd(f"{prefix}runs", {"old-run": 1})
        async with open_store(f"{redis_url}?prefix={prefix}") as store:
            record = await store.run("old-run")
            assert record is not None and record.scope == "default"
            assert record.status is RunStatus.FINISHED
            assert await store.thread_scope("old-thread") == "default"
            assert [t.thread_id for t in await store.threads()] == ["old-thread"]
            assert [t.created for t in await store.threads()] == [100.5]
            assert [r.run_id for r in await store.thread_runs("old-thread")] == ["old-run"]
            assert await store.run("old-run", scope="alice") is None
            with pytest.raises(ThreadTaken):
                await store.append("old-thread", "new-run", [], scope="alice")
            await store.append("old-thread", "new-run", [])
            assert len(await store.thread_runs("old-thread")) == 2
        assert await client.get(f"{prefix}layout") == b"2"
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


def test_the_history_command_reads_a_thread_of_any_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_pipes._cli import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run = [
        b'{"type":"RUN_STARTED","threadId":"t-alice","runId":"r1"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello alice"}',
        b'{"type":"TEXT_MESSAGE_END","messageId":"m1"}',
        b'{"type":"RUN_FINISHED","threadId":"t-alice","runId":"r1"}',
    ]

    async def record() -> None:
        async with open_store(url) as store:
            await store.append("t-alice", "r1", run, scope="alice")
            await store.end_run("r1", scope="alice")

    anyio.run(record)
    assert main(["history", "--store", url, "--format", "transcript", "t-alice"]) == 0
    assert "hello alice" in capsys.readouterr().out
