"""Thread leases and the compare-and-set run creation, in every event log backend.

Leases are how a server keeps one live run per thread across processes (through
the store, never a lock of its own); ``create_run`` is the one atomic point at
which a run id becomes a run, so that simultaneous requests naming it start it
once.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agui_pipes.store import RunStatus, ThreadTaken, open_store
from tests._store_backends import BACKENDS, redis_url, store_url_for

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

pytestmark = pytest.mark.anyio


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


async def test_a_thread_lease_is_held_by_one_run_until_released(store_url: str) -> None:
    async with open_store(store_url) as store:
        assert await store.acquire_thread("t", "r1") is None
        assert await store.acquire_thread("t", "r1") is None  # its own lease again
        assert await store.acquire_thread("t", "r2") == "r1"
        assert await store.acquire_thread("t", "r2", scope="other") is None  # per scope
        assert await store.renew_thread("t", "r1") is True
        assert await store.renew_thread("t", "r2") is False
        await store.release_thread("t", "r2")  # not its lease: left alone
        assert await store.acquire_thread("t", "r3") == "r1"
        await store.release_thread("t", "r1")
        assert await store.acquire_thread("t", "r3") is None


async def test_a_lease_past_its_ttl_is_free(store_url: str) -> None:
    async with open_store(store_url) as store:
        assert await store.acquire_thread("t", "dead", ttl=0.2) is None
        assert await store.acquire_thread("t", "next") == "dead"
        with anyio.fail_after(5):
            while await store.acquire_thread("t", "next") is not None:  # noqa: ASYNC110 - expires in the store
                await anyio.sleep(0.05)
        assert await store.renew_thread("t", "dead") is False


async def test_create_run_is_a_compare_and_set_keeping_the_digest(store_url: str) -> None:
    async with open_store(store_url) as store:
        assert await store.create_run("t", "r", digest="abc") is True
        assert await store.create_run("t", "r", digest="def") is False
        assert await store.run_digest("r") == "abc"
        record = await store.run("r")
        assert record is not None and record.status is RunStatus.LIVE and record.last_seq == 0
        await store.append("t", "r", [b'{"type":"CUSTOM","name":"x","value":1}'])
        await store.end_run("r")
        assert await store.create_run("t", "r") is False  # an ended run is still the id's
        await store.append("t2", "old", [])
        assert await store.run_digest("old") is None  # a run created without one
        with pytest.raises(ThreadTaken):
            await store.create_run("t", "theirs", scope="intruder")


async def test_simultaneous_creates_of_one_run_id_create_it_once(
    store_url: str, tmp_path: Path
) -> None:
    created: list[bool] = []
    async with open_store(store_url) as first, open_store(store_url) as second:
        stores = [first, second] if not store_url.startswith("memory") else [first, first]

        async def create(index: int) -> None:
            created.append(await stores[index % 2].create_run("t", "r", digest="d"))

        async with anyio.create_task_group() as tg:
            for index in range(20):
                tg.start_soon(create, index)
    assert sorted(created) == [False] * 19 + [True]
