"""Codec throughput: agui_pipes.codecs.encode_sse vs the official EventEncoder,
and SSEDecoder over a realistic stream cut into network-sized chunks.

    python benchmarks/bench_codecs.py [--events 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from agui_pipes.codecs import SSEDecoder, encode_sse
from agui_pipes.testing import run_events, text, tool_call


def _stream(n: int) -> list[BaseEvent]:
    events: list[BaseEvent] = []
    i = 0
    while len(events) < n:
        events.extend(
            run_events(
                [
                    *text(f"m{i}", "The quick brown ", "fox jumps over ", "the lazy dog."),
                    *tool_call(f"c{i}", "search", '{"query": "weather in Z', 'ürich"}'),
                ],
                thread_id="t",
                run_id=f"r{i}",
            )
        )
        i += 1
    return events[:n]


def _time(label: str, n: int, body: Callable[[], object], repeat: int = 5) -> float:
    best = min(_once(body) for _ in range(repeat))
    print(f"{label:<34} {best / n * 1e6:7.2f} µs/event  {n / best:>10,.0f} events/s")
    return best


def _once(body: Callable[[], object]) -> float:
    start = time.perf_counter()
    body()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    events = _stream(args.events)
    encoder = EventEncoder()
    assert all(encode_sse(e) == encoder.encode(e).encode() for e in events)

    official = _time(
        "EventEncoder().encode().encode()",
        len(events),
        lambda: [encoder.encode(e).encode() for e in events],
    )
    ours = _time("codecs.encode_sse", len(events), lambda: [encode_sse(e) for e in events])
    print(f"encode speed-up: {official / ours:.2f}x")

    wire = b"".join(encode_sse(e) for e in events)
    chunks = [wire[i : i + 4096] for i in range(0, len(wire), 4096)]

    def decoding(fast: bool, as_bytes: bool) -> Callable[[], object]:
        def decode() -> None:
            decoder = SSEDecoder(fast_path=fast)
            feed = decoder.feed_bytes if as_bytes else decoder.feed
            for chunk in chunks:
                feed(chunk)
            decoder.close()

        return decode

    for as_bytes in (False, True):
        method = "feed_bytes" if as_bytes else "feed"
        line_by_line = _time(
            f"SSEDecoder.{method}, line by line (4 KiB chunks)",
            len(events),
            decoding(False, as_bytes),
        )
        fast = _time(
            f"SSEDecoder.{method}, fast path (4 KiB chunks)",
            len(events),
            decoding(True, as_bytes),
        )
        print(f"SSE {method} speed-up: {line_by_line / fast:.2f}x")


if __name__ == "__main__":
    main()
