"""DropEvents / KeepEvents: remove whole event families a client does not use.

A client that does not render reasoning, activities or custom events still
pays for them on the wire. Dropping is done by *family* only — every event of
a family goes, openers, continuations, terminators and chunks alike — so no
kept event continues or ends a dropped one. The run lifecycle (RUN_STARTED /
RUN_FINISHED / RUN_ERROR) is not a droppable family.

One thing crosses families: chunk lanes. A dropped event may have closed the
lane of a kept chunk item (TOOL_CALL_START ends a pending text chunk message,
so does a STATE_SNAPSHOT or SUBAGENT_FINISHED), so downstream that item stays
open longer, and a later id-less chunk could resolve differently — ambiguous,
or to the wrong message. When families that close lanes are dropped while
chunk families are kept, the stage follows the lanes of its input and output
(``_stagekit.lane_mirror.LaneMirror``) and gives such a chunk the ids of the item it
belongs to; chunks that resolve the same way either side are untouched.

The other: ownership. An untagged TOOL_CALL_START with a ``parentMessageId`` is
owned by that message's owner, which the client learns from events of the
``text`` / ``messages_snapshot`` families; with those dropped and tool calls
kept, such a start gets its owner's tag explicitly (``_stagekit.message_owners``).

Where a dropped family also lives inside MESSAGES_SNAPSHOT (and the RUN_STARTED
input echo) it is removed there too, so the client's history agrees with the
live stream: ``reasoning`` removes reasoning messages, ``activity`` activity
messages, ``tool_call`` tool messages and assistant ``toolCalls`` (an assistant
message left empty goes as well) and ``pendingToolCallIds``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Final

import ag_ui.core as ag
from ag_ui.core import BaseEvent, EventType

from .._lazy import public_dir
from .._pipeline.transformer import Transform
from .._stagekit.chunk_lanes import CHUNK_CLASSES, CLOSING_CLASSES, ChunkItem
from .._stagekit.dispatch import TableDispatch
from .._stagekit.lane_mirror import LaneMirror
from .._stagekit.message_owners import MessageOwners
from ..events import EVENT_CLASS_BY_TYPE

__all__ = ["FAMILIES", "DropEvents", "KeepEvents"]
__dir__ = public_dir(__all__)

_E = EventType
FAMILIES: Final[dict[str, frozenset[EventType]]] = {
    "text": frozenset(
        {_E.TEXT_MESSAGE_START, _E.TEXT_MESSAGE_CONTENT, _E.TEXT_MESSAGE_END, _E.TEXT_MESSAGE_CHUNK}
    ),
    "tool_call": frozenset(
        {
            _E.TOOL_CALL_START,
            _E.TOOL_CALL_ARGS,
            _E.TOOL_CALL_END,
            _E.TOOL_CALL_CHUNK,
            _E.TOOL_CALL_RESULT,
        }
    ),
    "reasoning": frozenset(
        {
            _E.REASONING_START,
            _E.REASONING_END,
            _E.REASONING_MESSAGE_START,
            _E.REASONING_MESSAGE_CONTENT,
            _E.REASONING_MESSAGE_END,
            _E.REASONING_MESSAGE_CHUNK,
            _E.REASONING_ENCRYPTED_VALUE,
        }
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

_Handler = Callable[[BaseEvent], Sequence[BaseEvent]]


def _drop(event: BaseEvent) -> Sequence[BaseEvent]:
    return ()


def _lane_handlers(
    mirror: LaneMirror,
    dropped: frozenset[type[BaseEvent]],
    kept_chunks: frozenset[type[BaseEvent]],
    changed: Callable[[], None],
) -> tuple[dict[type[BaseEvent], _Handler], _Handler]:
    """Handlers that follow the lanes of input and output (see the module docstring),
    and the one for kept closing events.

    Kept closing events are by far the most frequent (every content delta is one),
    and they only matter while a chunk item is open on either side: ``route``
    hands the chain no handler for them until then (``changed`` re-plans when
    that flips), and ``transform`` skips theirs.
    """
    source, output = mirror.source, mirror.output
    source_open, output_open = source.open, output.open
    kept = mirror.kept

    def drop_closer(event: BaseEvent) -> Sequence[BaseEvent]:
        if source_open:
            source.observe(event)
            changed()
        return ()

    def drop_chunk(event: BaseEvent) -> Sequence[BaseEvent]:
        source.assign(event)
        changed()
        return ()

    def keep_closer(event: BaseEvent) -> Sequence[BaseEvent]:
        if source_open or output_open:
            kept(event)
            changed()
        return (event,)

    def keep_chunk(event: BaseEvent) -> Sequence[BaseEvent]:
        out = (kept(event),)
        changed()
        return out

    handlers: dict[type[BaseEvent], _Handler] = {}
    for cls in dropped & CLOSING_CLASSES:
        handlers[cls] = drop_closer
    for cls in dropped & CHUNK_CLASSES:
        handlers[cls] = drop_chunk
    for cls in CLOSING_CLASSES - dropped:
        handlers[cls] = keep_closer
    for cls in kept_chunks:
        handlers[cls] = keep_chunk
    return handlers, keep_closer


_OWNER_SOURCES: Final[frozenset[type[BaseEvent]]] = frozenset(
    {ag.TextMessageStartEvent, ag.TextMessageChunkEvent, ag.MessagesSnapshotEvent}
)
"""Dropped, these take a message's owner off the record (``_stagekit.message_owners``)."""


