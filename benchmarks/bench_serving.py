"""Serving benchmark: real servers on loopback, measured side by side in one run.

    python benchmarks/bench_serving.py               # a few minutes
    python benchmarks/bench_serving.py --quick       # < 1 min: 10k-event stream, fewer runs
    python benchmarks/bench_serving.py --json out.json --markdown out.md

Every server is a separate process (uvicorn on 127.0.0.1, except the replay
upstream, a raw asyncio server so that it is never the bottleneck); this
process is the client (httpx, concurrent streaming runs on anyio). Paths:

1. ``direct``   — the client reads the replay upstream itself: it answers
   every POST with the same pre-encoded SSE body (``streams.py``'s realistic
   stream, ``--events`` events, written as fast as the socket takes it);
2. ``proxy``    — a bare pass-through proxy (Starlette + httpx, bytes
   streamed through with no decoding) in front of that upstream;
3. ``gateway``  — ``agui-pipes serve --upstream URL --config CHAIN`` (the real
   CLI) in front of the same upstream; the default chain has the stages of
   the in-process suite's gateway path (``suite.py``), so the two compare;
   With ``--store URL`` (repeatable) a ``gateway+<scheme>`` row follows it:
   the same gateway recording every run in that event log (ids on every
   frame, the recorder's batched appends), so the store's cost per event on
   the real gateway path is the difference between the two rows;
4. ``endpoint/demo`` and ``endpoint/tokens`` — ``AgentEndpoint`` (via
   ``build_app``, no chain) serving the demo agent, and an agent streaming
   ``--tokens`` deltas with one ``await`` per token (as a model stream does),
   with each of ``--clients`` concurrent clients; ``driver/tokens`` is the
   same token agent through the run driver alone, in this process, for
   comparison. ``--baseline DIR`` serves both agents from the agui_pipes
   checkout in ``DIR`` too (``baseline/...`` rows, measured right after the
   ``endpoint/...`` row of the same client count): before/after in one run.
5. ``in-process`` (with ``--in-process``) — after each gateway phase, the
   gateway's own loop (SSE decoding of 64 KiB reads, ``Relay`` through the
   same chain) over the same body in this process: what the gateway's server
   CPU per event costs beyond it is the serving layer's (``--replay-only``
   skips the endpoint phases).

Figures, per phase:

* ``events/s``  — data frames received by all clients / wall time of the phase;
* ``server µs/event`` — user + system CPU of the server process under test
  (from ``/proc/<pid>/stat`` before and after the phase, so the process's
  own threads count and nothing else does) / events: on the replay paths the
  events the upstream sent (a chain may drop or merge some; the gateway did
  the work for each), elsewhere the events the clients received.
  For ``direct`` that is the replay upstream; for ``proxy`` and ``gateway``
  the proxy or gateway only (the upstream's CPU is listed separately);
  ``driver/tokens`` is this process's CPU time;
* ``client µs/event`` — this process's CPU (all the clients) per event
  received: where it approaches 1e6 / events/s the client, not the server,
  sets the pace (the Python client is the bottleneck of ``direct``);
* ``TTFE``      — time to first event: from just before the request is sent
  to the arrival of the first ``data:`` frame, p50 / p99 over runs;
* ``gap``       — per-event inter-arrival time: for the event at position
  i > 0 in its run, its arrival minus the arrival of the event at position
  i - 1 (frames arriving in the same read share a timestamp, gap 0); p50 /
  p99 over all events. It shows how bursty delivery is: what a user sees as
  stutter;
* ``latency``   — per-event latency where the producer stamps its events
  (``endpoint/tokens`` only: each delta carries ``time.time_ns()`` taken as
  the agent emits it): arrival at the client minus emission, p50 / p99.
  Same machine, same clock.

All processes share the machine, so the client's work competes with the
server's: wall-clock figures are a lower bound on what the server alone could
do, CPU per event is the figure to compare across paths. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _raw_http import read_head  # noqa: E402
from streams import generate  # noqa: E402

_TICKS = os.sysconf("SC_CLK_TCK")
_STAMP = re.compile(rb'"delta":"(\d{19}) "')
_FINISHED = b'"type":"RUN_FINISHED"'

#: The in-process suite's gateway path (``suite.gateway_chain``) as a chain file.
GATEWAY_CHAIN = """\
version: 1
transformers:
  - expand_chunks
  - type: filter_tool_calls
    deny: ["internal_*"]
  - type: subagent_visibility
    mode: inline
  - type: tool_result_to_state
    tool: update_items
    mode: delta
  - type: verify
    profile: consumer
