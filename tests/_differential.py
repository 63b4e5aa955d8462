"""What the differential tests of the fast paths share: their hypothesis settings, the
gateway chain they all check first (the benchmark's, with a second denied tool), and the
two comparisons every optimisation hook is held to — a chain's routed run against calling
``transform`` on every event (``route``), and a relay with its bypass against the relay
without it and on the reference path (``passes``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ag_ui.core import BaseEvent
from hypothesis import HealthCheck, settings

from agui_pipes import StreamTransformer, TransformerChain
from agui_pipes.relay import Relay
from agui_pipes.transformers import (
    ExpandChunks,
    FilterToolCalls,
    SubagentVisibility,
    ToolResultToState,
    Verify,
)


def differential_settings(max_examples: int) -> settings:
    """Whole generated streams per example: no deadline, big inputs expected."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def gateway_stages() -> list[StreamTransformer]:
    return [
        ExpandChunks(),
        Verify(profile="consumer"),
        FilterToolCalls.deny(["internal_*", "search"]),
        SubagentVisibility.inline(),
        ToolResultToState.delta("update_items"),
    ]


def unrouted(stages: Sequence[StreamTransformer], events: list[BaseEvent]) -> list[BaseEvent]:
    """Each event depth-first through every stage's ``transform``, then each ``finish``.

    Event by event (not stage by stage) like the chain, so when a stream breaks two
    rules the first failure in stream order is the one both report.
    """

    def push(position: int, batch: Iterable[BaseEvent]) -> list[BaseEvent]:
        if position == len(stages):
            return list(batch)
        out: list[BaseEvent] = []
        for event in batch:
            out.extend(push(position + 1, stages[position].transform(event)))
        return out

    out: list[BaseEvent] = []
    for event in events:
        out.extend(push(0, (event,)))
    for position, stage in enumerate(stages):
        out.extend(push(position + 1, stage.finish()))
    return out


def outcome(run: Callable[[], list[BaseEvent]]) -> tuple[str, object]:
    """The events ``run`` returns (with their classes), or its error's class and message."""
    try:
        return "events", [(type(e), e) for e in run()]
    except Exception as exc:  # the same failure, whichever way the stages ran
        return "error", (type(exc).__name__, getattr(exc, "message", None))


def assert_routing_agrees(
    factory: Callable[[], list[StreamTransformer]], events: list[BaseEvent]
) -> None:
    """The fused, routed chain gives what calling every stage's ``transform`` gives."""
    routed = outcome(lambda: TransformerChain(factory()).apply_sync(events))
    reference = outcome(lambda: unrouted(factory(), events))
    if routed[0] == "error" and reference[0] == "error":
        # The chain annotates a stage's error (StageError / stage name); the class
        # of the underlying refusal and its message are what must agree.
        assert routed[1][1] == reference[1][1]  # type: ignore[index]
    else:
        assert routed == reference


def relay_outcome(
    factory: Callable[[], list[StreamTransformer]],
    lines: Sequence[bytes],
    batch: int,
    bypass: bool,
    fast_path: bool = True,
) -> tuple[list[bytes], object, int]:
    """Output per batch, then the error (class and message) or the end-of-stream output."""
    relay = Relay(
        TransformerChain(factory()),
        on_input=None if bypass else (lambda e: None),
        fast_path=fast_path,
    )
    out: list[bytes] = []
    try:
        for start in range(0, len(lines), batch):
            out.append(relay.feed(lines[start : start + batch]))
        end: object = relay.finish()
    except Exception as exc:
        end = (type(exc).__name__, str(exc))
    return out, end, relay.events_forwarded


def assert_bypass_agrees(
    factory: Callable[[], list[StreamTransformer]], lines: Sequence[bytes], batch: int
) -> int:
    """A relay forwarding what the stages promised to pass gives what it gives without.

    The references: the same relay with the bypass off (an ``on_input`` hook needs
    every event) and on the reference path. Returns how many events were forwarded.
    """
    with_bypass = relay_outcome(factory, lines, batch, bypass=True)
    without = relay_outcome(factory, lines, batch, bypass=False)
    reference = relay_outcome(factory, lines, batch, bypass=False, fast_path=False)
    assert with_bypass[:2] == without[:2] == reference[:2]
    assert without[2] == reference[2] == 0
    return with_bypass[2]