def _owner_handlers(
    handlers: dict[type[BaseEvent], _Handler],
    mirror: LaneMirror | None,
    changed: Callable[[], None],
) -> dict[type[BaseEvent], _Handler]:
    """Handlers that keep an untagged tool call start owned by its parent message's owner.

    The events that put owners on record are watched whether dropped or kept (then
    handled as before); a kept untagged TOOL_CALL_START whose parent message a
    subagent owns is tagged with that subagent. The tag moves the lane the start
    closes, so the output lanes see the tagged copy.
    """
    owners = MessageOwners()

    def then(cls: type[BaseEvent], hook: Callable[[Any], None]) -> _Handler:
        after = handlers.get(cls, _keep)

        def watched(event: BaseEvent) -> Sequence[BaseEvent]:
            hook(event)
            return after(event)

        return watched

    def run_started(event: ag.RunStartedEvent) -> None:
        owners.reset()
        if isinstance(event.input, ag.RunAgentInput):
            owners.seed(event.input.messages, authoritative=False)

    def text_chunk(event: ag.TextMessageChunkEvent) -> None:
        if event.message_id is not None:
            owners.opened(event.message_id, event.subagent_run_id)

    keep_start = handlers.get(ag.ToolCallStartEvent, _keep)

    def tool_start(event: BaseEvent) -> Sequence[BaseEvent]:
        parent = event.parent_message_id  # type: ignore[attr-defined]
        if event.subagent_run_id is not None or parent is None:  # type: ignore[attr-defined]
            return keep_start(event)
        owner = owners.owner(parent)
        if owner is None:
            return keep_start(event)
        tagged = event.model_copy(update={"subagent_run_id": owner})
        if mirror is not None:
            mirror.source.observe(event)
            mirror.output.observe(tagged)
            changed()
        return (tagged,)

    return {
        ag.RunStartedEvent: then(ag.RunStartedEvent, run_started),
        ag.MessagesSnapshotEvent: then(
            ag.MessagesSnapshotEvent, lambda e: owners.seed(e.messages, authoritative=True)
        ),
        ag.TextMessageStartEvent: then(
            ag.TextMessageStartEvent, lambda e: owners.opened(e.message_id, e.subagent_run_id)
        ),
        ag.TextMessageChunkEvent: then(ag.TextMessageChunkEvent, text_chunk),
        ag.ToolCallResultEvent: then(
            ag.ToolCallResultEvent, lambda e: owners.minted(e.message_id, e.subagent_run_id)
        ),
        ag.ToolCallStartEvent: tool_start,
    }


def _keep(event: BaseEvent) -> Sequence[BaseEvent]:
    return (event,)


def _observing(observe: _Handler, rewrite: _Handler) -> _Handler:
    def both(event: BaseEvent) -> Sequence[BaseEvent]:
        observe(event)
        return rewrite(event)

    return both


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


