"""Chunk expansion: ``*_CHUNK`` shorthand to explicit START / CONTENT / END events.

A chunk says "this belongs to whatever I was streaming before" and may omit
its id; verification and application need the explicit triad. This stage
follows PROTOCOL.md §5 and the official TypeScript client's expansion, so both
SDKs assemble the same messages from the same chunks and refuse the same
malformed chunk streams:

* Chunk streams are kept per **lane**: the parent agent (untagged) and each
  subagent id, so two subagents streaming at once do not close each other.
* The first chunk of an item needs its id (``messageId`` / ``toolCallId``)
  and a tool chunk also ``toolCallName``; a text chunk without a role opens
  an assistant message.
* A continuation may omit those fields or repeat them with the same value; a
  conflicting ``role`` / ``name`` / ``toolCallName`` / ``parentMessageId`` is
  fatal, as is a tag that disagrees with the lane holding the id.
* The synthetic END is emitted when a chunk opens a different item in the
  lane; when a message, tool-call, step, state, custom or explicit reasoning
  event arrives in the lane; when a run-level event (RUN_*,
  MESSAGES_SNAPSHOT) arrives (every lane closes, in the order they opened);
  when the lane's subagent finishes or errors. RAW, ACTIVITY_*,
  REASONING_ENCRYPTED_VALUE and SUBAGENT_STARTED close nothing.
* An id-less chunk goes to its tag's lane; untagged, to the parent's lane if
  it has an open item of that kind, else to the only lane with one; several
  candidates is fatal (ambiguous).

Nothing is flushed at end of stream: a chunk stream still open then belongs
to a truncated run, which verification reports; inventing its END would
make a cut-off message look complete.

The ``ExpandChunks`` stage and the consumer both run this; it lives outside
the stages so that the consumer depends on no stage module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import ag_ui.core as ag
from ag_ui.core import BaseEvent

from ..events import ALL_EVENT_CLASSES
from ..verify import Rule, VerificationError
from .construct import construct

__all__ = [
    "ALL_LANES_CLOSERS",
    "CHUNK_CLASSES",
    "LANE_CLOSERS",
    "SUBAGENT_ENDS",
    "ChunkExpander",
]

_PARENT = "(the parent agent)"

LANE_CLOSERS: Final[frozenset[type[BaseEvent]]] = frozenset(
    {
        ag.TextMessageStartEvent,
        ag.TextMessageContentEvent,
        ag.TextMessageEndEvent,
        ag.ToolCallStartEvent,
        ag.ToolCallArgsEvent,
        ag.ToolCallEndEvent,
        ag.ToolCallResultEvent,
        ag.StateSnapshotEvent,
        ag.StateDeltaEvent,
        ag.CustomEvent,
        ag.StepStartedEvent,
        ag.StepFinishedEvent,
        ag.ReasoningStartEvent,
        ag.ReasoningMessageStartEvent,
        ag.ReasoningMessageContentEvent,
        ag.ReasoningMessageEndEvent,
        ag.ReasoningEndEvent,
    }
)
"""Events that close the chunk item open in their own lane (the lane of their tag)."""

ALL_LANES_CLOSERS: Final[frozenset[type[BaseEvent]]] = frozenset(
    {ag.RunStartedEvent, ag.RunFinishedEvent, ag.RunErrorEvent, ag.MessagesSnapshotEvent}
)
"""Run-level events: every lane closes, in the order the lanes opened."""

SUBAGENT_ENDS: Final[frozenset[type[BaseEvent]]] = frozenset(
    {ag.SubagentFinishedEvent, ag.SubagentErrorEvent}
)
"""A subagent's terminal: its own lane closes (``subagent_run_id`` is its id)."""

CHUNK_CLASSES: Final[frozenset[type[BaseEvent]]] = frozenset(
    {ag.TextMessageChunkEvent, ag.ToolCallChunkEvent, ag.ReasoningMessageChunkEvent}
)
"""The three ``*_CHUNK`` classes. Every other event class closes nothing."""

