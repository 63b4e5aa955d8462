"""The testing kit: builders, run_transformer, assertions, pytest fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType

import pytest
from ag_ui.core import BaseEvent, EventType

from agui_pipes import StageError, StreamTransformer
from agui_pipes.testing import (
    assert_events_equal,
    reasoning,
    run_events,
    run_transformer,
    step,
    subagent,
    text,
    text_chunks,
    tool_call,
    tool_call_chunks,
)


def test_builders_produce_wire_shapes() -> None:
    events = run_events(
        step("plan", text("m1", "Hel", "lo"))
        + tool_call("c1", "search", {"q": 1}, result=[1])
        + reasoning("r1", "hmm")
        + subagent("s1", "helper", text("m2", "sub"))
    )
    kinds = [e.type for e in events]
    assert kinds[0] is EventType.RUN_STARTED and kinds[-1] is EventType.RUN_FINISHED
    assert kinds.count(EventType.TEXT_MESSAGE_CONTENT) == 3
    args = [e for e in events if e.type is EventType.TOOL_CALL_ARGS][0]
    assert args.delta == '{"q": 1}'  # type: ignore[attr-defined]
    inner = [e for e in events if getattr(e, "message_id", None) == "m2"]
    assert {getattr(e, "subagent_run_id", None) for e in inner} == {"s1"}
    chunks = text_chunks("m3", "a", "b") + tool_call_chunks("c2", "t", "{", "}")
    assert [getattr(e, "message_id", None) for e in chunks[:2]] == ["m3", None]
    assert [getattr(e, "tool_call_name", None) for e in chunks[2:]] == ["t", None]


def test_run_error_builder() -> None:
    events = run_events(text("m", "x"), error="boom")
    assert events[-1].type is EventType.RUN_ERROR


def test_assert_events_equal_shows_a_diff() -> None:
    a = run_events(text("m1", "hello"))
    b = run_events(text("m1", "world"))
    assert_events_equal(a, list(a))
    with pytest.raises(AssertionError) as info:
        assert_events_equal(a, b)
    message = str(info.value)
    assert '-{"delta": "world"' in message and '+{"delta": "hello"' in message


class Dropper(StreamTransformer):
    def __init__(self) -> None:
        self.dropped = 0

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if event.type is EventType.TEXT_MESSAGE_CONTENT:
            self.dropped += 1
            return ()
        return (event,)


def test_run_transformer_uses_the_given_instance() -> None:
    stage = Dropper()
    out = run_transformer(stage, run_events(text("m", "a", "b")))
    assert stage.dropped == 2
    assert [e.type for e in out].count(EventType.TEXT_MESSAGE_CONTENT) == 0


def test_run_transformer_checks_outputs() -> None:
    class Bad(StreamTransformer):
        def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
            return [event.model_dump()]  # type: ignore[list-item]

    # The chain itself refuses it, naming the stage and the fix.
    with pytest.raises(StageError, match=r"stage Bad.*returned a dict as an output item"):
        run_transformer(Bad(), run_events())


def test_plugin_fixtures(
    agui_events: ModuleType,
    agui_run_transformer: Callable[[StreamTransformer, list[BaseEvent]], list[BaseEvent]],
    agui_assert_events_equal: Callable[..., None],
) -> None:
    stage = Dropper()
    events = agui_events.run_events(agui_events.text("m", "x"))
    out = agui_run_transformer(stage, events)
    assert stage.dropped == 1  # like run_transformer: the given instance ran
    expected = [e for e in events if e.type is not EventType.TEXT_MESSAGE_CONTENT]
    agui_assert_events_equal(out, expected)
    with pytest.raises(AssertionError):
        agui_assert_events_equal(out, events)
