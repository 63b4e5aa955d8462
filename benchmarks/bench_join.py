"""Joining a live run: time to the first frame, and server memory per reader.

    python benchmarks/bench_join.py [--events 2000] [--readers 1 10 100] [--store sqlite]

A server subprocess (this file with ``--serve``: an agent endpoint with a store,
uvicorn) runs one agent whose run streams ``--events`` text deltas, then holds
the run open until the benchmark says so (a file appears). This process then
opens N concurrent readers of that live run with ``GET runs/{runId}?join=1``
and measures, for each N:

* time to first frame — from sending the GET to the first SSE frame (the join
  head: the run's ``--events`` deltas folded into one ``MESSAGES_SNAPSHOT``),
  median and max over the N readers;
* the server's RSS with the N readers connected, minus its RSS before they
  connected, over N: memory per extra reader (``/proc/PID/status`` VmRSS).

Then the run is released, every reader must read it to its ``RUN_FINISHED``
(the check is part of the benchmark: a reader that ends early fails it).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def serve(port: int, store: str, events: int, release: Path) -> None:
    """The server side: one agent endpoint with ``store``; each run holds until ``release``."""
    import uvicorn

    from agui_pipes.driver import RunContext, RunOutcome
    from agui_pipes.server import build_app

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.message() as message:
            for n in range(events):
                message.delta(f"token{n} ")
            while not release.exists():  # noqa: ASYNC110, ASYNC240 - a file the benchmark makes
                await anyio.sleep(0.02)
            message.delta("end")
        return RunOutcome.success()

    app = build_app(agent=agent, path="/agent", store=store, detach_grace=120, keepalive=None)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


async def _reader(client: httpx.AsyncClient, url: str, first: list[float], done: list[int]) -> None:
    started = time.perf_counter()
    frames = 0
    async with client.stream("GET", url) as response:
        assert response.status_code == 200, response.status_code
        buffer = b""
        async for chunk in response.aiter_raw():
            if not frames:
                first.append(time.perf_counter() - started)
            buffer += chunk
            frames += chunk.count(b"\n\n")
        if b'"RUN_FINISHED"' not in buffer[-400:]:
            raise AssertionError("a reader ended before the run's RUN_FINISHED")
    done.append(frames)


async def measure(
    base: str, pid: int, readers: int, run_id: str, release: Path
) -> dict[str, float]:
    limits = httpx.Limits(max_connections=readers + 10)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        body = {"threadId": f"t-{run_id}", "runId": run_id, "messages": []}
        post = await client.send(
            client.build_request(
                "POST", "/agent", json=body, headers={"accept": "text/event-stream"}
            ),
            stream=True,
        )
        await post.aclose()  # the run detaches and goes on
        await anyio.sleep(0.5)  # let the detached run settle before the baseline
        before = _rss_kib(pid)
        first: list[float] = []
        done: list[int] = []
        async with anyio.create_task_group() as tg:
            for _ in range(readers):
                tg.start_soon(_reader, client, f"/agent/runs/{run_id}?join=1", first, done)
            while len(first) < readers:  # noqa: ASYNC110 - counted by the reader tasks
                await anyio.sleep(0.01)
            await anyio.sleep(0.3)
            during = _rss_kib(pid)
            release.touch()  # noqa: ASYNC240 - one tiny file, once
        release.unlink()  # noqa: ASYNC240
        assert len(done) == readers
        return {
            "readers": readers,
            "first_ms_median": statistics.median(first) * 1000,
            "first_ms_max": max(first) * 1000,
            "kib_per_reader": (during - before) / readers,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--readers", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--store", default="sqlite", help="sqlite, memory or a store URL")
    parser.add_argument("--serve", nargs=4, metavar=("PORT", "STORE", "EVENTS", "RELEASE"))
    args = parser.parse_args()
    if args.serve:
        port, store, events, release = args.serve
        serve(int(port), store, int(events), Path(release))
        return
    with tempfile.TemporaryDirectory() as tmp:
        store = {"sqlite": f"sqlite:///{tmp}/runs.db", "memory": "memory:"}.get(
            args.store, args.store
        )
        release = Path(tmp) / "release"
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port), store, str(args.events), str(release)],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{base}/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not start")
                time.sleep(0.1)
            print(f"store {args.store}, a run of {args.events} deltas held open")
            print(f"{'readers':>8} {'first frame ms (median / max)':>30} {'KiB per reader':>15}")
            for n, readers in enumerate(args.readers):
                row = anyio.run(measure, base, server.pid, readers, f"run-{n}", release)
                first = f"{row['first_ms_median']:>17.1f} / {row['first_ms_max']:<10.1f}"
                print(f"{row['readers']:>8} {first} {row['kib_per_reader']:>15.1f}")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
