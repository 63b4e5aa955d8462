"""Cost of the declarative layer: loading a chain file, building chains, `agui-pipes run`.

    python benchmarks/bench_config.py [--events 150000] [--repeat 3] [--json out.json]

Three figures, medians of ``--repeat`` runs (reported, never asserted):

* ``load_ms`` — ``load_chain`` of examples/chains/production-gateway.yaml (parse
  with positions, interpolate, validate, build each stage once);
* ``build_us`` — one call of the returned factory (a fresh 9-stage chain);
* ``run`` — what ``agui-pipes run`` does per event, in process: read an NDJSON
  recording (benchmarks/streams.py), decode, apply the chain, encode NDJSON —
  for the empty chain (the I/O + decode + encode floor) and the gateway chain.
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
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from streams import write_ndjson

from agui_pipes._cli._input import read_events
from agui_pipes.codecs import encode_ndjson
from agui_pipes.config import LoadedChain, load_chain

ROOT = Path(__file__).resolve().parent.parent
GATEWAY = ROOT / "examples" / "chains" / "production-gateway.yaml"


def median_of(repeat: int, measure: object) -> float:
    return statistics.median(measure() for _ in range(repeat))  # type: ignore[operator]


def time_load() -> float:
    start = time.perf_counter()
    load_chain(GATEWAY)
    return (time.perf_counter() - start) * 1e3


def time_build(factory: LoadedChain, n: int = 2000) -> float:
    start = time.perf_counter()
    for _ in range(n):
        factory()
    return (time.perf_counter() - start) / n * 1e6


def time_run(factory: LoadedChain, recording: Path, events: int) -> float:
    """Seconds for read + decode + chain + encode of the whole recording."""

    async def main() -> None:
        sink = open(os.devnull, "wb")  # noqa: ASYNC230, SIM115 - a sink, never blocks
        try:
            async with factory().apply(read_events(str(recording))) as out:
                async for event in out:
                    sink.write(encode_ndjson(event))
        finally:
            sink.close()

    start = time.perf_counter()
    anyio.run(main)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=150_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    gateway = load_chain(GATEWAY)
    empty = load_chain("transformers: []")
    with tempfile.TemporaryDirectory() as tmp:
        recording = Path(tmp) / "stream.ndjson"
        count = write_ndjson(recording, args.events)
        load_ms = median_of(args.repeat, time_load)
        build_us = median_of(args.repeat, lambda: time_build(gateway))
        floor = median_of(args.repeat, lambda: time_run(empty, recording, count))
        full = median_of(args.repeat, lambda: time_run(gateway, recording, count))
    result = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "events": count,
        "load_ms": round(load_ms, 2),
        "build_us": round(build_us, 1),
        "run_empty_events_per_s": round(count / floor),
        "run_empty_us_per_event": round(floor / count * 1e6, 2),
        "run_gateway_events_per_s": round(count / full),
        "run_gateway_us_per_event": round(full / count * 1e6, 2),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
