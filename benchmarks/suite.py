"""The benchmark suite: agui_pipes against the physical floor and the TypeScript reference.

    python benchmarks/suite.py                      # 10k and 150k streams, 5 repetitions
    python benchmarks/suite.py --sizes 10k,150k,1.5M --repeat 5 --json out.json
    python benchmarks/suite.py --smoke              # 10k, 1 repetition: keeps the suite working

Every measurement runs on the same deterministic streams (``streams.py``)
and reports events/s and µs/event as the median of ``--repeat`` runs:

1. ``floor``     — orjson (or json) parse + serialize of every NDJSON line, no checks;
2. ``reference`` — ``@ag-ui/client`` 1.0.0's inbound pipeline (enforceEvents,
   transformChunks, verifyEvents) plus ``@ag-ui/encoder`` SSE encoding, in node,
   on the same file (``benchmarks/ts/reference.mjs``; ``npm ci`` on first use);
3. ``gateway``   — NDJSON bytes in → decode → ExpandChunks → FilterToolCalls.deny →
   SubagentVisibility.inline → ToolResultToState.delta → Verify(consumer) →
   SSE bytes out, through ``TransformerChain.apply`` over an async source;
4. each stage alone, the verifier alone, the fold alone, decode and encode alone
   (stages see the stream as the gateway hands it to them: decoded and expanded),
   and the run driver (agent → emit → verifier → consumer);
5. peak RSS of the gateway path streaming each size from disk, in a fresh
   process per size (memory must stay flat in stream length).

Times are CPU time of the measuring process (``time.process_time`` in Python,
``process.cpuUsage()`` in node), so load from other processes on a shared
machine distorts them less than wall-clock time. Nothing here is asserted:
the suite reports, the closing notes and docs/benchmarks.md quote.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TS_DIR = HERE / "ts"
sys.path.insert(0, str(HERE))

import anyio  # noqa: E402
from ag_ui.core import BaseEvent  # noqa: E402
from streams import STREAMS, write_ndjson  # noqa: E402

from agui_pipes import (  # noqa: E402
    Stage,
    TransformerChain,
    fold,
)
from agui_pipes.codecs import NDJSONDecoder, decode, encode_sse  # noqa: E402
from agui_pipes.relay import Relay  # noqa: E402
from agui_pipes.transformers import (  # noqa: E402
    CoalesceDeltas,
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    Redact,
    StateDiff,
    StripRawEvents,
    SubagentVisibility,
    Timestamp,
    ToolResultToState,
    Verify,
)
from agui_pipes.verify import Verifier  # noqa: E402

try:
    import orjson

    def _floor_roundtrip(line: bytes) -> bytes:
        return orjson.dumps(orjson.loads(line))

    FLOOR_LIB = "orjson"
except ImportError:  # pragma: no cover - orjson is in the test extra

    def _floor_roundtrip(line: bytes) -> bytes:
        return json.dumps(json.loads(line), separators=(",", ":")).encode()

    FLOOR_LIB = "json"

SIZES = {"10k": 10_000, "150k": 150_000, "1.5M": 1_500_000}


def gateway_chain() -> TransformerChain:
    """The gateway path's stages, in order (decode before, SSE encoding after)."""
    return TransformerChain(
        [
            ExpandChunks(),
            FilterToolCalls.deny(["internal_*"]),
            SubagentVisibility.inline(),
            ToolResultToState.delta("update_items"),
            Verify(profile="consumer"),  # last, as the Gateway runs it
        ]
    )


def stages_alone() -> dict[str, Callable[[], Stage]]:
    return {
        "ExpandChunks": ExpandChunks,
        "Verify(consumer)": lambda: Verify(profile="consumer"),
        "FilterToolCalls.deny": lambda: FilterToolCalls.deny(["internal_*"]),
        "SubagentVisibility.inline": SubagentVisibility.inline,
        "SubagentVisibility.hidden": SubagentVisibility.hidden,
        "ToolResultToState.delta": lambda: ToolResultToState.delta("update_items"),
        "DropEvents(reasoning)": lambda: DropEvents(["reasoning"]),
        "StripRawEvents": StripRawEvents,
        "CoalesceDeltas(256)": lambda: CoalesceDeltas(max_chars=256),
        "Redact": lambda: Redact([r"sk-[A-Za-z0-9]{20,}"]),
        "StateDiff": StateDiff,
        "Timestamp": Timestamp,
    }


# -- measurement helpers ------------------------------------------------------------


@dataclass
class Row:
    name: str
    events: int
    seconds: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def us_per_event(self) -> float:
        return self.median / self.events * 1e6

    @property
    def events_per_second(self) -> float:
        return self.events / self.median if self.median else float("inf")


