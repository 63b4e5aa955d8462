"""Issue 33's ratio table: every row measured side by side in one run.

    python benchmarks/bench_ratios.py                  # 5 rounds: ~1 minute quiet, ~6 loaded
    python benchmarks/bench_ratios.py --rounds 7 --json ratios.json --markdown ratios.md
    python benchmarks/bench_ratios.py --smoke          # small streams, one round (smoke-tested)

Each round measures every row once (whole-process commands in alternating order),
so drift in the load of a shared machine hits every row alike; a row's figure is
the median of its per-round ratios, printed with their range. Times are CPU time
(user + system): of the child from ``os.wait4`` for whole processes, of the server
process from ``/proc`` for HTTP rows, of this thread/process for in-process rows.
The rows, as the issue words them:

1. ``run`` vs TS — ``agui-pipes run -c CHAIN --format sse -o /dev/null FILE`` (CHAIN:
   ``expand_chunks`` then ``verify`` consumer, the stages the TS client has) against
   ``node benchmarks/ts/reference.mjs FILE --repeat 1``, whole processes, on the
   realistic 160k stream (``--events``); the figure is how many times less CPU ours used;
2. ``run`` vs the orjson floor — the same command against a Python process that reads
   the file and writes ``orjson.dumps(orjson.loads(line))`` per line (times more);
3. ``run`` vs the official SDK alone — a Python process doing
   ``EventEncoder().encode(TypeAdapter(Event).validate_json(line))`` per line, no
   checks (how many times less CPU ours used);
4. start-up — the same ``run`` command on a two-event stream (``RUN_STARTED``,
   ``RUN_FINISHED``) against ``python -c "import ag_ui.core"``;
5. agent endpoint — ``agui-pipes serve --agent`` (the default stack, its default log
   level) serving a token agent (one ``await`` per token), server CPU per event, against
   the same agent through the run driver alone in this process;
6. snapshots and deltas — ``encode_sse(decode(payload).event)`` against
   ``orjson.dumps(orjson.loads(payload))`` per event type (``bench_state_events.py``'s
   payloads, the thread's CPU clock);
7. in-process gateway path on the state-heavy stream (~5% ``STATE_DELTA``) against the
   TS reference's steady state (``suite.py``'s floor / reference / gateway round);
8. HTTP gateway — ``agui-pipes serve --upstream URL --config CHAIN`` at the command's
   default log level, server CPU per upstream event, against the in-process suite loop
   (``suite.gateway``: ``Relay`` over NDJSON lines, 32 per feed) on the same stream.

Nothing is asserted; the table goes to docs/benchmarks.md ("Issue 33 ratios").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TS_DIR = HERE / "ts"
sys.path.insert(0, str(HERE))

import anyio  # noqa: E402
import orjson  # noqa: E402
from bench_process import CONSUMER_CHAIN, cpu_of, ensure_node  # noqa: E402
from bench_serving import (  # noqa: E402
    GATEWAY_CHAIN,
    Phase,
    Server,
    free_port,
    load,
    sse_body,
)
from bench_state_events import PAYLOADS  # noqa: E402
from streams import write_ndjson  # noqa: E402

_CLI = [sys.executable, "-c", "import sys; from agui_pipes._cli import main; sys.exit(main())"]

FLOOR_CHILD = """\
import sys
import orjson
loads, dumps = orjson.loads, orjson.dumps
with open(sys.argv[1], "rb") as source, open(sys.argv[2], "wb") as out:
    write = out.write
    for line in source:
        write(dumps(loads(line)))
"""

SDK_CHILD = """\
import sys
from pydantic import TypeAdapter
from ag_ui.core import Event
from ag_ui.encoder import EventEncoder
validate, encode = TypeAdapter(Event).validate_json, EventEncoder().encode
with open(sys.argv[1], "rb") as source, open(sys.argv[2], "w") as out:
    write = out.write
    for line in source:
        write(encode(validate(line)))
"""

TOKEN_AGENT = """\
import anyio
from agui_pipes import RunOutcome

TOKENS = {tokens}


async def agent(ctx):
    message = ctx.assistant_message()
    for _ in range(TOKENS):
        message.delta("tok ")
        await anyio.lowlevel.checkpoint()
    message.end()
    return RunOutcome.success()
