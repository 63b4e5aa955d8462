"""The event log's cost on the agent endpoint: CPU per event with no store, memory, SQLite, Redis.

    python benchmarks/bench_durable.py [--events 20000] [--rounds 7] [--redis redis://host:port/db]

What is measured is the whole endpoint (``AgentEndpoint`` driven as an ASGI
app in-process, no HTTP): body validation, the run driver, the frame sink in
the agent's task, the writer, and — with a store — the ``RecordingSink``
numbering each event and the ``RunRecorder`` storing it in batches, until
the run is ended in the store. The agent streams one assistant message of
``--events`` deltas and awaits once per delta (``asyncio.sleep(0)``), like a
model streaming tokens; the ASGI ``send`` only counts bytes.

Variants run interleaved (none, memory, SQLite, Redis, then again, so load
from other processes hits all alike); the medians of CPU µs per event
(``time.process_time``: SQLite's worker threads included) are shown with
their ratio to no store. Redis server CPU (``INFO cpu``) is shown apart.
Without ``--redis`` a ``redis-server`` is started on a free loopback port
(skipped with a note when there is none).

``--instructions`` counts instructions per event instead (valgrind
callgrind, fixed hash seed: reproducible where CPU time on a shared machine
is not): each variant serves one run and then three runs of ``--events``
events in a fresh process, and the difference per event is shown, so
start-up, imports and opening the store cancel out. It counts this
process's threads (SQLite's included), not the Redis server nor the kernel.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import _server_cpu, redis_server

from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint


def make_agent(count: int) -> Any:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.message() as message:
            for n in range(count):
                message.delta(f"token{n % 97} ")
                await asyncio.sleep(0)
        return RunOutcome.success()

    return agent


async def one_run(endpoint: AgentEndpoint) -> int:
    """Serve one run to a null client; the bytes it was sent."""
    body = json.dumps({"threadId": "bench", "runId": uuid.uuid4().hex, "messages": []}).encode()
    sent = 0
    given = False
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal sent
        sent += len(message.get("body", b""))

    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    await endpoint(scope, receive, send)
    return sent


async def main_async(args: argparse.Namespace, redis_url: str | None) -> None:
    with tempfile.TemporaryDirectory() as directory:
        variants: dict[str, str | None] = {
            "none": None,
            "memory": "memory:",
            "sqlite": f"sqlite:///{directory}/runs.db",
        }
        if redis_url is not None:
            variants["redis"] = f"{redis_url}?prefix=b{uuid.uuid4().hex[:8]}:"
        else:
            print("(no redis-server: Redis not measured)")
        agent = make_agent(args.events)
        endpoints = {
            name: AgentEndpoint(agent, store=url, keepalive=None)
            for name, url in variants.items()
        }
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        server: dict[str, list[float]] = {name: [] for name in variants}
        for endpoint in endpoints.values():  # warm up, open the stores
            await one_run(endpoint)
        events = args.events + 4  # RUN_STARTED, TEXT_MESSAGE_START, the deltas, END, RUN_FINISHED
        for _ in range(args.rounds):
            for name, endpoint in endpoints.items():
                store = None if endpoint.durable is None else await endpoint.durable.store()
                server0 = 0.0 if store is None else await _server_cpu(store)
                cpu0 = time.process_time()
                await one_run(endpoint)
                cpu[name].append((time.process_time() - cpu0) / events * 1e6)
                if store is not None:
                    server[name].append((await _server_cpu(store) - server0) / events * 1e6)
        for endpoint in endpoints.values():
            await endpoint.aclose()
    base = statistics.median(cpu["none"])
    print("endpoint, per event   CPU µs   × no store   Redis server CPU µs")
    for name in variants:
        median = statistics.median(cpu[name])
        extra = f"{statistics.median(server[name]):.2f}" if name == "redis" else "-"
        print(f"{name:<20} {median:8.2f} {median / base:12.2f}   {extra}")


async def _child(repeat: int, events: int, url: str) -> None:
    endpoint = AgentEndpoint(make_agent(events), store=url or None, keepalive=None)
    for _ in range(repeat):
        await one_run(endpoint)
    await endpoint.aclose()


def _instructions(repeat: int, events: int, url: str) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--child", str(repeat), str(events), url],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def instructions(events: int, redis_url: str | None) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; --instructions needs it")
    print(f"endpoint, instructions per event ({events} and {3 * events} events, difference)")
    with tempfile.TemporaryDirectory() as directory:
        variants = {"none": "", "memory": "memory:", "sqlite": f"sqlite:///{directory}/r.db"}
        if redis_url is not None:
            variants["redis"] = f"{redis_url}?prefix=ins{uuid.uuid4().hex[:8]}:"
        base = 0.0
        for variant, url in variants.items():
            if variant == "sqlite":
                url = f"sqlite:///{directory}/{uuid.uuid4().hex}.db"
            once = _instructions(1, events, url)
            if variant == "sqlite":
                url = f"sqlite:///{directory}/{uuid.uuid4().hex}.db"
            thrice = _instructions(3, events, url)
            per_event = (thrice - once) / (2 * (events + 4))
            base = base or per_event
            print(f"{variant:<8} {per_event:>10,.0f} instructions/event  {per_event / base:.2f}×")


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        asyncio.run(_child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--redis", default=None, help="a Redis URL (default: start one)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per event under callgrind instead")
    args = parser.parse_args()
    run = (lambda url: instructions(args.events, url)) if args.instructions else (
        lambda url: asyncio.run(main_async(args, url)))
    if args.redis is not None:
        run(args.redis)
        return
    with redis_server() as url:
        run(url)


if __name__ == "__main__":
    main()