def _cpu(fn: Callable[[], Any]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(name: str, events: int, fn: Callable[[], Any], repeat: int, note: str = "") -> Row:
    row = Row(name, events, note=note)
    for _ in range(repeat):
        row.seconds.append(_cpu(fn))
    return row


# -- the measurements -----------------------------------------------------------------


def floor(lines: Sequence[bytes]) -> None:
    for line in lines:
        _floor_roundtrip(line)


def gateway(lines: Sequence[bytes], chunk: int = 32) -> int:
    """The gateway path over in-memory NDJSON lines; returns the SSE bytes produced.

    Lines are fed to ``agui_pipes.relay.Relay`` (what the gateway runs for a
    synchronous chain) ``chunk`` at a time, the way events arrive in network
    reads.
    """
    relay = Relay(gateway_chain())
    total = 0
    for start in range(0, len(lines), chunk):
        total += len(relay.feed(lines[start : start + chunk]))
    return total + len(relay.finish())


def decoded(lines: Sequence[bytes]) -> list[BaseEvent]:
    out = []
    for index, line in enumerate(lines):
        event = decode(line, index=index).event
        if event is not None:
            out.append(event)
    return out


def run_alone(stage_factory: Callable[[], Stage], events: Sequence[BaseEvent]) -> None:
    TransformerChain([stage_factory()]).apply_sync(events)


def verifier_alone(events: Sequence[BaseEvent]) -> None:
    verifier = Verifier("consumer")
    observe = verifier.observe
    for event in events:
        observe(event)
    verifier.finish()


def encode_alone(events: Sequence[BaseEvent]) -> None:
    for event in events:
        encode_sse(event)


def decode_alone(lines: Sequence[bytes]) -> None:
    for index, line in enumerate(lines):
        decode(line, index=index)


def driver(events: int) -> None:
    """An agent streaming ``events`` text deltas through the driver (verifier on)."""
    from agui_pipes import RunOutcome, run

    async def agent(ctx: Any) -> Any:
        message = ctx.assistant_message()
        for i in range(events):
            message.delta("tok ")
            if i % 32 == 0:
                await anyio.lowlevel.checkpoint()
        message.end()
        return RunOutcome.success()

    async def consume() -> None:
        async with run(agent, {"threadId": "t", "runId": "r"}) as stream:
            async for _ in stream:
                pass

    anyio.run(consume)


def reference(path: Path, repeat: int) -> Row | str:
    """Run the TS reference in node; returns its row, or why it could not run."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return "node/npm not found"
    if not (TS_DIR / "node_modules" / "@ag-ui" / "client").exists():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--silent"],
            cwd=TS_DIR,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return f"npm ci failed: {done.stderr.strip()[-500:]}"
    done = subprocess.run(
        [node, str(TS_DIR / "reference.mjs"), str(path), "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"reference.mjs failed: {done.stderr.strip()[-500:]}"
    result = json.loads(done.stdout)
    return Row("reference (TS @ag-ui/client)", result["events"], result["cpuSeconds"])


def side_by_side(
    path: Path, lines: Sequence[bytes], repeat: int, no_reference: bool
) -> tuple[Row, Row | None, Row, Row | str]:
    """Floor, reference and gateway path measured in rounds, all three per round.

    The machine's speed drifts over tens of seconds (it is shared), so
    measuring each one's repetitions in a block skews their ratio by whatever
    the drift did in between. Interleaving them keeps each round's three
    figures comparable. The reference runs in a fresh node per round and keeps
    its last repetition, after warm-up repetitions totalling at least 150k
    events (V8's JIT needs that many to reach its steady state; on the 10k
    stream a second repetition alone is still half cold).
    """
    n = len(lines)
    reference_repetitions = 1 + max(1, -(-150_000 // max(n, 1)))
    floor_row = Row(f"floor ({FLOOR_LIB} parse+serialize)", n)
    gw_row = Row("gateway path (agui_pipes)", n)
    ref_row: Row | None = None
    ref: Row | str = "skipped"
    for _ in range(repeat):
        floor_row.seconds.append(_cpu(lambda: floor(lines)))
        if not no_reference and (ref_row is not None or ref == "skipped"):
            ref = reference(path, reference_repetitions)
            if isinstance(ref, Row):
                if ref_row is None:
                    ref_row = Row(ref.name, ref.events)
                ref_row.seconds.append(ref.seconds[-1])
        gw_row.seconds.append(_cpu(lambda: gateway(lines)))
    return floor_row, ref_row, gw_row, ref


def round_ratios(floor_row: Row, ref_row: Row, gw_row: Row) -> tuple[list[float], list[float]]:
    """Per round: how many times the reference's events/s, and the floor's µs/event."""
    vs_ref = [
        (r / ref_row.events) / (g / gw_row.events)
        for r, g in zip(ref_row.seconds, gw_row.seconds, strict=True)
    ]
    vs_floor = [g / f for g, f in zip(gw_row.seconds, floor_row.seconds, strict=True)]
    return vs_ref, vs_floor


def peak_rss(path: Path) -> int:
    """Peak RSS (bytes) of a fresh process streaming the gateway path from ``path``."""
    done = subprocess.run(
        [sys.executable, str(HERE / "suite.py"), "--_rss-child", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip())


def _rss_child(path: Path) -> None:
    """Stream the file through the gateway path in 64 KiB reads; print ru_maxrss in bytes."""
    relay = Relay(gateway_chain())
    decoder = NDJSONDecoder()
    with path.open("rb") as stream:
        while chunk := stream.read(65536):
            relay.feed(decoder.feed_bytes(chunk))  # bytes payloads, as the gateway's
    relay.feed(decoder.close_bytes())
    relay.finish()
    print(_peak_rss_bytes())


def _peak_rss_bytes() -> int:
    """This process's peak RSS. VmHWM on Linux: ru_maxrss would also count the
    pages of the (large) parent this child was forked from before exec."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def component_rows(
    lines: Sequence[bytes], events: Sequence[BaseEvent], n: int, repeat: int
) -> list[Row]:
    """Decode and encode alone, each stage alone, the verifier, the fold and the driver."""
    expanded = TransformerChain([ExpandChunks()]).apply_sync(events)
    rows = [measure("decode alone", n, lambda: decode_alone(lines), repeat)]
    rows.append(measure("SSE encode alone", len(expanded), lambda: encode_alone(expanded), repeat))
    for name, factory in stages_alone().items():
        source = events if name == "ExpandChunks" else expanded
        rows.append(
            measure(
                f"stage {name}", len(source), lambda f=factory, s=source: run_alone(f, s), repeat
            )
        )
    rows.append(
        measure(
            "verifier alone (consumer)", len(expanded), lambda: verifier_alone(expanded), repeat
        )
    )
    rows.append(measure("fold alone", len(expanded), lambda: fold(expanded), repeat))
    rows.append(measure("driver (agent emit → consumer)", n, lambda: driver(n), repeat))
    return rows


