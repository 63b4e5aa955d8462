"""The event log's behaviour, one suite run against memory:, sqlite:, redis: and postgresql:.

Every test goes through the public API (``open_store`` and ``EventLog``) on
a real backend: a real SQLite file, a real ``redis-server`` and a real PostgreSQL.
"""

from __future__ import annotations

import socket
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes.store import (
    BadEventId,
    EventLog,
    Retention,
    RunBroken,
    RunEnded,
    RunLost,
    RunStatus,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    UnknownRun,
    WrongRun,
    WrongThread,
    format_event_id,
    open_store,
)
from tests._redis_server import redis_server
from tests._store_backends import BACKENDS, redis_url, store_url_for

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

pytestmark = pytest.mark.anyio


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def payloads(run: str, count: int, start: int = 1) -> list[bytes]:
    return [
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"%s","delta":"%d"}' % (run.encode(), n)
        for n in range(start, start + count)
    ]


async def collect(store: EventLog, run_id: str, after: int = 0) -> list[tuple[int, bytes]]:
    return [entry async for entry in store.follow(run_id, after=after)]


# -- append, read ----------------------------------------------------------------------


async def test_append_numbers_from_one_and_reads_back_in_order(store_url: str) -> None:
    async with open_store(store_url) as store:
        first = await store.append("t", "r", payloads("r", 3))
        second = await store.append("t", "r", payloads("r", 2, start=4))
        assert (first, second) == ([1, 2, 3], [4, 5])
        assert await store.read("r") == list(enumerate(payloads("r", 5), 1))
        assert await store.read("r", after=2, limit=2) == [
            (3, payloads("r", 1, 3)[0]),
            (4, payloads("r", 1, 4)[0]),
        ]
        assert await store.read("r", after=5) == []
        record = await store.run("r")
        assert record is not None
        assert (record.thread_id, record.run_id, record.status, record.last_seq) == (
            "t",
            "r",
            RunStatus.LIVE,
            5,
        )
        assert record.ended is None and record.created <= record.updated


async def test_bytes_come_back_exactly(store_url: str) -> None:
    odd = ['{"delta":"naïve 東京 🚀 \\u0000 \\n"}'.encode(), b"{}", b'"' + b"x" * 100_000 + b'"']
    async with open_store(store_url) as store:
        await store.append("t", "r", odd)
        assert [data for _, data in await store.read("r")] == odd


async def test_an_empty_append_creates_the_run(store_url: str) -> None:
    async with open_store(store_url) as store:
        assert await store.run("r") is None
        assert await store.append("t", "r", []) == []
        record = await store.run("r")
        assert record is not None and record.last_seq == 0 and record.status is RunStatus.LIVE
        assert await store.read("r") == []


async def test_unknown_runs(store_url: str) -> None:
    async with open_store(store_url) as store:
        with pytest.raises(UnknownRun, match="'nope'"):
            await store.read("nope")
        with pytest.raises(UnknownRun):
            await collect(store, "nope")
        with pytest.raises(UnknownRun):
            await store.end_run("nope")
        assert await store.thread_runs("nothing") == []


async def test_end_run_closes_the_log_and_the_first_ending_wins(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 2))
        ended = await store.end_run("r", RunStatus.CANCELLED, reason="stopped by the user")
        assert ended.status is RunStatus.CANCELLED and ended.reason == "stopped by the user"
        assert ended.ended is not None and ended.last_seq == 2
        again = await store.end_run("r", RunStatus.FINISHED)
        assert again.status is RunStatus.CANCELLED
        with pytest.raises(RunEnded, match="cancelled"):
            await store.append("t", "r", payloads("r", 1))
        assert len(await store.read("r")) == 2


