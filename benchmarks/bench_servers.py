"""ASGI servers side by side: the same agui_pipes apps under each, measured in one run.

    python benchmarks/bench_servers.py                 # a few minutes
    python benchmarks/bench_servers.py --quick         # < 1 min
    python benchmarks/bench_servers.py --servers uvicorn,granian --json out.json

Servers (each one a process of its own, every one of them up for the whole run):

* ``uvicorn``      — uvicorn with its pure-Python stack (h11, the asyncio loop);
* ``uvicorn-fast`` — uvicorn with httptools and uvloop (what ``uvicorn[standard]`` picks);
* ``granian``      — granian's embedded ASGI server (Rust HTTP, the app on asyncio);
* ``hypercorn``    — hypercorn on asyncio (h11).

Apps, each served by every server:

* ``endpoint`` — ``build_app(agent=...)`` with the token agent of ``bench_serving.py``
  (``--tokens`` deltas per run, one ``await`` per token, each delta stamped with
  ``time.time_ns()`` as the agent emits it);
* ``gateway``  — ``build_app(upstream=..., chain=...)`` (the in-process suite's gateway
  chain) in front of a raw asyncio upstream that streams ``--tokens`` stamped deltas per
  run, one chunk and one event-loop turn per token.

Rounds (``--rounds``): each round runs every (app, server) pair once, servers in a
rotated order, so noise from the other work on the machine spreads over all of them;
the table gives medians over rounds. Figures per pair:

* ``server µs/event`` — user + system CPU of the server process (all its threads, and
  any child process) per event received by the clients;
* ``added latency p50 / p99`` — from the paced phases (``LATENCY_TOKENS`` tokens
  ``LATENCY_PACE`` apart, by a second process of each pair, so that nothing saturates):
  arrival at the client minus the stamp: for the endpoint
  the agent's emission, for the gateway the upstream's write, minus the same figure
  measured reading the upstream directly (``direct``, the client's and the upstream's
  share), so what is left is the gateway's;
* ``events/s`` — events received by all clients / the phase's wall time (the client,
  in this process, shares the machine: CPU per event is the figure to compare).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _raw_http import read_head  # noqa: E402
from bench_serving import (  # noqa: E402
    GATEWAY_CHAIN,
    Phase,
    Server,
    free_port,
    load,
    percentile,
    token_agent,
)

_TICKS = os.sysconf("SC_CLK_TCK")

SERVERS = ("uvicorn", "uvicorn-fast", "granian", "hypercorn")
"""Every server this benchmark knows, in the order the table lists them."""

LATENCY_TOKENS = 100
LATENCY_PACE = 0.005
"""The latency phases: runs of 100 tokens 5 ms apart (200 tokens/s per stream), so that
neither the clients nor the servers saturate and the latency is what a stream adds,
not time spent queued behind other streams' work."""


def paced_agent(tokens: int, pace: float) -> Any:
    """The token agent at a model's pace: ``pace`` seconds before each stamped token."""
    from agui_pipes import RunOutcome

    async def agent(ctx: Any) -> Any:
        message = ctx.assistant_message()
        for _ in range(tokens):
            await anyio.sleep(pace)
            message.delta(f"{time.time_ns()} ")
        message.end()
        return RunOutcome.success()

    return agent