# -- reporting --------------------------------------------------------------------------


def stream_file(label: str, stream: str = "realistic") -> Path:
    suffix = "" if stream == "realistic" else f"-{stream}"
    path = OUT / f"stream-{label}{suffix}.ndjson"
    if not path.exists():
        write_ndjson(path, SIZES[label], stream=stream)
    return path


def table(rows: Iterable[Row], floor_row: Row, ref_row: Row | None) -> str:
    lines = [
        f"{'measurement':<34} {'events/s':>12} {'µs/event':>9} {'x floor':>8} {'vs TS':>7}",
        "-" * 74,
    ]
    for row in rows:
        x_floor = row.us_per_event / floor_row.us_per_event
        vs_ts = (
            f"{row.events_per_second / ref_row.events_per_second:6.2f}x"
            if ref_row is not None
            else "    n/a"
        )
        lines.append(
            f"{row.name:<34} {row.events_per_second:>12,.0f} {row.us_per_event:>9.2f} "
            f"{x_floor:>7.1f}x {vs_ts}"
        )
    return "\n".join(lines)


def markdown(report: dict[str, Any], repeat: int) -> str:
    """The report as Markdown tables: one per stream size, then peak RSS."""
    machine = report["machine"]
    out = [
        f"Machine: {machine['platform']}, {machine['cpus']} CPUs, Python {machine['python']}, "
        f"floor library {machine['floor_library']}. CPU time, median of {repeat}.",
        "",
    ]
    for label, size in report["sizes"].items():
        rows = size["rows"]
        floor_us = rows[0]["us_per_event"]
        ref_us = size["reference"]
        out += [
            f"### {label} {report.get('stream', 'realistic')} stream ({size['events']:,} events)",
            "",
            "| measurement | events/s | µs/event | × floor | vs TS reference |",
            "|---|---:|---:|---:|---:|",
        ]
        for row in rows:
            vs = f"{ref_us / row['us_per_event']:.2f}×" if ref_us else "n/a"
            out.append(
                f"| {row['name']} | {row['events_per_second']:,} | {row['us_per_event']:.2f} | "
                f"{row['us_per_event'] / floor_us:.1f}× | {vs} |"
            )
        out.append("")
        per_round = size.get("per_round")
        if per_round:
            vs_ref, vs_floor = per_round["vs_reference"], per_round["vs_floor"]
            out += [
                "Per round (floor, reference and gateway path back to back): the gateway "
                f"path ran at {statistics.median(vs_ref):.2f}× the reference's events/s "
                f"(rounds: {', '.join(f'{v:.2f}' for v in vs_ref)}) and "
                f"{statistics.median(vs_floor):.1f}× the floor's µs/event "
                f"(rounds: {', '.join(f'{v:.1f}' for v in vs_floor)}).",
                "",
            ]
    if report["memory"]:
        out += [
            "### Peak RSS of the gateway path (streaming from disk)",
            "",
            "| stream | peak RSS |",
            "|---|---:|",
        ]
        out += [f"| {k} | {v / 2**20:.1f} MiB |" for k, v in report["memory"].items()]
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description="agui_pipes benchmark suite")
    parser.add_argument("--sizes", default="10k,150k", help="comma list of 10k,150k,1.5M")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--stream",
        choices=sorted(STREAMS),
        default="realistic",
        help="which streams.py stream (state-heavy: ~5%% STATE_DELTA, a snapshot per run)",
    )
    parser.add_argument("--memory", default="150k,1.5M", help="sizes for the peak-RSS check")
    parser.add_argument("--smoke", action="store_true", help="10k, one repetition, 10k memory")
    parser.add_argument("--no-reference", action="store_true", help="skip the node reference")
    parser.add_argument(
        "--core-only",
        action="store_true",
        help="only floor, reference and the gateway path (quick comparisons while optimising)",
    )
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument(
        "--markdown", type=Path, help="write the tables as Markdown (for docs/benchmarks.md)"
    )
    parser.add_argument("--_rss-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._rss_child is not None:
        _rss_child(args._rss_child)
        return
    if args.smoke:
        args.sizes, args.repeat, args.memory = "10k", 1, "10k"

    report: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "floor_library": FLOOR_LIB,
        },
        "stream": args.stream,
        "sizes": {},
        "memory": {},
    }
    for label in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        path = stream_file(label, args.stream)
        lines = path.read_bytes().splitlines()
        n = len(lines)
        print(
            f"\n== {label}: {n} events ({path.stat().st_size / 1e6:.1f} MB), "
            f"median of {args.repeat}, CPU time",
            flush=True,
        )
        floor_row, ref_row, gw_row, ref = side_by_side(path, lines, args.repeat, args.no_reference)
        rows = [floor_row]
        if ref_row is not None:
            rows.append(ref_row)
        rows.append(gw_row)
        events = decoded(lines) if not args.core_only else []
        if not args.core_only:
            rows.extend(component_rows(lines, events, n, args.repeat))
        print(table(rows, floor_row, ref_row))
        if ref_row is None:
            print(f"(reference not run: {ref})")
        else:
            gw = next(r for r in rows if r.name.startswith("gateway"))
            print(
                f"gateway vs TS reference: {gw.events_per_second / ref_row.events_per_second:.2f}x"
                f" the events/s; gateway vs floor: {gw.us_per_event / floor_row.us_per_event:.1f}x"
                " the µs/event"
            )
            vs_ref, vs_floor = round_ratios(floor_row, ref_row, gw_row)
            print(
                f"per round (each round runs all three back to back): vs TS "
                f"{statistics.median(vs_ref):.2f}x (range {min(vs_ref):.2f}-{max(vs_ref):.2f}), "
                f"vs floor {statistics.median(vs_floor):.1f}x "
                f"(range {min(vs_floor):.1f}-{max(vs_floor):.1f})"
            )
        report["sizes"][label] = {
            "events": n,
            "reference": None if ref_row is None else ref_row.us_per_event,
            "reference_note": None if ref_row is not None else str(ref),
            "per_round": None
            if ref_row is None
            else dict(
                zip(
                    ("vs_reference", "vs_floor"),
                    round_ratios(floor_row, ref_row, gw_row),
                    strict=True,
                )
            ),
            "rows": [
                {
                    "name": r.name,
                    "events": r.events,
                    "us_per_event": round(r.us_per_event, 3),
                    "events_per_second": round(r.events_per_second),
                    "seconds": r.seconds,
                }
                for r in rows
            ],
        }
    memory_labels = [s.strip() for s in args.memory.split(",") if s.strip()]
    if memory_labels:
        print("\n== peak RSS of the gateway path, streaming from disk (fresh process each)")
        for label in memory_labels:
            rss = peak_rss(stream_file(label, args.stream))
            report["memory"][label] = rss
            print(f"  {label:>5}: {rss / 2**20:8.1f} MiB")
        if len(memory_labels) >= 2:
            first, last = report["memory"][memory_labels[0]], report["memory"][memory_labels[-1]]
            print(f"  ratio {memory_labels[-1]}/{memory_labels[0]}: {last / first:.3f}")
            report["memory_ratio"] = round(last / first, 3)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
        print(f"\nwrote {args.json}")
    if args.markdown is not None:
        args.markdown.write_text(markdown(report, args.repeat))
        print(f"wrote {args.markdown}")


if __name__ == "__main__":
    main()
