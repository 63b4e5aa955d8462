"""SubagentVisibility: what a client sees of subagent work — attributed, inline or hidden.

Clients older than subagent support fail while decoding SUBAGENT_* events,
so what reaches a consumer is a producer-side choice (TRANSFORMERS.md):

``attributed`` (default)
    The stream as emitted.

``inline`` — the pre-subagent shape
    SUBAGENT_* events and *tagged* STEP_* events are dropped (a subagent's
    step flattened into the parent's would collide with or misdescribe the
    parent's steps); ``subagentRunId`` is stripped everywhere, nested places
    included (snapshot messages, the RUN_STARTED echo, interrupts). Before a
    tag is stripped, every chunk continuation gets the id (and tool name /
    parent message / role) its lane would have resolved it to on the client:
    once every lane collapses into the parent's, an id-less chunk would
    otherwise be routed to whatever the parent had open. A client assembles
    the same messages and state from the inline stream as from the attributed
    one.

``hidden`` — only the parent's own events
    Ownership is first-writer-wins and remembered for the whole run, per kind
    (text messages, reasoning spans, reasoning messages, tool calls — a call
    inside a subagent's message is the subagent's — and activities); an
    untagged event is judged by the owner of what it continues. Tagged or
    subagent-owned events are dropped, SUBAGENT_* too. A TOOL_CALL_RESULT is
    kept iff the consumer saw the call, whoever executed it (agents as tools),
    and goes out untagged. STATE_* always pass, untagged: state is shared, and
    a client that missed a subagent's publish would mirror stale state and
    send it back. MESSAGES_SNAPSHOT is authoritative for ownership and is
    filtered to the parent's messages (a tool message is kept iff its call is
    visible); the RUN_STARTED echo only adds owners (and is filtered the same
    way). Invariant: an entity the consumer saw open keeps that visibility
    until it closes, so a late ownership change can never strand a START
    without its END or the other way round.

In every mode a RUN_FINISHED while an announced subagent is still active is
rejected with a ``VerificationError`` (rule ``open-at-finish``) — even when the
lifecycle is hidden, because the stream was wrong before any rewriting. The
run driver turns that into RUN_ERROR ``PROTOCOL_VIOLATION``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import ag_ui.core as ag
from ag_ui.core import BaseEvent, EventType

from .._lazy import public_dir
from .._pipeline.transformer import Condition
from .._protocol.chunks import LANE_CLOSERS
from .._protocol.construct import replace
from .._stagekit.chunk_lanes import CHUNK_CLASSES, ChunkLanes
from .._stagekit.dispatch import TableDispatch
from .._stagekit.lane_mirror import fill_chunk
from ..events import strip_attribution
from ..verify import Rule, VerificationError

__all__ = ["SubagentVisibility"]
__dir__ = public_dir(__all__)

Mode = Literal["attributed", "inline", "hidden"]
_MODES: Final = ("attributed", "inline", "hidden")
_Handler = Callable[[Any], Sequence[BaseEvent]]

# Ownership buckets (each kind has its own id space).
_TEXT: Final = "text"
_TOOL: Final = "tool"
_SPAN: Final = "span"
_REASONING: Final = "reasoning"
_ACTIVITY: Final = "activity"

_OPEN: Final[dict[type[BaseEvent], tuple[str, str]]] = {
    ag.TextMessageStartEvent: (_TEXT, "message_id"),
    ag.ReasoningStartEvent: (_SPAN, "message_id"),
    ag.ReasoningMessageStartEvent: (_REASONING, "message_id"),
}
_CONTINUE: Final[dict[type[BaseEvent], tuple[str, str]]] = {
    ag.TextMessageContentEvent: (_TEXT, "message_id"),
    ag.ToolCallArgsEvent: (_TOOL, "tool_call_id"),
    ag.ReasoningMessageContentEvent: (_REASONING, "message_id"),
}
_CLOSE: Final[dict[type[BaseEvent], tuple[str, str]]] = {
    ag.TextMessageEndEvent: (_TEXT, "message_id"),
    ag.ToolCallEndEvent: (_TOOL, "tool_call_id"),
    ag.ReasoningEndEvent: (_SPAN, "message_id"),
    ag.ReasoningMessageEndEvent: (_REASONING, "message_id"),
}
_CHUNK_BUCKET: Final[dict[type[BaseEvent], str]] = {
    ag.TextMessageChunkEvent: _TEXT,
    ag.ToolCallChunkEvent: _TOOL,
    ag.ReasoningMessageChunkEvent: _REASONING,
}
_ROLE_BUCKET: Final = {"reasoning": _REASONING, "activity": _ACTIVITY}


def _pass(event: BaseEvent) -> Sequence[BaseEvent]:
    return (event,)


class SubagentVisibility(TableDispatch):
    """Choose how subagent activity reaches the client: attributed, inlined, or hidden.

    Build with ``SubagentVisibility.inline()``, ``.hidden()`` or
    ``.attributed()`` (equivalently ``SubagentVisibility(mode="inline")``).
    """

    def __init__(self, mode: Mode = "attributed") -> None:
        if mode not in _MODES:
            raise ValueError(
                f"SubagentVisibility: mode {mode!r} is not one of 'attributed', 'inline', 'hidden'"
            )
        self.mode: Mode = mode
        self._active: dict[str, None] = {}
        self._lanes = ChunkLanes()
        # hidden mode
        self._owner: dict[str, dict[str, str | None]] = {}
        self._open: dict[str, dict[str, bool]] = {}
        self._chunk_visible: dict[tuple[str, str], bool] = {}
        self._visible_calls: set[str] = set()
        self._reset_hidden()
        handlers: dict[type[BaseEvent], _Handler]
        if mode == "attributed":
            self.event_types = (
                EventType.RUN_STARTED,
                EventType.RUN_FINISHED,
                EventType.SUBAGENT_STARTED,
                EventType.SUBAGENT_FINISHED,
                EventType.SUBAGENT_ERROR,
            )
            handlers = {
                ag.RunStartedEvent: self._attributed_run_started,
                ag.RunFinishedEvent: self._attributed_run_finished,
                ag.SubagentStartedEvent: self._attributed_subagent_started,
                ag.SubagentFinishedEvent: self._attributed_subagent_end,
                ag.SubagentErrorEvent: self._attributed_subagent_end,
            }
        elif mode == "inline":
            handlers = self._inline_handlers()
        else:
            handlers = self._hidden_handlers()
        self._handlers = handlers

    @classmethod
    def attributed(cls) -> SubagentVisibility:
        """The stream as emitted (subagent lifecycle and tags included)."""
        return cls("attributed")

    @classmethod
    def inline(cls) -> SubagentVisibility:
        """The pre-subagent shape: lifecycle dropped, tags stripped, same messages and state."""
        return cls("inline")

    @classmethod
    def hidden(cls) -> SubagentVisibility:
        """Only the parent's own events (shared state always passes)."""
        return cls("hidden")

    def passes(
        self, event_class: type[BaseEvent], fields: frozenset[str]
    ) -> tuple[Condition, ...] | None:
        # Inline: while no chunk stream is open (nothing for it to close), an
        # event ``_inline_observed`` handles passes as it is, its tag stripped.
        handler = self._handlers.get(event_class)
        if getattr(handler, "__func__", None) is not SubagentVisibility._inline_observed:
            return None
        if "subagent_run_id" not in fields:
            return (Condition.empty(self._lanes.open),)
        return (Condition.empty(self._lanes.open), Condition.drops("subagent_run_id"))

    # -- shared: subagent lifecycle bookkeeping ------------------------------

    def _started(self, event: ag.SubagentStartedEvent) -> None:
        self._active[event.subagent_run_id] = None

    def _ended(self, event: BaseEvent) -> None:
        self._active.pop(event.subagent_run_id, None)  # type: ignore[attr-defined]

    def _check_finish(self, event: ag.RunFinishedEvent) -> None:
        if self._active:
            still = ", ".join(repr(s) for s in self._active)
            raise VerificationError(
                Rule.OPEN_AT_FINISH,
                f"Cannot send 'RUN_FINISHED' while subagents are still active: {still} "
                f"(SubagentVisibility, mode {self.mode!r}); finish or error each subagent first",
                event,
            )

    def _attributed_run_started(self, event: ag.RunStartedEvent) -> Sequence[BaseEvent]:
        self._active.clear()
        return (event,)

    def _attributed_run_finished(self, event: ag.RunFinishedEvent) -> Sequence[BaseEvent]:
        self._check_finish(event)
        return (event,)

    def _attributed_subagent_started(self, event: ag.SubagentStartedEvent) -> Sequence[BaseEvent]:
        self._started(event)
        return (event,)

    def _attributed_subagent_end(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._ended(event)
        return (event,)

    # -- inline ------------------------------------------------------------

    def _inline_handlers(self) -> dict[type[BaseEvent], _Handler]:
        handlers: dict[type[BaseEvent], _Handler] = {}
        cls: type[BaseEvent]
        for cls in LANE_CLOSERS:  # the step events get their own handler below
            handlers[cls] = self._inline_observed
        handlers[ag.MessagesSnapshotEvent] = self._inline_run_level
        handlers[ag.RunErrorEvent] = self._inline_run_level
        for cls in (ag.RawEvent, ag.ActivitySnapshotEvent, ag.ActivityDeltaEvent,
                    ag.ReasoningEncryptedValueEvent):  # fmt: skip
            handlers[cls] = self._inline_strip
        for cls in CHUNK_CLASSES:
            handlers[cls] = self._inline_chunk
        handlers[ag.StepStartedEvent] = self._inline_step
        handlers[ag.StepFinishedEvent] = self._inline_step
        handlers[ag.SubagentStartedEvent] = self._drop_subagent_started
        handlers[ag.SubagentFinishedEvent] = self._drop_subagent_end
        handlers[ag.SubagentErrorEvent] = self._drop_subagent_end
        handlers[ag.RunStartedEvent] = self._inline_run_started
        handlers[ag.RunFinishedEvent] = self._inline_run_finished
        return handlers

    def _inline_strip(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (strip_attribution(event),)

    def _inline_observed(self, event: BaseEvent) -> Sequence[BaseEvent]:
        """The hot path: an attributable event that may close a chunk lane."""
        lanes = self._lanes
        if lanes.open:
            lanes.observe(event)
        if event.subagent_run_id is None:  # type: ignore[attr-defined]
            return (event,)
        return (replace(event, "subagent_run_id", None),)

    def _inline_run_level(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        return (strip_attribution(event),)

    def _inline_step(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        if event.subagent_run_id is not None:  # type: ignore[attr-defined]
            return ()
        return (event,)

    def _inline_chunk(self, event: BaseEvent) -> Sequence[BaseEvent]:
        assignment = self._lanes.assign(event)
        if assignment.item is not None and not assignment.opened:
            event = fill_chunk(event, assignment.item)
        return (strip_attribution(event),)

    # Both inline and hidden drop the lifecycle events, keeping their bookkeeping.
    def _drop_subagent_started(self, event: ag.SubagentStartedEvent) -> Sequence[BaseEvent]:
        self._started(event)
        return ()

    def _drop_subagent_end(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._ended(event)
        self._lanes.observe(event)
        return ()

    def _inline_run_started(self, event: ag.RunStartedEvent) -> Sequence[BaseEvent]:
        self._active.clear()
        self._lanes.reset()
        return (strip_attribution(event),)

    def _inline_run_finished(self, event: ag.RunFinishedEvent) -> Sequence[BaseEvent]:
        self._check_finish(event)
        self._lanes.observe(event)
        return (strip_attribution(event),)

    # -- hidden ------------------------------------------------------------

    def _reset_hidden(self) -> None:
        # Cleared in place: the continuation handlers hold these dicts in closures.
        if not self._owner:
            self._owner = {b: {} for b in (_TEXT, _TOOL, _SPAN, _REASONING, _ACTIVITY)}
            self._open = {b: {} for b in (_TEXT, _TOOL, _SPAN, _REASONING)}
        for owners in self._owner.values():
            owners.clear()
        for opened in self._open.values():
            opened.clear()
        self._chunk_visible.clear()
        self._visible_calls.clear()

    def _hidden_handlers(self) -> dict[type[BaseEvent], _Handler]:
        handlers: dict[type[BaseEvent], _Handler] = {}
        for cls in _OPEN:
            handlers[cls] = self._hidden_open
        for cls, (bucket, attr) in _CONTINUE.items():
            handlers[cls] = self._hidden_continuation(bucket, attr)
        for cls in _CLOSE:
            handlers[cls] = self._hidden_close
        for cls in CHUNK_CLASSES:
            handlers[cls] = self._hidden_chunk
        handlers[ag.ToolCallStartEvent] = self._hidden_tool_start
        handlers[ag.ToolCallResultEvent] = self._hidden_tool_result
        handlers[ag.StateSnapshotEvent] = self._hidden_state
        handlers[ag.StateDeltaEvent] = self._hidden_state
        for cls in (ag.StepStartedEvent, ag.StepFinishedEvent, ag.CustomEvent):
            handlers[cls] = self._hidden_tagged_observed
        handlers[ag.RawEvent] = self._hidden_tagged
        handlers[ag.ActivitySnapshotEvent] = self._hidden_activity
        handlers[ag.ActivityDeltaEvent] = self._hidden_activity
        handlers[ag.ReasoningEncryptedValueEvent] = self._hidden_encrypted
        handlers[ag.SubagentStartedEvent] = self._drop_subagent_started
        handlers[ag.SubagentFinishedEvent] = self._drop_subagent_end
        handlers[ag.SubagentErrorEvent] = self._drop_subagent_end
        handlers[ag.MessagesSnapshotEvent] = self._hidden_messages_snapshot
        handlers[ag.RunStartedEvent] = self._hidden_run_started
        handlers[ag.RunFinishedEvent] = self._hidden_run_finished
        handlers[ag.RunErrorEvent] = self._hidden_run_error
        return handlers

    def _judge(self, bucket: str, entity: str | None, tag: str | None) -> bool:
        """Visible iff untagged and (when known) owned by the parent."""
        if tag is not None:
            return False
        if entity is None:
            return True
        return self._owner[bucket].get(entity) is None

    def _hidden_open(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        bucket, attr = _OPEN[type(event)]
        entity: str = getattr(event, attr)
        tag: str | None = event.subagent_run_id  # type: ignore[attr-defined]
        opened = self._open[bucket]
        visible = opened.get(entity)
        if visible is None:
            owner = self._owner[bucket].setdefault(entity, tag)
            visible = tag is None and owner is None
            opened[entity] = visible
        return (event,) if visible else ()

    def _hidden_continuation(self, bucket: str, attr: str) -> _Handler:
        """The hot path (content deltas), specialised per event class."""
        lanes = self._lanes
        opened = self._open[bucket]
        judge = self._judge

        def continuation(event: BaseEvent) -> Sequence[BaseEvent]:
            if lanes.open:
                lanes.observe(event)
            entity: str = getattr(event, attr)
            visible = opened.get(entity)
            if visible is None:
                visible = judge(bucket, entity, event.subagent_run_id)  # type: ignore[attr-defined]
            return (event,) if visible else ()

        return continuation

    def _hidden_close(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        bucket, attr = _CLOSE[type(event)]
        entity: str = getattr(event, attr)
        visible = self._open[bucket].pop(entity, None)
        if visible is None:
            visible = self._judge(bucket, entity, event.subagent_run_id)  # type: ignore[attr-defined]
        return (event,) if visible else ()

    def _call_owner(self, call: str, tag: str | None, parent_message: str | None) -> str | None:
        """First writer wins; an untagged call inherits its parent message's owner."""
        owners = self._owner[_TOOL]
        if call in owners:
            return owners[call]
        owner = tag
        if owner is None and parent_message is not None:
            owner = self._owner[_TEXT].get(parent_message)
        owners[call] = owner
        if parent_message is not None:
            self._owner[_TEXT].setdefault(parent_message, owner)
        return owner

    def _hidden_tool_start(self, event: ag.ToolCallStartEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        opened = self._open[_TOOL]
        visible = opened.get(event.tool_call_id)
        if visible is None:
            owner = self._call_owner(
                event.tool_call_id, event.subagent_run_id, event.parent_message_id
            )
            visible = event.subagent_run_id is None and owner is None
            opened[event.tool_call_id] = visible
        if not visible:
            return ()
        self._visible_calls.add(event.tool_call_id)
        return (event,)

    def _hidden_tool_result(self, event: ag.ToolCallResultEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        if not self._result_owed(event.tool_call_id, event.subagent_run_id):
            return ()
        return (strip_attribution(event),)

    def _result_owed(self, call: str, tag: str | None) -> bool:
        """A result is owed for a call the consumer saw, whoever executed it.

        A call this run never introduced (an earlier run's, before the RUN_STARTED
        reset) has no known owner; an untagged answer to it is the parent's.
        """
        if call in self._visible_calls:
            return True
        return tag is None and call not in self._owner[_TOOL]

    def _hidden_chunk(self, event: BaseEvent) -> Sequence[BaseEvent]:
        assignment = self._lanes.assign(event)
        tag: str | None = event.subagent_run_id  # type: ignore[attr-defined]
        item = assignment.item
        if item is None:
            # Ambiguous or id-less with nothing open: the client rejects it anyway.
            return (event,) if tag is None and not assignment.candidates else ()
        bucket = _CHUNK_BUCKET[type(event)]
        key = (bucket, item.id)
        if assignment.opened or key not in self._chunk_visible:
            if bucket == _TOOL:
                owner = self._call_owner(item.id, tag, item.parent_message_id)
            else:
                owner = self._owner[bucket].setdefault(item.id, tag)
            self._chunk_visible[key] = tag is None and item.lane is None and owner is None
        if not self._chunk_visible[key]:
            return ()
        if bucket == _TOOL:
            self._visible_calls.add(item.id)
        return (fill_chunk(event, item) if not assignment.opened else event,)

    def _hidden_state(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        return (strip_attribution(event),)

    def _hidden_tagged(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return () if event.subagent_run_id is not None else (event,)  # type: ignore[attr-defined]

    def _hidden_tagged_observed(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        return () if event.subagent_run_id is not None else (event,)  # type: ignore[attr-defined]

    def _hidden_activity(self, event: BaseEvent) -> Sequence[BaseEvent]:
        tag: str | None = event.subagent_run_id  # type: ignore[attr-defined]
        owner = self._owner[_ACTIVITY].setdefault(event.message_id, tag)  # type: ignore[attr-defined]
        return (event,) if tag is None and owner is None else ()

    def _hidden_encrypted(self, event: ag.ReasoningEncryptedValueEvent) -> Sequence[BaseEvent]:
        if event.subagent_run_id is not None:
            return ()
        entity = event.entity_id
        if event.subtype == "tool-call":
            visible = self._owner[_TOOL].get(entity) is None
        else:
            visible = (
                self._owner[_TEXT].get(entity) is None
                and self._owner[_REASONING].get(entity) is None
            )
        return (event,) if visible else ()

    def _hidden_messages_snapshot(self, event: ag.MessagesSnapshotEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        messages = self._hidden_messages(event.messages, authoritative=True)
        return (event.model_copy(update={"messages": messages}),)

    def _hidden_messages(self, messages: Sequence[Any], *, authoritative: bool) -> list[Any]:
        """Record ownership from ``messages`` and return the parent's, untagged."""
        for message in messages:
            if isinstance(message, ag.ToolMessage):
                continue
            tag = message.subagent_run_id
            bucket = _ROLE_BUCKET.get(message.role, _TEXT)
            owners = self._owner[bucket]
            if authoritative:
                owners[message.id] = tag
            else:
                owners.setdefault(message.id, tag)
            if isinstance(message, ag.AssistantMessage) and message.tool_calls:
                call_owners = self._owner[_TOOL]
                for call in message.tool_calls:
                    if authoritative:
                        call_owners[call.id] = tag
                    else:
                        call_owners.setdefault(call.id, tag)
        kept: set[int] = set()
        for message in messages:
            if isinstance(message, ag.ToolMessage):
                continue
            bucket = _ROLE_BUCKET.get(message.role, _TEXT)
            if message.subagent_run_id is None and self._owner[bucket].get(message.id) is None:
                if isinstance(message, ag.AssistantMessage) and message.tool_calls:
                    self._visible_calls.update(c.id for c in message.tool_calls)
                kept.add(id(message))
        out: list[Any] = []
        for message in messages:
            if isinstance(message, ag.ToolMessage):
                if self._result_owed(message.tool_call_id, message.subagent_run_id):
                    out.append(message.model_copy(update={"subagent_run_id": None}))
            elif id(message) in kept:
                out.append(message)
        return out

    def _hidden_run_started(self, event: ag.RunStartedEvent) -> Sequence[BaseEvent]:
        self._active.clear()
        self._lanes.reset()
        self._reset_hidden()
        echo = event.input
        if not isinstance(echo, ag.RunAgentInput):
            return (event,)
        messages = self._hidden_messages(echo.messages, authoritative=False)
        if len(messages) == len(echo.messages) and all(
            a is b for a, b in zip(messages, echo.messages, strict=True)
        ):
            return (event,)
        new_input = echo.model_copy(update={"messages": messages})
        return (event.model_copy(update={"input": new_input}),)

    def _hidden_run_finished(self, event: ag.RunFinishedEvent) -> Sequence[BaseEvent]:
        self._check_finish(event)
        self._lanes.observe(event)
        outcome = event.outcome
        if isinstance(outcome, ag.RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
            pending = [i for i in outcome.pending_tool_call_ids if i in self._visible_calls]
            if len(pending) != len(outcome.pending_tool_call_ids):
                new = outcome.model_copy(update={"pending_tool_call_ids": pending or None})
                return (event.model_copy(update={"outcome": new}),)
        elif isinstance(outcome, ag.RunFinishedInterruptOutcome):
            return (strip_attribution(event),)
        return (event,)

    def _hidden_run_error(self, event: ag.RunErrorEvent) -> Sequence[BaseEvent]:
        self._lanes.observe(event)
        return (event,)
