"""``agui-pipes run`` as a whole process against the TypeScript reference, start-up included.

    python benchmarks/bench_process.py                     # 160k events, 7 rounds
    python benchmarks/bench_process.py --events 160000 --rounds 9 --stream state-heavy
    python benchmarks/bench_process.py --json out.json

What a user pays to push one recorded stream through the consumer checks: a
fresh process per measurement, start-up, reading the file, the work and the
output all counted. The two commands, on the same NDJSON file
(``streams.py``):

* **ours** — ``agui-pipes run --config CHAIN --format sse -o /dev/null FILE``
  with the stages the TS client has: ``expand_chunks`` then ``verify``
  (consumer profile);
* **reference** — ``node benchmarks/ts/reference.mjs FILE --repeat 1``:
  ``@ag-ui/client`` 1.0.0's ``enforceEvents`` → ``transformChunks`` →
  ``verifyEvents``, then ``@ag-ui/encoder``'s SSE encoding, one pass, cold.

Each is measured as the child's user + system CPU time (``os.wait4``), the two
back to back in every round (alternating which goes first), so the machine's
drift hits both alike; the ratio is the median of the per-round ratios. The
start-up of each (ours on an empty stream, node on a one-event file) is
measured in the same rounds, to say how much of the whole is start-up.

Python children run as an installed package would: bytecode cached (a private
``PYTHONPYCACHEPREFIX``, written by a warm-up round; ``PYTHONDONTWRITEBYTECODE``
is dropped for them). Nothing is asserted; docs/benchmarks.md quotes the result.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
TS_DIR = HERE / "ts"
sys.path.insert(0, str(HERE))

from streams import STREAMS, write_ndjson  # noqa: E402

#: The stages of the TS client's inbound pipeline, as a chain file.
CONSUMER_CHAIN = """\
version: 1
transformers:
  - expand_chunks
  - type: verify
    profile: consumer
"""

_CLI = [sys.executable, "-c", "import sys; from agui_pipes._cli import main; sys.exit(main())"]


def cpu_of(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """User + system CPU seconds of one child running ``argv``; fails loudly if it fails."""
    child = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    if child.returncode not in (0, 2):
        raise SystemExit(f"{argv[:4]} exited with {child.returncode}: {errors[-2000:]!r}")
    return usage.ru_utime + usage.ru_stime


def ensure_node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise SystemExit("node and npm are needed for the reference")
    if not (TS_DIR / "node_modules" / "@ag-ui" / "client").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=TS_DIR, check=True)
    return node


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--events", type=int, default=160_000)
    parser.add_argument("--stream", choices=sorted(STREAMS), default="realistic")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    node = ensure_node()

    OUT.mkdir(exist_ok=True)
    suffix = "" if args.stream == "realistic" else f"-{args.stream}"
    path = OUT / f"process-{args.events}{suffix}.ndjson"
    if not path.exists():
        write_ndjson(path, args.events, stream=args.stream)
    events = sum(1 for _ in path.open("rb"))

    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        chain = cwd / "consumer.yaml"
        chain.write_text(CONSUMER_CHAIN)
        empty = cwd / "empty.ndjson"
        empty.write_bytes(b"")
        one = cwd / "one.ndjson"
        with path.open("rb") as source:
            one.write_bytes(source.readline())
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cwd / "pycache")
        commands = {
            "ours": [
                *_CLI,
                "run",
                "-c",
                str(chain),
                "--format",
                "sse",
                "-q",
                "-o",
                os.devnull,
                str(path),
            ],
            "reference": [node, str(TS_DIR / "reference.mjs"), str(path), "--repeat", "1"],
            "ours start-up": [
                *_CLI,
                "run",
                "-c",
                str(chain),
                "--format",
                "sse",
                "-q",
                "-o",
                os.devnull,
                str(empty),
            ],
            "reference start-up": [node, str(TS_DIR / "reference.mjs"), str(one), "--repeat", "1"],
        }
        for argv in commands.values():  # warm-up: bytecode, the file cache
            cpu_of(argv, cwd, env)
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        ratios: list[float] = []
        for round_ in range(args.rounds):
            order = list(commands) if round_ % 2 == 0 else list(reversed(commands))
            for name in order:
                cpu[name].append(cpu_of(commands[name], cwd, env))
            ratios.append(cpu["reference"][-1] / cpu["ours"][-1])
            print(
                f"round {round_ + 1}: ours {cpu['ours'][-1]:.2f} s, reference "
                f"{cpu['reference'][-1]:.2f} s CPU -> {ratios[-1]:.2f}x; start-up "
                f"{cpu['ours start-up'][-1]:.2f} / {cpu['reference start-up'][-1]:.2f} s",
                flush=True,
            )

    median = {name: statistics.median(values) for name, values in cpu.items()}
    print(f"\n{args.stream} stream, {events:,} events, {args.rounds} rounds (CPU s, medians):")
    for name, value in median.items():
        print(f"  {name:<20} {value:6.3f} s")
    work_ours = median["ours"] - median["ours start-up"]
    work_ref = median["reference"] - median["reference start-up"]
    print(
        f"  beyond start-up: ours {work_ours / events * 1e6:.2f} µs/event, reference "
        f"{work_ref / events * 1e6:.2f} µs/event"
    )
    print(
        f"whole process: ours used {statistics.median(ratios):.2f}x less CPU than the "
        f"reference (per round {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    if args.json is not None:
        result: dict[str, Any] = {
            "stream": args.stream,
            "events": events,
            "cpu_s": cpu,
            "median_cpu_s": median,
            "ratio_per_round": ratios,
            "ratio": statistics.median(ratios),
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
