"""What Compact costs and saves, on the benchmark streams.

    python benchmarks/bench_compact.py [--events 30000] [--repeat 9]

For each stream of benchmarks/streams.py (``realistic`` and ``state-heavy``):

* events and JSON bytes (NDJSON) in and out of ``compact`` — what a history or
  replay saves;
* µs/event of the ``Compact`` stage through ``TransformerChain.apply_sync``,
  with the empty chain subtracted, measured *interleaved* with the empty chain
  and with ``CoalesceDeltas(max_chars=200)`` (one round runs the three in turn;
  the figure is the median over rounds), so load from other work on the
  machine hits all three alike — the ratio to CoalesceDeltas is the figure to
  compare across machines;
* µs/event of ``thread_history`` over the stream's runs (each run stored apart,
  as an event log holds them).

Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ag_ui.core import BaseEvent, EventType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from streams import STREAMS

from agui_pipes import Stage, TransformerChain, thread_history
from agui_pipes.codecs import encode_ndjson
from agui_pipes.events import EVENT_CLASS_BY_TYPE
from agui_pipes.transformers import CoalesceDeltas, Compact
from agui_pipes.transformers.compact import compact


def load(stream: str, n: int) -> list[BaseEvent]:
    return [EVENT_CLASS_BY_TYPE[EventType(d["type"])].model_validate(d) for d in STREAMS[stream](n)]


def _seconds(make: Callable[[], Stage] | None, events: list[BaseEvent]) -> float:
    chain = TransformerChain([] if make is None else [make()])
    start = time.perf_counter()
    chain.apply_sync(events)
    return time.perf_counter() - start


def _runs(events: list[BaseEvent]) -> list[list[BaseEvent]]:
    runs: list[list[BaseEvent]] = []
    for event in events:
        if event.type is EventType.RUN_STARTED or not runs:
            runs.append([])
        runs[-1].append(event)
    return runs


def _bytes(events: list[BaseEvent]) -> int:
    return sum(len(encode_ndjson(event)) for event in events)


def measure(stream: str, n: int, repeat: int) -> dict[str, float | int | str]:
    events = load(stream, n)
    out = compact(events)
    contenders: dict[str, Callable[[], Stage] | None] = {
        "empty": None,
        "coalesce": lambda: CoalesceDeltas(max_chars=200),
        "compact": Compact,
    }
    rounds: dict[str, list[float]] = {name: [] for name in contenders}
    history: list[float] = []
    runs = _runs(events)
    thread = getattr(events[0], "thread_id", "t")
    for _ in range(repeat):
        for name, make in contenders.items():
            rounds[name].append(_seconds(make, events))
        start = time.perf_counter()
        thread_history(thread, runs)
        history.append(time.perf_counter() - start)
    per_event = {k: statistics.median(v) / len(events) * 1e6 for k, v in rounds.items()}
    compact_us = per_event["compact"] - per_event["empty"]
    coalesce_us = per_event["coalesce"] - per_event["empty"]
    return {
        "stream": stream,
        "events_in": len(events),
        "events_out": len(out),
        "bytes_in": _bytes(events),
        "bytes_out": _bytes(out),
        "compact_us": compact_us,
        "coalesce_us": coalesce_us,
        "ratio_to_coalesce": compact_us / coalesce_us,
        "history_us": statistics.median(history) / len(events) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, {platform.machine()}; medians of "
        f"{args.repeat} interleaved rounds"
    )
    print(
        f"{'stream':12} {'events in→out':>17} {'NDJSON bytes in→out':>23} "
        f"{'Compact µs/ev':>14} {'÷ Coalesce':>10} {'history µs/ev':>14}"
    )
    rows = []
    for stream in STREAMS:
        row = measure(stream, args.events, args.repeat)
        rows.append(row)
        print(
            f"{stream:12} {row['events_in']:>8,}→{row['events_out']:<8,} "
            f"{row['bytes_in']:>11,}→{row['bytes_out']:<11,} {row['compact_us']:14.2f} "
            f"{row['ratio_to_coalesce']:10.2f} {row['history_us']:14.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