"""

TWO_EVENTS = (
    b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
    b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n'
)


@dataclass
class Ratio:
    """One row of the table: per-round ratios, the target, and which way is better."""

    key: str
    label: str
    target: float
    at_least: bool  # True: the figure must reach the target (x less); False: stay below it
    rounds: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def now(self) -> float | None:
        return statistics.median(self.rounds) if self.rounds else None

    @property
    def met(self) -> bool | None:
        now = self.now
        if now is None:
            return None
        return now >= self.target if self.at_least else now <= self.target

    def cells(self) -> tuple[str, str, str]:
        unit = "× less" if self.at_least else "×"
        if self.now is None:
            return f"n/a ({self.note or 'not measured'})", "", "–"
        spread = f" ({min(self.rounds):.2f}–{max(self.rounds):.2f})" if len(self.rounds) > 1 else ""
        target = f"{'≥' if self.at_least else '≤'} {self.target}{unit}"
        return f"{self.now:.2f}{unit}{spread}", target, "yes" if self.met else "no"


def _rows() -> dict[str, Ratio]:
    rows = [
        Ratio("run_vs_ts", "`agui-pipes run` CPU vs the TS reference (whole process)", 3.5, True),
        Ratio(
            "run_vs_floor", "`agui-pipes run` CPU vs the orjson floor (whole process)", 2.5, False
        ),
        Ratio(
            "run_vs_sdk", "`run` vs the official SDK alone (validate_json + EventEncoder)", 3, True
        ),
        Ratio("startup", "start-up: `run` on a 2-event stream vs `import ag_ui.core`", 1.3, False),
        Ratio(
            "endpoint",
            "agent endpoint, token-per-await agent, server CPU/event vs driver",
            1.5,
            False,
        ),
    ]
    rows += [
        Ratio(f"state:{name}", f"`{name}` decode + encode vs an orjson round trip", 2.5, False)
        for name in PAYLOADS
    ]
    rows += [
        Ratio("gateway_state_vs_ts", "in-process gateway path, 5% state deltas, vs TS", 5, True),
        Ratio(
            "http_gateway", "HTTP gateway at the CLI's default log level vs in-process", 1.2, False
        ),
    ]
    return {row.key: row for row in rows}


# -- the measurements of one round ------------------------------------------------------


class Processes:
    """Rows 1–4: whole processes, each child's CPU from ``wait4``."""

    def __init__(self, tmp: Path, events: int, with_node: bool) -> None:
        OUT.mkdir(exist_ok=True)
        self.path = OUT / f"process-{events}.ndjson"
        if not self.path.exists():
            write_ndjson(self.path, events)
        self.events = sum(1 for _ in self.path.open("rb"))
        self.cwd = tmp
        chain = tmp / "consumer.yaml"
        chain.write_text(CONSUMER_CHAIN)
        two = tmp / "two.ndjson"
        two.write_bytes(TWO_EVENTS)
        (tmp / "floor.py").write_text(FLOOR_CHILD)
        (tmp / "sdk.py").write_text(SDK_CHILD)
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # warm starts, as an installed package
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        self.env = env
        run = [*_CLI, "run", "-c", str(chain), "--format", "sse", "-q", "-o", os.devnull]
        self.commands: dict[str, list[str]] = {
            "ours": [*run, str(self.path)],
            "floor": [sys.executable, str(tmp / "floor.py"), str(self.path), os.devnull],
            "sdk": [sys.executable, str(tmp / "sdk.py"), str(self.path), os.devnull],
            "ours start-up": [*run, str(two)],
            "import ag_ui.core": [sys.executable, "-c", "import ag_ui.core"],
        }
        if with_node:
            node = ensure_node()
            self.commands["reference"] = [
                node,
                str(TS_DIR / "reference.mjs"),
                str(self.path),
                "--repeat",
                "1",
            ]
        for argv in self.commands.values():  # bytecode, the file cache
            cpu_of(argv, self.cwd, self.env)
        self.cpu: dict[str, list[float]] = {name: [] for name in self.commands}

    def round(self, index: int, rows: dict[str, Ratio]) -> None:
        names = list(self.commands)
        for name in names if index % 2 == 0 else reversed(names):
            self.cpu[name].append(cpu_of(self.commands[name], self.cwd, self.env))
        last = {name: values[-1] for name, values in self.cpu.items()}
        if "reference" in last:
            rows["run_vs_ts"].rounds.append(last["reference"] / last["ours"])
        rows["run_vs_floor"].rounds.append(last["ours"] / last["floor"])
        rows["run_vs_sdk"].rounds.append(last["sdk"] / last["ours"])
        rows["startup"].rounds.append(last["ours start-up"] / last["import ag_ui.core"])


