"""What only the Postgres event log has: its URL, its pool, its one listening connection.

The shared suite (test_store.py, test_store_leases.py, test_store_scopes.py...) runs
on Postgres like on every backend; these tests cover what is Postgres' own, against a
real PostgreSQL (tests/_postgres.py): the URL options, the bounded pool and its
timeout as a ``StoreError``, ``LISTEN/NOTIFY`` through one connection per store
object (and what happens when that connection is killed), seqs that never
interleave when two store objects append to one run, and a server going away.
"""

from __future__ import annotations

import socket
import uuid
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from agui_pipes.store import EventLog, StoreError, open_store
from agui_pipes.store.postgres import PostgresEventLog
from tests._postgres import postgres_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def pg_url(postgres_url: str) -> str:
    """A fresh, empty store: a new schema in the session's database."""
    return f"{postgres_url}?schema=p{uuid.uuid4().hex[:12]}"


def payloads(count: int, start: int = 1) -> list[bytes]:
    return [b'{"type":"CUSTOM","name":"n","value":%d}' % n for n in range(start, start + count)]


class _Admin:
    """A plain session on the test database, beside the store (psycopg's sync connection,
    each statement in a worker thread: its async one runs on asyncio only)."""

    def __init__(self, postgres_url: str) -> None:
        self._url = postgres_url
        self._conn: psycopg.Connection | None = None

    async def __aenter__(self) -> _Admin:
        self._conn = await anyio.to_thread.run_sync(
            lambda: psycopg.connect(self._url, autocommit=True)
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._conn is not None:
            await anyio.to_thread.run_sync(self._conn.close)

    async def execute(self, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        conn = self._conn
        assert conn is not None

        def run() -> list[tuple[Any, ...]]:
            cursor = conn.execute(query.encode(), params)
            return cursor.fetchall() if cursor.description is not None else []

        return await anyio.to_thread.run_sync(run)


async def _listeners(postgres_url: str, schema: str) -> int:
    """Sessions LISTENing on the store's channel: those whose last statement was its LISTEN."""
    async with _Admin(postgres_url) as admin:
        rows = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query = %s",
            (f'LISTEN "agui_pipes.{schema}"',),
        )
        return int(rows[0][0])


# -- the URL -----------------------------------------------------------------------------


def test_the_url_options_and_the_rest_for_libpq() -> None:
    store = open_store(
        "postgresql://app:secret@db:6543/runs?schema=tenant_a&pool=3&pool_timeout=2.5"
        "&poll=1&max_runs=9&sslmode=disable&connect_timeout=4"
    )
    assert isinstance(store, PostgresEventLog)
    assert (store.schema, store.pool_size, store.pool_timeout, store.poll) == (
        "tenant_a",
        3,
        2.5,
        1.0,
    )
    assert store.retention.max_runs == 9
    assert (
        store.conninfo == "postgresql://app:secret@db:6543/runs?sslmode=disable&connect_timeout=4"
    )
    assert repr(store) == "PostgresEventLog('postgresql://db:6543/runs', schema='tenant_a')"
    # libpq decodes %20, not '+', to a space: an option with spaces reaches it intact
    spaced = open_store("postgresql://db/runs?options=-c%20synchronous_commit%3Doff")
    assert isinstance(spaced, PostgresEventLog)
    assert conninfo_to_dict(spaced.conninfo)["options"] == "-c synchronous_commit=off"
    default = open_store("postgres://db/runs")
    assert isinstance(default, PostgresEventLog)
    assert (default.schema, default.pool_size, default.pool_timeout, default.poll) == (
        "agui_pipes",
        10,
        10.0,
        5.0,
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://", "names no Postgres server"),
        ("postgresql://db/runs?schema=Bad-Name", "schema='Bad-Name' must be a lowercase SQL name"),
        ("postgresql://db/runs?schema=" + "x" * 41, "at most 40 characters"),
        ("postgresql://db/runs?pool=0", "pool='0' must be positive"),
        ("postgresql://db/runs?pool=2.5", "pool='2.5' is not an integer"),
        ("postgresql://db/runs?pool_timeout=soon", "pool_timeout='soon' is not a number"),
        ("postgresql://db/runs?poll=-1", "poll='-1' must be positive"),
        ("postgresql://db/runs?colour=blue", "libpq cannot read it.*colour"),
    ],
)
def test_bad_urls_are_refused_before_connecting(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        open_store(url)
    assert repr(url) in str(caught.value)


# -- failures are StoreErrors ------------------------------------------------------------


async def test_an_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        store = open_store(f"postgresql://agui@127.0.0.1:{port}/runs")
        with pytest.raises(
            StoreError, match=r"cannot open the Postgres event log at .*127\.0\.0\.1"
        ) as caught:
            await store.open()
        assert caught.value.http_status == 500


async def test_a_server_that_goes_away_is_a_store_error() -> None:
    with postgres_server() as url:
        store = open_store(url)
        await store.open()
        await store.append("t", "r", payloads(1))
    try:
        with pytest.raises(StoreError, match=r"the Postgres event log .* failed"):
            await store.append("t", "r", payloads(1, 2))
        with pytest.raises(StoreError, match="failed"):
            await store.read("r")
    finally:
        await store.aclose()


async def test_a_schema_of_another_layout_is_refused(pg_url: str, postgres_url: str) -> None:
    async with open_store(pg_url) as store:
        assert isinstance(store, PostgresEventLog)
        schema = store.schema
    async with _Admin(postgres_url) as admin:
        await admin.execute(f"UPDATE \"{schema}\".meta SET value = '9' WHERE key = 'format'")
    with pytest.raises(StoreError, match=r"has layout '9'.*use another schema"):
        async with open_store(pg_url):
            pass


async def test_a_call_that_waits_past_pool_timeout_fails_and_the_pool_recovers(
    pg_url: str, postgres_url: str
) -> None:
    async with open_store(pg_url + "&pool=1&pool_timeout=0.3") as store:
        assert isinstance(store, PostgresEventLog)
        await store.append("t", "r", payloads(1))
        async with _Admin(postgres_url) as blocker:
            # Another session holds the run's row: the next append waits on it, holding
            # the store's only pooled connection.
            await blocker.execute("BEGIN")
            await blocker.execute(
                f'SELECT 1 FROM "{store.schema}".runs WHERE run_id = %s FOR UPDATE', ("r",)
            )
            seqs: list[int] = []
            async with anyio.create_task_group() as tasks:

                async def append() -> None:
                    seqs.extend(await store.append("t", "r", payloads(1, 2)))

                tasks.start_soon(append)
                with anyio.fail_after(20):
                    while True:  # the waiting append has the connection: the pool is empty
                        try:
                            await store.read("r")
                        except StoreError as exc:
                            refused = str(exc)
                            break
                        await anyio.sleep(0.01)
                assert "PoolTimeout" in refused
                await blocker.execute("ROLLBACK")
        assert seqs == [2]
        assert [seq for seq, _ in await store.read("r")] == [1, 2]


# -- LISTEN/NOTIFY -----------------------------------------------------------------------


async def _follow_all(store: EventLog, run_id: str, into: list[int]) -> None:
    async for seq, _ in store.follow(run_id):
        into.append(seq)


async def test_many_followers_share_one_listening_connection(
    pg_url: str, postgres_url: str
) -> None:
    # poll=60: a follower not woken by a notification would wait a minute, past fail_after.
    async with (
        open_store(pg_url + "&poll=60&pool=4") as writer,
        open_store(pg_url + "&poll=60&pool=4") as reader,
    ):
        assert isinstance(reader, PostgresEventLog)
        runs = [f"r{n}" for n in range(5)]
        for run in runs:
            await writer.append("t", run, [])
        got: dict[str, list[list[int]]] = {run: [[] for _ in range(6)] for run in runs}
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                for run in runs:
                    for into in got[run]:
                        tasks.start_soon(_follow_all, reader, run, into)
                while await _listeners(postgres_url, reader.schema) < 1:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
                for start in range(1, 10, 3):
                    for run in runs:
                        await writer.append("t", run, payloads(3, start))
                assert await _listeners(postgres_url, reader.schema) == 1  # 30 followers
                for run in runs:
                    await writer.end_run(run)
        assert all(seqs == list(range(1, 10)) for lists in got.values() for seqs in lists)


async def test_followers_catch_up_when_the_listening_connection_is_killed(
    pg_url: str, postgres_url: str
) -> None:
    async with open_store(pg_url + "&poll=60") as writer, open_store(pg_url + "&poll=60") as reader:
        assert isinstance(reader, PostgresEventLog)
        await writer.append("t", "r", payloads(1))
        got: list[int] = []
        listen = f'LISTEN "agui_pipes.{reader.schema}"'
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_follow_all, reader, "r", got)
                while got != [1] or await _listeners(postgres_url, reader.schema) < 1:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
                async with _Admin(postgres_url) as admin:
                    await admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s",
                        (listen,),
                    )
                    # Written while no one listens: the reconnected listener wakes everyone.
                    await writer.append("t", "r", payloads(1, 2))
                while got != [1, 2]:  # noqa: ASYNC110 - appended by the follower
                    await anyio.sleep(0.02)
                await writer.append("t", "r", payloads(1, 3))
                await writer.end_run("r")
        assert got == [1, 2, 3]


# -- several writers ---------------------------------------------------------------------


async def test_two_store_objects_appending_to_one_run_never_interleave(pg_url: str) -> None:
    async with open_store(pg_url) as first, open_store(pg_url) as second:
        await first.append("t", "r", [])
        given: list[list[int]] = []

        async def write(store: EventLog, tag: int) -> None:
            for n in range(40):
                batch = [b'{"w":%d,"n":%d,"k":%d}' % (tag, n, k) for k in range(3)]
                given.append(await store.append("t", "r", batch))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(write, first, 1)
            tasks.start_soon(write, second, 2)
        entries = await first.read("r")
        assert [seq for seq, _ in entries] == list(range(1, 241))
        assert sorted(seq for seqs in given for seq in seqs) == list(range(1, 241))
        for seqs in given:  # each batch got consecutive seqs, holding its own events in order
            assert seqs == list(range(seqs[0], seqs[0] + 3))
            batch = [entries[seq - 1][1] for seq in seqs]
            assert len({data.split(b',"k"')[0] for data in batch}) == 1
