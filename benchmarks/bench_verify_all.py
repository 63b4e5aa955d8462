"""``verify --all``'s cost: the finding collector against the first-violation Consumer.

    python benchmarks/bench_verify_all.py [--events 50000] [--rounds 7]

Both run over the same deterministic realistic stream (benchmarks/streams.py), from
the NDJSON lines in memory to the end of stream: ``Consumer.push`` per line then
``finish()`` (decode, chunk expansion, verification, fold — what ``verify`` does), and
``FindingCollector.push`` per line then ``finish()`` (the same, but a violation is
recorded and the check goes on — what ``verify --all`` does), consumer profile (the
stream carries many runs, which the producer profile refuses by design). Rounds alternate which
goes first; the figures are medians of CPU time per event. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
from streams import generate

from agui_pipes import Consumer
from agui_pipes._consumer.findings import FindingCollector


def _consumer(lines: list[bytes], profile: str) -> float:
    start = time.process_time()
    consumer = Consumer(profile=profile)  # type: ignore[arg-type]
    for line in lines:
        consumer.push(line)
    consumer.finish()
    return time.process_time() - start


def _collector(lines: list[bytes], profile: str) -> float:
    start = time.process_time()
    collector = FindingCollector(profile=profile)  # type: ignore[arg-type]
    for line in lines:
        collector.push(line)
    findings = collector.finish()
    assert not [f for f in findings if f.severity.value != "hygiene"], findings[:3]
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    lines = [orjson.dumps(event) for event in generate(args.events)]
    for profile in ("consumer",):
        plain: list[float] = []
        every: list[float] = []
        _consumer(lines, profile), _collector(lines, profile)  # warm-up
        for round_ in range(args.rounds):
            pair = (_consumer, _collector) if round_ % 2 == 0 else (_collector, _consumer)
            for measure in pair:
                (plain if measure is _consumer else every).append(measure(lines, profile))
        per_plain = statistics.median(plain) / len(lines) * 1e6
        per_every = statistics.median(every) / len(lines) * 1e6
        print(
            f"{profile:9s} first violation {per_plain:6.2f} µs/event   --all "
            f"{per_every:6.2f} µs/event   ({per_every / per_plain:.2f}x)"
        )


if __name__ == "__main__":
    main()