class Endpoint:
    """Row 5: ``serve --agent`` with a token agent against the driver alone."""

    def __init__(self, tmp: Path, tokens: int, runs: int, clients: int) -> None:
        self.tokens, self.runs, self.clients = tokens, runs, clients
        (tmp / "ratio_token_agent.py").write_text(TOKEN_AGENT.format(tokens=tokens))
        port = free_port()
        argv = [sys.executable, "-m", "agui_pipes", "serve", "--agent", "ratio_token_agent:agent"]
        self.server = Server(
            "endpoint",
            [*argv, "--port", str(port), "--keepalive", "0"],
            port,
            env={**os.environ, "PYTHONPATH": str(tmp)},
        )
        sys.path.insert(0, str(tmp))
        from ratio_token_agent import agent  # type: ignore[import-not-found]

        self.agent = agent
        self.server_cpu: list[float] = []
        self.driver_cpu: list[float] = []

    def _driver(self) -> float:
        from agui_pipes import run

        events = 0

        async def consume() -> None:
            nonlocal events
            for n in range(self.runs * self.clients):
                async with run(self.agent, {"threadId": "t", "runId": f"r{n}"}) as stream:
                    async for _ in stream:
                        events += 1

        cpu = time.process_time()
        anyio.run(consume)
        return (time.process_time() - cpu) / events

    def round(self, rows: dict[str, Ratio]) -> None:
        url = self.server.url + "/"
        anyio.run(load, url, 1, 1, Phase("warmup", 1))
        phase = Phase("endpoint", self.clients)
        cpu = self.server.cpu
        anyio.run(load, url, self.clients, self.runs, phase)
        if phase.errors:
            raise SystemExit(f"endpoint runs failed: {phase.errors[:3]}")
        self.server_cpu.append((self.server.cpu - cpu) / phase.events)
        self.driver_cpu.append(self._driver())
        rows["endpoint"].rounds.append(self.server_cpu[-1] / self.driver_cpu[-1])


class StateEvents:
    """Row 6: decode + encode of each open-JSON event against an orjson round trip."""

    def __init__(self, loops: int) -> None:
        from agui_pipes.codecs import decode, encode_sse

        self.loops = loops
        self.bodies: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {}
        loads, dumps = orjson.loads, orjson.dumps
        for name, payload in PAYLOADS.items():

            def ours(payload: bytes = payload) -> object:
                return encode_sse(decode(payload).event)  # type: ignore[arg-type]

            def bare(payload: bytes = payload) -> object:
                return dumps(loads(payload))

            self.bodies[name] = (ours, bare)

    def _timed(self, body: Callable[[], object]) -> float:
        start = time.thread_time()
        for _ in range(self.loops):
            body()
        return time.thread_time() - start

    def round(self, rows: dict[str, Ratio]) -> None:
        for name, (ours, bare) in self.bodies.items():
            # a few alternating pairs per round: one pair is a few ms, short enough for a
            # descheduling or a cache miss to swing it
            pairs = [self._timed(ours) / self._timed(bare) for _ in range(5)]
            rows[f"state:{name}"].rounds.append(statistics.median(pairs))


class StateGateway:
    """Row 7: suite.py's interleaved floor / reference / gateway round, state-heavy stream."""

    def __init__(self, label: str, with_node: bool) -> None:
        import suite

        self.suite = suite
        self.path = suite.stream_file(label, "state-heavy")
        self.lines = self.path.read_bytes().splitlines()
        self.with_node = with_node
        self.note = ""

    def round(self, rows: dict[str, Ratio]) -> None:
        _, ref_row, gw_row, ref = self.suite.side_by_side(
            self.path, self.lines, 1, not self.with_node
        )
        if ref_row is None:
            rows["gateway_state_vs_ts"].note = str(ref)
            return
        rows["gateway_state_vs_ts"].rounds.append(ref_row.us_per_event / gw_row.us_per_event)


