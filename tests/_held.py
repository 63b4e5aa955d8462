"""What a stage releases for a stream cut off mid-run, worked out without the drain code.

The rule the relay, the gateway and the endpoint keep (issue 27): before a
server writes its own terminal event for a run that stopped short, the client
gets every event the stages give for what arrived *and* what their
``finish()`` releases — flowing through the stages after the one holding it
— except a terminal event a stage makes of the cut (Repair's RUN_ERROR): the
server's own says what happened. ``released_at_cut`` is that, computed the
plain way (each event through ``transform`` of each stage in turn, then each
``finish()``), for the tests to compare the servers with.

``cut_points`` are where a run is open (a cut there leaves it unfinished);
``built_in_stages`` builds each built-in as its documentation shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ag_ui.core import BaseEvent, EventType

from agui_pipes import StreamTransformer
from agui_pipes._stagekit.builtins import Builtin
from agui_pipes.config import Registry

_TERMINAL = (EventType.RUN_FINISHED, EventType.RUN_ERROR)

HOLDERS = frozenset({"coalesce_deltas", "compact", "filter_tool_calls", "redact", "repair"})
"""The built-ins that hold data (tests/relay/test_relay_drain.py finds them so)."""


def built_in_stage(builtin: Builtin) -> Callable[[], StreamTransformer]:
    """A factory of the built-in, configured with its documentation's first example."""
    spec = Registry(plugins=False).get(builtin.name)
    assert spec is not None
    extra = spec.options.model_config.get("json_schema_extra")
    examples = extra.get("examples", [{}]) if isinstance(extra, dict) else [{}]
    options = spec.validate(examples[0])

    def build() -> StreamTransformer:
        stage = spec.build(options)
        assert isinstance(stage, StreamTransformer)
        return stage

    return build


def cut_points(events: Sequence[BaseEvent]) -> list[int]:
    """Each ``k`` such that ``events[:k]`` leaves a run open (started, not ended)."""
    points: list[int] = []
    open_run = False
    for k, event in enumerate(events, start=1):
        if event.type is EventType.RUN_STARTED:
            open_run = True
        elif event.type in _TERMINAL:
            open_run = False
        if open_run and k < len(events):
            points.append(k)
    return points


def _through(
    stages: Sequence[StreamTransformer], start: int, batch: list[BaseEvent]
) -> list[BaseEvent]:
    for stage in stages[start:]:
        batch = [out for event in batch for out in stage.transform(event)]
    return batch


def released_at_cut(
    stages: Sequence[StreamTransformer], prefix: Sequence[BaseEvent]
) -> tuple[list[BaseEvent], list[BaseEvent]]:
    """What the client gets before the server's terminal for ``prefix``, and the held part.

    Returns ``(events, held)``: every output (``held`` those that came of the
    stages' ``finish()``), up to a terminal a ``finish()`` made. A stage whose
    ``finish()`` raises (a verifier refusing the cut-off run) releases nothing.
    """
    out = _through(stages, 0, list(prefix))
    held: list[BaseEvent] = []
    for position, stage in enumerate(stages):
        try:
            flushed = list(stage.finish())
            held.extend(_through(stages, position + 1, flushed))
        except Exception:
            continue
    for position, event in enumerate(held):
        if event.type in _TERMINAL:
            held = held[:position]
            break
    return out + held, held
