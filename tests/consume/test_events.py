"""agui_pipes.events: attribution and entity lookups over the official models."""

from __future__ import annotations

import pytest
from ag_ui.core import (
    AssistantMessage,
    CustomEvent,
    EventType,
    Interrupt,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    ToolCallResultEvent,
    UserMessage,
)

from agui_pipes.events import (
    ATTRIBUTABLE_TYPES,
    EVENT_CLASS_BY_TYPE,
    Action,
    EntityKind,
    EntityRef,
    attribution,
    entity_of,
    event_type,
    strip_attribution,
    with_attribution,
)


def test_every_wire_type_has_a_class() -> None:
    assert set(EVENT_CLASS_BY_TYPE) == set(EventType)
    assert EventType.RUN_STARTED not in ATTRIBUTABLE_TYPES
    assert EventType.SUBAGENT_STARTED not in ATTRIBUTABLE_TYPES
    assert EventType.STATE_DELTA in ATTRIBUTABLE_TYPES


def test_attribution_read_set_strip_without_mutation() -> None:
    event = TextMessageContentEvent(message_id="m", delta="x")
    assert attribution(event) is None
    tagged = with_attribution(event, "sub-1")
    assert attribution(tagged) == "sub-1"
    assert attribution(event) is None  # original untouched
    assert strip_attribution(tagged) == event
    assert strip_attribution(event) is event  # nothing to strip: no copy
    assert event_type(tagged) is EventType.TEXT_MESSAGE_CONTENT


def test_lifecycle_id_is_identity_not_a_tag() -> None:
    started = SubagentStartedEvent(subagent_run_id="s1", name="planner")
    assert attribution(started) is None
    assert strip_attribution(started) is started
    with pytest.raises(ValueError, match="cannot carry a subagentRunId"):
        with_attribution(started, "s2")
    with pytest.raises(ValueError, match="RUN_FINISHED cannot carry"):
        with_attribution(RunFinishedEvent(thread_id="t", run_id="r"), "s2")


def test_strip_reaches_nested_messages_and_interrupts() -> None:
    snapshot = MessagesSnapshotEvent(
        messages=[
            UserMessage(id="u", content="hi"),
            AssistantMessage(id="a", content="yo", subagent_run_id="s1"),
        ]
    )
    stripped = strip_attribution(snapshot)
    assert all(m.subagent_run_id is None for m in stripped.messages)  # type: ignore[attr-defined]
    assert snapshot.messages[1].subagent_run_id == "s1"

    echo = RunStartedEvent(
        thread_id="t",
        run_id="r",
        input=RunAgentInput(
            thread_id="t",
            run_id="r",
            messages=[AssistantMessage(id="a", content="x", subagent_run_id="s1")],
        ),
    )
    out = strip_attribution(echo)
    assert out.input.messages[0].subagent_run_id is None  # type: ignore[attr-defined]
    assert echo.input is not None and echo.input.messages[0].subagent_run_id == "s1"

    finished = RunFinishedEvent(
        thread_id="t",
        run_id="r",
        outcome=RunFinishedInterruptOutcome(
            interrupts=[Interrupt(id="i", reason="approve", subagent_run_id="s1")]
        ),
    )
    done = strip_attribution(finished)
    assert done.outcome.interrupts[0].subagent_run_id is None  # type: ignore[attr-defined]
    assert "subagentRunId" not in done.model_dump_json(by_alias=True)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (RunStartedEvent(thread_id="t", run_id="r"), EntityRef(EntityKind.RUN, "r", Action.OPEN)),
        (
            TextMessageContentEvent(message_id="m", delta=""),
            EntityRef(EntityKind.TEXT_MESSAGE, "m", Action.CONTINUE),
        ),
        (TextMessageChunkEvent(delta="x"), EntityRef(EntityKind.TEXT_MESSAGE, None, Action.CHUNK)),
        (
            ToolCallResultEvent(message_id="r1", tool_call_id="c", content="{}"),
            EntityRef(EntityKind.TOOL_CALL, "c", Action.RESULT),
        ),
        (
            SubagentStartedEvent(subagent_run_id="s", name="n"),
            EntityRef(EntityKind.SUBAGENT, "s", Action.OPEN),
        ),
        (StateDeltaEvent(delta=[]), None),
        (CustomEvent(name="c", value=1), None),
    ],
)
def test_entity_of(event: object, expected: EntityRef | None) -> None:
    assert entity_of(event) == expected  # type: ignore[arg-type]
