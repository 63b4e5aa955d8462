"""Helpers shared by the built-in stage tests: consume, serialize, run async."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence

from ag_ui.core import BaseEvent

from agui_pipes import Consumer, RunResult, Stage, TransformerChain
from agui_pipes.testing import event_lines, run_transformer


def consumed(events: Sequence[BaseEvent]) -> RunResult:
    """Decode-free consumer pipeline: expand chunks, verify (consumer profile), fold."""
    consumer = Consumer()
    consumer.push_many(events)
    return consumer.finish()


def wire(events: Sequence[BaseEvent]) -> str:
    """The whole stream as it would be serialized (one JSON line per event)."""
    return "\n".join(event_lines(events))


def through(stage: Stage, events: Sequence[BaseEvent]) -> list[BaseEvent]:
    """Run a fresh copy of ``stage`` over ``events`` (sync)."""
    return run_transformer(stage.fresh(), events)


async def through_async(stage: Stage, events: Sequence[BaseEvent]) -> list[BaseEvent]:
    """Run a fresh copy of ``stage`` over ``events`` with ``chain.apply`` (async)."""

    async def source() -> AsyncIterator[BaseEvent]:
        for event in events:
            yield event

    chain = TransformerChain([stage.fresh()])
    return [event async for event in chain.apply(source())]


def dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True)
