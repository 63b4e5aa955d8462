"""The shared event logs side by side: appends/s and follower latency, SQLite, Postgres, Redis.

    python benchmarks/bench_store_follow.py [--events 20000] [--rounds 3] [--batch 1,32,256]
                                            [--samples 200] [--postgres URL] [--redis URL]

Payloads are realistic wire JSON (``benchmarks/streams.py`` runs encoded by
``agui_pipes.codecs.encode_json``), as in ``bench_store.py``.

* **append** — ``store.append`` of batches of each ``--batch`` size into a
  fresh run, in interleaved rounds (every backend, then again), medians:
  events/s (wall) and this process's CPU µs per event (the database
  server's own CPU is not counted).
* **follow** — the latency from the start of an ``append`` of one event to
  a follower yielding it, one event at a time (the next is appended 20 ms
  after the follower had the previous one: it is waiting again),
  ``--samples`` of them: median and 95th percentile, for a follower on the
  *same* store object as the writer (woken in-process) and on *another* one
  (the path a follower in another process takes: SQLite polls every ``poll``
  seconds, 0.1 by default; Postgres wakes on ``NOTIFY``; Redis on ``XREAD
  BLOCK``).

Without ``--postgres`` / ``--redis`` a throwaway server is started (the test
suite's helpers, ``tests/_postgres.py`` and ``tests/_redis_server.py``) and
left out with a note when it cannot be. The throwaway PostgreSQL keeps its
durable defaults (every commit flushed: ``synchronous_commit=on``); SQLite
runs as the store opens it (WAL, ``synchronous=NORMAL``: no flush per commit);
``pg-nosync`` is the same PostgreSQL with ``synchronous_commit=off`` for the
store's connections (set through the URL), the durability SQLite's setting has.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
from streams import generate

from agui_pipes.codecs import decode, encode_json
from agui_pipes.store import EventLog, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' server helpers


def payloads(count: int) -> list[bytes]:
    out = []
    for wire in generate(count):
        event = decode(orjson.dumps(wire)).event
        assert event is not None
        out.append(encode_json(event))
    return out[:count]


@contextlib.contextmanager
def server(kind: str, given: str | None) -> Iterator[str | None]:
    """``given``, else a throwaway server of ``kind`` (None, with a note, if none can run)."""
    if given is not None:
        yield given
        return
    import pytest

    from tests._postgres import postgres_server
    from tests._redis_server import redis_server

    with tempfile.TemporaryDirectory() as directory:
        try:
            with (
                postgres_server(durable=True)
                if kind == "postgres"
                else redis_server(Path(directory)) as url
            ):
                yield url
        except pytest.skip.Exception as skipped:
            print(f"note: {kind} not measured: {skipped}")
            yield None


async def bench_append(store: EventLog, data: list[bytes], batch: int) -> tuple[float, float]:
    """(events/s, CPU µs/event) for one pass over ``data`` in batches of ``batch``."""
    run = uuid.uuid4().hex
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for start in range(0, len(data), batch):
        await store.append("bench", run, data[start : start + batch])
    await store.end_run(run)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return len(data) / wall, cpu / len(data) * 1e6


async def bench_follow(writer: EventLog, reader: EventLog, samples: int) -> list[float]:
    """Seconds from the start of each one-event append to the follower yielding it."""
    run = uuid.uuid4().hex
    await writer.append("bench", run, [])
    latencies: list[float] = []
    arrived = anyio.Event()
    started = 0.0

    async def follow() -> None:
        nonlocal arrived
        async for _ in reader.follow(run):
            latencies.append(time.perf_counter() - started)
            arrived.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(follow)
        await anyio.sleep(0.2)  # the follower is waiting (and Postgres' listener is up)
        for n in range(samples):
            arrived = anyio.Event()
            started = time.perf_counter()
            await writer.append("bench", run, [b'{"type":"CUSTOM","name":"n","value":%d}' % n])
            with anyio.fail_after(10):
                await arrived.wait()
            await anyio.sleep(0.02)  # the follower is back waiting before the next one
        await writer.end_run(run)
    return latencies


def _ms(values: list[float], quantile: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] * 1000


async def main_async(args: argparse.Namespace, urls: dict[str, str]) -> None:
    data = payloads(args.events)
    size = sum(map(len, data)) / len(data)
    batches = [int(size) for size in args.batch.split(",")]
    print(
        f"{len(data)} events, mean {size:.0f} bytes of JSON; batches {batches}; "
        f"{args.rounds} interleaved rounds, medians"
    )
    stores = {name: open_store(url) for name, url in urls.items()}
    others = {name: open_store(url) for name, url in urls.items()}
    for store in [*stores.values(), *others.values()]:
        await store.open()
    try:
        appends: dict[tuple[str, int], list[tuple[float, float]]] = {
            (name, batch): [] for name in stores for batch in batches
        }
        for _ in range(args.rounds):
            for name, store in stores.items():
                for batch in batches:
                    appends[name, batch].append(await bench_append(store, data, batch))
        print()
        print(f"{'append':<9} {'batch':>5} {'events/s':>10} {'CPU µs/ev':>10}")
        for (name, batch), rows in appends.items():
            rate = statistics.median(r[0] for r in rows)
            cpu = statistics.median(r[1] for r in rows)
            print(f"{name:<9} {batch:>5} {rate:>10,.0f} {cpu:>10.2f}")
        print()
        print(f"{'follow':<9} {'follower':<8} {'median ms':>10} {'p95 ms':>8}")
        for name, store in stores.items():
            for where, reader in (("same", store), ("other", others[name])):
                latencies = await bench_follow(store, reader, args.samples)
                median, p95 = _ms(latencies, 0.5), _ms(latencies, 0.95)
                print(f"{name:<9} {where:<8} {median:>10.2f} {p95:>8.2f}")
    finally:
        for store in [*stores.values(), *others.values()]:
            await store.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", default="1,32,256", help="comma-separated batch sizes")
    parser.add_argument("--samples", type=int, default=200, help="follower latency samples")
    parser.add_argument("--postgres", default=None, help="a postgresql:// URL (default: start one)")
    parser.add_argument("--redis", default=None, help="a redis:// URL (default: start one)")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as directory,
        server("postgres", args.postgres) as postgres,
        server("redis", args.redis) as redis,
    ):
        urls = {"sqlite": f"sqlite:///{directory}/runs.db"}
        if postgres is not None:
            urls["postgres"] = f"{postgres}{'&' if '?' in postgres else '?'}schema=bench"
            # The same, committing without waiting for the flush (libpq's `options`): the
            # durability of SQLite's synchronous=NORMAL (a crash of the database's host may
            # lose the last commits).
            urls["pg-nosync"] = urls["postgres"] + "&options=-c%20synchronous_commit%3Doff"
        if redis is not None:
            urls["redis"] = f"{redis}?prefix=bench{uuid.uuid4().hex[:8]}:"
        anyio.run(main_async, args, urls)


if __name__ == "__main__":
    main()
