"""Load benchmark: many concurrent streaming clients through the gateway, vs direct.

    python benchmarks/bench_gateway.py [--clients 200] [--runs 2] [--pace 0.005]

Three processes on 127.0.0.1: an upstream serving the demo agent (each event
stamped with the wall-clock time it left the agent, in ``metadata``), the
gateway under test (``agui-pipes serve --upstream ... --config CHAIN``, a real
CLI process), and this client, which opens ``--clients`` concurrent
streaming runs, ``--runs`` times each — first straight at the upstream, then
through the gateway. Reported:

* events/s delivered through the gateway under that load;
* per-event latency (arrival at the client minus departure from the agent),
  p50 and p99, direct and via the gateway, and the difference: what the
  gateway adds;
* gateway CPU time per relayed event (from /proc, user + system);
* errors: any run that does not end in RUN_FINISHED, any non-200 — must be 0.

All processes share the machine, so the client's and the upstream's work
competes with the gateway's: figures are an upper bound on the gateway cost.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
_SENT = re.compile(rb'"bench_sent_ns":(\d+)')
_TICKS = os.sysconf("SC_CLK_TCK")

GATEWAY_CHAIN = """\
version: 1
transformers:
  - expand_chunks
  - type: verify
    profile: consumer
    on_violation: run_error
