"""What the opentelemetry stage costs per event, as ratios measured side by side.

    python benchmarks/bench_trace.py [--deltas 50000] [--events 20000] [--repeat 9]
    python benchmarks/bench_trace.py --instructions      # callgrind: instructions per delta

The machine is shared, so absolute times across runs mean little: every
figure here is a pair measured in alternation (with, without the stage; the
median of each), reported as the difference per event and as a ratio. Three
pairs:

* **deltas** — the deltas of open messages (after each message's first, which
  carries its first-token time) through a chain of the stage alone, against a
  chain of a stage the chain skips for every class (the chain's own cost).
  This is the hot path the issue bounds at 1 µs/event; also with
  ``delta_stats=True``, which sees every delta;
* **stream** — a realistic stream (benchmarks/streams.py: reasoning, long
  token-by-token answers, tool calls, nested subagents) through
  ``apply_sync``: the stage against no stage, spans and metrics recorded by the
  real SDK into memory;
* **relay** — the same stream as wire bytes through ``Relay`` with the
  gateway's stages, with and without the stage appended: what tracing adds
  to a gateway, and how many events the bypass still forwards unbuilt.

``--instructions`` counts instructions under valgrind's callgrind (fixed hash
seed) for 1x and 3x the deltas, with and without the stage, so imports and
warm-up cancel out: instructions per delta the stage adds, reproducible to
the instruction. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ag_ui.core import (  # noqa: E402
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from agui_pipes import StreamTransformer, TransformerChain  # noqa: E402
from agui_pipes.codecs import decode, encode_ndjson  # noqa: E402
from agui_pipes.relay import Relay  # noqa: E402
from agui_pipes.transformers import OpenTelemetry  # noqa: E402

_OPEN = 64
"""Messages open at once in the deltas measurement."""


class _Skipped(StreamTransformer):
    """A stage the chain never calls (routes nothing): the chain's own cost, for the baseline."""

    event_types = ()


