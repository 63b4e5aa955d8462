"""How many concurrent token-paced streams one serving process carries.

    python benchmarks/bench_scale.py                       # ~3 minutes
    python benchmarks/bench_scale.py --streams 10,100 --duration 5 --json out.json

For each stream count (``--streams``, default 10, 100, 1,000, 5,000) a fresh process
under test is started, warmed up with one run, and then carries that many concurrent
runs, each a token stream paced at ``rate`` tokens a second, for ``--duration``
seconds. Two processes under test:

* ``gateway``  — the real CLI, ``agui-pipes serve --upstream URL --config CHAIN`` (its
  default server stack, the in-process suite's gateway chain), in front of a raw
  asyncio upstream streaming stamped deltas at the pace asked (the POST's
  ``forwardedProps``); a ``direct`` phase reads that upstream itself with the same
  streams, so the gateway's *added* latency is the difference of the two;
* ``endpoint`` — ``build_app(agent=...)`` with an agent emitting stamped deltas at the
  pace asked, under the same server stack ``serve`` picks.

The rate per stream is 50 tokens/s, lowered for the large counts so that all streams
together stay within ``--budget`` events a second (the client and the upstream share
the machine with the process under test; the rate is in the table); ``--rate R`` runs
every count at R instead, which compares the counts at the same run length.
``--profile DIR`` runs the gateway under cProfile (CPU time) and writes, per count,
``DIR/gateway-N.pstats`` and ``DIR/gateway-N.pstats.gc.json`` (the garbage collector's
passes and CPU per generation, the objects left after each full pass and the commonest
kinds at the largest). Figures:

* ``CPU µs/event`` — user + system CPU of the process under test over the phase / the
  events the clients received;
* ``memory/stream`` — the process's resident memory with every stream open minus
  before the phase, / streams;
* ``latency p50 / p99`` — arrival at the client minus the stamp; ``added`` subtracts
  the ``direct`` phase's at the same stream count (the client's and upstream's share);
* ``streams/core at 50 tok/s`` — 1e6 / (CPU µs/event x 50): what one core sustains
  at this CPU per event (the saturation point, computed; a 2-core machine shared with
  the client and upstream cannot run 5,000 streams at 50 tokens/s for real).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _raw_http import read_head  # noqa: E402
from bench_servers import tree_cpu, tree_rss  # noqa: E402
from bench_serving import GATEWAY_CHAIN, Server, free_port, percentile  # noqa: E402

_STAMP = re.compile(rb'"delta":"(\d{19}) "')
TARGET_RATE = 50.0
"""Tokens a second per stream, the pace the saturation point is computed at."""


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _request(path: str, run_id: str, tokens: int, pace: float) -> bytes:
    body = json.dumps(
        {
            "threadId": f"t-{run_id}",
            "runId": run_id,
            "messages": [{"id": f"{run_id}-u", "role": "user", "content": "go"}],
            "forwardedProps": {"tokens": tokens, "pace": pace},
        }
    ).encode()
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body


# -- the upstream and the endpoint --------------------------------------------------------


def upstream_main(port: int) -> None:
    """Stream ``forwardedProps.tokens`` stamped deltas, ``forwardedProps.pace`` s apart."""
    _raise_fd_limit()
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )

    def chunk(*events: dict[str, Any]) -> bytes:
        data = b"".join(
            b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"
            for event in events
        )
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await read_head(reader)
                if request is None:
                    return
                headers, length = request
                body = json.loads(await reader.readexactly(length)) if length else {}
                if headers.startswith(b"GET /healthz"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    await writer.drain()
                    continue
                props = body.get("forwardedProps") or {}
                tokens, pace = int(props.get("tokens", 10)), float(props.get("pace", 0.02))
                thread, run = body.get("threadId", "t"), body.get("runId", "r")
                writer.write(
                    head
                    + chunk(
                        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
                        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
                    )
                )
                for _ in range(tokens):
                    await asyncio.sleep(pace)
                    writer.write(
                        chunk(
                            {
                                "type": "TEXT_MESSAGE_CONTENT",
                                "messageId": "m",
                                "delta": f"{time.time_ns()} ",
                            }
                        )
                    )
                writer.write(
                    chunk(
                        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
                        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
                    )
                    + b"0\r\n\r\n"
                )
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=8192)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def endpoint_main(port: int) -> None:
    """``build_app`` with a paced stamping agent, under the stack ``serve`` picks."""
    _raise_fd_limit()
    import anyio
    import uvicorn

    from agui_pipes import RunOutcome
    from agui_pipes._cli._servers import DEFAULT_SERVER, stack_of
    from agui_pipes.server import build_app

    async def agent(ctx: Any) -> Any:
        props = ctx.input.forwarded_props or {}
        message = ctx.assistant_message()
        for _ in range(int(props.get("tokens", 10))):
            await anyio.sleep(float(props.get("pace", 0.02)))
            message.delta(f"{time.time_ns()} ")
        message.end()
        return RunOutcome.success()

    stack = stack_of(DEFAULT_SERVER)
    uvicorn.run(
        build_app(agent=agent),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        backlog=8192,
        http=stack.http,
        loop=stack.loop,
    )


# -- the client ---------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    streams: int
    rate: float
    events: int = 0
    runs: int = 0
    errors: list[str] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    cpu: float = 0.0
    rss_before: int = 0
    rss_open: int = 0
    wall: float = 0.0

    def row(self) -> dict[str, Any]:
        cpu_us = self.cpu / max(self.events, 1) * 1e6
        return {
            "phase": self.name,
            "streams": self.streams,
            "rate": self.rate,
            "events": self.events,
            "events_per_s": round(self.events / self.wall) if self.wall else 0,
            "cpu_us_per_event": round(cpu_us, 2),
            "memory_kib_per_stream": round(
                (self.rss_open - self.rss_before) / 1024 / self.streams, 1
            )
            if self.rss_before
            else None,
            "latency_ms": [
                round(percentile(self.latency_ms, 0.5), 2),
                round(percentile(self.latency_ms, 0.99), 2),
            ],
            "streams_per_core_at_50": round(1e6 / (cpu_us * TARGET_RATE)) if cpu_us else None,
            "errors": len(self.errors),
            "first_errors": self.errors[:3],
        }


async def _stream(
    port: int, path: str, run_id: str, tokens: int, pace: float, phase: Phase
) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        phase.errors.append(f"{run_id}: connect: {exc}")
        return
    try:
        writer.write(_request(path, run_id, tokens, pace))
        status = await reader.readuntil(b"\r\n")
        if not status.startswith(b"HTTP/1.1 200"):
            phase.errors.append(f"{run_id}: {status.decode(errors='replace').strip()}")
            return
        tail = b""
        seen = b""
        while True:
            data = await reader.read(65536)
            if not data:
                break
            now = time.time_ns()
            buffer = tail + data
            frames = buffer.split(b"\n\n")
            tail = frames.pop()
            for frame in frames:
                if b"data: " not in frame:
                    continue
                phase.events += 1
                stamp = _STAMP.search(frame)
                if stamp is not None:
                    phase.latency_ms.append((now - int(stamp.group(1))) / 1e6)
                seen = frame
            if buffer.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's end
                break
        if b"RUN_FINISHED" not in seen:
            phase.errors.append(f"{run_id}: ended with {seen[-120:]!r}")
        else:
            phase.runs += 1
    except (OSError, asyncio.IncompleteReadError) as exc:
        phase.errors.append(f"{run_id}: {type(exc).__name__}: {exc}")
    finally:
        writer.close()


async def _load(
    port: int, path: str, streams: int, tokens: int, pace: float, phase: Phase, on_open: Any
) -> None:
    """``streams`` concurrent runs, opened in batches (the listen backlog is finite)."""
    tasks = []
    for index in range(streams):
        tasks.append(
            asyncio.ensure_future(
                _stream(port, path, f"{phase.name}-{streams}-{index}", tokens, pace, phase)
            )
        )
        if index % 200 == 199:
            await asyncio.sleep(0.1)
    # every stream is open (the last batch had time to connect): what it holds now
    await asyncio.sleep(min(1.0, tokens * pace / 3))
    on_open()
    await asyncio.gather(*tasks)


def run_phase(
    name: str, server: Server, path: str, streams: int, rate: float, duration: float
) -> Phase:
    phase = Phase(name, streams, rate)
    port = int(server.url.rsplit(":", 1)[1])
    tokens = max(2, round(rate * duration))
    warm = Phase("warmup", 1, rate)
    asyncio.run(_load(port, path, 1, 3, 0.001, warm, lambda: None))
    phase.rss_before = tree_rss(server.process.pid)
    cpu, wall = tree_cpu(server.process.pid), time.monotonic()

    def opened() -> None:
        phase.rss_open = tree_rss(server.process.pid)

    asyncio.run(_load(port, path, streams, tokens, 1 / rate, phase, opened))
    phase.cpu = tree_cpu(server.process.pid) - cpu
    phase.wall = time.monotonic() - wall
    return phase


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['phase']:<9} {row['streams']:>5} streams @ {row['rate']:>5g} tok/s "
        f"{row['events']:>7,} ev {row['events_per_s']:>6,} ev/s "
        f"cpu {row['cpu_us_per_event']:>7.2f} µs/ev  mem {row['memory_kib_per_stream']} KiB/stream "
        f"latency {row['latency_ms'][0]:.2f} / {row['latency_ms'][1]:.2f} ms"
        f"{'  added ' + str(row.get('added_latency_ms')) if 'added_latency_ms' in row else ''}"
        f"  streams/core@50 {row['streams_per_core_at_50']}  errors {row['errors']}"
    )


def markdown(report: dict[str, Any]) -> str:
    out = [
        f"Machine: {report['machine']}. Each row: a fresh process, {report['duration']:g} s "
        f"of that many concurrent paced streams (the rate is lowered past "
        f"{report['budget']:,.0f} events/s in all).",
        "",
        "| process | streams | tokens/s per stream | events/s | CPU µs/event "
        "| memory KiB/stream | latency p50 / p99 ms | added p50 / p99 ms "
        "| streams one core sustains at 50 tokens/s | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        if row["phase"] == "direct":
            continue
        added = row.get("added_latency_ms")
        out.append(
            f"| {row['phase']} | {row['streams']:,} | {row['rate']:g} | {row['events_per_s']:,} "
            f"| {row['cpu_us_per_event']:.2f} | {row['memory_kib_per_stream']} "
            f"| {row['latency_ms'][0]:.2f} / {row['latency_ms'][1]:.2f} "
            f"| {'–' if added is None else f'{added[0]:.2f} / {added[1]:.2f}'} "
            f"| {row['streams_per_core_at_50']:,} | {row['errors']} |"
        )
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--streams", default="10,100,1000,5000", help="comma-separated counts")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds a stream lasts")
    parser.add_argument(
        "--budget", type=float, default=2000.0, help="most events/s of all streams together"
    )
    parser.add_argument(
        "--rate",
        type=float,
        help="tokens/s per stream at every count (default: 50, lowered past --budget)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="profile the gateway (cProfile) into DIR/gateway-STREAMS.pstats",
    )
    parser.add_argument("--apps", default="gateway,endpoint", help="gateway, endpoint or both")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    parser.add_argument("--_role", help=argparse.SUPPRESS)
    parser.add_argument("--_port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._role == "upstream":
        upstream_main(args._port)
        return 0
    if args._role == "endpoint":
        endpoint_main(args._port)
        return 0
    _raise_fd_limit()
    apps = args.apps.split(",")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        chain = Path(tmp) / "chain.yaml"
        chain.write_text(GATEWAY_CHAIN)
        port = free_port()
        upstream = Server("upstream", _child("upstream", port), port)
        try:
            for streams in (int(n) for n in args.streams.split(",")):
                rate = args.rate or min(TARGET_RATE, args.budget / streams)
                if "gateway" in apps:
                    direct = run_phase("direct", upstream, "/", streams, rate, args.duration)
                    rows.append(direct.row())
                    print(_line(rows[-1]), flush=True)
                    profile = args.profile and args.profile / f"gateway-{streams}.pstats"
                    gateway = _start_gateway(upstream.url + "/", chain, profile)
                    try:
                        phase = run_phase("gateway", gateway, "/", streams, rate, args.duration)
                    finally:
                        gateway.stop()
                    row = phase.row()
                    row["added_latency_ms"] = [
                        round(row["latency_ms"][i] - direct.row()["latency_ms"][i], 2)
                        for i in (0, 1)
                    ]
                    rows.append(row)
                    print(_line(row), flush=True)
                if "endpoint" in apps:
                    port = free_port()
                    endpoint = Server("endpoint", _child("endpoint", port), port)
                    try:
                        phase = run_phase("endpoint", endpoint, "/", streams, rate, args.duration)
                    finally:
                        endpoint.stop()
                    rows.append(phase.row())
                    print(_line(rows[-1]), flush=True)
        finally:
            upstream.stop()
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "duration": args.duration,
        "budget": args.budget,
        "rows": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(report))
    return 0


def _child(role: str, port: int) -> list[str]:
    return [sys.executable, __file__, "--_role", role, "--_port", str(port)]


_GATEWAY = """
import resource, sys
s, h = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (h, h))
from agui_pipes._cli import main
profile = sys.argv.pop(1)
if not profile:
    sys.exit(main(sys.argv[1:]))
