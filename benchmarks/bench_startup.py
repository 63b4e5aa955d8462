"""Start-up cost of `agui-pipes` commands, as ratios to bare-interpreter baselines.

    python benchmarks/bench_startup.py [--repeat 20] [--json out.json]

Each command runs ``--repeat`` times in a fresh subprocess (commands interleaved,
so a burst of load on a shared machine hits all of them alike); the figures are
medians. Reported, never asserted:

* CPU time (user + system of the child, from ``os.wait4``) — the figure the
  ratios use, because on a shared machine wall-clock time swings far more;
* wall-clock time, for reference.

Targets (issue 14): ``--version`` and ``--help`` at most 3x ``python -c pass``;
``run`` on an empty stream at most 1.3x ``python -c "import ag_ui.core"`` (the
event models every real command needs). ``run`` is measured with an empty chain
(the command's own cost) and with examples/chains/production-gateway.yaml (what
a real chain adds: its stages and their option models).

The commands run in a temporary directory, so the agui_pipes measured is the
one on the import path (installed, or ``PYTHONPATH``), not the current directory,
and with bytecode cached there (warm starts, as for an installed package).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GATEWAY = ROOT / "examples" / "chains" / "production-gateway.yaml"

# The console script `agui-pipes` is exactly this (see [project.scripts]).
_CLI = [sys.executable, "-c", "import sys; from agui_pipes._cli import main; sys.exit(main())"]


_NO_EVENTS = 2
"""``run``'s exit status for an input holding no event: the measured commands end so."""


def commands(empty_chain: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import ag_ui.core'": [sys.executable, "-c", "import ag_ui.core"],
        "python -c 'import agui_pipes'": [sys.executable, "-c", "import agui_pipes"],
        "agui-pipes --version": [*_CLI, "--version"],
        "agui-pipes --help": [*_CLI, "--help"],
        "agui-pipes run (empty chain, empty stream)": [*_CLI, "run", "-c", str(empty_chain)],
        "agui-pipes run (gateway chain, empty stream)": [*_CLI, "run", "-c", str(GATEWAY)],
    }


def measure(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, exit status) of one run of ``argv`` with empty stdin."""
    env = dict(os.environ)
    # Warm starts, as for an installed package: bytecode is written once (by the
    # warm-up round) and read after, into a private cache that leaves no
    # __pycache__ in the checkout. Without it, PYTHONDONTWRITEBYTECODE=1 would
    # recompile every agui_pipes module on every start.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cwd / "pycache")
    start = time.perf_counter()
    child = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,  # not the checkout: `python -c` would import agui_pipes from the cwd
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait again
    return usage.ru_utime + usage.ru_stime, wall, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        empty_chain = Path(tmp) / "empty.yaml"
        empty_chain.write_text("version: 1\ntransformers: []\n")
        table = commands(empty_chain)
        for name, argv in table.items():  # warm the file cache and .pyc files
            status = measure(argv, Path(tmp))[2]
            expected = _NO_EVENTS if name.startswith("agui-pipes run") else 0
            if status != expected:  # a broken command would be timed as a fast one
                raise SystemExit(f"{name!r} exited with {status}, expected {expected}")
        cpu: dict[str, list[float]] = {name: [] for name in table}
        wall: dict[str, list[float]] = {name: [] for name in table}
        for _ in range(args.repeat):
            for name, argv in table.items():
                spent, elapsed, _ = measure(argv, Path(tmp))
                cpu[name].append(spent)
                wall[name].append(elapsed)

    median_cpu = {name: statistics.median(values) for name, values in cpu.items()}
    median_wall = {name: statistics.median(values) for name, values in wall.items()}
    bare = median_cpu["python -c pass"]
    core = median_cpu["python -c 'import ag_ui.core'"]
    ratios = {
        "version_vs_pass": median_cpu["agui-pipes --version"] / bare,
        "help_vs_pass": median_cpu["agui-pipes --help"] / bare,
        "run_empty_vs_ag_ui_core": median_cpu["agui-pipes run (empty chain, empty stream)"] / core,
        "run_gateway_vs_ag_ui_core": (
            median_cpu["agui-pipes run (gateway chain, empty stream)"] / core
        ),
    }
    targets = {
        "version_vs_pass": 3.0,
        "help_vs_pass": 3.0,
        "run_empty_vs_ag_ui_core": 1.3,
    }

    width = max(map(len, table))
    print(f"{'command':<{width}}  {'cpu ms':>7}  {'wall ms':>7}   (medians of {args.repeat})")
    for name in table:
        print(f"{name:<{width}}  {median_cpu[name] * 1e3:7.1f}  {median_wall[name] * 1e3:7.1f}")
    print()
    for key, value in ratios.items():
        target = targets.get(key)
        verdict = ""
        if target is not None:
            verdict = f"  (target <= {target}: {'met' if value <= target else 'NOT met'})"
        print(f"{key:<28} {value:5.2f}x{verdict}")

    result = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "repeat": args.repeat,
        "cpu_ms": {name: round(value * 1e3, 1) for name, value in median_cpu.items()},
        "wall_ms": {name: round(value * 1e3, 1) for name, value in median_wall.items()},
        "ratios": {key: round(value, 2) for key, value in ratios.items()},
        "targets": targets,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
