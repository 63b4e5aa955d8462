"""Compact: the same conversation in fewer events — for logs, history and replays.

A recorded run holds one event per token. Replaying it (a page reload, a
history endpoint, a resumed stream) needs the messages and the state, not
the token boundaries. This stage, and the function :func:`compact` that runs
it over a whole list, rewrite a stream so that a consumer folds exactly the
same messages and state from far fewer events. It is the counterpart of the
TypeScript client's ``compactEvents``, with three differences that matter:
it streams (holding only what is still open), the state it follows carries
across runs (``compactEvents`` restarts every batch from ``{}``, ag-ui
#1720), and it never moves an event past another item's events.

What is merged
--------------

* **Items** — a text message, a reasoning message, a tool call: its START
  passes at once; its CONTENT / ARGS deltas are held and released as *one*
  delta (joined text, ``metadata`` merged key by key, the first delta's
  ``timestamp`` and tag) right before its END. A delta carrying ``rawEvent``
  is never merged (that payload belongs to one event): it splits the held
  deltas around it, in order. Held deltas are released early, merged so
  far, where a later event could observe them: a MESSAGES_SNAPSHOT (all
  items), a TOOL_CALL_RESULT or ACTIVITY_* naming the message's id, and a
  text and a reasoning message sharing one id (their contents land in one
  message, so their interleaving is kept).
* **Items left open** — when the run ends (RUN_ERROR, or any RUN_* event),
  the item's subagent ends (SUBAGENT_FINISHED / SUBAGENT_ERROR) or the stream
  ends, the held deltas of an item that never closed pass through unchanged,
  one by one: nothing is lost and nothing is invented.
* **State** — a run of consecutive STATE_SNAPSHOT / STATE_DELTA events (held
  deltas between them do not break the run; anything else does, as does a
  change of ``subagentRunId`` or an event with ``rawEvent``) becomes one
  event: a STATE_SNAPSHOT of the resulting state when the run holds a
  snapshot, else one STATE_DELTA carrying the operations of every delta in
  order. Merging deltas is only exact when the state they apply to is
  known (a delta that fails is skipped whole by the client, which a merged
  delta would change), so the stage follows the state: it is known after a
  snapshot or a delta whose first operation replaces the whole document,
  and stays known across runs. Before that — deltas against the state the
  client brought — deltas pass unchanged. A known-state delta that does not
  apply is left out of the merged one (the client skips it too).
* **Chunks** — ``*_CHUNK`` events are expanded first (their meaning depends
  on their lane), so the output never holds a chunk.

Everything else passes unchanged, in order. A run of one state event and an
item with a single delta come out as the very same event objects, which
makes ``compact`` idempotent.

Memory is what is open: the held deltas of open items (``open_items``
counts them), one pending state event, and the followed state document,
bounded by ``limits`` like a consumer's (a snapshot or delta past them
passes unchanged and the state counts as unknown again).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    MessagesSnapshotEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from .._foundation.json_patch import JsonDocument, LimitExceeded, PatchError, clone_json
from .._foundation.limits import Limits
from .._foundation.limits_scope import resolve_limits
from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer
from .._protocol.chunks import ChunkExpander

__all__ = ["Compact", "compact"]
__dir__ = public_dir(__all__)

_TEXT: Final = 0
_REASONING: Final = 1
_TOOL: Final = 2

_CONTENT: Final[dict[type[BaseEvent], int]] = {
    TextMessageContentEvent: _TEXT,
    ReasoningMessageContentEvent: _REASONING,
    ToolCallArgsEvent: _TOOL,
}
_START: Final[dict[type[BaseEvent], int]] = {
    TextMessageStartEvent: _TEXT,
    ReasoningMessageStartEvent: _REASONING,
    ToolCallStartEvent: _TOOL,
}
_END: Final[dict[type[BaseEvent], int]] = {
    TextMessageEndEvent: _TEXT,
    ReasoningMessageEndEvent: _REASONING,
    ToolCallEndEvent: _TOOL,
}
_CHUNKS: Final = frozenset({TextMessageChunkEvent, ToolCallChunkEvent, ReasoningMessageChunkEvent})
_RUN_LEVEL: Final = frozenset({RunStartedEvent, RunFinishedEvent, RunErrorEvent})
_NAMES_A_MESSAGE: Final = frozenset(
    {ToolCallResultEvent, ActivitySnapshotEvent, ActivityDeltaEvent}
)

_Key = tuple[int, str]


def _item_id(event: BaseEvent, kind: int) -> str:
    return event.tool_call_id if kind == _TOOL else event.message_id  # type: ignore[attr-defined, no-any-return]


class _Item:
    """An open item: who opened it (its subagent) and the deltas held since the last release."""

    __slots__ = ("held", "owner")

    def __init__(self, owner: str | None) -> None:
        self.owner = owner
        self.held: list[BaseEvent] = []


class _PendingState:
    """A run of state events not yet emitted (only ever while the state is known)."""

    __slots__ = ("applied_all", "count", "first", "metadata", "ops", "snapshot", "tag")

    def __init__(self, first: BaseEvent) -> None:
        self.first = first
        self.tag: str | None = first.subagent_run_id  # type: ignore[attr-defined]
        self.count = 0
        self.snapshot = False
        self.applied_all = True
        self.ops: list[Any] = []
        self.metadata: dict[str, Any] | None = None

    def add(self, event: BaseEvent) -> None:
        self.count += 1
        if event.metadata is not None:
            if self.metadata is None:
                self.metadata = {}
            self.metadata.update(event.metadata)


def _merge(run: list[BaseEvent]) -> BaseEvent:
    """One delta for a run of deltas of one item (none carries ``rawEvent``)."""
    first = run[0]
    if len(run) == 1:
        return first
    metadata: dict[str, Any] | None = None
    for event in run:
        if event.metadata is not None:
            if metadata is None:
                metadata = {}
            metadata.update(event.metadata)
    joined = "".join([event.delta for event in run])  # type: ignore[attr-defined]
    return first.model_copy(update={"delta": joined, "metadata": metadata})


def _merged(held: list[BaseEvent]) -> list[BaseEvent]:
    """Held deltas as few events as possible: runs merged, ``rawEvent`` carriers kept alone."""
    if not held:
        return []
    out: list[BaseEvent] = []
    run: list[BaseEvent] = []
    for event in held:
        if event.raw_event is None:
            run.append(event)
        else:
            if run:
                out.append(_merge(run))
                run = []
            out.append(event)
    if run:
        out.append(_merge(run))
    return out


class Compact(StreamTransformer):
    """Merge each closed item's deltas into one and each run of state events into one.

    See the module documentation for exactly what is merged. ``limits``
    bounds the state the stage follows (None: the limits in effect).
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = resolve_limits(limits)
        self._items: dict[_Key, _Item] = {}
        self._state: JsonDocument | None = None
        self._pending: _PendingState | None = None
        self._expander = ChunkExpander()

    @property
    def open_items(self) -> int:
        """How many items are open (each holding at most its deltas since its START)."""
        return len(self._items)

    # -- the stream ----------------------------------------------------------

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.__class__ in _CHUNKS or self._expander.is_open:
            out: list[BaseEvent] = []
            for expanded in self._expander.expand(event):
                out.extend(self._one(expanded))
            return out
        return self._one(event)

    def finish(self) -> Sequence[BaseEvent]:
        out = self._flush_state()
        out.extend(self._release(list(self._items)))
        return out

    def _one(self, event: BaseEvent) -> list[BaseEvent]:
        cls = event.__class__
        kind = _CONTENT.get(cls)
        if kind is not None:
            key = (kind, _item_id(event, kind))
            item = self._items.get(key)
            if item is not None:
                if kind != _TOOL:
                    # A text and a reasoning message with one id write one message: keep
                    # their contents' interleaving by releasing the other's held deltas.
                    other = self._items.get((_REASONING if kind == _TEXT else _TEXT, key[1]))
                    if other is not None and other.held:
                        item.held.append(event)
                        return self._take(other)
                item.held.append(event)
                return []
            return self._passing(event)
        if cls is StateDeltaEvent or cls is StateSnapshotEvent:
            return self._state_event(event)
        kind = _END.get(cls)
        if kind is not None:
            item = self._items.pop((kind, _item_id(event, kind)), None)
            out = self._flush_state()
            if item is not None:
                out.extend(_merged(item.held))
            out.append(event)
            return out
        kind = _START.get(cls)
        if kind is not None:
            out = self._flush_state()
            key = (kind, _item_id(event, kind))
            previous = self._items.get(key)
            if previous is not None:  # a START on an open id: invalid, keep what it held
                out.extend(_merged(previous.held))
            self._items[key] = _Item(event.subagent_run_id)  # type: ignore[attr-defined]
            out.append(event)
            return out
        if cls in _RUN_LEVEL:
            out = self._flush_state()
            out.extend(self._release(list(self._items)))
            out.append(event)
            return out
        if cls is MessagesSnapshotEvent:
            out = self._flush_state()
            for item in self._items.values():
                out.extend(_merged(item.held))
                item.held = []
            out.append(event)
            return out
        if cls in _NAMES_A_MESSAGE:
            out = self._flush_state()
            message_id: str = event.message_id  # type: ignore[attr-defined]
            for kind in (_TEXT, _REASONING):
                item = self._items.get((kind, message_id))
                if item is not None and item.held:
                    out.extend(self._take(item))
            out.append(event)
            return out
        if cls is SubagentFinishedEvent or cls is SubagentErrorEvent:
            out = self._flush_state()
            owner = event.subagent_run_id  # type: ignore[attr-defined]
            out.extend(self._release([k for k, i in self._items.items() if i.owner == owner]))
            out.append(event)
            return out
        return self._passing(event)

    def _passing(self, event: BaseEvent) -> list[BaseEvent]:
        out = self._flush_state()
        out.append(event)
        return out

    def _take(self, item: _Item) -> list[BaseEvent]:
        """Release an open item's held deltas, merged (it stays open)."""
        held, item.held = item.held, []
        return _merged(held)

    def _release(self, keys: Iterable[_Key]) -> list[BaseEvent]:
        """Items that end unclosed: their held deltas pass unchanged, and they are forgotten."""
        out: list[BaseEvent] = []
        for key in keys:
            out.extend(self._items.pop(key).held)
        return out

    # -- state ---------------------------------------------------------------

    def _state_event(self, event: BaseEvent) -> list[BaseEvent]:
        pending = self._pending
        out: list[BaseEvent] = []
        if pending is not None and (
            pending.tag != event.subagent_run_id  # type: ignore[attr-defined]
            or event.raw_event is not None
        ):
            out = self._flush_state()
            pending = None
        if event.__class__ is StateSnapshotEvent:
            try:
                if self._state is None:
                    self._state = JsonDocument(event.snapshot, limits=self.limits)
                else:
                    self._state.reset(event.snapshot)
            except LimitExceeded:
                return self._unknown(out, event)
            applied = True
        else:
            operations = event.delta  # type: ignore[attr-defined]
            if self._state is None:
                self._state = _whole_document(operations, self.limits)
                if self._state is None:  # against the client's own state: pass as is
                    out.append(event)
                    return out
                applied = True
            else:
                try:
                    self._state.patch(operations)
                    applied = True
                except LimitExceeded:
                    return self._unknown(out, event)
                except PatchError:
                    applied = False  # the client skips it as well; its state is unchanged
        if event.raw_event is not None:
            out.append(event)
            return out
        if pending is None:
            pending = self._pending = _PendingState(event)
        pending.add(event)
        if event.__class__ is StateSnapshotEvent:
            pending.snapshot = True
            pending.ops = []
        elif not applied:
            pending.applied_all = False
        elif not pending.snapshot:
            pending.ops.extend(event.delta)  # type: ignore[attr-defined]
        return out

    def _unknown(self, out: list[BaseEvent], event: BaseEvent) -> list[BaseEvent]:
        """An event past the limits: pass it, and stop assuming what the client holds."""
        out.extend(self._flush_state())
        self._state = None
        out.append(event)
        return out

    def _flush_state(self) -> list[BaseEvent]:
        pending = self._pending
        if pending is None:
            return []
        self._pending = None
        first = pending.first
        if pending.count == 1 and (pending.snapshot or pending.applied_all):
            return [first]
        fields: dict[str, Any] = {"metadata": pending.metadata}
        if pending.snapshot:
            assert self._state is not None  # a pending run exists only while the state is known
            fields["snapshot"] = clone_json(self._state.value, self.limits)
            if first.__class__ is not StateSnapshotEvent:
                return [
                    StateSnapshotEvent(
                        snapshot=fields["snapshot"],
                        timestamp=first.timestamp,
                        metadata=pending.metadata,
                        subagent_run_id=pending.tag,
                    )
                ]
        else:
            fields["delta"] = pending.ops
        return [first.model_copy(update=fields)]


def _whole_document(operations: Any, limits: Limits) -> JsonDocument | None:
    """The state after ``operations`` when their first one sets the whole document, else None.

    Such a patch does not depend on the state it is applied to, so after it the
    stage knows what the client holds (unless the patch fails, on any state).
    """
    if not operations:
        return None
    first = operations[0]
    if first.op not in ("add", "replace") or first.path != "":
        return None
    try:
        document = JsonDocument({}, limits=limits)
        document.patch(operations)
    except PatchError:
        return None
    return document


def compact(events: Iterable[BaseEvent], *, limits: Limits | None = None) -> list[BaseEvent]:
    """The whole of ``events`` through a fresh :class:`Compact` (see its module doc)."""
    stage = Compact(limits)
    out: list[BaseEvent] = []
    for event in events:
        out.extend(stage.transform(event))
    out.extend(stage.finish())
    return out
