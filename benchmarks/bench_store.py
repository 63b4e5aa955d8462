"""The event log's cost: events/s appended in batches, and CPU per event, per backend.

    python benchmarks/bench_store.py [--events 20000] [--rounds 5] [--batch 1,32,256]
                                     [--redis redis://host:port/db]

Payloads are realistic wire JSON: ``benchmarks/streams.py`` runs, decoded and
encoded with ``agui_pipes.codecs.encode_json``, exactly what a server hands
the log.

Two measures, each timed in interleaved rounds (memory, SQLite, Redis, then
the same again, so load from other processes hits all alike; medians shown):

* **append** — ``store.append`` of batches of each ``--batch`` size into
  fresh runs (size 1 is an unbatched writer, for comparison): events/s
  (wall) and CPU µs per event. CPU is this process's (``time.process_time``,
  which includes SQLite's worker threads) plus, for Redis, the server's own
  (``INFO cpu`` before and after).
* **gateway path** — what a server pays per event: the baseline is
  ``encode_json(decode(payload).event)`` framed as ``data: ...`` (the
  gateway's per-event work with no stage, yielding to the loop every 64
  events); the recorded variant adds ``await recorder.record(json)`` — the
  JSON the server made anyway — with a ``RunRecorder`` flushing in the
  background, to the end of the run (the last batch stored, the run ended). The
  ratio is the store's CPU overhead per event (issue 16 targets ≤ 1.25×);
  Redis server CPU is shown apart.

Without ``--redis`` a ``redis-server`` is started on a free loopback port
(skipped with a note when there is none).

``--instructions`` measures the gateway path instead in instructions per
event (valgrind callgrind, fixed hash seed: reproducible where CPU time on a
shared machine is not): each variant runs once and three times over
``--events`` events in a fresh process, and the difference per event is
shown, so start-up and warm-up cancel out. It counts this process's threads
(SQLite's inserts included), not the Redis server nor the kernel. Under
valgrind the recorder's 5 ms linger gathers fewer events per batch than at
full speed (batches follow the loop's turns, 64 events here), so per-batch
costs weigh more than they do natively.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
from streams import generate

from agui_pipes.codecs import decode, encode_json
from agui_pipes.store import EventLog, RunRecorder, open_store


def payloads(count: int) -> list[bytes]:
    out = []
    for wire in generate(count):
        event = decode(orjson.dumps(wire)).event
        assert event is not None
        out.append(encode_json(event))
    return out[:count]


@contextmanager
def redis_server() -> Iterator[str | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                directory,
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait()


async def _server_cpu(store: EventLog) -> float:
    """The Redis server's CPU seconds so far (0 for the other backends)."""
    client = getattr(store, "_client", None)
    if client is None:
        return 0.0
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def bench_append(
    store: EventLog, data: list[bytes], batch: int
) -> tuple[float, float, float]:
    """(events/s, client CPU µs/event, server CPU µs/event) for one pass over ``data``."""
    run = uuid.uuid4().hex
    server0 = await _server_cpu(store)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for start in range(0, len(data), batch):
        await store.append("bench", run, data[start : start + batch])
    await store.end_run(run)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    server = await _server_cpu(store) - server0
    n = len(data)
    return n / wall, cpu / n * 1e6, server / n * 1e6


async def bench_gateway(store: EventLog | None, data: list[bytes]) -> tuple[float, float]:
    """(client CPU µs/event, server CPU µs/event) for the gateway's per-event work."""
    server0 = 0.0 if store is None else await _server_cpu(store)
    frames = []
    cpu0 = time.process_time()
    if store is None:
        for index, payload in enumerate(data):
            json = encode_json(decode(payload).event)  # type: ignore[arg-type]
            frames.append(b"data: " + json + b"\n\n")
            if index % 64 == 63:
                await asyncio.sleep(0)  # a server yields to the loop while it writes
    else:
        async with RunRecorder(store, "bench", uuid.uuid4().hex) as recorder:
            for index, payload in enumerate(data):
                json = encode_json(decode(payload).event)  # type: ignore[arg-type]
                frames.append(b"data: " + json + b"\n\n")
                await recorder.record(json)
                if index % 64 == 63:
                    await asyncio.sleep(0)
    cpu = time.process_time() - cpu0
    server = 0.0 if store is None else await _server_cpu(store) - server0
    return cpu / len(data) * 1e6, server / len(data) * 1e6


