"""Snapshots and deltas: decode + encode per event type against a bare orjson round trip.

For each payload, one iteration is ``encode_sse(decode(payload).event)`` (the
gateway's per-event work) and the baseline is ``orjson.dumps(orjson.loads(payload))``
of the same bytes. The two are timed in interleaved rounds (so drift in the
machine's load hits both alike) and the medians are compared; the ratio is what
issue 15 targets (≤ 3×).

    python benchmarks/bench_state_events.py [--rounds 15] [--loops 2000] [--reference] [--relay]
        [--cpu] [--only TYPE,...]

``--reference`` adds the reference path (``fast_path=False``) for comparison;
``--relay`` adds ``Relay(TransformerChain([])).feed`` over a batch of the same
payload (what the gateway runs per event, with no stage), per event. ``--cpu``
times with the thread's CPU clock instead of the wall clock: on a machine
shared with other work, time spent descheduled then counts for neither side.
``--only`` limits the run to some event types.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import orjson

from agui_pipes import TransformerChain
from agui_pipes.codecs import decode, encode_sse
from agui_pipes.relay import Relay

PAYLOADS: dict[str, bytes] = {
    "STATE_DELTA": (
        b'{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/counter","value":42},'
        b'{"op":"add","path":"/items/-","value":{"id":"x1","title":"Buy milk","done":false}}]}'
    ),
    "STATE_SNAPSHOT": (
        b'{"type":"STATE_SNAPSHOT","snapshot":{"counter":42,"items":[{"id":"x1",'
        b'"title":"Buy milk","done":false,"score":0.5}],"user":{"name":"Zo\xc3\xab"}}}'
    ),
    "MESSAGES_SNAPSHOT": (
        b'{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u1","role":"user","content":'
        b'"What is the weather in Z\xc3\xbcrich?"},{"id":"a1","role":"assistant","content":'
        b'"Let me check.","toolCalls":[{"id":"c1","type":"function","function":{"name":'
        b'"weather","arguments":"{\\"city\\":\\"Zurich\\"}"}}]}]}'
    ),
    "ACTIVITY_SNAPSHOT": (
        b'{"type":"ACTIVITY_SNAPSHOT","messageId":"m1","activityType":"PLAN","content":'
        b'{"steps":[{"title":"search","status":"done"},{"title":"answer","status":"todo"}]}}'
    ),
    "ACTIVITY_DELTA": (
        b'{"type":"ACTIVITY_DELTA","messageId":"m1","activityType":"PLAN","patch":'
        b'[{"op":"replace","path":"/steps/1/status","value":"done"}]}'
    ),
}


_clock = time.perf_counter


def _timed(body: Callable[[], object], loops: int) -> float:
    start = _clock()
    for _ in range(loops):
        body()
    return (_clock() - start) / loops * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--loops", type=int, default=2000)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--relay", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    if args.cpu:
        global _clock
        _clock = time.thread_time
    chosen = [name for name in args.only.split(",") if name] or list(PAYLOADS)
    loads, dumps = orjson.loads, orjson.dumps
    print(
        f"{'event':<18} {'orjson µs':>9} {'fast µs':>8} {'ratio':>6}"
        + (f" {'ref µs':>7} {'ratio':>6}" if args.reference else "")
        + (f" {'relay µs':>8} {'ratio':>6}" if args.relay else "")
    )
    for name in chosen:
        payload = PAYLOADS[name]
        event = decode(payload).event
        assert event is not None
        assert encode_sse(event) == encode_sse(event, fast_path=False)

        def fast(payload: bytes = payload) -> object:
            return encode_sse(decode(payload).event)  # type: ignore[arg-type]

        def reference(payload: bytes = payload) -> object:
            return encode_sse(
                decode(payload, fast_path=False).event,
                fast_path=False,  # type: ignore[arg-type]
            )

        def bare(payload: bytes = payload) -> object:
            return dumps(loads(payload))

        batch = [payload] * 100

        def relay(batch: list[bytes] = batch) -> object:
            return Relay(TransformerChain([])).feed(batch)

        variants = [bare, fast] + ([reference] if args.reference else [])
        samples: list[list[float]] = [[] for _ in variants]
        relayed: list[float] = []
        for _ in range(args.rounds):
            for i, body in enumerate(variants):
                samples[i].append(_timed(body, args.loops))
            if args.relay:
                relayed.append(_timed(relay, max(1, args.loops // 100)) / len(batch))
        medians = [statistics.median(s) for s in samples]
        line = f"{name:<18} {medians[0]:9.2f} {medians[1]:8.2f} {medians[1] / medians[0]:5.1f}×"
        if args.reference:
            line += f" {medians[2]:7.2f} {medians[2] / medians[0]:5.1f}×"
        if args.relay:
            per_event = statistics.median(relayed)
            line += f" {per_event:8.2f} {per_event / medians[0]:5.1f}×"
        print(line)


if __name__ == "__main__":
    main()
