"""Consumer pipeline benchmark: agui_pipes vs the official TypeScript client, same file.

    python benchmarks/bench_consumer.py                 # 150k events, timing + memory
    python benchmarks/bench_consumer.py --events 300000 --repeat 5 --no-memory

What is timed, from the NDJSON bytes already in memory to the end of stream:

* agui_pipes: ``Consumer.push(line)`` per line — decode (the 1.0 processing
  model, strict validation), ExpandChunks, Verifier (consumer profile) and
  fold (messages, state, tool calls) — then ``finish()``.
* reference: ``JSON.parse`` per line, then ``enforceEvents`` →
  ``transformChunks`` → ``verifyEvents`` of ``@ag-ui/client`` 1.0.0
  (benchmarks/ts/consumer_reference.mjs). It does *not* apply the events
  (no messages, no state), so agui_pipes does strictly more work here.

Both take the best of ``--repeat`` runs. The stream is benchmarks/streams.py's
deterministic realistic traffic (long answers in many deltas, reasoning,
parallel tool calls, state deltas, nested subagents, chunk-form messages).

Memory: the pipeline reads a file line by line in a fresh process, for the
stream and one ten times longer, and reports peak RSS (VmHWM) twice: for the
checks alone (decode, expand, verify — must stay flat) and with the fold,
whose result is the whole conversation (every message of every run is
kept), so it grows with the content the stream carried and nothing else.

Timings are machine- and load-dependent; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from streams import write_ndjson  # noqa: E402

from agui_pipes import Consumer  # noqa: E402
from agui_pipes._protocol.decode import as_object, decode_event  # noqa: E402
from agui_pipes.transformers import ExpandChunks  # noqa: E402
from agui_pipes.verify import Verifier  # noqa: E402

TS_DIR = HERE / "ts"
OUT = HERE / "out"


def stream_file(events: int, seed: int) -> Path:
    path = OUT / f"consumer-{events}-{seed}.ndjson"
    if not path.exists():
        write_ndjson(path, events, seed)
    return path


def time_python(data: bytes, repeat: int) -> tuple[float, int]:
    lines = data.splitlines()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        consumer = Consumer()
        push = consumer.push
        for line in data.splitlines():
            push(line)
        result = consumer.finish()
        best = min(best, time.perf_counter() - start)
        assert result.outcome == "success", result.outcome
    return best, len(lines)


def ensure_node() -> str | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None
    if not (TS_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=TS_DIR,
            check=True,
            capture_output=True,
        )
    return node


def time_reference(node: str, path: Path, repeat: int) -> dict[str, float]:
    proc = subprocess.run(
        [node, str(TS_DIR / "consumer_reference.mjs"), str(path), "--repeat", str(repeat)],
        cwd=TS_DIR,
        check=True,
        capture_output=True,
        text=True,
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"seconds": min(report["seconds"]), "events": report["events"]}


def peak_rss_child(path: Path, fold: bool) -> int:
    """Peak RSS (VmHWM) of the pipeline over ``path``, streamed, in a fresh interpreter.

    VmHWM rather than ``ru_maxrss``: after fork+exec Linux carries the
    parent's maximum over into the child's ``ru_maxrss``.
    """
    mode = "--rss-fold" if fold else "--rss-checks"
    proc = subprocess.run(
        [sys.executable, __file__, mode, str(path)], check=True, capture_output=True, text=True
    )
    return int(proc.stdout.strip())


def _vm_hwm() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # pragma: no cover


def rss_of(path: Path, fold: bool) -> None:
    """Stream ``path`` through the pipeline, then print the peak RSS in bytes."""
    if fold:
        consumer = Consumer()
        push = consumer.push
        with path.open("rb") as handle:
            for line in handle:
                push(line)
        assert consumer.finish().outcome == "success"
    else:
        warnings: list[Any] = []
        expand, observe = ExpandChunks().transform, Verifier().observe
        with path.open("rb") as handle:
            for index, line in enumerate(handle):
                event = decode_event(as_object(line, index), index, warnings)
                if event is not None:
                    for out in expand(event):
                        observe(out)
    print(_vm_hwm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=150_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ts", action="store_true", help="skip the TypeScript reference")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-RSS check")
    parser.add_argument("--rss-fold", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rss-checks", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_fold is not None or args.rss_checks is not None:
        rss_of(args.rss_fold or args.rss_checks, fold=args.rss_fold is not None)
        return

    path = stream_file(args.events, args.seed)
    data = path.read_bytes()
    seconds, count = time_python(data, args.repeat)
    ours = seconds / count * 1e6
    print(f"stream: {path.name}: {count:,} events, {len(data) / 1e6:.1f} MB NDJSON")
    print(
        f"agui_pipes decode+expand+verify+fold: {seconds:.3f} s, {ours:.2f} µs/event, "
        f"{count / seconds:,.0f} events/s"
    )
    node = None if args.no_ts else ensure_node()
    if node is not None:
        ref = time_reference(node, path, args.repeat)
        theirs = ref["seconds"] / ref["events"] * 1e6
        print(
            f"@ag-ui/client parse+enforce+transformChunks+verify: {ref['seconds']:.3f} s, "
            f"{theirs:.2f} µs/event"
        )
        print(
            f"ratio (reference / agui_pipes): {theirs / ours:.2f}x "
            f"({'agui_pipes faster' if ours < theirs else 'reference faster'})"
        )
    elif not args.no_ts:
        print("node/npm not found: reference not timed")
    if not args.no_memory:
        big = stream_file(args.events * 10, args.seed)
        for fold, label in (
            (False, "decode+expand+verify"),
            (True, "decode+expand+verify+fold (keeps every message)"),
        ):
            small_rss, big_rss = peak_rss_child(path, fold), peak_rss_child(big, fold)
            print(
                f"peak RSS, {label}: {small_rss / 2**20:.1f} MiB for {args.events:,} "
                f"events, {big_rss / 2**20:.1f} MiB for {args.events * 10:,} "
                f"(x{big_rss / small_rss:.2f})"
            )


if __name__ == "__main__":
    main()