"""


# -- the upstream process ---------------------------------------------------


def upstream_main(port: int, pace: float) -> None:
    """Serve the demo agent, stamping each event as it leaves the agent."""
    import uvicorn
    from ag_ui.core import BaseEvent

    from agui_pipes import StreamTransformer, TransformerChain
    from agui_pipes.demo import DemoAgent
    from agui_pipes.server import build_app

    class Stamp(StreamTransformer):
        def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
            metadata = {**(event.metadata or {}), "bench_sent_ns": time.time_ns()}
            return (event.model_copy(update={"metadata": metadata}),)

    app = build_app(agent=DemoAgent(pace=pace), chain=lambda: TransformerChain([Stamp()]))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", backlog=4096)


# -- helpers ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited: {process.args}")
        try:
            if httpx.get(url + "/healthz", timeout=1).text == "ok":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"server did not come up: {process.args}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the client ---------------------------------------------------------------


class Phase:
    def __init__(self, name: str) -> None:
        self.name = name
        self.latencies_ms: list[float] = []
        self.events = 0
        self.errors: list[str] = []
        self.runs = 0
        self.wall = 0.0


async def one_run(client: httpx.AsyncClient, url: str, run_id: str, phase: Phase) -> None:
    body = {
        "threadId": f"t-{run_id}",
        "runId": run_id,
        "messages": [{"id": f"{run_id}-u", "role": "user", "content": "A weekend in Porto?"}],
    }
    buffer = b""
    last = b""
    try:
        async with client.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                phase.errors.append(f"{run_id}: HTTP {response.status_code}")
                return
            async for chunk in response.aiter_raw():
                now = time.time_ns()
                buffer += chunk
                frames = buffer.split(b"\n\n")
                buffer = frames.pop()
                for frame in frames:
                    if not frame.startswith(b"data:"):
                        continue  # keep-alive comment
                    phase.events += 1
                    sent = _SENT.search(frame)
                    if sent is not None:
                        phase.latencies_ms.append((now - int(sent.group(1))) / 1e6)
                    last = frame
    except httpx.HTTPError as exc:
        phase.errors.append(f"{run_id}: {type(exc).__name__}: {exc}")
        return
    if b'"type":"RUN_FINISHED"' not in last:
        phase.errors.append(f"{run_id}: ended with {last[:120]!r}")
    phase.runs += 1


async def load(url: str, clients: int, runs: int, name: str) -> Phase:
    phase = Phase(name)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0), limits=limits) as client:

        async def worker(index: int) -> None:
            for n in range(runs):
                await one_run(client, url, f"{name}-{index}-{n}", phase)

        start = time.monotonic()
        async with anyio.create_task_group() as tg:
            for index in range(clients):
                tg.start_soon(worker, index)
        phase.wall = time.monotonic() - start
    return phase


def report(phase: Phase) -> None:
    lat = phase.latencies_ms
    print(
        f"{phase.name:<8} runs {phase.runs:>5}  events {phase.events:>8}  "
        f"{phase.events / phase.wall:>9,.0f} events/s  latency p50 {percentile(lat, 0.5):7.2f} ms"
        f"  p99 {percentile(lat, 0.99):7.2f} ms  errors {len(phase.errors)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2, help="sequential runs per client")
    parser.add_argument("--pace", type=float, default=0.005, help="demo pause between words")
    parser.add_argument("--keep-log", metavar="PATH", help="save the gateway's log there")
    parser.add_argument("--upstream-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_port is not None:
        upstream_main(args.upstream_port, args.pace)
        return 0

    up_port, gw_port = free_port(), free_port()
    up_url, gw_url = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{gw_port}"
    with tempfile.TemporaryDirectory() as tmp:
        chain_file = Path(tmp) / "chain.yaml"
        chain_file.write_text(GATEWAY_CHAIN)
        gateway_log = Path(tmp) / "gateway.log"
        upstream = subprocess.Popen(
            [sys.executable, __file__, "--upstream-port", str(up_port), "--pace", str(args.pace)]
        )
        with gateway_log.open("wb") as log:
            gateway = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "agui_pipes",
                    "serve",
                    "--upstream",
                    up_url + "/",
                    "--config",
                    str(chain_file),
                    "--port",
                    str(gw_port),
                    "--log-level",
                    "info",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_healthy(up_url, upstream)
            wait_healthy(gw_url, gateway)
            anyio.run(load, gw_url + "/", 10, 1, "warmup")
            direct = anyio.run(load, up_url + "/", args.clients, args.runs, "direct")
            cpu_before = cpu_seconds(gateway.pid)
            relayed = anyio.run(load, gw_url + "/", args.clients, args.runs, "gateway")
            gateway_cpu = cpu_seconds(gateway.pid) - cpu_before
        finally:
            for process in (gateway, upstream):
                process.terminate()
                process.wait(15)
        log_lines = gateway_log.read_text().splitlines()
        run_lines = sum(1 for line in log_lines if "gateway run " in line)
        if args.keep_log is not None:
            Path(args.keep_log).write_text("\n".join(log_lines) + "\n")

    print(
        f"{args.clients} concurrent clients x {args.runs} runs, demo pace {args.pace}s, "
        f"{os.cpu_count()} CPUs shared by upstream, gateway and clients"
    )
    report(direct)
    report(relayed)
    p50 = percentile(relayed.latencies_ms, 0.5) - percentile(direct.latencies_ms, 0.5)
    p99 = percentile(relayed.latencies_ms, 0.99) - percentile(direct.latencies_ms, 0.99)
    print(f"added by the gateway: p50 {p50:+.2f} ms  p99 {p99:+.2f} ms per event")
    print(
        f"gateway CPU: {gateway_cpu:.2f} s for {relayed.events} events = "
        f"{gateway_cpu / max(relayed.events, 1) * 1e6:.1f} µs/event; "
        f"{run_lines} per-run log lines"
    )
    errors = direct.errors + relayed.errors
    for error in errors[:10]:
        print("error:", error)
        run_id = error.split(":")[0]
        for line in log_lines:
            if run_id in line:
                print("   gateway log:", line)
    problems = [line for line in log_lines if "Traceback" in line or " ERROR " in line]
    for line in problems[:20]:
        print("gateway log:", line)
    print(f"errors: {len(errors)}")
    mean = statistics.fmean(relayed.latencies_ms) if relayed.latencies_ms else 0.0
    print(f"(gateway mean latency {mean:.2f} ms over {len(relayed.latencies_ms)} events)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
