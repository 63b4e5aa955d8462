"""DropEvents / KeepEvents: remove whole event families a client does not use.

A client that does not render reasoning, activities or custom events still
pays for them on the wire. Dropping is done by *family* only — every event of
a family goes, openers, continuations, terminators and chunks alike — so the
output stays a valid stream without any bookkeeping. The run lifecycle
(RUN_STARTED / RUN_FINISHED / RUN_ERROR) is not a droppable family.

Where a dropped family also lives inside MESSAGES_SNAPSHOT (and the RUN_STARTED
input echo) it is removed there too, so the client's history agrees with the
live stream: ``reasoning`` removes reasoning messages, ``activity`` activity
messages, ``tool_call`` tool messages and assistant ``toolCalls`` (an assistant
message left empty goes as well) and ``pendingToolCallIds``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any, Final

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    EventType,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
)

from .._transformer import StreamTransformer
from ..events import EVENT_CLASS_BY_TYPE

__all__ = ["FAMILIES", "DropEvents", "KeepEvents"]

_E = EventType
FAMILIES: Final[dict[str, frozenset[EventType]]] = {
    "text": frozenset(
        {_E.TEXT_MESSAGE_START, _E.TEXT_MESSAGE_CONTENT, _E.TEXT_MESSAGE_END,
         _E.TEXT_MESSAGE_CHUNK}
    ),
    "tool_call": frozenset(
        {_E.TOOL_CALL_START, _E.TOOL_CALL_ARGS, _E.TOOL_CALL_END, _E.TOOL_CALL_CHUNK,
         _E.TOOL_CALL_RESULT}
    ),
    "reasoning": frozenset(
        {_E.REASONING_START, _E.REASONING_END, _E.REASONING_MESSAGE_START,
         _E.REASONING_MESSAGE_CONTENT, _E.REASONING_MESSAGE_END, _E.REASONING_MESSAGE_CHUNK,
         _E.REASONING_ENCRYPTED_VALUE}
    ),
    "state": frozenset({_E.STATE_SNAPSHOT, _E.STATE_DELTA}),
    "messages_snapshot": frozenset({_E.MESSAGES_SNAPSHOT}),
    "activity": frozenset({_E.ACTIVITY_SNAPSHOT, _E.ACTIVITY_DELTA}),
    "step": frozenset({_E.STEP_STARTED, _E.STEP_FINISHED}),
    "raw": frozenset({_E.RAW}),
    "custom": frozenset({_E.CUSTOM}),
    "subagent": frozenset({_E.SUBAGENT_STARTED, _E.SUBAGENT_FINISHED, _E.SUBAGENT_ERROR}),
}
"""Event families by name: every event type of a family is dropped or kept together."""

_ROLE_OF_FAMILY: Final = {"reasoning": "reasoning", "activity": "activity", "tool_call": "tool"}


def _family_names(families: Iterable[str] | str, who: str) -> list[str]:
    names = [families] if isinstance(families, str) else list(families)
    if not names:
        raise ValueError(f"{who}: give at least one event family ({', '.join(FAMILIES)})")
    for name in names:
        if name == "run":
            raise ValueError(
                f"{who}: the run lifecycle (RUN_STARTED/RUN_FINISHED/RUN_ERROR) cannot be "
                "dropped; a stream without it is not a valid AG-UI stream"
            )
        if name not in FAMILIES:
            raise ValueError(
                f"{who}: unknown event family {name!r}; choose from {', '.join(FAMILIES)}"
            )
    return names


class DropEvents(StreamTransformer):
    """Drop every event of the given families (a dropped entity's continuations go with it).

    ``DropEvents(["reasoning"])`` for a client that does not render reasoning.
    """

    def __init__(self, families: Iterable[str] | str) -> None:
        names = _family_names(families, type(self).__name__)
        self._init(set(names))

    def _init(self, dropped: set[str]) -> None:
        self.families: frozenset[str] = frozenset(dropped)
        types: set[EventType] = set()
        for name in dropped:
            types |= FAMILIES[name]
        self._dropped = frozenset(EVENT_CLASS_BY_TYPE[t] for t in types)
        self._roles = frozenset(_ROLE_OF_FAMILY[f] for f in dropped if f in _ROLE_OF_FAMILY)
        self._tools = "tool_call" in dropped
        rewrite: set[EventType] = set()
        if self._roles:
            rewrite |= {_E.MESSAGES_SNAPSHOT, _E.RUN_STARTED}
        if self._tools:
            rewrite.add(_E.RUN_FINISHED)
        self.event_types: Collection[EventType | str] | None = frozenset(types | rewrite)

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        cls = type(event)
        if cls in self._dropped:
            return ()
        if cls is MessagesSnapshotEvent:
            messages = self._clean(event.messages)  # type: ignore[attr-defined]
            if messages is not None:
                return (event.model_copy(update={"messages": messages}),)
        elif cls is RunStartedEvent:
            return self._run_started(event)  # type: ignore[arg-type]
        elif cls is RunFinishedEvent:
            return self._run_finished(event)  # type: ignore[arg-type]
        return (event,)

    def _clean(self, messages: Sequence[Any]) -> list[Any] | None:
        if not self._roles:
            return None
        out: list[Any] = []
        changed = False
        for message in messages:
            if message.role in self._roles:
                changed = True
                continue
            if self._tools and isinstance(message, AssistantMessage) and message.tool_calls:
                changed = True
                if not message.content:
                    continue
                message = message.model_copy(update={"tool_calls": None})
            out.append(message)
        return out if changed else None

    def _run_started(self, event: RunStartedEvent) -> Sequence[BaseEvent]:
        echo = event.input
        if isinstance(echo, RunAgentInput):
            messages = self._clean(echo.messages)
            if messages is not None:
                new_input = echo.model_copy(update={"messages": messages})
                return (event.model_copy(update={"input": new_input}),)
        return (event,)

    def _run_finished(self, event: RunFinishedEvent) -> Sequence[BaseEvent]:
        outcome = event.outcome
        if isinstance(outcome, RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
            new = outcome.model_copy(update={"pending_tool_call_ids": None})
            return (event.model_copy(update={"outcome": new}),)
        return (event,)


class KeepEvents(DropEvents):
    """Keep only the run lifecycle and the given families; drop everything else.

    ``KeepEvents(["text", "tool_call", "state"])`` for a minimal chat client.
    """

    def __init__(self, families: Iterable[str] | str) -> None:
        kept = set(_family_names(families, type(self).__name__))
        self._init(set(FAMILIES) - kept)

