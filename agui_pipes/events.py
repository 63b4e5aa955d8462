"""What every stage needs to know about an event, in one place.

The official ``ag_ui.core`` models are agui_pipes' event type: nothing here
wraps or re-declares them. This module answers the questions stages keep
asking — what type is this, who produced it (its subagent attribution), and
which entity does it open, continue or close — with table lookups keyed by the
event's class, so the answers cost a dict hit on the hot path.

Events are immutable by contract. The helpers that change attribution return
a rewritten copy (``model_copy``) and never touch the event they were given,
because the same object may still be referenced upstream (a recording, a
retry buffer, another consumer of a tee).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import ag_ui.core as ag
from ag_ui.core import BaseEvent, EventType

from ._lazy import public_dir
from ._protocol.construct import replace

__all__ = [
    "ALL_EVENT_CLASSES",
    "ATTRIBUTABLE_CLASSES",
    "ATTRIBUTABLE_TYPES",
    "EVENT_CLASS_BY_TYPE",
    "Action",
    "EntityKind",
    "EntityRef",
    "Event",
    "EventType",
    "attribution",
    "entity_of",
    "event_type",
    "is_event",
    "strip_attribution",
    "with_attribution",
]
__dir__ = public_dir(__all__)

Event: TypeAlias = BaseEvent
"""The type every stage consumes and produces: any ``ag_ui.core`` event model."""


ALL_EVENT_CLASSES: Final[tuple[type[BaseEvent], ...]] = (
    ag.TextMessageStartEvent,
    ag.TextMessageContentEvent,
    ag.TextMessageEndEvent,
    ag.TextMessageChunkEvent,
    ag.ToolCallStartEvent,
    ag.ToolCallArgsEvent,
    ag.ToolCallEndEvent,
    ag.ToolCallChunkEvent,
    ag.ToolCallResultEvent,
    ag.StateSnapshotEvent,
    ag.StateDeltaEvent,
    ag.MessagesSnapshotEvent,
    ag.ActivitySnapshotEvent,
    ag.ActivityDeltaEvent,
    ag.RawEvent,
    ag.CustomEvent,
    ag.RunStartedEvent,
    ag.RunFinishedEvent,
    ag.RunErrorEvent,
    ag.StepStartedEvent,
    ag.StepFinishedEvent,
    ag.ReasoningStartEvent,
    ag.ReasoningMessageStartEvent,
    ag.ReasoningMessageContentEvent,
    ag.ReasoningMessageEndEvent,
    ag.ReasoningMessageChunkEvent,
    ag.ReasoningEndEvent,
    ag.ReasoningEncryptedValueEvent,
    ag.SubagentStartedEvent,
    ag.SubagentFinishedEvent,
    ag.SubagentErrorEvent,
)

EVENT_CLASS_BY_TYPE: Final[dict[EventType, type[BaseEvent]]] = {
    cls.model_fields["type"].default: cls for cls in ALL_EVENT_CLASSES
}
"""The model class for each wire ``type``."""

_RUN_SCOPED: Final = frozenset(
    {
        EventType.RUN_STARTED,
        EventType.RUN_FINISHED,
        EventType.RUN_ERROR,
        EventType.MESSAGES_SNAPSHOT,
    }
)
_LIFECYCLE: Final = frozenset(
    {EventType.SUBAGENT_STARTED, EventType.SUBAGENT_FINISHED, EventType.SUBAGENT_ERROR}
)

ATTRIBUTABLE_TYPES: Final[frozenset[EventType]] = frozenset(EventType) - _RUN_SCOPED - _LIFECYCLE
"""Event types whose ``subagentRunId`` is an attribution tag.

On SUBAGENT_* the same field is the identity of the invocation being announced
or closed, not a tag, so those types are deliberately excluded.
"""

_ATTRIBUTABLE_CLASSES: Final = frozenset(
    cls for cls in ALL_EVENT_CLASSES if cls.model_fields["type"].default in ATTRIBUTABLE_TYPES
)
ATTRIBUTABLE_CLASSES: Final[frozenset[type[BaseEvent]]] = _ATTRIBUTABLE_CLASSES
"""The model classes of ``ATTRIBUTABLE_TYPES`` (for dispatch on ``type(event)``)."""


def is_event(item: object) -> bool:
    """True when ``item`` is an ``ag_ui.core`` event model instance."""
    return isinstance(item, BaseEvent)


def event_type(event: BaseEvent) -> EventType:
    """The event's wire type (``EventType.TEXT_MESSAGE_START``, ...)."""
    return event.type


