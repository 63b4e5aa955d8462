"""A thread's folded history kept in the event log: a cold read folds only the runs after it.

Every backend (memory, SQLite, Redis, Postgres), through the store's own API
and ``ThreadHistories`` (what ``GET threads/{id}`` and the POST's new-message
check read): after one process folded a thread of more than
``SNAPSHOT_EVERY`` runs, a fresh one (a restart, a thread that left the cache)
reads its runs' events only for the runs after the snapshot, and serves the
same page bytes a fold of every run gives; a snapshot that no longer matches
the thread's runs, or does not read, is ignored and the thread folded from its
runs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agui_pipes.server._thread_histories import SNAPSHOT_EVERY, ThreadHistories
from agui_pipes.store import EventLog, MemoryEventLog, RunStatus, open_store
from tests._store_backends import BACKENDS, postgres_url, redis_url, store_url_for

pytestmark = pytest.mark.anyio

__all__ = ["postgres_url", "redis_url"]  # the session fixtures, used through store_url_for

THREAD = "t-snap"


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[EventLog]:
    async with open_store(store_url) as log:
        yield log


def _run(n: int) -> list[bytes]:
    run_id = f"r{n}"
    user = {"id": f"u{n}", "role": "user", "content": f"question {n}"}
    events: list[dict[str, Any]] = [
        {
            "type": "RUN_STARTED",
            "threadId": THREAD,
            "runId": run_id,
            "input": {"threadId": THREAD, "runId": run_id, "messages": [user]},
        },
        {"type": "TEXT_MESSAGE_START", "messageId": f"a{n}", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"a{n}", "delta": f"answer {n}"},
        {"type": "TEXT_MESSAGE_END", "messageId": f"a{n}"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"turn": n}},
        {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run_id},
    ]
    return [json.dumps(e).encode() for e in events]


async def _add_runs(store: EventLog, start: int, stop: int) -> None:
    for n in range(start, stop):
        await store.append(THREAD, f"r{n}", _run(n))
        await store.end_run(f"r{n}", RunStatus.FINISHED)


def _count_reads(store: EventLog) -> Callable[[], list[str]]:
    """Note each run whose events the store is asked for (a spy on the real store)."""
    read = store.read
    seen: list[str] = []

    async def counted(run_id: str, *args: Any, **kwargs: Any) -> list[tuple[int, bytes]]:
        seen.append(run_id)
        return await read(run_id, *args, **kwargs)

    store.read = counted  # type: ignore[method-assign]
    return lambda: seen


async def _page(store: EventLog, **kwargs: Any) -> bytes:
    return (await ThreadHistories().page(store, "default", THREAD, **kwargs)).head


async def test_a_fresh_reader_starts_from_the_snapshot(store: EventLog) -> None:
    runs = SNAPSHOT_EVERY * 2 + 5
    await _add_runs(store, 0, runs)
    first = await _page(store)  # folds every run, keeps the snapshot
    assert await store.history_snapshot("r0") is not None
    reads = _count_reads(store)
    again = await _page(store)  # a new process: nothing folded in memory
    assert again == first
    # Only the runs after the snapshot (at most SNAPSHOT_EVERY - 1 of them).
    assert len(reads()) < SNAPSHOT_EVERY
    assert reads() == [f"r{n}" for n in range(runs - len(reads()), runs)]


async def test_runs_ended_after_the_snapshot_are_folded_on(store: EventLog) -> None:
    await _add_runs(store, 0, SNAPSHOT_EVERY + 1)
    await _page(store)
    await _add_runs(store, SNAPSHOT_EVERY + 1, SNAPSHOT_EVERY + 8)
    restored = await _page(store)
    histories = ThreadHistories()
    messages = await histories.messages(store, "default", THREAD)
    assert [m["id"] for m in messages][-2:] == [f"u{SNAPSHOT_EVERY + 7}", f"a{SNAPSHOT_EVERY + 7}"]
    # The same bytes as folding every run (no snapshot: a thread under SNAPSHOT_EVERY runs
    # folded by a reader whose store keeps none).
    await store.put_history_snapshot("r0", b"{}", scope="default")
    assert await _page(store) == restored
    older = (await _page(store, before=f"r{SNAPSHOT_EVERY}", limit=3)).decode()
    assert f"question {SNAPSHOT_EVERY - 1}" in older
    assert f"question {SNAPSHOT_EVERY - 3}" in older
    assert f"question {SNAPSHOT_EVERY}" not in older


async def test_a_snapshot_of_runs_the_thread_no_longer_holds_is_ignored(
    store: EventLog,
) -> None:
    await _add_runs(store, 0, SNAPSHOT_EVERY + 2)
    await _page(store)
    # A run the snapshot folded is broken now: the history holds it no more.
    await store.mark_broken("r5", "test", scope="default")
    reads = _count_reads(store)
    page = (await _page(store)).decode()
    assert "answer 5" not in page and "answer 6" in page
    assert len(reads()) == SNAPSHOT_EVERY + 1  # folded from its runs


async def test_an_unreadable_snapshot_is_logged_and_the_runs_folded(
    store: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    await _add_runs(store, 0, SNAPSHOT_EVERY + 2)
    expected = await _page(store)
    await store.put_history_snapshot("r0", b'["x"]\n{"format": "other"}', scope="default")
    with caplog.at_level(logging.WARNING, logger="agui_pipes.server"):
        assert await _page(store) == expected
    assert "history snapshot is unusable" in caplog.text
    # And the fold that replaced it was kept: the next fresh reader uses it.
    reads = _count_reads(store)
    assert await _page(store) == expected
    assert len(reads()) < SNAPSHOT_EVERY


async def test_the_snapshot_is_deleted_with_the_first_run(store_url: str) -> None:
    from agui_pipes.store import Retention

    async with open_store(store_url, retention=Retention(max_runs_per_thread=4)) as store:
        await _add_runs(store, 0, SNAPSHOT_EVERY + 2)
        await _page(store)
        assert await store.history_snapshot("r0") is not None
        await store.prune()
        assert await store.history_snapshot("r0") is None
        page = (await _page(store)).decode()
        assert "answer 0" not in page and f"answer {SNAPSHOT_EVERY + 1}" in page


async def test_a_store_that_cannot_keep_the_snapshot_still_serves_the_page(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agui_pipes.store import StoreUnavailable

    class Full(MemoryEventLog):
        async def put_history_snapshot(self, run_id: str, data: bytes, **kw: Any) -> None:
            raise StoreUnavailable("the disk is full", "ENOSPC", 5)

    async with Full() as store:
        await _add_runs(store, 0, SNAPSHOT_EVERY + 2)
        with caplog.at_level(logging.WARNING, logger="agui_pipes.server"):
            page = (await _page(store)).decode()
        assert f"answer {SNAPSHOT_EVERY + 1}" in page
        assert "cannot keep its history snapshot" in caplog.text
        assert await store.history_snapshot("r0") is None