import cProfile, collections, gc, json, time
profiler = cProfile.Profile(time.process_time)  # CPU, not waiting for one
passes = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}  # count, CPU seconds
started = [0.0]
sizes, kinds = [], []
def timed(phase, info):
    # the collector's own cost, which cProfile charges to whatever allocated
    if phase == "start":
        started[0] = time.process_time()
        return
    entry = passes[info["generation"]]
    entry[0] += 1
    entry[1] += time.process_time() - started[0]
    if info["generation"] == 2:
        live = gc.get_objects(2)
        if len(live) > max(sizes, default=0):
            kinds[:] = collections.Counter(type(o).__qualname__ for o in live).most_common(40)
        sizes.append(len(live))
        del live
gc.callbacks.append(timed)
try:
    sys.exit(profiler.runcall(main, sys.argv[1:]))
finally:
    profiler.dump_stats(profile)
    with open(profile + ".gc.json", "w") as out:
        report = {
            "passes_and_cpu_s_by_generation": passes,
            "objects_after_full_passes": sizes,
            "kinds_at_the_largest": kinds,
        }
        json.dump(report, out)
"""


def _start_gateway(upstream: str, chain: Path, profile: Path | None = None) -> Server:
    """The real CLI as a gateway, its file descriptor limit raised for thousands of streams.

    With ``profile`` it runs under cProfile and writes its stats there when it stops.
    """
    port = free_port()
    argv = [
        sys.executable,
        "-c",
        _GATEWAY,
        str(profile or ""),
        *("serve", "--upstream", upstream, "--config", str(chain), "--port", str(port)),
    ]
    return Server("gateway", argv, port, env={**os.environ, "PYTHONUNBUFFERED": "1"})


if __name__ == "__main__":
    sys.exit(main())
