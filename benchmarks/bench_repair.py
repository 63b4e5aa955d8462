"""What Repair costs on a valid stream, as ratios to an empty chain (issue 17).

    python benchmarks/bench_repair.py [--events 50000] [--repeat 9]

Repair sits on the hot path of a server that repairs before its chain, and on a
valid stream it must change nothing, so what matters is its pass-through cost.
The stream is benchmarks/streams.py's realistic mix with its chunk events
expanded first (Repair expands chunks itself; expanded input keeps the rows
about Repair alone). Four chains run side by side, alternating, and each
figure is the median over ``--repeat`` rounds of (chain time / empty-chain
time in the same round; the chains run in a different order each round), so
load from other processes mostly cancels out:

* ``empty`` — no stage (1.00 by definition);
* ``verify`` — ``Verify()`` (consumer profile), what a consumer checks anyway;
* ``repair`` — ``Repair()``;
* ``repair+verify`` — ``Repair() | Verify()``, the usual pairing.

``repair / verify`` compares Repair with the verifier it runs inside. The
per-event figure in µs (the median empty-chain time times the ratio minus one)
is printed for orientation only: absolute times vary between runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_stages import load

from agui_pipes import Stage, TransformerChain
from agui_pipes.transformers import ExpandChunks, Repair, Verify

CHAINS: dict[str, Callable[[], list[Stage]]] = {
    "empty": list,
    "verify": lambda: [Verify()],
    "repair": lambda: [Repair()],
    "repair+verify": lambda: [Repair(), Verify()],
}


def _seconds(stages: list[Stage], events: list) -> float:  # type: ignore[type-arg]
    chain = TransformerChain(stages)
    start = time.perf_counter()
    out = chain.apply_sync(events)
    elapsed = time.perf_counter() - start
    assert len(out) == len(events)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()

    events = TransformerChain([ExpandChunks()]).apply_sync(load(args.events))
    stage = Repair()
    TransformerChain([stage]).apply_sync(events)
    assert stage.report.count == 0, stage.report  # a valid stream: nothing to repair
    ratios: dict[str, list[float]] = {name: [] for name in CHAINS}
    empties: list[float] = []
    order = list(CHAINS)
    for round_ in range(args.repeat):
        times = {name: _seconds(CHAINS[name](), events) for name in order}
        order = order[1:] + order[:1] if round_ % 2 else order[::-1]
        empties.append(times["empty"])
        for name, seconds in times.items():
            ratios[name].append(seconds / times["empty"])
    per_event = statistics.median(empties) / len(events) * 1e6
    print(f"{len(events)} events; empty chain {per_event:.3f} µs/event (orientation only)")
    print(f"{'chain':16} {'ratio':>7} {'~µs/event over empty':>22}")
    for name, values in ratios.items():
        ratio = statistics.median(values)
        print(f"{name:16} {ratio:7.2f} {per_event * (ratio - 1):22.3f}")
    to_verify = statistics.median(
        r / v for r, v in zip(ratios["repair"], ratios["verify"], strict=True)
    )
    print(f"repair / verify: {to_verify:.2f}")


if __name__ == "__main__":
    main()
