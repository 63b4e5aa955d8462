"""Thread history on a long thread: the first page, and /healthz while readers fold.

    python benchmarks/bench_history.py [--runs 10000] [--deltas 20] [--readers 5]

Builds one thread of ``--runs`` ended runs in a SQLite event log (each run: a
RUN_STARTED carrying the user's turn as ``input``, one assistant message of
``--deltas`` deltas, RUN_FINISHED — what a served run records), then starts
``agui-pipes serve --demo --store sqlite:///...`` in a process of its own and,
from this process:

* **baseline**: /healthz alone, every 10 ms for 2 s (what the machine gives);
* **cold, no snapshot yet**: right after the server started (nothing folded
  yet, and the log holds no history snapshot — a thread written directly, or
  by a version before snapshots), ``--readers`` concurrent ``GET
  /threads/{id}`` (the first page, the default limit), while a prober GETs
  ``/healthz`` every 10 ms;
* **warm**: the same again (the fold is kept: only runs ended since are read);
* **cold after a restart**: a new server process on the same log, which now
  holds the snapshot the first one kept — what a restarted server meets;
* **one page**: a single warm ``GET /threads/{id}``, and an older page
  (``?before=``).

It prints each reader's time to the whole page and /healthz's latency (median,
p99 and max) during the readers. Targets (issue 27): the first page within 1 s,
/healthz under 50 ms. Not a timed test: a measurement to run by hand.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import free_port

THREAD = "bench-thread"


def _run_events(n: int, deltas: int) -> list[bytes]:
    run_id = f"run-{n}"
    user = {"id": f"u-{n}", "role": "user", "content": f"question {n}: what about Porto?"}
    started = {
        "type": "RUN_STARTED",
        "threadId": THREAD,
        "runId": run_id,
        "input": {"threadId": THREAD, "runId": run_id, "messages": [user]},
    }
    message = f"a-{n}"
    events: list[dict[str, object]] = [
        started,
        {"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"},
        *(
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": f"word{d} "}
            for d in range(deltas)
        ),
        {"type": "TEXT_MESSAGE_END", "messageId": message},
        {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run_id},
    ]
    return [json.dumps(e, separators=(",", ":")).encode() for e in events]


async def build(url: str, runs: int, deltas: int) -> None:
    from agui_pipes.store import RunStatus, open_store

    async with open_store(url) as store:
        for n in range(runs):
            await store.append(THREAD, f"run-{n}", _run_events(n, deltas))
            await store.end_run(f"run-{n}", RunStatus.FINISHED)


class Served:
    """``agui-pipes serve --demo --store URL`` in a process of its own."""

    def __init__(self, store: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [
            sys.executable,
            "-m",
            "agui_pipes",
            "serve",
            "--demo",
            "--store",
            store,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise SystemExit(f"serve exited:\n{self.log.read().decode(errors='replace')}")
            try:
                if httpx.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise SystemExit("serve did not come up within 60 s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


async def _read(client: httpx.AsyncClient, url: str) -> tuple[float, int, bytes]:
    start = time.perf_counter()
    response = await client.get(url)
    return time.perf_counter() - start, response.status_code, response.content


async def idle(base: str, seconds: float = 2.0) -> list[float]:
    """/healthz latencies with no reader: what this machine gives at all."""
    probes: list[float] = []
    async with httpx.AsyncClient(timeout=600) as probe:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            took, _, _ = await _read(probe, f"{base}/healthz")
            probes.append(took)
            await anyio.sleep(0.01)
    return probes


async def phase(base: str, readers: int) -> tuple[list[float], list[float], bytes]:
    """``readers`` concurrent history reads; /healthz latencies (seconds) meanwhile."""
    pages: list[float] = []
    probes: list[float] = []
    body = b""
    done = anyio.Event()
    limits = httpx.Limits(max_connections=readers + 2)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def reader() -> None:
            nonlocal body
            took, status, content = await _read(client, f"{base}/threads/{THREAD}")
            if status != 200:
                raise SystemExit(f"GET threads answered {status}: {content[:300]!r}")
            pages.append(took)
            body = content

        async def prober() -> None:
            async with httpx.AsyncClient(timeout=600) as probe:
                while not done.is_set():
                    took, _, _ = await _read(probe, f"{base}/healthz")
                    probes.append(took)
                    await anyio.sleep(0.01)

        async with anyio.create_task_group() as tg:
            tg.start_soon(prober)
            async with anyio.create_task_group() as readers_group:
                for _ in range(readers):
                    readers_group.start_soon(reader)
            done.set()
    return pages, probes, body


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def report(name: str, pages: list[float], probes: list[float]) -> None:
    ordered = sorted(probes)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"| {name} | {_ms(min(pages))} | {_ms(max(pages))} | {len(probes)} | "
        f"{_ms(statistics.median(probes))} | {_ms(p99)} | {_ms(max(probes))} |"
    )


async def main_async(args: argparse.Namespace) -> None:
    directory = Path(tempfile.mkdtemp(prefix="bench-history-"))
    store = f"sqlite:///{directory / 'runs.db'}"
    start = time.perf_counter()
    await build(store, args.runs, args.deltas)
    size = (directory / "runs.db").stat().st_size
    took = time.perf_counter() - start
    print(f"built {args.runs:,} runs x {args.deltas + 4} events in {took:.1f} s", end="")
    print(f" ({size / 1e6:.1f} MB of SQLite)")
    print()
    print(
        "| phase | page ms (fastest) | page ms (slowest) | /healthz probes | "
        "/healthz median ms | p99 ms | max ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    served = Served(store)
    try:
        report("no reader (baseline)", [0.0], await idle(served.url))
        pages, probes, body = await phase(served.url, args.readers)
        report(f"cold, no snapshot yet, {args.readers} readers", pages, probes)
        pages, probes, warm = await phase(served.url, args.readers)
        report(f"warm, {args.readers} readers", pages, probes)
    finally:
        served.stop()
    # A restart: nothing folded in memory, the snapshot the first server kept in the log.
    served = Served(store)
    try:
        pages, probes, body = await phase(served.url, args.readers)
        report(f"cold after a restart (snapshot), {args.readers} readers", pages, probes)
        if body != warm:
            raise SystemExit("the page after the restart differs from the first server's")
        async with httpx.AsyncClient(timeout=600) as client:
            one, _, body = await _read(client, f"{served.url}/threads/{THREAD}")
            older, status, _ = await _read(
                client, f"{served.url}/threads/{THREAD}?before=run-{args.runs // 2}&limit=100"
            )
        print()
        print(
            f"one warm page: {_ms(one)} ms, {len(body):,} bytes; "
            f"an older page (?before=the middle run): {_ms(older)} ms (status {status})"
        )
    finally:
        served.stop()
    shutil.rmtree(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--deltas", type=int, default=20)
    parser.add_argument("--readers", type=int, default=5)
    anyio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    main()
