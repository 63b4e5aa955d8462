"""The event log's cost on the real gateway over HTTP: instructions per event, no store vs stores.

    python benchmarks/bench_durable_http.py [--events 20000] [--runs 3] [--redis URL]

The gateway as users run it — ``agui-pipes serve --upstream URL`` (uvicorn,
no chain: the relay path), with and without ``--store`` — in front of the
replay upstream of ``bench_serving.py`` (a raw asyncio server answering every
POST with the same pre-encoded SSE body of ``--events`` events from
``streams.py``'s realistic stream). This process is the client.

Each gateway runs under valgrind's callgrind, so what is counted is the
gateway process alone (all its threads: SQLite's worker threads included;
not the Redis server, not the kernel): after one warm-up run the counters
are zeroed (``callgrind_control --zero``), ``--runs`` runs are served, and
the counters dumped (``callgrind_control --dump``); instructions per event
is that count over the events relayed. Instruction counts do not depend on
the load from other processes, as CPU time on a shared machine does; time
does pass about fifty times slower under callgrind, so the recorder's 5 ms
linger gathers smaller batches than it would natively (the store's per-append
costs weigh more here than in production: the figures are an upper bound).

For CPU time instead (noisier, natively): ``bench_serving.py --replay-only
--store URL ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serving import Phase, Server, _child, free_port, load, sse_body
from bench_store import redis_server


class _Callgrind:
    """``agui-pipes serve`` under callgrind, up once its /healthz answers."""

    def __init__(self, name: str, serve_args: list[str], directory: Path) -> None:
        self.name = name
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.out = directory / f"{name}.%p.out"
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--fair-sched=yes",
            f"--callgrind-out-file={self.out}",
            sys.executable,
            "-m",
            "agui_pipes",
            "serve",
            *serve_args,
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--keepalive",
            "0",
        ]
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            argv,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{name} exited at start-up:\n{self._output()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=5).text == "ok":
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise SystemExit(f"{name} did not come up under valgrind in 10 minutes")

    def _output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def control(self, *args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(self.process.pid)], check=True, capture_output=True
        )

    def dumped_instructions(self) -> int:
        """Instructions since the last zeroing, from the dump just written."""
        pattern = str(self.out).replace("%p", str(self.process.pid))
        dumps = sorted(
            Path(pattern).parent.glob(Path(pattern).name + "*"),
            key=lambda path: path.stat().st_mtime,
        )
        for path in reversed(dumps):
            found = re.search(
                r"^(?:summary|totals): (\d+)", path.read_text(errors="replace"), re.MULTILINE
            )
            if found is not None:
                return int(found.group(1))
        raise SystemExit(f"no callgrind dump with totals for {self.name}: {dumps}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def measure(
    name: str, upstream: Server, store: str | None, events: int, runs: int, directory: Path
) -> float:
    serve_args = ["--upstream", upstream.url + "/"]
    if store is not None:
        serve_args += ["--store", store]
    gateway = _Callgrind(name.replace("/", "_"), serve_args, directory)
    try:
        phase = Phase("warmup", 1)
        anyio.run(load, gateway.url + "/", 1, 1, phase)
        gateway.control("--zero")
        phase = Phase(name, 1)
        anyio.run(load, gateway.url + "/", 1, runs, phase)
        if phase.errors:
            raise SystemExit(f"{name}: {phase.errors[:3]}")
        gateway.control("--dump")
        time.sleep(1)
        return gateway.dumped_instructions() / (runs * events)
    finally:
        gateway.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--redis", default=None, help="a Redis URL (default: start one)")
    parser.add_argument(
        "--only",
        default="",
        help="the stores to count besides none, comma-separated (memory,sqlite,redis; default all)",
    )
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed; this benchmark needs it")
    only = [name for name in args.only.split(",") if name]
    redis = contextlib.nullcontext(args.redis) if args.redis else redis_server()
    with tempfile.TemporaryDirectory() as tmp, redis as redis_url:
        directory = Path(tmp)
        body_file = directory / "stream.sse"
        body = sse_body(args.events)
        body_file.write_bytes(body)
        events = body.count(b"\n\ndata:") + 1
        port = free_port()
        upstream = Server("upstream", _child("upstream", port, "--_arg", str(body_file)), port)
        variants: dict[str, str | None] = {
            "none": None,
            "memory": "memory:",
            "sqlite": f"sqlite:///{directory}/runs.db",
        }
        if redis_url is not None:
            variants["redis"] = f"{redis_url}?prefix=bdh{uuid.uuid4().hex[:8]}:"
        print(
            f"gateway over HTTP (relay path, no chain), {events:,}-event runs, "
            f"instructions per event in the gateway process"
        )
        try:
            base = 0.0
            for name, store in variants.items():
                if only and name != "none" and name not in only:
                    continue
                per_event = measure(name, upstream, store, events, args.runs, directory)
                base = base or per_event
                print(
                    f"{name:<8} {per_event:>10,.0f} instructions/event  {per_event / base:.2f}×",
                    flush=True,
                )
        finally:
            upstream.stop()


if __name__ == "__main__":
    main()