async def main_async(args: argparse.Namespace, redis_url: str | None) -> None:
    data = payloads(args.events)
    size = sum(map(len, data)) / len(data)
    batches = [int(size) for size in args.batch.split(",")]
    print(
        f"{len(data)} events, mean {size:.0f} bytes of JSON; batches {batches}; "
        f"{args.rounds} interleaved rounds, medians"
    )
    with tempfile.TemporaryDirectory() as directory:
        urls = {"memory": "memory:", "sqlite": f"sqlite:///{directory}/runs.db"}
        if redis_url is not None:
            urls["redis"] = f"{redis_url}?prefix=bench{uuid.uuid4().hex[:8]}:"
        stores = {name: open_store(url) for name, url in urls.items()}
        for store in stores.values():
            await store.open()
        try:
            appends: dict[tuple[str, int], list[tuple[float, float, float]]] = {
                (name, batch): [] for name in stores for batch in batches
            }
            paths: dict[str, list[tuple[float, float]]] = {"none": [], **{n: [] for n in stores}}
            for _ in range(args.rounds):
                for name, store in stores.items():
                    for batch in batches:
                        appends[name, batch].append(await bench_append(store, data, batch))
                paths["none"].append(await bench_gateway(None, data))
                for name, store in stores.items():
                    paths[name].append(await bench_gateway(store, data))
            print()
            print(
                f"{'append':<8} {'batch':>5} {'events/s':>10} {'CPU µs/ev':>10} "
                f"{'server µs/ev':>13}"
            )
            for (name, batch), rows in appends.items():
                rate = statistics.median(r[0] for r in rows)
                cpu = statistics.median(r[1] for r in rows)
                server = statistics.median(r[2] for r in rows)
                print(f"{name:<8} {batch:>5} {rate:>10,.0f} {cpu:>10.2f} {server:>13.2f}")
            print()
            print(f"{'gateway':<8} {'CPU µs/ev':>10} {'× none':>7} {'server µs/ev':>13}")
            base = [r[0] for r in paths["none"]]
            for name, rows in paths.items():
                cpu = statistics.median(r[0] for r in rows)
                ratio = statistics.median(r[0] / b for r, b in zip(rows, base, strict=True))
                server = statistics.median(r[1] for r in rows)
                print(f"{name:<8} {cpu:>10.2f} {ratio:>7.2f} {server:>13.2f}")
        finally:
            for store in stores.values():
                await store.aclose()


async def _child(variant: str, repeat: int, events: int, url: str) -> None:
    data = payloads(events)
    store = None if variant == "none" else open_store(url)
    if store is not None:
        await store.open()
    try:
        for _ in range(repeat):
            await bench_gateway(store, data)
    finally:
        if store is not None:
            await store.aclose()


def _instructions(variant: str, repeat: int, events: int, url: str) -> int:
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            variant,
            str(repeat),
            str(events),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def instructions(events: int, redis_url: str | None, only: list[str] | None = None) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; --instructions needs it")
    print(
        f"gateway path, instructions per event ({events} and {3 * events} events, "
        f"difference; this process only)"
    )
    with tempfile.TemporaryDirectory() as directory:
        variants = {"none": "", "memory": "memory:", "sqlite": ""}
        if redis_url is not None:
            variants["redis"] = f"{redis_url}?prefix=ins{uuid.uuid4().hex[:8]}:"
        base = 0.0
        for variant, url in variants.items():
            if only and variant not in only and variant != "none":
                continue
            if variant == "sqlite":
                url = f"sqlite:///{directory}/{uuid.uuid4().hex}.db"
            once = _instructions(variant, 1, events, url)
            thrice = _instructions(variant, 3, events, url)
            per_event = (thrice - once) / (2 * events)
            base = base or per_event
            print(f"{variant:<8} {per_event:>10,.0f} instructions/event  {per_event / base:.2f}×")


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        asyncio.run(_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", default="1,32,256", help="comma-separated batch sizes")
    parser.add_argument("--redis", default=None, help="a redis:// URL (default: start one)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="the gateway path in instructions per event (valgrind)",
    )
    parser.add_argument(
        "--only",
        default="",
        help="with --instructions: backends to measure "
        "besides the baseline, comma-separated (memory,sqlite,redis)",
    )
    args = parser.parse_args()
    if args.redis:
        if args.instructions:
            instructions(args.events, args.redis, args.only.split(",") if args.only else None)
        else:
            asyncio.run(main_async(args, args.redis))
        return
    with redis_server() as url:
        if url is None:
            print("note: no redis-server on PATH; Redis not measured")
        if args.instructions:
            instructions(args.events, url, args.only.split(",") if args.only else None)
        else:
            asyncio.run(main_async(args, url))


if __name__ == "__main__":
    main()
