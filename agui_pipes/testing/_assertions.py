"""Run a stage over a list, and compare event sequences with a readable diff."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence

from ag_ui.core import BaseEvent

from .._foundation.loops import running_loop
from .._pipeline.chain import TransformerChain
from .._pipeline.transformer import Stage

__all__ = ["assert_events_equal", "event_lines", "run_transformer"]


def run_transformer(stage: Stage, events: Iterable[BaseEvent]) -> list[BaseEvent]:
    """Feed ``events`` through ``stage`` (then its ``finish``) and return the output.

    Works for sync stages without an event loop, even inside async code;
    async stages and operators run on a private loop, so with them it must be
    called outside any running loop (a plain ``def`` test). The stage
    instance is used as given, so its state can be inspected afterwards.
    Every output item is checked to be an event.
    """
    chain = stage.fresh() if isinstance(stage, TransformerChain) else TransformerChain([stage])
    loop = None if chain.is_sync else running_loop()
    if loop is not None:
        raise RuntimeError(
            f"run_transformer() cannot run {stage.name} inside a running {loop} event loop: "
            "it has async stages or operators, and run_transformer() runs them on an event "
            "loop of its own. Call it from a plain `def test_...` (not `async def`), or in "
            "async code apply the chain: `async with TransformerChain([stage]).apply(source) "
            "as out: events = [event async for event in out]` (source: an async iterable)"
        )
    out = chain.apply_sync(list(events))
    for i, item in enumerate(out):
        if not isinstance(item, BaseEvent):
            raise TypeError(
                f"output item #{i} of {stage.name} is a {type(item).__name__}, not an event"
            )
    return out


def event_lines(events: Iterable[BaseEvent]) -> list[str]:
    """One compact, stable JSON line per event (wire shape, camelCase, sorted keys)."""
    return [
        json.dumps(e.model_dump(mode="json", by_alias=True), sort_keys=True, ensure_ascii=False)
        for e in events
    ]


def assert_events_equal(
    actual: Sequence[BaseEvent], expected: Sequence[BaseEvent], *, context: int = 3
) -> None:
    """Assert two event sequences are equal on the wire; on failure, show a unified diff."""
    left, right = event_lines(actual), event_lines(expected)
    if left == right:
        return
    diff = "\n".join(
        difflib.unified_diff(right, left, "expected", "actual", n=context, lineterm="")
    )
    raise AssertionError(
        f"event sequences differ ({len(actual)} actual vs {len(expected)} expected):\n{diff}"
    )