async def test_a_run_stays_in_its_thread(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", [])
        with pytest.raises(WrongThread, match="belongs to thread 't', not 'u'"):
            await store.append("u", "r", payloads("r", 1))


async def test_concurrent_runs_are_isolated(store_url: str) -> None:
    async with open_store(store_url) as store:

        async def write(thread: str, run: str) -> None:
            for n in range(1, 41, 4):
                await store.append(thread, run, payloads(run, 4, start=n))

        async with anyio.create_task_group() as tasks:
            for index in range(4):
                tasks.start_soon(write, f"t{index % 2}", f"r{index}")
        for index in range(4):
            run = f"r{index}"
            assert await store.read(run) == list(enumerate(payloads(run, 40), 1))


async def test_thread_runs_in_creation_order(store_url: str) -> None:
    async with open_store(store_url) as store:
        for run in ("b", "a", "c"):
            await store.append("t", run, payloads(run, 1))
        await store.append("u", "other", [])
        await store.end_run("a", RunStatus.ERROR)
        runs = await store.thread_runs("t")
        assert [record.run_id for record in runs] == ["b", "a", "c"]
        assert [record.status for record in runs] == [
            RunStatus.LIVE,
            RunStatus.ERROR,
            RunStatus.LIVE,
        ]
        assert [record.run_id for record in await store.thread_runs("u")] == ["other"]


# -- follow ----------------------------------------------------------------------------


async def test_follow_gets_live_appends_then_ends_with_the_run(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 2))
        got: list[tuple[int, bytes]] = []

        async def follower() -> None:
            got.extend(await collect(store, "r"))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(follower)
                for start in range(3, 23, 5):
                    await anyio.sleep(0.02)
                    await store.append("t", "r", payloads("r", 5, start=start))
                await anyio.sleep(0.02)
                await store.end_run("r")
        assert got == list(enumerate(payloads("r", 22), 1))


async def test_follow_from_the_middle_of_an_ended_run(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 5))
        await store.end_run("r")
        with anyio.fail_after(10):
            assert await collect(store, "r", after=3) == list(enumerate(payloads("r", 5), 1))[3:]
            assert await collect(store, "r", after=5) == []


async def test_follow_of_a_long_run_crosses_read_batches(store_url: str) -> None:
    async with open_store(store_url) as store:
        total = store.follow_batch * 2 + 7
        await store.append("t", "r", payloads("r", total))
        await store.end_run("r")
        with anyio.fail_after(20):
            got = await collect(store, "r", after=1)
        assert [seq for seq, _ in got] == list(range(2, total + 1))


async def test_a_run_ended_without_events_ends_its_followers(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", [])
        # The follower has looked the run up and found it live: from there it follows.
        looked_up = anyio.Event()
        look_up = store.run

        async def looking_up(run_id: str, **options: Any) -> object:
            record = await look_up(run_id, **options)
            looked_up.set()
            return record

        store.run = looking_up  # type: ignore[method-assign]
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                results: list[list[tuple[int, bytes]]] = []

                async def follower() -> None:
                    results.append(await collect(store, "r"))

                tasks.start_soon(follower)
                await looked_up.wait()
                await store.end_run("r")
        assert results == [[]]


# -- broken runs -----------------------------------------------------------------------


async def test_a_broken_run_refuses_to_be_read(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 3))
        await store.mark_broken("r", "disk full")
        record = await store.run("r")
        assert record is not None and record.status is RunStatus.BROKEN
        assert record.reason == "disk full"
        with pytest.raises(RunBroken, match=r"cannot be resumed.*disk full") as caught:
            await store.read("r")
        assert caught.value.http_status == 410
        with pytest.raises(RunBroken):
            await collect(store, "r")
        with pytest.raises(RunBroken):
            await store.append("t", "r", payloads("r", 1))
        with pytest.raises(RunBroken):
            await store.resume_after("r", None)


async def test_a_follower_of_a_run_that_breaks_gets_an_error_not_a_gap(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 2))
        got: list[tuple[int, bytes]] = []
        errors: list[BaseException] = []
        caught_up = anyio.Event()

        async def follower() -> None:
            try:
                async for entry in store.follow("r"):
                    got.append(entry)
                    if len(got) == 2:
                        caught_up.set()
            except RunBroken as exc:
                errors.append(exc)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(follower)
                await caught_up.wait()
                await store.mark_broken("r", "a batch was lost")
        assert got == list(enumerate(payloads("r", 2), 1))
        assert len(errors) == 1 and "a batch was lost" in str(errors[0])


