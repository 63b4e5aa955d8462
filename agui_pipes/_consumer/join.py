"""Joining a run mid-way: the events a cold client needs before the live tail.

A client that reloads its page, opens a second tab or wakes up on a phone has
lost what the run has sent so far. Replaying the events after its cursor does
not help it — the replay starts mid-message, which a 1.0 consumer rejects
(``RUN_STARTED`` must come first; content for a message it never saw start).
:class:`RunJoin` folds the run's events so far (as stored: after the chain,
exactly what a client watching from the start received) and states them as a
*head* any 1.0 client accepts from a cold start:

* the run's own ``RUN_STARTED`` (its ids and echoed input, as sent);
* ``MESSAGES_SNAPSHOT`` — the run's input messages (when known) with
  everything the run produced so far folded in, open messages included up to
  their last delta;
* ``STATE_SNAPSHOT`` — the folded state, when the input carried a state or
  the run touched it (otherwise none, so a client keeps the state it has);
* the opening event of every item still open, in the order they opened:
  subagents, steps, reasoning spans, text and reasoning messages, tool calls.
  1.0 lets a START reopen a closed message or tool call (its content then
  appends), so the live tail's deltas land on the snapshot's text. Items a
  chunk opened are reopened by a chunk (without its delta) so the tail's
  id-less chunks find their lane.

A run that ended has its terminal event last (the head is then the whole
run, short). The head ends where the fold ended; the live tail continues from there with
its normal ids. Memory is the fold (the run's messages and state), never the
run's event list.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from .._foundation.limits import Limits
from .._protocol.chunks import ChunkExpander
from .consume import Folder

__all__ = ["RunJoin", "is_terminal"]

_Key = tuple[str, str | None, str]
"""An open item: (kind, owner subagent or None, id or step name)."""

_OPENS: dict[type[BaseEvent], str] = {
    SubagentStartedEvent: "subagent",
    StepStartedEvent: "step",
    ReasoningStartEvent: "reasoning",
    ReasoningMessageStartEvent: "reasoning-message",
    TextMessageStartEvent: "text",
    ToolCallStartEvent: "tool",
}
_CLOSES: dict[type[BaseEvent], str] = {
    SubagentFinishedEvent: "subagent",
    SubagentErrorEvent: "subagent",
    StepFinishedEvent: "step",
    ReasoningEndEvent: "reasoning",
    ReasoningMessageEndEvent: "reasoning-message",
    TextMessageEndEvent: "text",
    ToolCallEndEvent: "tool",
}
_CHUNKS = (TextMessageChunkEvent, ToolCallChunkEvent, ReasoningMessageChunkEvent)
_FOLDED_OPENERS = (TextMessageStartEvent, ReasoningMessageStartEvent, ToolCallStartEvent)
"""Openers whose metadata a consumer merges into the message or tool call they open."""


def is_terminal(event: BaseEvent) -> bool:
    """Whether ``event`` ends a run (``RUN_FINISHED`` or ``RUN_ERROR``)."""
    return event.__class__ is RunFinishedEvent or event.__class__ is RunErrorEvent


def _key(kind: str, event: BaseEvent) -> _Key:
    if kind == "subagent":
        return (kind, None, getattr(event, "subagent_run_id", ""))
    owner = getattr(event, "subagent_run_id", None)
    if kind == "step":
        return (kind, owner, getattr(event, "step_name", ""))
    if kind == "tool":
        # Tool call and message ids are unique per run whatever their owner.
        return (kind, None, getattr(event, "tool_call_id", ""))
    return (kind, None, getattr(event, "message_id", ""))


def _reopener(opener: BaseEvent, by_chunk: bool) -> BaseEvent:
    """The event that reopens an item: its START, or its chunk without the delta.

    Without its ``metadata``: a consumer merges a START's metadata into the
    message or tool call, whose merged metadata the snapshot already holds —
    merging the opener's again would undo what later events changed.
    """
    if not by_chunk:
        if opener.metadata is not None and opener.__class__ in _FOLDED_OPENERS:
            return opener.model_copy(update={"metadata": None})
        return opener
    tag = opener.subagent_run_id  # type: ignore[attr-defined]
    if isinstance(opener, TextMessageStartEvent):
        return TextMessageChunkEvent(
            message_id=opener.message_id, role=opener.role, name=opener.name, subagent_run_id=tag
        )
    if isinstance(opener, ToolCallStartEvent):
        return ToolCallChunkEvent(
            tool_call_id=opener.tool_call_id,
            tool_call_name=opener.tool_call_name,
            parent_message_id=opener.parent_message_id,
            subagent_run_id=tag,
        )
    assert isinstance(opener, ReasoningMessageStartEvent)
    return ReasoningMessageChunkEvent(message_id=opener.message_id, subagent_run_id=tag)


class RunJoin:
    """Fold one run's events (as a client received them) into a join head.

    ``feed(event)`` takes the run's events in order, chunks as sent (they are
    expanded here as a consumer would); ``head()`` is the self-contained
    prefix described in the module doc, valid at any point of the run.

    ``messages`` and ``state`` are the run's input (``RunAgentInput.messages``
    and ``.state``) when the caller knows them — a retried POST carries them —
    so the snapshot holds the conversation a watching client started with.
    Without them the input echoed on ``RUN_STARTED.input`` (if any) is used.
    ``limits`` bounds the folded documents as in :func:`agui_pipes.fold`.

    The events are trusted: they are the log of a run that was verified (or
    repaired) when it was served. Events after the run's terminal are ignored.
    """

    def __init__(
        self,
        *,
        messages: list[dict[str, Any]] | None = None,
        state: Any = None,
        limits: Limits | None = None,
    ) -> None:
        self._state_known = state is not None
        self._folder = Folder({} if state is None else state, messages, limits)
        self._expand = ChunkExpander().expand
        self._started: RunStartedEvent | None = None
        self._open: dict[_Key, tuple[BaseEvent, bool]] = {}
        self._terminal: BaseEvent | None = None

    @property
    def ended(self) -> bool:
        """Whether the run's terminal event was fed."""
        return self._terminal is not None

    def feed(self, event: BaseEvent) -> None:
        """Fold one event of the run."""
        if self._terminal is not None:
            return
        by_chunk = isinstance(event, _CHUNKS)
        for out in self._expand(event):
            self._track(out, by_chunk)
            self._folder.apply(out)

    def _track(self, event: BaseEvent, by_chunk: bool) -> None:
        cls = event.__class__
        kind = _OPENS.get(cls)
        if kind is not None:
            key = _key(kind, event)
            self._open.setdefault(
                key, (event, by_chunk and kind in ("text", "tool", "reasoning-message"))
            )
            return
        kind = _CLOSES.get(cls)
        if kind is not None:
            self._open.pop(_key(kind, event), None)
            if kind == "subagent":
                # A subagent's end closes what it still held open (RUN_ERROR-like).
                owner = getattr(event, "subagent_run_id", None)
                for key in [k for k, (opener, _) in self._open.items() if _owner(opener) == owner]:
                    del self._open[key]
            return
        if cls is RunStartedEvent:
            started: RunStartedEvent = event  # type: ignore[assignment]
            self._started = started
            if started.input is not None and started.input.state is not None:
                self._state_known = True
        elif cls is StateSnapshotEvent or cls is StateDeltaEvent:
            self._state_known = True
        elif is_terminal(event):
            self._terminal = event
            self._open.clear()

    def head(self) -> list[BaseEvent]:
        """The join head: what a cold client needs before the run's next event."""
        if self._started is None:
            return []
        result = self._folder.result_snapshot()
        head: list[BaseEvent] = [
            self._started,
            MessagesSnapshotEvent.model_validate({"messages": result.messages}),
        ]
        if self._state_known:
            head.append(StateSnapshotEvent(snapshot=result.state))
        head.extend(_reopener(opener, by_chunk) for opener, by_chunk in self._open.values())
        if self._terminal is not None:
            head.append(self._terminal)
        return head


def _owner(event: BaseEvent) -> str | None:
    """Whose item ``event`` opened: a subagent's start belongs to its parent subagent."""
    started = event.__class__ is SubagentStartedEvent
    owner: str | None = getattr(event, "parent_subagent_run_id" if started else "subagent_run_id")
    return owner