class _Sdk:
    """Real SDK providers recording into memory (cleared between repetitions)."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def trace(self, **options: Any) -> OpenTelemetry:
        self.spans.clear()
        return OpenTelemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )


def _deltas(
    count: int, waiting: bool = False
) -> tuple[list[BaseEvent], list[BaseEvent], list[BaseEvent]]:
    """(setup, deltas, teardown): ``_OPEN`` messages opened with their first delta, then
    ``count`` deltas spread over them, then their ends and the run's. ``waiting`` opens
    one more message that gets no delta, so the stage must look at every delta (the
    worst case: some message still awaits its first token)."""
    ids = [f"m{i}" for i in range(_OPEN)]
    setup: list[BaseEvent] = [RunStartedEvent(thread_id="t", run_id="r")]
    for message_id in ids:
        setup.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
        setup.append(TextMessageContentEvent(message_id=message_id, delta="Hi "))
    if waiting:
        setup.append(TextMessageStartEvent(message_id="silent", role="assistant"))
        ids_end = ["silent"]
    else:
        ids_end = []
    # One event per open message, reused: building events is not what is measured (the
    # stage keeps no reference to them), and under callgrind it would dwarf the rest.
    pool = [TextMessageContentEvent(message_id=m, delta="token ") for m in ids]
    deltas: list[BaseEvent] = [pool[i % _OPEN] for i in range(count)]
    teardown: list[BaseEvent] = [TextMessageEndEvent(message_id=m) for m in ids + ids_end]
    teardown.append(RunFinishedEvent(thread_id="t", run_id="r"))
    return setup, deltas, teardown


def _time_deltas(stage: StreamTransformer, events: tuple[list[BaseEvent], ...]) -> float:
    setup, deltas, teardown = events
    chain = TransformerChain([stage])
    transform = chain.transform
    for event in setup:
        transform(event)
    start = time.process_time()
    for event in deltas:
        transform(event)
    elapsed = time.process_time() - start
    for event in teardown:
        transform(event)
    chain.finish()
    return elapsed


def _pair(
    with_stage: Callable[[], float], without: Callable[[], float], repeat: int
) -> tuple[float, float]:
    """Medians of alternating runs (with, without), so load on the machine hits both alike."""
    a: list[float] = []
    b: list[float] = []
    with_stage(), without()  # warm-up: route plans, instruments, tracers
    for _ in range(repeat):
        a.append(with_stage())
        b.append(without())
    return statistics.median(a), statistics.median(b)


def _report(name: str, events: int, medians: tuple[float, float], extra: str = "") -> str:
    traced, base = medians
    added = (traced - base) / events * 1e6
    ratio = traced / base if base else float("inf")
    return (
        f"| {name} | {events:,} | {base / events * 1e6:.3f} | {traced / events * 1e6:.3f} | "
        f"{added:+.3f} | {ratio:.2f}x |{extra}"
    )


def _stream(events: int) -> tuple[list[BaseEvent], list[bytes]]:
    from streams import generate

    lines = [__import__("orjson").dumps(payload) for payload in generate(events)]
    decoded = []
    for index, line in enumerate(lines):
        event = decode(line, index=index).event
        if event is not None:
            decoded.append(event)
    # The realistic stream has chunk-form messages: expand them first, as the gateway does.
    from agui_pipes.transformers import ExpandChunks

    expanded = TransformerChain([ExpandChunks()]).apply_sync(decoded)
    return expanded, [encode_ndjson(e).rstrip(b"\n") for e in expanded]


def _relay(
    stages: Callable[[], list[StreamTransformer]], lines: Sequence[bytes]
) -> tuple[float, int]:
    relay = Relay(TransformerChain(stages()))
    start = time.process_time()
    for begin in range(0, len(lines), 32):
        relay.feed(lines[begin : begin + 32])
    relay.finish()
    return time.process_time() - start, relay.events_forwarded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=50_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("WHAT", "DELTAS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    if args.instructions:
        _instructions(args.deltas // 5)
        return

    sdk = _Sdk()
    rows = [
        "| measurement | events | without (µs/event) | with OpenTelemetry (µs/event) "
        "| added (µs/event) | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    events = _deltas(args.deltas)
    rows.append(
        _report(
            "deltas of open messages",
            args.deltas,
            _pair(
                lambda: _time_deltas(sdk.trace(), events),
                lambda: _time_deltas(_Skipped(), events),
                args.repeat,
            ),
        )
    )
    waiting = _deltas(args.deltas, waiting=True)
    rows.append(
        _report(
            "deltas, another message awaiting its first",
            args.deltas,
            _pair(
                lambda: _time_deltas(sdk.trace(), waiting),
                lambda: _time_deltas(_Skipped(), waiting),
                args.repeat,
            ),
        )
    )
    rows.append(
        _report(
            "deltas, `delta_stats: true`",
            args.deltas,
            _pair(
                lambda: _time_deltas(sdk.trace(delta_stats=True), events),
                lambda: _time_deltas(_Skipped(), events),
                args.repeat,
            ),
        )
    )

    decoded, lines = _stream(args.events)

    def through(stage: StreamTransformer) -> float:
        start = time.process_time()
        TransformerChain([stage]).apply_sync(decoded)
        return time.process_time() - start

    rows.append(
        _report(
            "realistic stream, stage alone",
            len(decoded),
            _pair(lambda: through(sdk.trace()), lambda: through(_Skipped()), args.repeat),
        )
    )

    from suite import gateway_chain

    forwarded: dict[str, int] = {}

    def relay(traced: bool) -> float:
        def stages() -> list[StreamTransformer]:
            chosen = [s for s in gateway_chain().stages if isinstance(s, StreamTransformer)]
            return [*chosen, sdk.trace()] if traced else chosen

        seconds, forwarded["with" if traced else "without"] = _relay(stages, lines)
        return seconds

    medians = _pair(lambda: relay(True), lambda: relay(False), args.repeat)
    rows.append(
        _report(
            "realistic stream, gateway relay",
            len(lines),
            medians,
            f" bypass forwarded {forwarded['without']:,} events without the stage, "
            f"{forwarded['with']:,} with it |",
        )
    )
    print(
        f"Python {sys.version.split()[0]}, {args.repeat} alternating repeats, medians of CPU time\n"
    )
    print("\n".join(rows))


# -- instruction counts ------------------------------------------------------------


def _child(what: str, count: int) -> None:
    kind, _, case = what.partition("-")
    events = _deltas(count, waiting=case == "waiting")
    stage: StreamTransformer = _Sdk().trace() if kind == "trace" else _Skipped()
    _time_deltas(stage, events)


def _instructions(count: int) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "0"}

    def collected(what: str, deltas: int) -> int:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                __file__,
                "--child",
                what,
                str(deltas),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
        return int(found.group(1))

    print(f"instructions per delta of an open message ({count:,} and {3 * count:,} deltas):")
    for case in ("", "-waiting"):
        per_delta = {}
        for kind in ("trace", "skipped"):
            once = collected(kind + case, count)
            thrice = collected(kind + case, 3 * count)
            per_delta[kind] = (thrice - once) / (2 * count)
        label = "another message awaiting its first delta" if case else "every message started"
        print(
            f"  {label}: chain without the stage {per_delta['skipped']:.0f}, with OpenTelemetry "
            f"{per_delta['trace']:.0f}, added {per_delta['trace'] - per_delta['skipped']:.0f}"
        )


if __name__ == "__main__":
    main()