async def test_an_unknown_run_marked_broken_is_broken_not_unknown(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.mark_broken("r", "the first write failed")
        with pytest.raises(RunBroken):
            await store.read("r")


# -- resuming from an SSE id -----------------------------------------------------------


async def _id(store: EventLog, run: str, seq: int) -> str:
    """The SSE id a server gives entry ``seq`` of ``run``: store epoch, run generation."""
    record = await store.run(run)
    assert record is not None
    return format_event_id(store.epoch, run, seq, record.generation)


async def test_resume_after_checks_the_id(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 4))
        await store.append("t", "other", payloads("other", 1))
        epoch = store.epoch
        generation = (await store.run("r")).generation  # type: ignore[union-attr]
        assert await store.resume_after("r", None) == 0
        assert await store.resume_after("r", await _id(store, "r", 3)) == 3
        # a live run may be asked past what is stored yet, up to what its writer numbered
        assert await store.resume_after("r", await _id(store, "r", 9), issued=9) == 9
        with pytest.raises(WrongRun, match=r"past the end of live run 'r'.*#9") as past:
            await store.resume_after("r", await _id(store, "r", 10), issued=9)
        assert past.value.http_status == 409
        with pytest.raises(BadEventId) as bad:
            await store.resume_after("r", "garbage")
        assert bad.value.http_status == 400
        with pytest.raises(WrongRun, match="belongs to run 'other'") as wrong:
            await store.resume_after("r", await _id(store, "other", 1))
        assert wrong.value.http_status == 409
        with pytest.raises(WrongRun, match="another store epoch"):
            await store.resume_after("r", format_event_id("0badc0ffee00", "r", 1, generation))
        with pytest.raises(WrongRun, match="carries no run generation"):
            await store.resume_after("r", format_event_id(epoch, "r", 1))
        with pytest.raises(WrongRun, match="earlier run of that id"):
            await store.resume_after("r", format_event_id(epoch, "r", 1, generation + "0"))
        with pytest.raises(UnknownRun) as unknown:
            await store.resume_after("nope", format_event_id(epoch, "nope", 1, generation))
        assert unknown.value.http_status == 404
        await store.end_run("r")
        with pytest.raises(WrongRun, match="past the end"):
            await store.resume_after("r", await _id(store, "r", 5))
        assert await store.resume_after("r", await _id(store, "r", 4)) == 4


async def test_an_id_past_what_a_live_run_stored_waits_for_it(store_url: str) -> None:
    """Without the writer's count, the log may lag a sent frame: wait for it, then refuse."""
    async with open_store(store_url) as store:
        store.resume_wait = 0.2
        await store.append("t", "r", payloads("r", 2))
        with pytest.raises(WrongRun, match=r"past the end of live run 'r'.*#2"):
            await store.resume_after("r", await _id(store, "r", 3))
        store.resume_wait = 30.0
        found: list[int] = []
        waiting = await _id(store, "r", 4)
        async with anyio.create_task_group() as tg:

            async def resume() -> None:
                found.append(await store.resume_after("r", waiting))

            tg.start_soon(resume)
            await store.append("t", "r", payloads("r", 2, start=3))  # the writer catches up
        assert found == [4]
        waiting = await _id(store, "r", 9)
        refused: list[WrongRun] = []
        async with anyio.create_task_group() as tg:

            async def refuse() -> None:
                with pytest.raises(WrongRun) as caught:
                    await store.resume_after("r", waiting)
                refused.append(caught.value)

            tg.start_soon(refuse)
            await store.end_run("r")  # the run ends before #9
        assert "past the end of run 'r' (its last event is #4)" in str(refused[0])


async def test_a_follower_past_the_end_of_a_run_is_told(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 2))
        await store.end_run("r")
        with pytest.raises(WrongRun, match="position #5 is past the end of run 'r'"):
            async for _ in store.follow("r", after=5):
                pass


# -- retention -------------------------------------------------------------------------


async def _ended_runs(store: EventLog, thread: str, runs: list[str]) -> None:
    for run in runs:
        await store.append(thread, run, payloads(run, 2))
        await store.end_run(run)


async def test_retention_keeps_the_newest_ended_runs_per_thread(store_url: str) -> None:
    retention = Retention(max_runs_per_thread=2, interval=3600)
    async with open_store(store_url, retention=retention) as store:
        await store.append("t", "live", [])  # never counted, never deleted
        await _ended_runs(store, "t", ["a", "b", "c", "d"])
        await _ended_runs(store, "u", ["x"])
        assert await store.prune() == 2
        assert [r.run_id for r in await store.thread_runs("t")] == ["live", "c", "d"]
        assert [r.run_id for r in await store.thread_runs("u")] == ["x"]
        assert await store.run("a") is None
        with pytest.raises(UnknownRun):
            await store.read("b")
        assert await store.prune() == 0