# -- the token upstream -------------------------------------------------------------------


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def token_upstream_main(port: int, tokens: int) -> None:
    """Stream ``tokens`` stamped deltas to every POST, one chunk and one loop turn each.

    A POST to ``/paced`` streams ``LATENCY_TOKENS`` instead, ``LATENCY_PACE`` seconds
    apart (a model's pace). A raw asyncio server, so that it costs little beside the
    server under test.
    """
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )

    def frame(event: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"

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
                thread, run = body.get("threadId", "t"), body.get("runId", "r")
                paced = headers.startswith(b"POST /paced")
                count, pace = (LATENCY_TOKENS, LATENCY_PACE) if paced else (tokens, 0.0)
                writer.write(head)
                writer.write(
                    _chunk(
                        frame({"type": "RUN_STARTED", "threadId": thread, "runId": run})
                        + frame(
                            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
                        )
                    )
                )
                for _ in range(count):
                    if pace:
                        await asyncio.sleep(pace)
                    writer.write(
                        _chunk(
                            frame(
                                {
                                    "type": "TEXT_MESSAGE_CONTENT",
                                    "messageId": "m",
                                    "delta": f"{time.time_ns()} ",
                                }
                            )
                        )
                    )
                    await writer.drain()
                    if not pace:
                        await asyncio.sleep(0)
                writer.write(
                    _chunk(
                        frame({"type": "TEXT_MESSAGE_END", "messageId": "m"})
                        + frame({"type": "RUN_FINISHED", "threadId": thread, "runId": run})
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


# -- the servers --------------------------------------------------------------------------


def build(
    app_name: str, tokens: int, upstream: str | None, chain_file: str | None, paced: bool
) -> Any:
    """The app a server child serves: the (paced) token agent, or a gateway to the upstream."""
    from agui_pipes.config import load_chain
    from agui_pipes.server import build_app

    if app_name == "endpoint":
        if paced:
            return build_app(agent=paced_agent(LATENCY_TOKENS, LATENCY_PACE))
        return build_app(agent=token_agent(tokens))
    assert upstream is not None and chain_file is not None
    return build_app(upstream=upstream + ("paced" if paced else ""), chain=load_chain(chain_file))


def serve_main(server: str, port: int, app: Any) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` with ``server`` until terminated."""
    if server in ("uvicorn", "uvicorn-fast"):
        import uvicorn

        fast = server == "uvicorn-fast"
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            backlog=8192,
            http="httptools" if fast else "h11",
            loop="uvloop" if fast else "asyncio",
        )
    elif server == "granian":
        from granian.constants import Interfaces
        from granian.server.embed import Server as Granian

        async def run_granian() -> None:
            await Granian(
                app,
                address="127.0.0.1",
                port=port,
                interface=Interfaces.ASGI,
                backlog=8192,
                log_enabled=False,
            ).serve()

        asyncio.run(run_granian())
    elif server == "hypercorn":
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.backlog = 8192
        config.loglevel = "WARNING"
        config.accesslog = None
        asyncio.run(serve(app, config))  # type: ignore[arg-type]
    else:
        raise SystemExit(f"unknown server {server!r}; known: {', '.join(SERVERS)}")


def tree_cpu(pid: int) -> float:
    """User + system CPU of ``pid`` and its live descendants (all threads), from /proc."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICKS
            for task in Path(f"/proc/{current}/task").iterdir():
                children = (task / "children").read_text().split()
                pending.extend(int(child) for child in children)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its live descendants."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def _child(role: str, *extra: str) -> list[str]:
    return [sys.executable, __file__, "--_role", role, *extra]


# -- measuring ----------------------------------------------------------------------------


def measure(name: str, server: Server, clients: int, runs: int, path: str = "/") -> Phase:
    """One phase: ``clients`` concurrent clients, ``runs`` runs each; CPU of the server tree."""
    anyio.run(load, server.url + path, min(clients, 4), 1, Phase("warmup", 1))
    phase = Phase(name, clients)
    cpu = tree_cpu(server.process.pid)
    client = time.process_time()
    anyio.run(load, server.url + path, clients, runs, phase)
    phase.client_cpu = time.process_time() - client
    phase.server_cpu = tree_cpu(server.process.pid) - cpu
    return phase


def summarize(
    name: str, phases: list[Phase], paced: list[Phase], floor: list[Phase] | None
) -> dict[str, Any]:
    """Medians over rounds of one (app, server) pair: CPU and events/s of the full-speed
    ``phases``, latency of the ``paced`` ones minus the ``floor``'s."""

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    cpu = [p.server_cpu / max(p.events, 1) * 1e6 for p in phases]
    p50 = [percentile(p.latency_ms, 0.5) for p in paced]
    p99 = [percentile(p.latency_ms, 0.99) for p in paced]
    if floor is not None:
        base50 = statistics.median(percentile(p.latency_ms, 0.5) for p in floor)
        base99 = statistics.median(percentile(p.latency_ms, 0.99) for p in floor)
        p50 = [v - base50 for v in p50]
        p99 = [v - base99 for v in p99]
    return {
        "pair": name,
        "rounds": len(phases),
        "events": sum(p.events for p in phases),
        "events_per_s": round(statistics.median(p.events / p.wall for p in phases if p.wall)),
        "server_us_per_event": median(cpu),
        "server_us_per_event_range": [round(min(cpu), 2), round(max(cpu), 2)],
        "client_us_per_event": median(
            [(p.client_cpu or 0.0) / max(p.events, 1) * 1e6 for p in phases]
        ),
        "added_latency_ms": [median(p50), median(p99)],
        "paced_server_us_per_event": median([p.server_cpu / max(p.events, 1) * 1e6 for p in paced]),
        "errors": sum(len(p.errors) for p in phases + paced),
        "first_errors": [e for p in phases + paced for e in p.errors][:3],
    }


def _line(row: dict[str, Any]) -> str:
    low, high = row["server_us_per_event_range"]
    p50, p99 = row["added_latency_ms"]
    return (
        f"{row['pair']:<24} {row['events']:>8,} ev {row['events_per_s']:>8,} ev/s "
        f"server {row['server_us_per_event']:>7.2f} µs/ev ({low:.2f}–{high:.2f}) "
        f"client {row['client_us_per_event']:>6.2f}  added latency "
        f"{p50:.3f} / {p99:.3f} ms  errors {row['errors']}"
    )


def markdown(report: dict[str, Any]) -> str:
    config = report["config"]
    out = [
        f"Machine: {report['machine']}. {config['rounds']} rounds, servers interleaved; "
        f"{config['clients']} concurrent clients x {config['runs']} runs each, "
        f"{config['tokens']} tokens per run at full speed; latency from {config['clients']} "
        f"paced streams of {LATENCY_TOKENS} tokens {LATENCY_PACE * 1000:g} ms apart. Medians "
        "over rounds (CPU range in brackets).",
        "",
        "| app / server | events/s | server CPU µs/event | paced CPU µs/event "
        "| added latency p50 / p99 ms | errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        low, high = row["server_us_per_event_range"]
        p50, p99 = row["added_latency_ms"]
        out.append(
            f"| {row['pair']} | {row['events_per_s']:,} | {row['server_us_per_event']:.2f} "
            f"({low:.2f}–{high:.2f}) | {row['paced_server_us_per_event']:.2f} "
            f"| {p50:.3f} / {p99:.3f} | {row['errors']} |"
        )
    return "\n".join(out) + "\n"


def available(names: list[str]) -> list[str]:
    """The servers of ``names`` whose packages are installed (the others are reported)."""
    needs = {
        "uvicorn": ["uvicorn"],
        "uvicorn-fast": ["uvicorn", "httptools", "uvloop"],
        "granian": ["granian"],
        "hypercorn": ["hypercorn"],
    }
    found = []
    for name in names:
        if name not in needs:
            raise SystemExit(f"unknown server {name!r}; known: {', '.join(SERVERS)}")
        missing = [module for module in needs[name] if not _importable(module)]
        if missing:
            print(f"skipping {name}: {', '.join(missing)} not installed", flush=True)
        else:
            found.append(name)
    return found


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


Results = dict[str, tuple[list[Phase], list[Phase]]]
"""Per pair: its full-speed phases and its paced (latency) phases, one of each a round."""


def run_rounds(
    apps: list[str],
    servers: list[str],
    tokens: int,
    chain_file: Path,
    rounds: int,
    clients: int,
    runs: int,
    baseline: Path | None = None,
) -> Results:
    """Start every (app, server) pair, then measure each once per round, order rotated.

    Each pair is two processes: one for the full-speed phase (CPU per event,
    events/s), one serving the paced agent or a gateway to the paced upstream (latency).
    With ``baseline`` (an agui_pipes checkout) every pair is served from it too
    (``baseline:app/server``), measured in the same rounds: before / after side by side.
    The gateways' upstream is read directly first in every round (``gateway/direct``):
    the latency floor the gateway rows are measured against.
    """
    started: list[Server] = []
    results: Results = {}

    def start(name: str, argv: list[str], env: dict[str, str] | None = None) -> Server:
        port = free_port()
        started.append(Server(name, [*argv, "--_port", str(port)], port, env=env))
        return started[-1]

    try:
        upstream = start("upstream", _child("upstream", "--tokens", str(tokens)))
        pairs: list[tuple[str, Server, Server]] = []
        if "gateway" in apps:
            pairs.append(("gateway/direct", upstream, upstream))
        trees: list[tuple[str, dict[str, str] | None]] = [("", None)]
        if baseline is not None:
            trees.append(("baseline:", {**os.environ, "PYTHONPATH": str(baseline.resolve())}))
        for app in apps:
            for server in servers:
                for prefix, env in trees:
                    argv = _child(
                        app,
                        *("--_server", server, "--tokens", str(tokens)),
                        *("--_upstream", upstream.url + "/", "--_chain", str(chain_file)),
                    )
                    name = f"{prefix}{app}/{server}"
                    full = start(name, argv, env)
                    pairs.append((name, full, start(name, [*argv, "--_paced"], env)))
        for round_ in range(rounds):
            shift = round_ % len(pairs)
            for name, full, paced in pairs[shift:] + pairs[:shift]:
                phase = measure(name, full, clients, runs)
                lat = measure(name, paced, clients, 1, "/paced" if paced is upstream else "/")
                phases, latencies = results.setdefault(name, ([], []))
                phases.append(phase)
                latencies.append(lat)
                cpu = phase.server_cpu / max(phase.events, 1) * 1e6
                print(
                    f"round {round_ + 1} {name:<30} {cpu:7.2f} µs/ev  latency p50 "
                    f"{percentile(lat.latency_ms, 0.5):.2f} p99 "
                    f"{percentile(lat.latency_ms, 0.99):.2f} ms  "
                    f"errors {len(phase.errors) + len(lat.errors)}",
                    flush=True,
                )
    finally:
        for server in reversed(started):
            server.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="under a minute: fewer rounds")
    parser.add_argument("--servers", default=",".join(SERVERS), help="comma-separated names")
    parser.add_argument("--apps", default="endpoint,gateway", help="endpoint, gateway or both")
    parser.add_argument("--rounds", type=int, help="rounds of every pair (default 5)")
    parser.add_argument("--clients", type=int, help="concurrent clients (default 8)")
    parser.add_argument("--runs", type=int, help="runs per client per phase (default 4)")
    parser.add_argument("--tokens", type=int, help="tokens per run (default 2000)")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also serve every pair from the agui_pipes checkout in DIR (before / after)",
    )
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    parser.add_argument("--_role", help=argparse.SUPPRESS)
    parser.add_argument("--_port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--_server", help=argparse.SUPPRESS)
    parser.add_argument("--_upstream", help=argparse.SUPPRESS)
    parser.add_argument("--_chain", help=argparse.SUPPRESS)
    parser.add_argument("--_paced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    tokens = args.tokens or (300 if args.quick else 2000)

    if args._role == "upstream":
        token_upstream_main(args._port, tokens)
        return 0
    if args._role in ("endpoint", "gateway"):
        app = build(args._role, tokens, args._upstream, args._chain, args._paced)
        serve_main(args._server, args._port, app)
        return 0

    rounds = args.rounds or (2 if args.quick else 5)
    clients = args.clients or (4 if args.quick else 8)
    runs = args.runs or (2 if args.quick else 4)
    servers = available(args.servers.split(","))
    apps = args.apps.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        chain_file = Path(tmp) / "chain.yaml"
        chain_file.write_text(GATEWAY_CHAIN)
        results = run_rounds(
            apps, servers, tokens, chain_file, rounds, clients, runs, args.baseline
        )
    floor = results["gateway/direct"][1] if "gateway/direct" in results else None
    rows = [
        summarize(name, phases, paced, floor if "gateway/" in name and paced is not floor else None)
        for name, (phases, paced) in results.items()
    ]
    for row in rows:
        print(_line(row))
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "config": {
            "rounds": rounds,
            "clients": clients,
            "runs": runs,
            "tokens": tokens,
            "servers": servers,
        },
        "rows": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
