"""The event log's cost on the agent endpoint or the gateway: CPU per event, no store vs stores.

    python benchmarks/bench_durable.py [--events 20000] [--rounds 7] [--redis redis://host:port/db]
    python benchmarks/bench_durable.py --gateway [--frames-per-read 16] ...

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

``--gateway`` measures the gateway instead (``Gateway`` driven as an ASGI
app, its relay path: no chain): its upstream is an in-process httpx
transport replaying the same run's SSE, pre-encoded, in reads of
``--frames-per-read`` frames (yielding to the loop between reads, as a
socket would), so what is counted is the gateway's own work — decoding,
the relay, re-encoding and, with a store, splitting each batch per frame,
numbering and recording it.

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

import httpx
from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from bench_store import _server_cpu, redis_server

from agui_pipes.codecs import encode_sse
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, Gateway


def make_agent(count: int) -> Any:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.message() as message:
            for n in range(count):
                message.delta(f"token{n % 97} ")
                await asyncio.sleep(0)
        return RunOutcome.success()

    return agent


def upstream_sse(count: int) -> list[bytes]:
    """The frames an upstream agent sends for one message of ``count`` deltas."""
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id="bench", run_id="upstream"),
        TextMessageStartEvent(message_id="m", role="assistant"),
        *(TextMessageContentEvent(message_id="m", delta=f"token{n % 97} ") for n in range(count)),
        TextMessageEndEvent(message_id="m"),
        RunFinishedEvent(thread_id="bench", run_id="upstream"),
    ]
    return [encode_sse(event) for event in events]


class _Reads(httpx.AsyncByteStream):
    def __init__(self, reads: list[bytes]) -> None:
        self._reads = reads

    async def __aiter__(self) -> Any:
        for read in self._reads:
            await asyncio.sleep(0)
            yield read


class ReplayUpstream(httpx.AsyncBaseTransport):
    """An upstream answering every POST with the same SSE, in reads of ``per_read`` frames."""

    def __init__(self, frames: list[bytes], per_read: int) -> None:
        self._reads = [b"".join(frames[i : i + per_read]) for i in range(0, len(frames), per_read)]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Reads(self._reads)
        )


def make_subject(gateway: bool, events: int, url: str | None, per_read: int) -> Any:
    """The ASGI app measured: the endpoint with its agent, or the gateway with its upstream."""
    if not gateway:
        return AgentEndpoint(make_agent(events), store=url, keepalive=None)
    client = httpx.AsyncClient(transport=ReplayUpstream(upstream_sse(events), per_read))
    return Gateway("http://upstream.invalid/", client=client, store=url, keepalive=None)


async def one_run(endpoint: AgentEndpoint | Gateway) -> int:
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
        endpoints = {
            name: make_subject(args.gateway, args.events, url, args.frames_per_read)
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
    what = f"gateway ({args.frames_per_read} frames/read)" if args.gateway else "endpoint"
    print(f"{what}, per event   CPU µs   × no store   Redis server CPU µs")
    for name in variants:
        median = statistics.median(cpu[name])
        extra = f"{statistics.median(server[name]):.2f}" if name == "redis" else "-"
        print(f"{name:<20} {median:8.2f} {median / base:12.2f}   {extra}")


async def _child(repeat: int, events: int, url: str, gateway: bool, per_read: int) -> None:
    endpoint = make_subject(gateway, events, url or None, per_read)
    for _ in range(repeat):
        await one_run(endpoint)
    await endpoint.aclose()


def _instructions(repeat: int, events: int, url: str, gateway: bool, per_read: int) -> int:
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            str(repeat),
            str(events),
            url,
            str(int(gateway)),
            str(per_read),
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


def instructions(
    events: int, redis_url: str | None, gateway: bool, per_read: int, only: list[str] | None
) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; --instructions needs it")
    what = f"gateway ({per_read} frames/read)" if gateway else "endpoint"
    print(f"{what}, instructions per event ({events} and {3 * events} events, difference)")
    with tempfile.TemporaryDirectory() as directory:
        variants = {"none": "", "memory": "memory:", "sqlite": f"sqlite:///{directory}/r.db"}
        if redis_url is not None:
            variants["redis"] = f"{redis_url}?prefix=ins{uuid.uuid4().hex[:8]}:"
        base = 0.0
        for variant, url in variants.items():
            if only and variant != "none" and variant not in only:
                continue
            if variant == "sqlite":
                url = f"sqlite:///{directory}/{uuid.uuid4().hex}.db"
            once = _instructions(1, events, url, gateway, per_read)
            if variant == "sqlite":
                url = f"sqlite:///{directory}/{uuid.uuid4().hex}.db"
            thrice = _instructions(3, events, url, gateway, per_read)
            per_event = (thrice - once) / (2 * (events + 4))
            base = base or per_event
            print(f"{variant:<8} {per_event:>10,.0f} instructions/event  {per_event / base:.2f}×")


def main() -> None:
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        asyncio.run(
            _child(
                int(sys.argv[2]),
                int(sys.argv[3]),
                sys.argv[4],
                sys.argv[5] == "1",
                int(sys.argv[6]),
            )
        )
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--redis", default=None, help="a Redis URL (default: start one)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per event under callgrind instead",
    )
    parser.add_argument(
        "--gateway",
        action="store_true",
        help="measure the gateway's relay path instead of the agent endpoint",
    )
    parser.add_argument(
        "--frames-per-read",
        type=int,
        default=16,
        help="gateway: frames per read from the replayed upstream (default 16)",
    )
    parser.add_argument(
        "--only",
        default="",
        help="--instructions: the stores to count besides none, comma-separated "
        "(memory,sqlite,redis; default all)",
    )
    args = parser.parse_args()
    if args.frames_per_read < 1:
        parser.error("--frames-per-read must be >= 1")
    only = [name for name in args.only.split(",") if name]
    run = (
        (lambda url: instructions(args.events, url, args.gateway, args.frames_per_read, only))
        if args.instructions
        else (lambda url: asyncio.run(main_async(args, url)))
    )
    if args.redis is not None:
        run(args.redis)
        return
    with redis_server() as url:
        run(url)


if __name__ == "__main__":
    main()
