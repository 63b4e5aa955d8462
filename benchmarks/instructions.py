"""Instructions per event (valgrind callgrind): a noise-free A/B measure for optimising.

CPU time on a shared machine swings by ±30% between runs, which hides the 2-5%
steps most optimisations are made of. The number of instructions executed
does not swing: under ``valgrind --tool=callgrind`` with a fixed hash seed it
is reproducible to the instruction. This script runs one measurement of the
suite (the floor, the gateway path, or the gateway path without one stage)
over the 10k stream once and three times, and reports the difference per
event, so imports and one-time warm-up (builder compilation, plan caching)
cancel out.

    python benchmarks/instructions.py                 # floor and gateway
    python benchmarks/instructions.py gateway -S      # gateway, and without SubagentVisibility
    python benchmarks/instructions.py run startup     # whole `agui-pipes run` processes

``run`` and ``startup`` count a whole process, not a difference: ``agui-pipes run``
with examples/chains/production-gateway.yaml over the 10k stream (SSE out), and
the same command over a 2-event stream (start-up: imports, the chain's option
models, the first events). Both run in a temporary directory, so the agui_pipes
measured is the one on the import path, with its bytecode cached by a warm-up run.

Instructions are not time — the interpreter retires fewer instructions per
cycle than orjson's C code, so the time ratio to the floor is larger than
the instruction ratio — but a change that removes instructions from the hot
path is a change that makes it faster. Needs valgrind (``apt install
valgrind``); takes ~30 s per measurement.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGE_NAMES = {
    "-EC": "ExpandChunks",
    "-V": "Verify",
    "-F": "FilterToolCalls",
    "-S": "SubagentVisibility",
    "-T": "ToolResultToState",
}


def _child(measurement: str, repeat: int) -> None:
    sys.path.insert(0, str(HERE))
    import suite

    from agui_pipes import TransformerChain
    from agui_pipes.relay import Relay

    lines = suite.stream_file("10k").read_bytes().splitlines()
    if measurement == "floor":
        for _ in range(repeat):
            suite.floor(lines)
        return
    without = STAGE_NAMES.get(measurement.removeprefix("gateway"))
    for _ in range(repeat):
        stages = [s for s in suite.gateway_chain().stages if type(s).__name__ != without]
        relay = Relay(TransformerChain(stages))
        for start in range(0, len(lines), 32):
            relay.feed(lines[start : start + 32])
        relay.finish()


def _env() -> dict[str, str]:
    """Fixed hash seed (reproducible dict layouts) and cached bytecode (a steadier base)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _instructions(measurement: str, repeat: int) -> int:
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            measurement,
            str(repeat),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


_CLI = [sys.executable, "-c", "import sys; from agui_pipes._cli import main; sys.exit(main())"]
_PROCESSES = ("run", "startup")


def _process_argv(measurement: str, tmp: Path) -> list[str]:
    """The ``agui-pipes run`` command a whole-process measurement counts."""
    lines = _lines_10k()
    stream = tmp / f"{measurement}.ndjson"
    chosen = lines if measurement == "run" else lines[:2]
    stream.write_bytes(b"\n".join(chosen) + b"\n")
    chain = HERE.parent / "examples" / "chains" / "production-gateway.yaml"
    return [*_CLI, "run", "-c", str(chain), "--format", "sse", "-q", "-o", os.devnull, str(stream)]


def _process_instructions(measurement: str) -> int:
    """Instructions of one whole process (after a warm-up run that caches bytecode)."""
    import tempfile

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        argv = _process_argv(measurement, tmp)
        env = {**_env(), "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
        subprocess.run(argv, cwd=tmp, env=env, check=True)
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
            cwd=tmp,
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "measurements",
        nargs="*",
        default=["floor", "gateway"],
        help="floor, gateway, gateway without a stage ("
        + ", ".join(f"gateway{flag}" for flag in STAGE_NAMES)
        + "), or a whole process: run, startup",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed; this measure needs it (apt install valgrind)")
    events = len(_lines_10k())
    for measurement in args.measurements:
        if measurement in _PROCESSES:
            total = _process_instructions(measurement)
            print(f"{measurement:12s} {total:14,d} instructions (whole process)")
            continue
        if measurement != "floor" and measurement.removeprefix("gateway") not in ("", *STAGE_NAMES):
            raise SystemExit(f"unknown measurement {measurement!r}; see --help")
        # Warm the bytecode cache first, so neither counted run compiles modules.
        _child_warm(measurement)
        once = _instructions(measurement, 1)
        thrice = _instructions(measurement, 3)
        per_event = (thrice - once) / (2 * events)
        print(f"{measurement:12s} {per_event:10,.0f} instructions/event")


def _lines_10k() -> list[bytes]:
    sys.path.insert(0, str(HERE))
    import suite

    return suite.stream_file("10k").read_bytes().splitlines()


def _child_warm(measurement: str) -> None:
    subprocess.run([sys.executable, __file__, "--child", measurement, "0"], env=_env(), check=True)


if __name__ == "__main__":
    main()
