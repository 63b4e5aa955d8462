"""Per-event overhead of a chain of pass-through sync stages over an async source.

    python benchmarks/bench_chain.py [--events 200000] [--stages 5] [--repeat 5]
        [--backend asyncio|trio] [--json out.json]

Reports the median of several repetitions, in CPU µs/event (process time, so other
load on a shared machine distorts it less): a bare async generator
(the floor every pipeline pays), the chain on top of it, and the chain's own
overhead (the difference). Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import AsyncIterator, Iterable

import anyio
from ag_ui.core import BaseEvent, TextMessageContentEvent

from agui_pipes import StreamTransformer, TransformerChain


class PassThrough(StreamTransformer):
    """A stage that touches nothing, as most stages do for most events."""

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        return (event,)


def make_events(n: int) -> list[BaseEvent]:
    # One model reused: the benchmark measures the pipeline, not model construction.
    event = TextMessageContentEvent(message_id="m", delta="x")
    return [event] * n


async def source(events: list[BaseEvent]) -> AsyncIterator[BaseEvent]:
    for event in events:
        yield event


async def time_bare(events: list[BaseEvent]) -> float:
    start = time.process_time()
    count = 0
    async for _ in source(events):
        count += 1
    return time.process_time() - start


async def time_chain(events: list[BaseEvent], stages: int) -> float:
    chain = TransformerChain([PassThrough() for _ in range(stages)])
    start = time.process_time()
    count = 0
    async for _ in chain.apply(source(events)):
        count += 1
    elapsed = time.process_time() - start
    assert count == len(events)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--stages", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--json", help="also write the figures as JSON to this path")
    args = parser.parse_args()
    events = make_events(args.events)

    async def measure() -> tuple[list[float], list[float]]:
        bare, chained = [], []
        for _ in range(args.repeat):
            bare.append(await time_bare(events))
            chained.append(await time_chain(events, args.stages))
        return bare, chained

    bare, chained = anyio.run(measure, backend=args.backend)
    per = 1e6 / args.events
    result = {
        "machine": f"{platform.machine()} {platform.python_implementation()} "
        f"{platform.python_version()}",
        "backend": args.backend,
        "events": args.events,
        "stages": args.stages,
        "bare_us_per_event": round(statistics.median(bare) * per, 3),
        "chain_us_per_event": round(statistics.median(chained) * per, 3),
    }
    result["chain_overhead_us_per_event"] = round(
        result["chain_us_per_event"] - result["bare_us_per_event"], 3
    )
    print(
        f"{args.events} events, {args.stages} pass-through stages, {args.backend}, "
        f"median of {args.repeat}:\n"
        f"  bare async generator  {result['bare_us_per_event']:.3f} µs/event\n"
        f"  chain (total)         {result['chain_us_per_event']:.3f} µs/event\n"
        f"  chain overhead        {result['chain_overhead_us_per_event']:.3f} µs/event"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
