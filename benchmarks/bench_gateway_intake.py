"""The HTTP gateway's own per-event work, in process: SSE bytes in, SSE bytes out.

    python benchmarks/bench_gateway_intake.py [--events 100000] [--repeat 5]

What ``Gateway`` does per upstream network read on its relay path, without the
sockets: ``SSEDecoder.feed_bytes`` cuts the chunk into payloads and
``agui_pipes.relay.Relay`` decodes, runs the chain and encodes them. Measured
side by side, in rounds (CPU time, median), on the realistic stream of
``benchmarks/streams.py`` cut into 16 KiB reads:

* the SSE decoder alone, line by line and on its fast path;
* the chain a gateway runs for a configured ``expand_chunks | filter | verify``
  chain, before the merge (``ExpandChunks`` and ``Verify`` twice) and after it;
* the whole intake, decoder and chain, before (line-by-line decoder, stages
  twice) and after.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from streams import generate

from agui_pipes import Stage, TransformerChain
from agui_pipes.codecs import SSEDecoder, decode, encode_sse
from agui_pipes.relay import Relay
from agui_pipes.transformers import ExpandChunks, FilterToolCalls, SubagentVisibility, Verify


def _configured() -> list[Stage]:
    return [FilterToolCalls.deny(["internal_*"]), SubagentVisibility.inline()]


def doubled() -> TransformerChain:
    """The gateway's chain around ``expand_chunks | ... | verify`` before the merge."""
    return TransformerChain([ExpandChunks(), ExpandChunks(), *_configured(), Verify(), Verify()])


def merged() -> TransformerChain:
    """The same after it: each stage once."""
    return TransformerChain([ExpandChunks(), *_configured(), Verify()])


def _cpu(body: Callable[[], object]) -> float:
    start = time.process_time()
    body()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    events = [decode(json.dumps(e).encode()).event for e in generate(args.events)]
    wire = b"".join(encode_sse(e) for e in events if e is not None)
    chunks = [wire[i : i + 16384] for i in range(0, len(wire), 16384)]
    n = len(events)

    def decoder_only(fast: bool) -> Callable[[], object]:
        def run() -> None:
            decoder = SSEDecoder(fast_path=fast)
            for chunk in chunks:
                decoder.feed_bytes(chunk)
            decoder.close()

        return run

    cutter = SSEDecoder()
    payloads = [cutter.feed_bytes(chunk) for chunk in chunks]

    def chain_only(build: Callable[[], TransformerChain]) -> Callable[[], object]:
        def run() -> None:
            relay = Relay(build())
            for batch in payloads:
                relay.feed(batch)
            relay.finish()

        return run

    def intake(fast: bool, build: Callable[[], TransformerChain]) -> Callable[[], object]:
        def run() -> None:
            decoder = SSEDecoder(fast_path=fast)
            relay = Relay(build())
            for chunk in chunks:
                relay.feed(decoder.feed_bytes(chunk))
            decoder.close()
            relay.finish()

        return run

    rows: dict[str, Callable[[], object]] = {
        "SSE decoder, line by line": decoder_only(False),
        "SSE decoder, fast path": decoder_only(True),
        "chain, stages twice (before)": chain_only(doubled),
        "chain, merged (after)": chain_only(merged),
        "intake before (line by line, twice)": intake(False, doubled),
        "intake after (fast path, merged)": intake(True, merged),
    }
    seconds: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeat):  # rounds: every row once per round, interleaved
        for name, body in rows.items():
            seconds[name].append(_cpu(body))
    print(
        f"{n:,} events, {len(wire) / 1e6:.1f} MB of SSE, {len(chunks)} reads of 16 KiB; "
        f"median of {args.repeat} rounds, CPU time"
    )
    for name, values in seconds.items():
        print(f"{name:40s} {statistics.median(values) / n * 1e6:6.2f} µs/event")
    before = statistics.median(seconds["intake before (line by line, twice)"])
    after = statistics.median(seconds["intake after (fast path, merged)"])
    print(f"intake speed-up: {before / after:.2f}x")


if __name__ == "__main__":
    main()