async def test_retention_by_total_count(store_url: str) -> None:
    async with open_store(store_url, retention=Retention(max_runs=3)) as store:
        await _ended_runs(store, "t", ["a", "b"])
        await _ended_runs(store, "u", ["c", "d"])
        await store.prune()
        kept = [r.run_id for r in [*await store.thread_runs("t"), *await store.thread_runs("u")]]
        assert kept == ["b", "c", "d"]


async def test_retention_by_age_counts_from_the_last_write(store_url: str) -> None:
    async with open_store(store_url, retention=Retention(max_age=3600)) as store:
        await _ended_runs(store, "t", ["a"])
        await store.append("t", "live", payloads("live", 1))
        assert await store.prune() == 0
        assert await store.prune(now=time.time() + 3 * 3600) == 2
        assert await store.thread_runs("t") == []


async def test_retention_sweeps_when_a_run_is_created(store_url: str) -> None:
    async with open_store(store_url, retention=Retention(max_runs=1, interval=0)) as store:
        await _ended_runs(store, "t", ["a", "b", "c"])
        # each creation swept the runs ended before it
        assert [r.run_id for r in await store.thread_runs("t")] == ["b", "c"]


# -- lifecycle -------------------------------------------------------------------------


async def test_a_store_must_be_opened(store_url: str) -> None:
    store = open_store(store_url)
    with pytest.raises(StoreClosed, match="not open"):
        store.epoch  # noqa: B018
    with pytest.raises(StoreClosed, match="async with store"):
        await store.append("t", "r", [])
    async with store:
        assert len(store.epoch) == 12
    with pytest.raises(StoreClosed, match="closed"):
        await store.read("r")
    with pytest.raises(StoreClosed, match="closed"):
        await store.open()


async def test_the_epoch_is_the_stores_not_the_objects(store_url: str) -> None:
    async with open_store(store_url) as first:
        epoch = first.epoch
    async with open_store(store_url) as second:
        if store_url.startswith("memory:"):
            assert second.epoch != epoch  # a new memory store is a new store
        else:
            assert second.epoch == epoch


# -- several processes / restarts ------------------------------------------------------


async def test_sqlite_survives_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with open_store(url) as store:
        epoch = store.epoch
        await store.append("t", "r", payloads("r", 3))
        await store.end_run("r")
        await store.append("t", "s", payloads("s", 1))
    async with open_store(url) as store:
        assert store.epoch == epoch
        assert await store.read("r") == list(enumerate(payloads("r", 3), 1))
        assert [r.run_id for r in await store.thread_runs("t")] == ["r", "s"]
        assert await store.append("t", "s", payloads("s", 1, 2)) == [2]


async def test_sqlite_relative_path_and_missing_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_store("sqlite:///runs.db") as store:
        await store.append("t", "r", [])
    assert (tmp_path / "runs.db").exists()
    with pytest.raises(StoreError, match=r"directory .* does not exist"):
        async with open_store(f"sqlite:///{tmp_path / 'no' / 'runs.db'}"):
            pass