# --------------------------------------------------------------------------
# Attribution


def attribution(event: BaseEvent) -> str | None:
    """The subagent invocation an event is attributed to, or ``None`` (the parent).

    Always ``None`` for run-scoped events and for SUBAGENT_* lifecycle events,
    whose ``subagentRunId`` is an identity rather than a tag.
    """
    if type(event) not in _ATTRIBUTABLE_CLASSES:
        return None
    tag: str | None = getattr(event, "subagent_run_id", None)
    return tag


def with_attribution(event: BaseEvent, subagent_run_id: str | None) -> BaseEvent:
    """A copy of ``event`` tagged with ``subagent_run_id`` (``None`` removes the tag).

    Raises ``ValueError`` for event types that cannot carry attribution, so a
    stage cannot silently mis-tag a run-scoped or lifecycle event.
    """
    if type(event) not in _ATTRIBUTABLE_CLASSES:
        raise ValueError(
            f"{event.type.value} cannot carry a subagentRunId tag; "
            "only content and progress events are attributable"
        )
    if getattr(event, "subagent_run_id", None) == subagent_run_id:
        return event
    return event.model_copy(update={"subagent_run_id": subagent_run_id})


def _strip_list(items: Sequence[Any]) -> tuple[list[Any], bool]:
    changed = False
    out: list[Any] = []
    for item in items:
        if getattr(item, "subagent_run_id", None) is not None:
            item = item.model_copy(update={"subagent_run_id": None})
            changed = True
        out.append(item)
    return out, changed


def strip_attribution(event: BaseEvent) -> BaseEvent:
    """A copy of ``event`` with every attribution tag removed, nested ones included.

    Covers the event's own tag, messages inside MESSAGES_SNAPSHOT and inside the
    RUN_STARTED input echo, and interrupts in a RUN_FINISHED interrupt outcome.
    SUBAGENT_* events are returned unchanged: their id is not a tag. The
    original is returned when there was nothing to strip (no copy is made).
    """
    cls = type(event)
    if cls in _ATTRIBUTABLE_CLASSES:
        if getattr(event, "subagent_run_id", None) is None:
            return event
        return replace(event, "subagent_run_id", None)
    if cls is ag.MessagesSnapshotEvent:
        assert isinstance(event, ag.MessagesSnapshotEvent)
        messages, changed = _strip_list(event.messages)
        return event.model_copy(update={"messages": messages}) if changed else event
    if cls is ag.RunStartedEvent:
        assert isinstance(event, ag.RunStartedEvent)
        echo = event.input
        if not isinstance(echo, ag.RunAgentInput):
            return event
        messages, changed = _strip_list(echo.messages)
        if not changed:
            return event
        return event.model_copy(update={"input": echo.model_copy(update={"messages": messages})})
    if cls is ag.RunFinishedEvent:
        assert isinstance(event, ag.RunFinishedEvent)
        outcome = event.outcome
        if not isinstance(outcome, ag.RunFinishedInterruptOutcome):
            return event
        interrupts, changed = _strip_list(outcome.interrupts)
        if not changed:
            return event
        return event.model_copy(
            update={"outcome": outcome.model_copy(update={"interrupts": interrupts})}
        )
    return event


# --------------------------------------------------------------------------
# Entities


class EntityKind(str, enum.Enum):
    """The things a stream opens and closes. Each kind has its own id space."""

    RUN = "run"
    TEXT_MESSAGE = "text_message"
    TOOL_CALL = "tool_call"
    REASONING = "reasoning"
    """A reasoning span (REASONING_START / REASONING_END)."""
    REASONING_MESSAGE = "reasoning_message"
    STEP = "step"
    """Keyed by ``stepName`` (the protocol pairs steps by name and owner)."""
    SUBAGENT = "subagent"
    ACTIVITY = "activity"