class DropEvents(TableDispatch):
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
        # Lanes only need following when a kept chunk can outlive a dropped event
        # that closed (or a dropped chunk that replaced) its lane.
        kept_chunks = CHUNK_CLASSES - self._dropped
        self._mirror: LaneMirror | None = None
        handlers: dict[type[BaseEvent], _Handler] = {cls: _drop for cls in self._dropped}
        self._keep_closer: _Handler | None = None
        self._source_open: dict[str | None, ChunkItem] = {}
        self._output_open: dict[str | None, ChunkItem] = {}
        if kept_chunks and self._dropped & (CLOSING_CLASSES | CHUNK_CLASSES):
            mirror = self._mirror = LaneMirror()
            self._source_open, self._output_open = mirror.source.open, mirror.output.open
            lane_handlers, self._keep_closer = _lane_handlers(
                mirror, self._dropped, kept_chunks, self._lanes_changed
            )
            handlers.update(lane_handlers)
            rewrite |= {
                t for t, c in EVENT_CLASS_BY_TYPE.items() if c in kept_chunks | CLOSING_CLASSES
            }
        rewriters: list[tuple[type[BaseEvent], _Handler]] = []
        if self._roles:
            rewriters += [
                (ag.MessagesSnapshotEvent, self._messages_snapshot),
                (ag.RunStartedEvent, self._run_started),
            ]
        if self._tools:
            rewriters.append((ag.RunFinishedEvent, self._run_finished))
        for cls, rewriter in rewriters:
            if cls in self._dropped:  # a dropped MESSAGES_SNAPSHOT needs no cleaning
                continue
            observe = handlers.get(cls)
            handlers[cls] = rewriter if observe is None else _observing(observe, rewriter)
        if ag.ToolCallStartEvent not in self._dropped and self._dropped & _OWNER_SOURCES:
            handlers.update(_owner_handlers(handlers, self._mirror, self._lanes_changed))
            rewrite |= {t for t, c in EVENT_CLASS_BY_TYPE.items() if c in handlers}
        self._handlers = handlers
        self.event_types: Collection[EventType | str] | None = frozenset(types | rewrite)

    route_key: bool = False
    """Whether a chunk item is open in the followed lanes (kept closing events matter)."""

    def _lanes_changed(self) -> None:
        following = bool(self._source_open) or bool(self._output_open)
        if following is not self.route_key:
            self.route_key = following
            self.reroute()

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        handler = super().route(event_class)
        if handler is self._keep_closer and not self.route_key:
            return None  # no chunk item open: a kept delta passes without a call
        return handler

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        # The table's dispatch, with the hot case first (so not TableDispatch.transform).
        handler = self._handlers.get(type(event))
        if handler is None:
            return (event,)
        if handler is self._keep_closer and not self._source_open and not self._output_open:
            return (event,)  # the hot path: a kept delta while no chunk item is open
        return handler(event)

    # -- snapshots and the run lifecycle --------------------------------------

    def _messages_snapshot(self, event: BaseEvent) -> Sequence[BaseEvent]:
        messages = self._clean(event.messages)  # type: ignore[attr-defined]
        if messages is None:
            return (event,)
        return (event.model_copy(update={"messages": messages}),)

    def _clean(self, messages: Sequence[Any]) -> list[Any] | None:
        if not self._roles:
            return None
        out: list[Any] = []
        changed = False
        for message in messages:
            if message.role in self._roles:
                changed = True
                continue
            if self._tools and isinstance(message, ag.AssistantMessage) and message.tool_calls:
                changed = True
                if not message.content:
                    continue
                message = message.model_copy(update={"tool_calls": None})
            out.append(message)
        return out if changed else None

    def _run_started(self, event: BaseEvent) -> Sequence[BaseEvent]:
        echo = event.input  # type: ignore[attr-defined]
        if isinstance(echo, ag.RunAgentInput):
            messages = self._clean(echo.messages)
            if messages is not None:
                new_input = echo.model_copy(update={"messages": messages})
                return (event.model_copy(update={"input": new_input}),)
        return (event,)

    def _run_finished(self, event: BaseEvent) -> Sequence[BaseEvent]:
        outcome = event.outcome  # type: ignore[attr-defined]
        if isinstance(outcome, ag.RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
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