async def test_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "runs.db").write_text("hello, I am not SQLite" * 100)
    with pytest.raises(StoreError, match="cannot use"):
        async with open_store(f"sqlite:///{tmp_path / 'runs.db'}"):
            pass


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
async def test_two_store_objects_see_each_others_appends(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url_for(kind, request, tmp_path)
    if kind == "sqlite":
        url += "?poll=0.02"
    async with open_store(url) as writer, open_store(url) as reader:
        assert writer.epoch == reader.epoch
        await writer.append("t", "r", payloads("r", 1))
        got: list[tuple[int, bytes]] = []

        async def follower() -> None:
            got.extend(await collect(reader, "r"))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(follower)
                for start in range(2, 12, 2):
                    await anyio.sleep(0.03)
                    await writer.append("t", "r", payloads("r", 2, start=start))
                await writer.end_run("r")
        assert got == list(enumerate(payloads("r", 11), 1))


_WRITER = textwrap.dedent(
    """
    import sys, anyio
    from agui_pipes.store import open_store

    async def main():
        async with open_store(sys.argv[1]) as store:
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            sys.stdin.readline()
            for n in range(1, 31):
                await store.append("t", "r", [b'{"n":%d}' % n])
                await anyio.sleep(0.005)
            await store.end_run("r")

    anyio.run(main)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
async def test_a_follower_sees_another_process_write(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url_for(kind, request, tmp_path)
    if kind == "sqlite":
        url += "?poll=0.02"
    async with open_store(url) as store:
        await store.append("t", "r", [])  # the run exists before the follower starts
        async with await anyio.open_process([sys.executable, "-c", _WRITER, url]) as writer:
            assert writer.stdin is not None and writer.stdout is not None
            lines = BufferedByteReceiveStream(writer.stdout)
            got: list[tuple[int, bytes]] = []

            async def follower() -> None:
                got.extend(await collect(store, "r"))

            with anyio.fail_after(30):
                assert await lines.receive_until(b"\n", 100) == b"ready"
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(follower)
                    await writer.stdin.send(b"go\n")
                assert await writer.wait() == 0
        assert got == [(n, b'{"n":%d}' % n) for n in range(1, 31)]


# -- property: any interleaving reads back in order ------------------------------------

_BATCHES = st.lists(
    st.tuples(st.sampled_from(["r0", "r1", "r2"]), st.integers(min_value=0, max_value=6)),
    max_size=25,
)


@pytest.mark.parametrize("kind", BACKENDS)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=_BATCHES, ends=st.sets(st.sampled_from(["r0", "r1", "r2"])))
def test_any_interleaving_of_appends_reads_back_in_order(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    batches: list[tuple[str, int]],
    ends: set[str],
) -> None:
    if kind == "redis":
        url = f"{request.getfixturevalue('redis_url')}?prefix=h{uuid.uuid4().hex[:12]}:"
    elif kind == "postgres":
        url = f"{request.getfixturevalue('postgres_url')}?schema=h{uuid.uuid4().hex[:12]}"
    elif kind == "sqlite":
        url = f"sqlite:///{tmp_path / uuid.uuid4().hex}.db"
    else:
        url = "memory:"
    expected: dict[str, list[bytes]] = {}

    async def main() -> None:
        async with open_store(url) as store:
            for run, count in batches:
                start = len(expected.setdefault(run, [])) + 1
                batch = payloads(run, count, start)
                seqs = await store.append(f"thread-{run}", run, batch)
                assert seqs == list(range(start, start + count))
                expected[run].extend(batch)
            for run in sorted(ends & set(expected)):
                await store.end_run(run)
            for run, stored in expected.items():
                assert await store.read(run) == list(enumerate(stored, 1))
                if run in ends:
                    assert await collect(store, run) == list(enumerate(stored, 1))
                    middle = len(stored) // 2
                    tail = await collect(store, run, after=middle)
                    assert tail == list(enumerate(stored, 1))[middle:]

    anyio.run(main)


async def test_a_cancelled_follower_leaves_the_store_usable(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 1))
        with anyio.move_on_after(0.2):
            await collect(store, "r")  # waits for more (in XREAD BLOCK on Redis)
        # the connection the follower was blocked on must not answer the next command
        for round_ in range(3):
            await store.append("t", "r", payloads("r", 1, start=2 + round_))
            assert [seq for seq, _ in await store.read("r")] == list(range(1, 3 + round_))
        await store.end_run("r")
        with anyio.fail_after(10):
            assert [seq for seq, _ in await collect(store, "r")] == [1, 2, 3, 4]


async def test_an_unreachable_redis_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        store = open_store(f"redis://127.0.0.1:{port}/0")
        with pytest.raises(StoreError, match=r"cannot reach the Redis event log at .*127\.0\.0\.1"):
            await store.open()


async def test_a_redis_that_goes_away_is_a_store_error(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        store = open_store(url)
        await store.open()
        await store.append("t", "r", payloads("r", 1))
    try:
        # Unavailable (a server's 503), in words a client may see: no host, no port.
        with pytest.raises(StoreUnavailable, match="cannot be reached; retry later") as caught:
            await store.append("t", "r", payloads("r", 1, 2))
        assert caught.value.http_status == 503
        assert "127.0.0.1" not in str(caught.value)
        with pytest.raises(StoreUnavailable, match="cannot be reached"):
            await store.read("r")
    finally:
        await store.aclose()


# -- signals between processes ---------------------------------------------------------


async def test_reader_stop_and_heartbeat_marks_are_shared(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", payloads("r", 1))
        assert await store.reader_seen("r") is None
        assert await store.stop_requested("r") is None
        assert await store.heartbeat_seen("r") is None
        before = time.time()
        await store.touch_reader("r")
        await store.heartbeat("r")
        await store.request_stop("r", "stopped by a client")
        seen = await store.reader_seen("r")
        beat = await store.heartbeat_seen("r")
        assert seen is not None and before - 1 <= seen <= time.time() + 1
        assert beat is not None and before - 1 <= beat <= time.time() + 1
        assert await store.stop_requested("r") == "stopped by a client"
        assert await store.stop_requested("other") is None
        if not store_url.startswith("memory:"):
            # another store object (another process) sees the same marks
            async with open_store(store_url) as other:
                assert await other.reader_seen("r") == seen
                assert await other.stop_requested("r") == "stopped by a client"


async def test_a_follower_of_a_run_whose_writer_died_gets_run_lost(store_url: str) -> None:
    async with open_store(store_url) as store:
        store.owner_timeout = 0.3
        await store.append("t", "r", payloads("r", 2))
        await store.heartbeat("r")  # then the writer "dies": no more heartbeats
        got: list[tuple[int, bytes]] = []
        with anyio.fail_after(20):
            with pytest.raises(RunLost, match="stopped heartbeating") as caught:
                async for entry in store.follow("r"):
                    got.append(entry)
        assert caught.value.http_status == 410
        assert got == list(enumerate(payloads("r", 2), 1))
        record = await store.run("r")
        assert record is not None and record.status is RunStatus.LOST
        assert record.reason is not None and "owner timeout 0.3" in record.reason
        # the log stays readable, and a later follower learns at once that the run is lost
        assert [seq for seq, _ in await store.read("r")] == [1, 2]
        with anyio.fail_after(5), pytest.raises(RunLost):
            await collect(store, "r", after=1)
        with pytest.raises(RunEnded):
            await store.append("t", "r", payloads("r", 1, 3))


async def test_a_heartbeating_writer_or_no_heartbeat_at_all_is_never_lost(
    store_url: str,
) -> None:
    async with open_store(store_url) as store:
        store.owner_timeout = 0.3
        await store.append("t", "beating", [])
        await store.append("t", "plain", [])  # written without heartbeats: never judged
        got: list[int] = []

        async def follower() -> None:
            async for seq, _ in store.follow("beating"):
                got.append(seq)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(follower)
                for n in range(1, 8):
                    await store.heartbeat("beating")
                    await anyio.sleep(0.15)
                    await store.append("t", "beating", payloads("beating", 1, n))
                await store.end_run("beating")
            assert got == list(range(1, 8))
            # The follower of "plain" checks its owner every owner_timeout / 3: once it
            # has checked twice, "plain" was silent past the timeout and not judged lost.
            checks: list[str] = []
            check_owner = store.check_owner

            async def counted_check(run_id: str, **options: Any) -> object:
                record = await check_owner(run_id, **options)
                checks.append(run_id)
                return record

            store.check_owner = counted_check  # type: ignore[method-assign]
            plain: list[tuple[int, bytes]] = []
            async with anyio.create_task_group() as tasks:

                async def follow_plain() -> None:
                    plain.extend(await collect(store, "plain"))
                    plain.append((-1, b"the follower ended"))

                tasks.start_soon(follow_plain)
                while checks.count("plain") < 2:  # noqa: ASYNC110 - counted by the follower
                    await anyio.sleep(0.01)
                tasks.cancel_scope.cancel()
            assert plain == []  # still following, nothing lost
        record = await store.run("plain")
        assert record is not None and record.status is RunStatus.LIVE


async def test_pruning_a_run_deletes_its_marks(store_url: str) -> None:
    async with open_store(store_url) as store:
        store.retention = Retention(max_runs=1, interval=0)
        for run in ("old", "new"):
            await store.append("t", run, [])
            await store.heartbeat(run)
            await store.touch_reader(run)
            await store.request_stop(run, "stop")
            await store.end_run(run)
        assert await store.prune() == 1
        assert await store.heartbeat_seen("old") is None
        assert await store.reader_seen("old") is None
        assert await store.stop_requested("old") is None
        assert await store.heartbeat_seen("new") is not None
        assert await store.stop_requested("new") == "stop"