"""


# -- server processes ---------------------------------------------------------------------


def sse_body(events: int, state_heavy: bool = False) -> bytes:
    """The replayed stream, SSE-encoded once (``streams.py``, deterministic)."""
    from streams import generate_state_heavy

    source = generate_state_heavy(events) if state_heavy else generate(events)
    return b"".join(
        b"data: " + json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
        for event in source
    )


def upstream_main(port: int, body_file: Path) -> None:
    """Replay ``body_file`` to every POST (HTTP/1.1 keep-alive, chunked); GET /healthz is ok."""
    body = body_file.read_bytes()
    piece = 256 * 1024
    chunks = [
        f"{len(body[i : i + piece]):x}\r\n".encode() + body[i : i + piece] + b"\r\n"
        for i in range(0, len(body), piece)
    ] + [b"0\r\n\r\n"]
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await read_head(reader)
                if request is None:
                    return
                headers, length = request
                if length:
                    await reader.readexactly(length)
                if headers.startswith(b"GET /healthz"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                else:
                    writer.write(head)
                    for chunk in chunks:
                        writer.write(chunk)
                        await writer.drain()
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def proxy_main(port: int, upstream: str) -> None:
    """A bare pass-through proxy: forward the POST, stream the upstream's bytes back as they come.

    The floor for any HTTP relay in Python on this stack (uvicorn, Starlette,
    httpx): what the gateway costs beyond it is decoding, the chain and encoding.
    """
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Route

    client = httpx.AsyncClient(
        timeout=httpx.Timeout(60.0),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=512),
    )

    async def relay(request: Request) -> Response:
        body = await request.body()
        upstream_request = client.build_request(
            "POST", upstream, content=body, headers={"content-type": "application/json"}
        )
        response = await client.send(upstream_request, stream=True)

        async def pump() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_raw():
                    yield chunk
            finally:
                await response.aclose()

        return StreamingResponse(pump(), media_type="text/event-stream")

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(
        routes=[Route("/", relay, methods=["POST"]), Route("/healthz", health, methods=["GET"])]
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def token_agent(tokens: int) -> Callable[[Any], Any]:
    """An agent streaming ``tokens`` deltas with one ``await`` per token, as a model stream does.

    Each delta is its own emission time (``time.time_ns()``), so the client can
    measure per-event latency without any stage stamping events in the server.
    """
    from agui_pipes import RunOutcome

    async def agent(ctx: Any) -> Any:
        message = ctx.assistant_message()
        for _ in range(tokens):
            message.delta(f"{time.time_ns()} ")
            await anyio.lowlevel.checkpoint()
        message.end()
        return RunOutcome.success()

    return agent


def endpoint_main(port: int, agent_name: str, tokens: int) -> None:
    """Serve the demo agent or the token agent through ``build_app`` (no chain)."""
    import uvicorn

    from agui_pipes.demo import DemoAgent
    from agui_pipes.server import build_app

    agent: Any = DemoAgent() if agent_name == "demo" else token_agent(tokens)
    app = build_app(agent=agent)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


# -- helpers ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Server:
    """A server subprocess, up once its /healthz answers."""

    def __init__(
        self, name: str, argv: list[str], port: int, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.url = f"http://127.0.0.1:{port}"
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{name} exited at start-up:\n{self.output()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).text == "ok":
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        output = self.output()
        self.stop()
        raise SystemExit(f"{name} did not come up:\n{output}")

    @property
    def cpu(self) -> float:
        return cpu_seconds(self.process.pid)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.log.closed:
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _child(role: str, port: int, *extra: str) -> list[str]:
    return [sys.executable, __file__, "--_role", role, "--_port", str(port), *extra]


# -- the client ---------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    clients: int
    per_run: int | None = None  # events the upstream sends per run (replay paths)
    runs: int = 0
    events: int = 0
    wall: float = 0.0
    server_cpu: float = 0.0
    other_cpu: float | None = None  # the upstream's, behind a proxy or gateway
    client_cpu: float | None = None  # this process's: the clients' (they share the machine)
    ttfe_ms: list[float] = field(default_factory=list)
    gaps_ms: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        def ms(values: list[float], q: float) -> float | None:
            return round(percentile(values, q), 3) if values else None

        # CPU per event of the replayed stream on the replay paths (a gateway's chain may
        # drop or merge events: the work is per event it was handed), per event received
        # otherwise
        events = max(self.runs * self.per_run if self.per_run else self.events, 1)
        return {
            "phase": self.name,
            "clients": self.clients,
            "runs": self.runs,
            "events": self.events,
            "events_per_s": round(self.events / self.wall) if self.wall else None,
            "server_us_per_event": round(self.server_cpu / events * 1e6, 2),
            "upstream_us_per_event": None
            if self.other_cpu is None
            else round(self.other_cpu / events * 1e6, 2),
            "client_us_per_event": None
            if self.client_cpu is None
            else round(self.client_cpu / max(self.events, 1) * 1e6, 2),
            "ttfe_ms": [ms(self.ttfe_ms, 0.5), ms(self.ttfe_ms, 0.99)],
            "gap_ms": [ms(self.gaps_ms, 0.5), ms(self.gaps_ms, 0.99)],
            "latency_ms": [ms(self.latency_ms, 0.5), ms(self.latency_ms, 0.99)],
            "errors": len(self.errors),
            "first_errors": self.errors[:3],
        }


async def one_run(client: httpx.AsyncClient, url: str, run_id: str, phase: Phase) -> None:
    body = {
        "threadId": f"t-{run_id}",
        "runId": run_id,
        "messages": [{"id": f"{run_id}-u", "role": "user", "content": "A weekend in Porto?"}],
    }
    buffer = b""
    last = b""
    previous: int | None = None
    gaps, latency = phase.gaps_ms, phase.latency_ms
    events = 0
    sent = time.time_ns()
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
                        if not frame.startswith(b"id:"):
                            continue  # a keep-alive comment
                        frame = frame.partition(b"\n")[2]  # a recorded run's frame: id line
                    if previous is None:
                        phase.ttfe_ms.append((now - sent) / 1e6)
                    else:
                        gaps.append((now - previous) / 1e6)
                    previous = now
                    events += 1
                    stamp = _STAMP.search(frame)
                    if stamp is not None:
                        latency.append((now - int(stamp.group(1))) / 1e6)
                    last = frame
    except httpx.HTTPError as exc:
        phase.errors.append(f"{run_id}: {type(exc).__name__}: {exc}")
        return
    finally:
        phase.events += events
    if _FINISHED not in last:
        phase.errors.append(f"{run_id}: ended with {last[:160]!r}")
    phase.runs += 1


async def load(url: str, clients: int, runs: int, phase: Phase) -> None:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0), limits=limits) as client:

        async def worker(index: int) -> None:
            for n in range(runs):
                # Unique across phases: a gateway with an event log refuses a run id twice.
                await one_run(
                    client, url, f"{phase.name}-{index}-{n}-{uuid.uuid4().hex[:8]}", phase
                )

        start = time.monotonic()
        async with anyio.create_task_group() as tg:
            for index in range(clients):
                tg.start_soon(worker, index)
        phase.wall = time.monotonic() - start


def measure(
    name: str,
    server: Server,
    clients: int,
    runs: int,
    behind: Server | None = None,
    per_run: int | None = None,
) -> Phase:
    """One phase: ``clients`` concurrent clients, ``runs`` runs each, against ``server``."""
    anyio.run(load, server.url + "/", min(clients, 4), 1, Phase("warmup", 1))
    phase = Phase(name, clients, per_run)
    cpu, other = server.cpu, behind.cpu if behind is not None else 0.0
    client = time.process_time()
    anyio.run(load, server.url + "/", clients, runs, phase)
    phase.client_cpu = time.process_time() - client
    phase.server_cpu = server.cpu - cpu
    if behind is not None:
        phase.other_cpu = behind.cpu - other
    print(_line(phase.row()), flush=True)
    return phase


def in_process(body: bytes, chain_file: Path, runs: int, clients: int) -> Phase:
    """The gateway's own loop over the replayed body in this process, without HTTP.

    What the gateway does per upstream read (``SSEDecoder.feed_bytes`` on 64 KiB,
    then ``Relay.feed`` through the chain file's stages), with none of the
    serving layer: no sockets, no ASGI, no per-stage counters for the log line.
    The gateway's server CPU per event over this is the serving layer's cost.
    """
    from agui_pipes.codecs import SSEDecoder
    from agui_pipes.config import load_chain
    from agui_pipes.relay import Relay

    factory = load_chain(chain_file)
    per_run = body.count(b"\n\ndata:") + 1
    phase = Phase("in-process", clients, per_run)
    cpu, wall = time.process_time(), time.monotonic()
    for _ in range(runs):
        decoder, relay = SSEDecoder(), Relay(factory())
        for at in range(0, len(body), 65536):
            relay.feed(decoder.feed_bytes(body[at : at + 65536]))
        decoder.close()
        relay.finish()
        phase.runs += 1
        phase.events += relay.events_out
    phase.server_cpu, phase.wall = time.process_time() - cpu, time.monotonic() - wall
    print(_line(phase.row()), flush=True)
    return phase


def driver_alone(tokens: int, runs: int) -> Phase:
    """The token agent through the run driver alone, in this process (CPU time)."""
    from agui_pipes import run

    agent = token_agent(tokens)
    phase = Phase("driver/tokens", 1)

    async def consume() -> None:
        for n in range(runs):
            async with run(agent, {"threadId": "t", "runId": f"r{n}"}) as stream:
                async for _ in stream:
                    phase.events += 1
            phase.runs += 1

    cpu, wall = time.process_time(), time.monotonic()
    anyio.run(consume)
    phase.server_cpu, phase.wall = time.process_time() - cpu, time.monotonic() - wall
    print(_line(phase.row()), flush=True)
    return phase


# -- reporting ----------------------------------------------------------------------------


def _pair(values: list[float | None]) -> str:
    return " / ".join("–" if v is None else f"{v:.2f}" for v in values)


def _line(row: dict[str, Any]) -> str:
    upstream = row["upstream_us_per_event"]
    return (
        f"{row['phase']:<16} {row['clients']:>4} cl {row['runs']:>5} runs "
        f"{row['events']:>9,} ev {row['events_per_s'] or 0:>10,} ev/s "
        f"server {row['server_us_per_event']:>7.2f} µs/ev"
        + (f" (upstream {upstream:.2f})" if upstream is not None else "")
        + f" client {_pair([row['client_us_per_event']])}"
        f"  ttfe {_pair(row['ttfe_ms'])} ms  gap {_pair(row['gap_ms'])} ms"
        f"  latency {_pair(row['latency_ms'])} ms  errors {row['errors']}"
    )


def markdown(report: dict[str, Any]) -> str:
    config = report["config"]
    out = [
        f"Machine: {report['machine']}. Replayed stream: {config['stream_events']:,} events "
        f"({'state-heavy' if config['state_heavy'] else 'realistic'}, `streams.py`); "
        f"token agent: {config['tokens']} deltas per run.",
        "",
        "| path | clients | events | events/s | server CPU µs/event | client CPU µs/event "
        "| TTFE p50 / p99 ms | gap p50 / p99 ms | latency p50 / p99 ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        cpu = f"{row['server_us_per_event']:.2f}"
        if row["upstream_us_per_event"] is not None:
            cpu += f" (+{row['upstream_us_per_event']:.2f} upstream)"
        out.append(
            f"| {row['phase']} | {row['clients']} | {row['events']:,} | "
            f"{row['events_per_s'] or 0:,} | {cpu} | {_pair([row['client_us_per_event']])} | "
            f"{_pair(row['ttfe_ms'])} | "
            f"{_pair(row['gap_ms'])} | {_pair(row['latency_ms'])} | {row['errors']} |"
        )
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="under a minute: a 10k-event stream, fewer runs and tokens",
    )
    parser.add_argument("--events", type=int, help="replayed stream length (default 160000)")
    parser.add_argument(
        "--state-heavy",
        action="store_true",
        help="replay streams.py's state-heavy stream instead of the realistic one",
    )
    parser.add_argument(
        "--replay-runs",
        type=int,
        help="runs per replay phase, split among its clients, at least one each (default 3)",
    )
    parser.add_argument(
        "--replay-clients",
        default="1,10",
        help="comma list of concurrent clients for the replay paths",
    )
    parser.add_argument(
        "--clients",
        default="1,10,50,200",
        help="comma list of concurrent clients for the agent endpoint",
    )
    parser.add_argument("--tokens", type=int, help="deltas per token-agent run (default 400)")
    parser.add_argument(
        "--target",
        type=int,
        help="events per endpoint phase, at least one run per client (default 20000)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of agui_pipes (its repository root) whose endpoint is "
        "measured too, right after this one at each client count: "
        "baseline/demo and baseline/tokens rows",
    )
    parser.add_argument(
        "--chain", type=Path, help="gateway chain file (default: the suite's gateway-path stages)"
    )
    parser.add_argument(
        "--replay-only",
        action="store_true",
        help="only the replay paths (direct, proxy, gateway): no endpoint phases",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="after each gateway phase, the gateway's loop in this process "
        "(no HTTP): the serving layer's cost is the difference",
    )
    parser.add_argument(
        "--store",
        action="append",
        default=[],
        metavar="URL",
        help="also measure the gateway recording every run in this event log "
        "(memory:, sqlite:///PATH, redis://...); repeatable, each a "
        "'gateway+<scheme>' row measured right after 'gateway'",
    )
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument("--markdown", type=Path, help="write the table as Markdown")
    parser.add_argument("--_role", help=argparse.SUPPRESS)
    parser.add_argument("--_port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--_arg", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._role == "upstream":
        upstream_main(args._port, Path(args._arg))
        return 0
    if args._role == "proxy":
        proxy_main(args._port, args._arg)
        return 0
    if args._role in ("demo", "tokens"):
        endpoint_main(args._port, args._role, int(args._arg or 0))
        return 0

    quick = args.quick
    events = args.events or (10_000 if quick else 160_000)
    replay_runs = args.replay_runs or (2 if quick else 3)
    tokens = args.tokens or (100 if quick else 400)
    target = args.target or (4_000 if quick else 20_000)
    replay_clients = [int(c) for c in args.replay_clients.split(",") if c.strip()]
    clients = [int(c) for c in args.clients.split(",") if c.strip()]

    report: dict[str, Any] = {
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "config": {"stream_events": 0, "state_heavy": args.state_heavy, "tokens": tokens},
        "rows": [],
    }
    phases: list[Phase] = []
    with tempfile.TemporaryDirectory() as tmp:
        body_file = Path(tmp) / "stream.sse"
        body = sse_body(events, args.state_heavy)
        body_file.write_bytes(body)
        report["config"]["stream_events"] = body.count(b"\n\ndata:") + 1
        chain_file = args.chain
        if chain_file is None:
            chain_file = Path(tmp) / "chain.yaml"
            chain_file.write_text(GATEWAY_CHAIN)
        print(
            f"{report['machine']}; stream {report['config']['stream_events']:,} events "
            f"({len(body) / 1e6:.1f} MB)",
            flush=True,
        )

        servers: list[Server] = []
        try:
            up_port, px_port, gw_port = free_port(), free_port(), free_port()
            upstream = Server(
                "upstream", _child("upstream", up_port, "--_arg", str(body_file)), up_port
            )
            servers.append(upstream)
            proxy = Server("proxy", _child("proxy", px_port, "--_arg", upstream.url + "/"), px_port)
            servers.append(proxy)
            gateway = Server(
                "gateway",
                [
                    sys.executable,
                    "-m",
                    "agui_pipes",
                    "serve",
                    "--upstream",
                    upstream.url + "/",
                    "--config",
                    str(chain_file),
                    "--port",
                    str(gw_port),
                    "--log-level",
                    "warning",
                    "--keepalive",
                    "0",
                ],
                gw_port,
            )
            servers.append(gateway)
            recorded: list[Server] = []
            for store_url in args.store:
                port = free_port()
                recorded.append(
                    Server(
                        f"gateway+{store_url.split(':', 1)[0]}",
                        [
                            sys.executable,
                            "-m",
                            "agui_pipes",
                            "serve",
                            "--upstream",
                            upstream.url + "/",
                            "--config",
                            str(chain_file),
                            "--port",
                            str(port),
                            "--log-level",
                            "warning",
                            "--keepalive",
                            "0",
                            "--store",
                            store_url,
                        ],
                        port,
                    )
                )
                servers.append(recorded[-1])
            for n in replay_clients:
                # interleaved: the three paths back to back for each client count
                sent = report["config"]["stream_events"]
                runs = max(1, replay_runs // n)
                phases.append(measure("direct", upstream, n, runs, per_run=sent))
                phases.append(measure("proxy", proxy, n, runs, upstream, sent))
                phases.append(measure("gateway", gateway, n, runs, upstream, sent))
                for server in recorded:
                    phases.append(measure(server.name, server, n, runs, upstream, sent))
                if args.in_process:
                    phases.append(in_process(body, chain_file, max(2, min(runs * n, 3)), n))
            for server in servers:
                server.stop()
            servers.clear()

            for agent in () if args.replay_only else ("demo", "tokens"):
                port = free_port()
                endpoint = Server(
                    f"endpoint/{agent}", _child(agent, port, "--_arg", str(tokens)), port
                )
                servers.append(endpoint)
                baseline: Server | None = None
                if args.baseline is not None:
                    # the same agent and server code, agui_pipes imported from the other checkout
                    port = free_port()
                    baseline = Server(
                        f"baseline/{agent}",
                        _child(agent, port, "--_arg", str(tokens)),
                        port,
                        env={**os.environ, "PYTHONPATH": str(args.baseline.resolve())},
                    )
                    servers.append(baseline)
                per_run = tokens + 5 if agent == "tokens" else _demo_events(endpoint.url)
                for n in clients:
                    runs = max(1, target // (n * per_run))
                    phases.append(measure(f"endpoint/{agent}", endpoint, n, runs))
                    if baseline is not None:
                        phases.append(measure(f"baseline/{agent}", baseline, n, runs))
                for server in (endpoint, baseline):
                    if server is not None:
                        server.stop()
                        servers.remove(server)
            if not args.replay_only:
                phases.append(driver_alone(tokens, max(1, target // (tokens + 5))))
        finally:
            for server in servers:
                server.stop()

    report["rows"] = [phase.row() for phase in phases]
    errors = sum(len(phase.errors) for phase in phases)
    for phase in phases:
        for error in phase.errors[:3]:
            print(f"error in {phase.name}: {error}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.markdown is not None:
        args.markdown.write_text(markdown(report))
    print(f"errors: {errors}")
    return 1 if errors else 0


def _demo_events(url: str) -> int:
    """Events in one demo run (to size the endpoint phases)."""
    phase = Phase("probe", 1)
    anyio.run(load, url + "/", 1, 1, phase)
    return max(phase.events, 1)


if __name__ == "__main__":
    sys.exit(main())