class HttpGateway:
    """Row 8: ``serve --upstream`` at its default log level against the in-process loop."""

    def __init__(self, tmp: Path, events: int, runs: int) -> None:
        import suite

        self.suite = suite
        self.runs = runs
        body = sse_body(events)
        body_file = tmp / "stream.sse"
        body_file.write_bytes(body)
        self.sent = body.count(b"\n\ndata:") + 1
        # the same events as NDJSON lines, for the in-process loop
        self.lines = [
            frame.removeprefix(b"data: ") for frame in body.split(b"\n\n") if frame.strip()
        ]
        chain = tmp / "gateway.yaml"
        chain.write_text(GATEWAY_CHAIN)
        up_port, gw_port = free_port(), free_port()
        serving, body_path = str(HERE / "bench_serving.py"), str(body_file)
        self.upstream = Server(
            "upstream",
            [
                sys.executable,
                serving,
                "--_role",
                "upstream",
                "--_port",
                str(up_port),
                "--_arg",
                body_path,
            ],
            up_port,
        )
        serve = [sys.executable, "-m", "agui_pipes", "serve", "--upstream", self.upstream.url + "/"]
        self.gateway = Server(
            "gateway",
            [*serve, "--config", str(chain), "--port", str(gw_port), "--keepalive", "0"],
            gw_port,
        )
        self.http: list[float] = []
        self.local: list[float] = []

    def round(self, rows: dict[str, Ratio]) -> None:
        url = self.gateway.url + "/"
        anyio.run(load, url, 1, 1, Phase("warmup", 1))
        phase = Phase("gateway", 1, self.sent)
        cpu = self.gateway.cpu
        anyio.run(load, url, 1, self.runs, phase)
        if phase.errors:
            raise SystemExit(f"gateway runs failed: {phase.errors[:3]}")
        self.http.append((self.gateway.cpu - cpu) / (phase.runs * self.sent))
        lines = self.lines
        start = time.process_time()
        for _ in range(self.runs):
            self.suite.gateway(lines)
        self.local.append((time.process_time() - start) / (self.runs * len(lines)))
        rows["http_gateway"].rounds.append(self.http[-1] / self.local[-1])

    def stop(self) -> None:
        self.gateway.stop()
        self.upstream.stop()


# -- reporting ----------------------------------------------------------------------------


def table(rows: dict[str, Ratio]) -> str:
    lines = ["| ratio | now | target | met? |", "|---|---|---|---|"]
    for row in rows.values():
        now, target, met = row.cells()
        lines.append(f"| {row.label} | {now} | {target} | {met} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--events", type=int, default=160_000, help="rows 1–3's stream length")
    parser.add_argument("--smoke", action="store_true", help="small streams, one round")
    parser.add_argument("--no-reference", action="store_true", help="skip the node rows")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.events = 1, 2_000
    with_node = not args.no_reference
    rows = _rows()
    load_before = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        processes = Processes(tmp, args.events, with_node)
        endpoint = Endpoint(
            tmp, tokens=100 if args.smoke else 400, runs=1 if args.smoke else 5, clients=4
        )
        state = StateEvents(loops=50 if args.smoke else 500)
        gateway_state = StateGateway("10k" if args.smoke else "150k", with_node)
        http = HttpGateway(tmp, 2_000 if args.smoke else 40_000, 1 if args.smoke else 2)
        try:
            for index in range(args.rounds):
                processes.round(index, rows)
                endpoint.round(rows)
                state.round(rows)
                gateway_state.round(rows)
                http.round(rows)
                print(
                    f"round {index + 1}/{args.rounds}: "
                    + ", ".join(
                        f"{row.key} {row.rounds[-1]:.2f}" for row in rows.values() if row.rounds
                    ),
                    flush=True,
                )
        finally:
            endpoint.server.stop()
            http.stop()
    if not with_node:
        rows["run_vs_ts"].note = rows["gateway_state_vs_ts"].note = "--no-reference"
    load_after = os.getloadavg()
    minutes = (time.monotonic() - started) / 60
    machine = (
        f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"load average {load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end "
        f"({minutes:.1f} min, {args.rounds} rounds)"
    )
    median = statistics.median
    details = (
        f"rows 1–4: {processes.events:,} events; CPU s (medians) "
        + ", ".join(f"{name} {median(v):.3f}" for name, v in processes.cpu.items())
        + f"; endpoint {median(endpoint.server_cpu) * 1e6:.2f} µs/event, driver "
        f"{median(endpoint.driver_cpu) * 1e6:.2f}; HTTP gateway "
        f"{median(http.http) * 1e6:.2f} µs/event, in-process {median(http.local) * 1e6:.2f}"
    )
    print(f"\n{machine}\n{details}\n")
    print(table(rows))
    report: dict[str, Any] = {
        "machine": machine,
        "details": details,
        "rows": {
            key: {
                "label": row.label,
                "now": row.now,
                "target": row.target,
                "at_least": row.at_least,
                "met": row.met,
                "rounds": row.rounds,
                "note": row.note,
            }
            for key, row in rows.items()
        },
    }
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.markdown is not None:
        args.markdown.write_text(f"{machine}. {details}.\n\n{table(rows)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
