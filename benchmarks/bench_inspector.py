"""Inspector benchmark: building the model of a 100k-event stream, its memory, each request.

    python benchmarks/bench_inspector.py                  # 100k events, 5 repeats
    python benchmarks/bench_inspector.py --events 20000 --repeat 3

What is measured, on benchmarks/streams.py's deterministic realistic stream:

* **build**: ``InspectedRun.build`` over the NDJSON lines already in memory (decode,
  chunk expansion, verification, lanes, events index, fold checkpoints), next to a
  bare ``Consumer.push`` pass over the same lines (what ``agui-pipes verify`` does),
  interleaved (alternating repeats, medians) so the ratio holds on a loaded machine;
  and the same with ``--config`` (a ``filter_tool_calls`` + ``redact`` chain).
* **memory**: tracemalloc's peak while reading the file and building, and what the
  built run keeps (its event bytes included; the input lines freed), next to the
  file's size.
* **requests**: each API call through Starlette's TestClient, median of repeats:
  the summary, an events page deep in the stream, the type / text / id filters, one
  event, the fold at the worst index (just before a checkpoint) next to a full
  ``fold`` of the prefix, and a pipeline page of dropped rows.

* **ring** (``--ring``, instead of the above): ``serve --inspect``'s ring with its
  defaults recording 25 runs of 40 MiB each through its tap — what it counts and
  what tracemalloc says it holds, against the documented 256 MiB bound.

Timings depend on the machine and its load: they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from streams import write_ndjson  # noqa: E402

from agui_pipes import Consumer, TransformerChain, decode, fold  # noqa: E402
from agui_pipes.inspector import InspectedRun, inspector_app  # noqa: E402
from agui_pipes.transformers import FilterToolCalls, Redact  # noqa: E402

OUT = HERE / "out"


def _chain() -> TransformerChain:
    return TransformerChain(
        [
            FilterToolCalls(deny=["internal_*"]),
            Redact(patterns=[r"sk-[A-Za-z0-9]{16,}"], replacement="[REDACTED]"),
        ]
    )


def _verify_only(lines: list[bytes]) -> None:
    consumer = Consumer(allow_truncated=True)
    for line in lines:
        consumer.push(line)
    consumer.finish()


def _timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _median_ms(action: Callable[[], Any], repeat: int) -> float:
    return statistics.median(_timed(action) for _ in range(repeat)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ring", action="store_true", help="measure the live ring's bound")
    args = parser.parse_args()
    if args.ring:
        _ring()
        return

    path = OUT / f"inspector-{args.events}-{args.seed}.ndjson"
    if not path.exists():
        write_ndjson(path, args.events, args.seed)
    data = path.read_bytes()
    lines = data.splitlines()
    print(f"stream: {len(lines):,} events, {len(data) / 1e6:.1f} MB ({path.name})")

    # -- build, interleaved with the bare verify pass -----------------------
    builds: list[float] = []
    configured: list[float] = []
    verifies: list[float] = []
    for _ in range(args.repeat):
        verifies.append(_timed(lambda: _verify_only(lines)))
        builds.append(_timed(lambda: InspectedRun.build(lines, "bench")))
        configured.append(_timed(lambda: InspectedRun.build(lines, "bench", chain=_chain())))
        gc.collect()
    verify_s, build_s, config_s = (statistics.median(x) for x in (verifies, builds, configured))
    print(
        f"build:            {build_s:6.2f} s  ({build_s / verify_s:.2f}x a bare Consumer pass "
        f"of {verify_s:.2f} s)"
    )
    print(f"build + --config: {config_s:6.2f} s  ({config_s / verify_s:.2f}x; 2 stages)")

    # -- memory ---------------------------------------------------------------
    # Traced from reading the file on, so the event bytes the run keeps are counted.
    for label, chain in (("build", None), ("build + --config", _chain())):
        gc.collect()
        tracemalloc.start()
        read = path.read_bytes().splitlines()
        run = InspectedRun.build(read, "bench", chain=chain)
        del read
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"memory, {label}: peak {peak / 1e6:.0f} MB while reading and building, the "
            f"run keeps {current / 1e6:.0f} MB ({current / len(data):.1f}x the file)"
        )
        del run

    # -- requests ---------------------------------------------------------------
    from starlette.testclient import TestClient

    run = InspectedRun.build(lines, "bench", chain=_chain())
    client = TestClient(inspector_app(run))
    n = len(run)
    every = 512
    worst = (n // every) * every - 2  # the last event before a checkpoint: the longest replay
    some_id = run.row(n // 2)["ids"]
    ident = next(iter(some_id.values()), "")

    def get(url: str) -> Any:
        response = client.get(url)
        assert response.status_code == 200, (url, response.text)
        return response

    requests = [
        ("GET /api/runs/0/summary", "/api/runs/0/summary"),
        ("GET events, a page at the middle", f"/api/runs/0/events?offset={n // 2}&limit=200"),
        ("GET events?type=TOOL_CALL_START", "/api/runs/0/events?type=TOOL_CALL_START&limit=200"),
        ("GET events?q=internal (text)", "/api/runs/0/events?q=internal&limit=200"),
        (f"GET events?id={ident}", f"/api/runs/0/events?id={ident}&limit=200"),
        ("GET events/{index}", f"/api/runs/0/events/{n // 2}"),
        (f"GET fold?at={worst} (worst replay)", f"/api/runs/0/fold?at={worst}"),
        ("GET stages/0?kind=dropped", "/api/runs/0/stages/0?kind=dropped&limit=200"),
        ("GET stages/1 (a page)", "/api/runs/0/stages/1?offset=1000&limit=200"),
    ]
    summary_bytes = len(get("/api/runs/0/summary").content)
    for label, url in requests:
        print(f"{label:44s} {_median_ms(lambda u=url: get(u), args.repeat):8.1f} ms")
    print(f"summary size: {summary_bytes / 1e3:.0f} kB ({len(run.lanes())} lanes)")

    events = [decode(line).event for line in lines[: worst + 1]]
    full = _median_ms(lambda: fold(e for e in events if e is not None), args.repeat)
    scrub = _median_ms(lambda: run.fold_at(worst), args.repeat)
    print(
        f"fold at {worst}: {scrub:.1f} ms from a checkpoint vs {full:.1f} ms folding the "
        f"prefix from event 0 ({full / scrub:.0f}x)"
    )


def _ring(runs_recorded: int = 25, run_mib: int = 40) -> None:
    """25 runs of 40 MiB through the default ring: its count, its traced memory and peak."""
    from collections.abc import Iterator

    from ag_ui.core import (
        BaseEvent,
        EventType,
        RunFinishedEvent,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
    )

    from agui_pipes.inspector import RecentRuns

    def stream(number: int) -> Iterator[BaseEvent]:
        # Made as they are sent, as a served agent makes them: each delta a fresh string.
        yield RunStartedEvent(type=EventType.RUN_STARTED, thread_id="t", run_id=str(number))
        yield TextMessageStartEvent(
            type=EventType.TEXT_MESSAGE_START, message_id="m", role="assistant"
        )
        for _ in range(run_mib * 16):
            yield TextMessageContentEvent(
                type=EventType.TEXT_MESSAGE_CONTENT, message_id="m", delta="x" * (64 * 1024)
            )
        yield TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, message_id="m")
        yield RunFinishedEvent(type=EventType.RUN_FINISHED, thread_id="t", run_id=str(number))

    ring = RecentRuns()
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    for number in range(runs_recorded):
        tap = ring.recorder().fresh()
        for event in stream(number):
            tap.transform(event)
        tap.finish()
    seconds = time.perf_counter() - started
    held, peak = tracemalloc.get_traced_memory()  # no gc.collect(): nothing waits for it
    tracemalloc.stop()
    mib = 1024 * 1024
    kept = ring.newest_first()
    print(
        f"ring: {runs_recorded} runs of {run_mib} MiB in {seconds:.1f} s; "
        f"{len(kept)} kept ({kept[0].nbytes / mib:.1f} MiB each), counted "
        f"{ring.nbytes() / mib:.0f} MiB of a {ring.max_bytes / mib:.0f} MiB bound; traced "
        f"{held / mib:.0f} MiB held, {peak / mib:.0f} MiB peak"
    )


if __name__ == "__main__":
    main()