# What each event class does to the lanes.
_OWN_LANE, _ALL_LANES, _NOTHING, _SUBAGENT_END, _TEXT, _TOOL, _REASONING = range(7)
_ROLE: Final[dict[type[BaseEvent], int]] = {
    **dict.fromkeys(ALL_EVENT_CLASSES, _NOTHING),
    **dict.fromkeys(LANE_CLOSERS, _OWN_LANE),
    **dict.fromkeys(ALL_LANES_CLOSERS, _ALL_LANES),
    **dict.fromkeys(SUBAGENT_ENDS, _SUBAGENT_END),
    ag.TextMessageChunkEvent: _TEXT,
    ag.ToolCallChunkEvent: _TOOL,
    ag.ReasoningMessageChunkEvent: _REASONING,
}


class _Pending:
    """The item one lane is assembling: its kind, id, owner and what the opener said."""

    __slots__ = ("entity_id", "kind", "name", "owner", "parent_message_id", "role")

    def __init__(
        self,
        kind: int,
        entity_id: str,
        owner: str | None,
        *,
        role: str | None = None,
        name: str | None = None,
        parent_message_id: str | None = None,
    ) -> None:
        self.kind = kind
        self.entity_id = entity_id
        self.owner = owner
        self.role = role
        self.name = name
        self.parent_message_id = parent_message_id


_KIND_WORDS: Final = {
    _TEXT: ("text message", "TEXT_MESSAGE_CHUNK", "messageId"),
    _TOOL: ("tool call", "TOOL_CALL_CHUNK", "toolCallId"),
    _REASONING: ("reasoning message", "REASONING_MESSAGE_CHUNK", "messageId"),
}


