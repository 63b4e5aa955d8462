"""What ``serve --repair`` adds to the gateway's relay path, as a ratio (issue 17).

    python benchmarks/bench_gateway_repair.py [--events 50000] [--repeat 9]

The gateway relays a synchronous chain through ``agui_pipes.relay.Relay``: each
upstream chunk is decoded, transformed and SSE-encoded in one pass, and events
every stage promises to pass unchanged (``passes``) are forwarded without
being decoded into models at all. ``Repair`` makes no such promise (it counts
and checks every event), so turning repair on costs the relay its bypass, not
only Repair's own work. This measures the whole path on benchmarks/streams.py's
realistic mix, as SSE frames in 64 KiB reads:

* ``gateway`` — ``ExpandChunks | Verify(consumer)``: the gateway with no chain;
* ``gateway --repair`` — ``ExpandChunks | Repair | Verify(consumer)``: the same with
  ``repair=True`` (where ``Gateway`` inserts it).

The two run alternating, in a different order each round, and the figure is
the median over ``--repeat`` rounds of the per-round ratio, so load from other
processes mostly cancels out. µs per event are printed for orientation only.
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
from agui_pipes.codecs import SSEDecoder, encode_sse
from agui_pipes.relay import Relay
from agui_pipes.transformers import ExpandChunks, Repair, Verify

CHAINS: dict[str, Callable[[], list[Stage]]] = {
    "gateway": lambda: [ExpandChunks(), Verify(profile="consumer")],
    "gateway --repair": lambda: [ExpandChunks(), Repair(), Verify(profile="consumer")],
}
_READ = 64 * 1024


def _seconds(stages: list[Stage], body: bytes) -> tuple[float, int]:
    """Decode SSE reads, relay them through the chain, encode: CPU seconds and bytes out."""
    start = time.process_time()
    relay = Relay(TransformerChain(stages))
    decoder = SSEDecoder()
    written = 0
    for offset in range(0, len(body), _READ):
        payloads = decoder.feed_bytes(body[offset : offset + _READ])
        if payloads:
            written += len(relay.feed(payloads))
    written += len(relay.finish())
    return time.process_time() - start, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()

    events = load(args.events)
    body = b"".join(encode_sse(event) for event in events)
    repair = Repair()
    TransformerChain([ExpandChunks(), repair]).apply_sync(events)
    assert repair.report.count == 0, repair.report  # a valid stream: nothing to repair
    outputs = {name: _seconds(make(), body)[1] for name, make in CHAINS.items()}
    assert len(set(outputs.values())) == 1, outputs  # the same bytes either way
    order = list(CHAINS)
    times: dict[str, list[float]] = {name: [] for name in CHAINS}
    for _ in range(args.repeat):
        for name in order:
            times[name].append(_seconds(CHAINS[name](), body)[0])
        order.reverse()
    ratios = [r / p for r, p in zip(times["gateway --repair"], times["gateway"], strict=True)]
    print(f"{len(events)} events, {len(body):,} SSE bytes, {args.repeat} rounds")
    for name, values in times.items():
        print(
            f"{name:18} {statistics.median(values) / len(events) * 1e6:7.3f} µs/event "
            "(orientation only)"
        )
    print(
        f"gateway --repair / gateway: {statistics.median(ratios):.2f} "
        f"(rounds: {min(ratios):.2f} to {max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