class Action(str, enum.Enum):
    """What an event does to its entity."""

    OPEN = "open"
    CONTINUE = "continue"
    CLOSE = "close"
    CHUNK = "chunk"
    """Shorthand that may open or continue; the id may be missing (resolved by lane)."""
    RESULT = "result"
    """TOOL_CALL_RESULT: answers a call (which must exist) without reopening it."""
    SNAPSHOT = "snapshot"
    """ACTIVITY_SNAPSHOT / ACTIVITY_DELTA: creates or updates, never closes."""


@dataclass(frozen=True, slots=True)
class EntityRef:
    """The entity an event touches: its kind, its id and what the event does to it."""

    kind: EntityKind
    id: str | None
    action: Action


_K = EntityKind
_A = Action
_ENTITY_TABLE: Final[dict[type[BaseEvent], tuple[EntityKind, Action, str]]] = {
    ag.RunStartedEvent: (_K.RUN, _A.OPEN, "run_id"),
    ag.RunFinishedEvent: (_K.RUN, _A.CLOSE, "run_id"),
    ag.TextMessageStartEvent: (_K.TEXT_MESSAGE, _A.OPEN, "message_id"),
    ag.TextMessageContentEvent: (_K.TEXT_MESSAGE, _A.CONTINUE, "message_id"),
    ag.TextMessageEndEvent: (_K.TEXT_MESSAGE, _A.CLOSE, "message_id"),
    ag.TextMessageChunkEvent: (_K.TEXT_MESSAGE, _A.CHUNK, "message_id"),
    ag.ToolCallStartEvent: (_K.TOOL_CALL, _A.OPEN, "tool_call_id"),
    ag.ToolCallArgsEvent: (_K.TOOL_CALL, _A.CONTINUE, "tool_call_id"),
    ag.ToolCallEndEvent: (_K.TOOL_CALL, _A.CLOSE, "tool_call_id"),
    ag.ToolCallChunkEvent: (_K.TOOL_CALL, _A.CHUNK, "tool_call_id"),
    ag.ToolCallResultEvent: (_K.TOOL_CALL, _A.RESULT, "tool_call_id"),
    ag.ReasoningStartEvent: (_K.REASONING, _A.OPEN, "message_id"),
    ag.ReasoningEndEvent: (_K.REASONING, _A.CLOSE, "message_id"),
    ag.ReasoningMessageStartEvent: (_K.REASONING_MESSAGE, _A.OPEN, "message_id"),
    ag.ReasoningMessageContentEvent: (_K.REASONING_MESSAGE, _A.CONTINUE, "message_id"),
    ag.ReasoningMessageEndEvent: (_K.REASONING_MESSAGE, _A.CLOSE, "message_id"),
    ag.ReasoningMessageChunkEvent: (_K.REASONING_MESSAGE, _A.CHUNK, "message_id"),
    ag.StepStartedEvent: (_K.STEP, _A.OPEN, "step_name"),
    ag.StepFinishedEvent: (_K.STEP, _A.CLOSE, "step_name"),
    ag.SubagentStartedEvent: (_K.SUBAGENT, _A.OPEN, "subagent_run_id"),
    ag.SubagentFinishedEvent: (_K.SUBAGENT, _A.CLOSE, "subagent_run_id"),
    ag.SubagentErrorEvent: (_K.SUBAGENT, _A.CLOSE, "subagent_run_id"),
    ag.ActivitySnapshotEvent: (_K.ACTIVITY, _A.SNAPSHOT, "message_id"),
    ag.ActivityDeltaEvent: (_K.ACTIVITY, _A.SNAPSHOT, "message_id"),
}


def entity_of(event: BaseEvent) -> EntityRef | None:
    """Which entity ``event`` opens, continues or closes, or ``None``.

    ``None`` for events that touch no entity (state, snapshots of messages,
    RAW, CUSTOM, RUN_ERROR, REASONING_ENCRYPTED_VALUE — which *refers* to an
    entity by ``entityId`` but neither opens nor closes it). A chunk's id may
    be ``None``: it belongs to whatever its lane has open.
    """
    entry = _ENTITY_TABLE.get(type(event))
    if entry is None:
        return None
    kind, action, attr = entry
    return EntityRef(kind, getattr(event, attr, None), action)