class ChunkExpander:
    """The expansion itself, for the ``ExpandChunks`` stage and the consumer alike.

    ``expand(event)`` returns the events that replace ``event`` (the event
    itself, alone, when nothing changes); fatal chunk streams raise
    :class:`~agui_pipes.VerificationError`. ``on_change`` is called whenever
    :attr:`is_open` may have flipped, so a stage can re-plan its routing
    without testing the lanes on every event.
    """

    __slots__ = ("_lanes", "_on_change")

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self._lanes: dict[str | None, _Pending] = {}
        self._on_change = on_change

    @property
    def is_open(self) -> bool:
        """Whether any lane is assembling a chunk item."""
        return bool(self._lanes)

    def concerns(self, event_class: type[BaseEvent]) -> bool:
        """Whether ``expand`` may change an event of ``event_class`` right now.

        Chunks always; other events only while a chunk stream is open and
        only those that close a lane.
        """
        role = _role_of_class(event_class)
        return role >= _TEXT or (bool(self._lanes) and role != _NOTHING)

    def _lanes_changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    def expand(self, event: BaseEvent) -> Sequence[BaseEvent]:
        """The events that replace ``event`` downstream (see the module doc)."""
        role = _ROLE.get(event.__class__)
        if role is None:
            role = _role_of_class(event.__class__)
        if role >= _TEXT:
            try:
                return self._chunk(event, role)
            finally:
                self._lanes_changed()
        lanes = self._lanes
        if not lanes or role == _NOTHING:
            return (event,)
        if role == _OWN_LANE:
            pending = lanes.pop(getattr(event, "subagent_run_id", None), None)
            if pending is None:
                return (event,)
            self._lanes_changed()
            return (_end_event(pending), event)
        if role == _ALL_LANES:
            closed: list[BaseEvent] = [_end_event(p) for p in lanes.values()]
            lanes.clear()
            self._lanes_changed()
            closed.append(event)
            return closed
        # A subagent's terminal closes its own lane only (never the parent's).
        owner: str | None = getattr(event, "subagent_run_id", None)
        pending = None if owner is None else lanes.pop(owner, None)
        if pending is None:
            return (event,)
        self._lanes_changed()
        return (_end_event(pending), event)

    # -- chunks --------------------------------------------------------------

    def _fail(self, rule: Rule, detail: str, event: BaseEvent) -> VerificationError:
        return VerificationError(rule, detail, event)

    def _lane_for(
        self, kind: int, entity_id: str | None, tag: str | None, event: BaseEvent
    ) -> str | None:
        what, chunk_type, id_field = _KIND_WORDS[kind]
        lanes = self._lanes
        if entity_id is not None:
            for owner, pending in lanes.items():
                if pending.kind == kind and pending.entity_id == entity_id:
                    if tag is not None and tag != owner:
                        shown = _PARENT if owner is None else owner
                        raise self._fail(
                            Rule.OWNER_MISMATCH,
                            f"Cannot continue {what} '{entity_id}': chunk subagentRunId "
                            f"'{tag}' does not match the open stream's subagent '{shown}'.",
                            event,
                        )
                    return owner
            return tag
        if tag is not None:
            return tag
        parent = lanes.get(None)
        if parent is not None and parent.kind == kind:
            return None
        candidates = [owner for owner, pending in lanes.items() if pending.kind == kind]
        if len(candidates) == 1:
            return candidates[0]
        if len(candidates) > 1:
            raise self._fail(
                Rule.CHUNK_AMBIGUOUS,
                f"Ambiguous {chunk_type}: it carries neither a {id_field} nor a "
                f"subagentRunId, but {len(candidates)} lanes have an open {what}. Attribute "
                "the chunk to the subagent it belongs to.",
                event,
            )
        return None

    def _conflict(
        self,
        what: str,
        entity_id: str,
        field: str,
        incoming: str | None,
        established: str | None,
        event: BaseEvent,
    ) -> None:
        if incoming is not None and incoming != established:
            shown = "(absent)" if established is None else f"'{established}'"
            raise self._fail(
                Rule.CHUNK_CONFLICT,
                f"Cannot continue {what} '{entity_id}': chunk {field} '{incoming}' does not "
                f"match the open stream's {field} {shown}.",
                event,
            )

    def _chunk(self, event: Any, kind: int) -> Sequence[BaseEvent]:
        what = _KIND_WORDS[kind][0]
        # The fields, read from the instance dict: an attribute read on a pydantic
        # model goes through BaseModel.__getattr__'s hook, several times the cost.
        fields = event.__dict__
        entity_id: str | None = fields["tool_call_id" if kind == _TOOL else "message_id"]
        tag: str | None = fields["subagent_run_id"]
        lane = self._lane_for(kind, entity_id, tag, event)
        lanes = self._lanes
        pending = lanes.get(lane)
        out: list[BaseEvent] = []
        metadata = fields["metadata"]
        if (
            pending is not None
            and pending.kind == kind
            and (entity_id is None or entity_id == pending.entity_id)
        ):
            # A continuation: only the naming fields it carries can conflict.
            if kind == _TEXT:
                if fields["role"] is not None:
                    self._conflict(
                        what, pending.entity_id, "role", fields["role"], pending.role, event
                    )
                if fields["name"] is not None:
                    self._conflict(
                        what, pending.entity_id, "name", fields["name"], pending.name, event
                    )
            elif kind == _TOOL:
                if fields["tool_call_name"] is not None:
                    self._conflict(
                        what,
                        pending.entity_id,
                        "toolCallName",
                        fields["tool_call_name"],
                        pending.name,
                        event,
                    )
                if fields["parent_message_id"] is not None:
                    self._conflict(
                        what,
                        pending.entity_id,
                        "parentMessageId",
                        fields["parent_message_id"],
                        pending.parent_message_id,
                        event,
                    )
        else:
            pending = self._open_lane(kind, entity_id, tag, lane, metadata, event, out)
        delta: str | None = fields["delta"]
        raw = fields["raw_event"]
        if delta is not None or raw is not None or (not out and metadata is not None):
            owner = tag if tag is not None else pending.owner
            content: dict[str, Any] = {
                "tool_call_id" if kind == _TOOL else "message_id": pending.entity_id,
                "delta": "" if delta is None else delta,
            }
            if owner is not None:
                content["subagent_run_id"] = owner
            if metadata is not None:
                content["metadata"] = metadata
            if raw is not None:
                content["raw_event"] = raw
            out.append(construct(_CONTENT_CLASS[kind], content))
        return out

    def _open_lane(
        self,
        kind: int,
        entity_id: str | None,
        tag: str | None,
        lane: str | None,
        metadata: Any,
        event: Any,
        out: list[BaseEvent],
    ) -> _Pending:
        """A chunk that starts an item: close what ``lane`` had open, append the START.

        Off the hot path: once per item, while its continuations stay in ``_chunk``.
        """
        lanes = self._lanes
        pending = lanes.get(lane)
        if pending is not None:
            del lanes[lane]
            out.append(_end_event(pending))
        if entity_id is None:
            _, chunk_type, id_field = _KIND_WORDS[kind]
            raise self._fail(
                Rule.CHUNK_INCOMPLETE, f"First {chunk_type} must have a {id_field}", event
            )
        start: dict[str, Any]
        if kind == _TEXT:
            role = event.role if event.role is not None else "assistant"
            pending = _Pending(kind, entity_id, tag, role=role, name=event.name)
            start = {"message_id": entity_id, "role": role}
            if event.name is not None:
                start["name"] = event.name
            start_cls: type[BaseEvent] = ag.TextMessageStartEvent
        elif kind == _TOOL:
            if event.tool_call_name is None:
                raise self._fail(
                    Rule.CHUNK_INCOMPLETE,
                    "First TOOL_CALL_CHUNK must have a toolCallName",
                    event,
                )
            pending = _Pending(
                kind,
                entity_id,
                tag,
                name=event.tool_call_name,
                parent_message_id=event.parent_message_id,
            )
            start = {"tool_call_id": entity_id, "tool_call_name": event.tool_call_name}
            if event.parent_message_id is not None:
                start["parent_message_id"] = event.parent_message_id
            start_cls = ag.ToolCallStartEvent
        else:
            pending = _Pending(kind, entity_id, tag)
            start = {"message_id": entity_id, "role": "reasoning"}
            start_cls = ag.ReasoningMessageStartEvent
        if tag is not None:
            start["subagent_run_id"] = tag
        if metadata is not None:
            start["metadata"] = metadata
        lanes[lane] = pending
        out.append(construct(start_cls, start))
        return pending


_CONTENT_CLASS: Final[dict[int, type[BaseEvent]]] = {
    _TEXT: ag.TextMessageContentEvent,
    _TOOL: ag.ToolCallArgsEvent,
    _REASONING: ag.ReasoningMessageContentEvent,
}


def _end_event(pending: _Pending) -> BaseEvent:
    values: dict[str, Any]
    cls: type[BaseEvent]
    if pending.kind == _TOOL:
        cls, values = ag.ToolCallEndEvent, {"tool_call_id": pending.entity_id}
    elif pending.kind == _TEXT:
        cls, values = ag.TextMessageEndEvent, {"message_id": pending.entity_id}
    else:
        cls, values = ag.ReasoningMessageEndEvent, {"message_id": pending.entity_id}
    if pending.owner is not None:
        values["subagent_run_id"] = pending.owner
    return construct(cls, values)


def _role_of_class(event_class: type[BaseEvent]) -> int:
    role = _ROLE.get(event_class)
    if role is not None:
        return role
    for cls in event_class.__mro__:
        role = _ROLE.get(cls)
        if role is not None:
            return role
    return _NOTHING
