"""Per-event cost of every built-in stage on a realistic stream.

    python benchmarks/bench_stages.py [--events 100000] [--repeat 5] [--json out.json]

The stream comes from benchmarks/streams.py (runs with reasoning, long token-by-token
answers, parallel tool calls incl. an ``internal_*`` one and a JSON-Patch result,
state deltas, nested subagents, chunk-form messages). For each stage two figures,
each the best of ``--repeat`` runs (the least disturbed by other load on the machine),
in µs/event, with the cost of a chain with no stage subtracted:

* ``all``  — the stage over the whole stream (what it costs on average, including
  the events it rewrites);
* ``pass`` — the stage over only the events it leaves untouched (its output for
  them is the very same object): the pass-through cost the issue bounds at 1 µs.

Stages run through ``TransformerChain.apply_sync`` (the fused sync path every chain
of sync stages uses), so a stage that declares ``event_types`` is not even called
for other events. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ag_ui.core import BaseEvent, EventType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from streams import generate

from agui_pipes import Stage, TransformerChain
from agui_pipes.events import EVENT_CLASS_BY_TYPE
from agui_pipes.transformers import (
    CoalesceDeltas,
    Compact,
    DropEvents,
    FilterToolCalls,
    KeepEvents,
    Redact,
    StateDiff,
    StateFilter,
    StripRawEvents,
    SubagentVisibility,
    Timestamp,
    ToolResultToState,
)

STAGES: dict[str, Callable[[], Stage]] = {
    "FilterToolCalls.deny(['internal_*'])": lambda: FilterToolCalls.deny(["internal_*"]),
    "ToolResultToState.delta('update_items')": lambda: ToolResultToState.delta("update_items"),
    "SubagentVisibility.attributed()": SubagentVisibility.attributed,
    "SubagentVisibility.inline()": SubagentVisibility.inline,
    "SubagentVisibility.hidden()": SubagentVisibility.hidden,
    "DropEvents(['reasoning'])": lambda: DropEvents(["reasoning"]),
    "KeepEvents(['text','tool_call','state'])": lambda: KeepEvents(["text", "tool_call", "state"]),
    "StripRawEvents()": StripRawEvents,
    "CoalesceDeltas(max_chars=200)": lambda: CoalesceDeltas(max_chars=200),
    "Compact()": Compact,
    "Redact(['sk-[A-Za-z0-9]{20,}'])": lambda: Redact([r"sk-[A-Za-z0-9]{20,}"]),
    "StateDiff()": StateDiff,
    "StateFilter(deny=['/status'])": lambda: StateFilter(deny=["/status"]),
    "Timestamp()": Timestamp,
}


def load(n: int) -> list[BaseEvent]:
    return [EVENT_CLASS_BY_TYPE[EventType(d["type"])].model_validate(d) for d in generate(n)]


def _time(make: Callable[[], Stage] | None, events: list[BaseEvent]) -> float:
    chain = TransformerChain([] if make is None else [make()])
    start = time.perf_counter()
    chain.apply_sync(events)
    return time.perf_counter() - start


def untouched(make: Callable[[], Stage], events: list[BaseEvent]) -> list[BaseEvent]:
    """The events the stage passes through as the very same object."""
    stage = make()
    out: list[BaseEvent] = []
    for event in events:
        result = list(stage.transform(event))
        if len(result) == 1 and result[0] is event:
            out.append(event)
    return out


def best_us(make: Callable[[], Stage] | None, events: list[BaseEvent], repeat: int) -> float:
    return min(_time(make, events) for _ in range(repeat)) / len(events) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    events = load(args.events)
    base_all = best_us(None, events, args.repeat)
    rows = []
    print(
        f"{len(events)} events; empty chain {base_all:.3f} µs/event "
        f"(python {platform.python_version()}, {platform.machine()})"
    )
    print(f"{'stage':44} {'all µs/ev':>10} {'pass µs/ev':>11} {'untouched':>10}")
    for name, make in STAGES.items():
        all_us = best_us(make, events, args.repeat) - base_all
        quiet = untouched(make, events)
        base_pass = best_us(None, quiet, args.repeat) if quiet else 0.0
        pass_us = (best_us(make, quiet, args.repeat) - base_pass) if quiet else float("nan")
        share = len(quiet) / len(events)
        rows.append({"stage": name, "all_us": all_us, "pass_us": pass_us, "untouched": share})
        print(f"{name:44} {all_us:10.3f} {pass_us:11.3f} {share:10.0%}")
    if args.json:
        args.json.write_text(json.dumps({"events": len(events), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
