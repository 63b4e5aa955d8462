"""FilterToolCalls: remove tool calls by name so that nothing of them reaches the client.

A tool is denied because the client must not learn about it (an internal
lookup, a debug hook), so dropping its TOOL_CALL_START is not enough. The
reference implementations leak a blocked call through MESSAGES_SNAPSHOT, the
RUN_STARTED input echo, ``pendingToolCallIds``, SUBAGENT_STARTED
``parentToolCallId`` and id-less chunk continuations. This stage closes all of
those: a blocked call leaves no trace anywhere in the stream —

* its START / ARGS / END / RESULT, its chunks (id-less continuations too,
  routed with the client's lane model) and its tool-call encrypted values —
  a kept chunk whose lane the removed events would have closed gets the ids
  of its item, so it continues the same message downstream (``LaneMirror``);
* its ``toolCalls`` entry in assistant messages and its answering ``tool``
  message, in MESSAGES_SNAPSHOT and in the RUN_STARTED input echo (whose
  ``tools`` declarations of blocked names go too); an assistant message left
  with nothing but the blocked calls is dropped, as the client would never
  have created it;
* its id in a success outcome's ``pendingToolCallIds``;
* a subagent it spawned (``parentToolCallId``), nested subagents of that one,
  and everything attributed to them, messages in snapshots included;
* its result message: an encrypted value (``subtype: message``) naming it —
  pydantic-ai sends one after every retried or failed tool;
* the assistant message it leaves empty (START / END and nothing kept), also
  when a content-less ``TEXT_MESSAGE_CHUNK`` opened it;
* its id and name in the free text of a RUN_ERROR passing the stage (written
  upstream by a Verify with ``on_violation="run_error"`` or the run driver);
* with ``state_messages``, its entries in message lists kept in the state
  (``_stagekit.state_messages``), snapshots and deltas;
* its traces in activity content (``_stagekit.activity_scrub``): an object in an
  ACTIVITY_SNAPSHOT's content that names a blocked tool or a removed call's id
  (Microsoft Agent Framework's workflow ``executor`` activity carries the
  executor's ``function_call`` / ``function_result`` contents) is taken out, and
  so is a string that is a removed call's id. An ACTIVITY_DELTA whose operations
  would write such material is dropped whole, and after a snapshot that lost
  something the activity's deltas are dropped until its next snapshot (their
  positions no longer match what the client holds).

Interrupts are the one thing not removed: the next run must answer every
interrupt of an interrupted run, so an interrupt tied to a blocked call or
subagent is kept with that ``toolCallId`` / ``subagentRunId`` taken off.

Blocked ids are per run: the set is cleared at every RUN_STARTED (the TS
middleware once shared it across runs).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ag_ui.core as ag
from ag_ui.core import BaseEvent

from .._lazy import public_dir
from .._pipeline.transformer import Condition, StreamTransformer, Transform
from .._stagekit.activity_scrub import ActivityScrub
from .._stagekit.call_traces import MODEL_SHAPE, scrub_messages
from .._stagekit.chunk_lanes import (
    CHUNK_CLASSES,
    CLOSING_CLASSES,
    ChunkAssignment,
    ChunkItem,
    ChunkLanes,
)
from .._stagekit.lane_mirror import LaneMirror
from .._stagekit.state_messages import StateMessages, parse_pointer
from ..events import ATTRIBUTABLE_TYPES, EVENT_CLASS_BY_TYPE

__all__ = ["FilterToolCalls"]
__dir__ = public_dir(__all__)


_ENTITY: dict[type[BaseEvent], tuple[str, str]] = {
    ag.TextMessageStartEvent: ("text", "message_id"),
    ag.TextMessageContentEvent: ("text", "message_id"),
    ag.TextMessageEndEvent: ("text", "message_id"),
    ag.ReasoningStartEvent: ("span", "message_id"),
    ag.ReasoningEndEvent: ("span", "message_id"),
    ag.ReasoningMessageStartEvent: ("reasoning", "message_id"),
    ag.ReasoningMessageContentEvent: ("reasoning", "message_id"),
    ag.ReasoningMessageEndEvent: ("reasoning", "message_id"),
    ag.ActivitySnapshotEvent: ("activity", "message_id"),
    ag.ActivityDeltaEvent: ("activity", "message_id"),
}
"""Entities a blocked subagent may open, whose untagged continuations are its own too."""


def _pass(event: BaseEvent) -> Sequence[BaseEvent]:
    return (event,)


_Handler = Callable[[Any], Sequence[BaseEvent]]
_ATTRIBUTABLE: frozenset[type[BaseEvent]] = frozenset(
    EVENT_CLASS_BY_TYPE[t] for t in ATTRIBUTABLE_TYPES
)


def _names(value: Iterable[str] | str | None, option: str) -> list[str] | None:
    if value is None:
        return None
    names = [value] if isinstance(value, str) else list(value)
    if not names:
        raise ValueError(f"FilterToolCalls({option}=[]): give at least one tool name or pattern")
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"FilterToolCalls({option}=...): entry #{i + 1} is {name!r}; tool names must "
                "be non-empty strings (glob patterns such as 'internal_*' are allowed)"
            )
    return names


class FilterToolCalls(StreamTransformer):
    """Remove tool calls by name, leaving no trace of a removed call anywhere in the stream.

    Build with ``FilterToolCalls.deny(["internal_*"])`` or
    ``FilterToolCalls.allow(["search", "weather"])`` (exactly one of the two);
    names are ``fnmatch`` glob patterns, matched case-sensitively.
    """

    def __init__(
        self,
        allow: Iterable[str] | str | None = None,
        deny: Iterable[str] | str | None = None,
        state_messages: Iterable[str] | str | None = None,
    ) -> None:
        allowed = _names(allow, "allow")
        denied = _names(deny, "deny")
        if (allowed is None) == (denied is None):
            raise ValueError(
                "FilterToolCalls needs exactly one of allow=[...] or deny=[...] "
                f"({'both were' if allowed is not None else 'neither was'} given), e.g. "
                "FilterToolCalls.deny(['internal_*'])"
            )
        patterns = allowed if allowed is not None else denied
        assert patterns is not None
        self._allow_mode = allowed is not None
        exact = {p for p in patterns if not any(c in p for c in "*?[")}
        globs = [p for p in patterns if p not in exact]
        self._exact = frozenset(exact)
        self._glob = re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None
        self._decisions: dict[str, bool] = {}
        self._base: dict[type[BaseEvent], _Handler] = {
            ag.RunStartedEvent: self._run_started,
            ag.RunFinishedEvent: self._run_finished,
            ag.RunErrorEvent: self._run_error,
            ag.MessagesSnapshotEvent: self._messages_snapshot,
            ag.TextMessageStartEvent: self._text_start,
            ag.ToolCallStartEvent: self._tool_start,
            ag.ToolCallArgsEvent: self._by_call_id,
            ag.ToolCallEndEvent: self._by_call_id,
            ag.ToolCallResultEvent: self._result,
            ag.ToolCallChunkEvent: self._chunk,
            ag.ReasoningEncryptedValueEvent: self._encrypted,
            ag.SubagentStartedEvent: self._subagent_started,
            ag.SubagentFinishedEvent: self._subagent_end,
            ag.SubagentErrorEvent: self._subagent_end,
            ag.ActivitySnapshotEvent: self._activity_snapshot,
            ag.ActivityDeltaEvent: self._activity_delta,
        }
        self._mirror = LaneMirror()
        self._lanes = self._mirror.source
        self._blocked: set[str] = set()
        self._blocked_subagents: set[str] = set()
        self._blocked_entities: set[tuple[str, str]] = set()
        self._hidden_messages: set[str] = set()
        """Ids of messages removed whole: a blocked call's result, an emptied assistant message."""
        self._stale_activities: set[str] = set()
        """Activities whose last snapshot lost something: their deltas wait for the next one."""
        self._held: dict[str, _Held] = {}
        pointers = _pointers(state_messages)
        self._state: StateMessages | None = None
        if pointers:
            self._state = StateMessages(
                pointers, self._blocked, self.blocks, self._blocked_subagents
            )
            self._base[ag.StateSnapshotEvent] = self._state.snapshot
            self._base[ag.StateDeltaEvent] = self._state.delta
        self._build_tables()
        self._table = self._tables[0]

    @classmethod
    def allow(
        cls, names: Iterable[str] | str, *, state_messages: Iterable[str] | str | None = None
    ) -> FilterToolCalls:
        """Only calls of these tools pass (glob patterns allowed)."""
        return cls(allow=names, state_messages=state_messages)

    @classmethod
    def deny(
        cls, names: Iterable[str] | str, *, state_messages: Iterable[str] | str | None = None
    ) -> FilterToolCalls:
        """Calls of these tools are removed; every other call passes (glob patterns allowed).

        ``state_messages`` lists JSON pointers to message lists inside the state
        (``["/messages"]``) that are scrubbed of the removed calls as well.
        """
        return cls(deny=names, state_messages=state_messages)

    # -- decisions ------------------------------------------------------------

    def blocks(self, tool_name: str) -> bool:
        """True when calls of ``tool_name`` are removed."""
        decision = self._decisions.get(tool_name)
        if decision is None:
            matched = tool_name in self._exact or (
                self._glob is not None and self._glob.match(tool_name) is not None
            )
            decision = matched is not self._allow_mode
            if len(self._decisions) < 4096:
                self._decisions[tool_name] = decision
        return decision

    # -- dispatch -------------------------------------------------------------

    def _build_tables(self) -> None:
        """Precompute the handler tables for the four tracking situations.

        The common case (no chunk stream open, no blocked subagent) only looks at
        tool events and run-level events; every other event costs one dict miss.
        While a chunk stream is open, closing events also update the lanes; while
        a subagent is blocked, every attributable event is checked for its tag.
        """
        base = dict(self._base)
        tagged = dict(base)
        for cls in _ATTRIBUTABLE:
            tagged.setdefault(cls, self._by_tag)
        lanes = dict(base)
        both = dict(tagged)
        for cls in CLOSING_CLASSES:
            lanes[cls] = self._observing(base.get(cls, _pass))
            both[cls] = self._observing(tagged.get(cls, _pass))
        # Text and reasoning chunks are always routed: opening one replaces (closes)
        # a lane's tool item, and an id-less one must be attributed to the right lane
        # once a subagent is blocked (an untracked parent item would send it elsewhere),
        # and keep resolving there once a removed call no longer closes its lane.
        for cls in (ag.TextMessageChunkEvent, ag.ReasoningMessageChunkEvent):
            base[cls] = lanes[cls] = self._routing
            tagged[cls] = both[cls] = self._routing_owned
        self._tables = (base, lanes, tagged, both)

    def _observing(self, handler: _Handler) -> _Handler:
        """A closing event: it closes lanes of the input, and of the output when kept.

        While messages are held, ``_while_holding`` reports a kept event to the output
        lanes itself: after the held events it releases before it, or not at all when
        it holds the event too (a held message's END).
        """
        lanes = self._lanes
        mirror = self._mirror

        def observe(event: BaseEvent) -> Sequence[BaseEvent]:
            lanes.observe(event)
            self._select_table()
            out = handler(event)
            if out and not self._held:
                mirror.emitted(event)
                self._select_table()
            return out

        return observe

    def _routing(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return self._emit_chunk(event, self._lanes.assign(event))

    def _emit_chunk(self, event: BaseEvent, assignment: ChunkAssignment) -> Sequence[BaseEvent]:
        """A kept chunk, with the ids it omits filled in when removed events moved its lane.

        A text chunk that only opens an assistant message is that message's START
        (the chunk carries no content): it is held like one (``_text_start``), and a
        content-less continuation of it waits with it. Any other kept chunk releases
        what is held first, through the output lanes, so the chunk's own ids are
        judged against the lanes the client will really have.
        """
        item = assignment.item
        if item is not None and type(event) is ag.TextMessageChunkEvent:
            held_back = self._hold_text_chunk(event, assignment, item)
            if held_back is not None:
                return held_back
        if self._held and item is not None and not assignment.opened and _contentless(event):
            # A continuation carrying nothing expands to no event: it releases nothing.
            out = self._mirror.kept_assigned(event, assignment)
            self._select_table()
            return (out,)
        released: Sequence[BaseEvent] = ()
        if self._held:
            if type(event) is ag.ToolCallChunkEvent and assignment.opened and item is not None:
                parent = item.parent_message_id
                held = self._held.get(parent) if parent is not None else None
                if held is not None:
                    held.lost_call = False  # it keeps a call: never empty
            released = self._settle()
        out = self._mirror.kept_assigned(event, assignment)
        self._select_table()
        return (*released, out) if released else (out,)

    def _hold_text_chunk(
        self, event: BaseEvent, assignment: ChunkAssignment, item: ChunkItem
    ) -> Sequence[BaseEvent] | None:
        """What a text chunk does to the held messages, or None when it is kept as any chunk.

        An assistant message's opening chunk is held (or replaces the held message of
        its id); a content-less continuation of a held message waits with it.
        """
        if assignment.opened and item.role == "assistant":
            if item.id in self._held:
                # The id opens again (the START again, in expanded terms): the new
                # message replaces the held one, as a second START would.
                self._held[item.id] = _Held(event, assignment)
                if _opens_only(event):
                    self._select_table()
                    return ()
                return self._settle()
            if _opens_only(event) and len(self._held) < _MAX_HELD:
                self._held[item.id] = _Held(event, assignment)
                self._select_table()
                return ()
        elif self._held and _contentless(event):
            held = self._held.get(item.id)
            if held is not None and held.item is item:
                # It folds to nothing; past the bound it is dropped rather than kept.
                if len(held.events) < _MAX_HELD:
                    held.events.append((event, assignment))
                return ()
        return None

    route_key: int = 0
    """Which of the four handler tables is in use, plus 4 while an assistant message
    start is held (every event then comes to ``_while_holding``); the chain
    re-plans when it changes."""

    def _select_table(self) -> None:
        lanes_open = self._lanes.open or self._mirror.output.open
        self._use_table((1 if lanes_open else 0) + (2 if self._blocked_subagents else 0))

    def _use_table(self, index: int) -> None:
        self._table = self._tables[index]
        key = index + 4 if self._held else index
        if key != self.route_key:
            self.route_key = key
            self.reroute()

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        # The handler itself, or None: events the current table ignores skip the stage.
        if self._held:
            return self._while_holding
        return self._table.get(event_class)

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if self._held:
            return self._while_holding(event)
        handler = self._table.get(type(event))
        if handler is None:
            return (event,)
        return handler(event)

    def finish(self) -> Sequence[BaseEvent]:
        # The upstream ended with messages held: settle them as a kept event would.
        return self._settle()

    def passes(
        self, event_class: type[BaseEvent], fields: frozenset[str]
    ) -> tuple[Condition, ...] | None:
        # An event the current table sends to ``_by_call_id`` (the deltas of
        # calls, outside chunk streams) passes unless its call or its tagging
        # subagent is blocked. Nothing passes unseen while a message is held.
        if self._held:
            return None
        handler = self._table.get(event_class)
        if getattr(handler, "__func__", None) is not FilterToolCalls._by_call_id:
            return None
        if "subagent_run_id" not in fields:
            return (Condition.not_member("tool_call_id", self._blocked),)
        return (
            Condition.not_member("tool_call_id", self._blocked),
            Condition.not_member("subagent_run_id", self._blocked_subagents),
        )

    # -- handlers -------------------------------------------------------------

    def _reset(self) -> None:
        self._stale_activities.clear()
        self._blocked.clear()
        self._blocked_subagents.clear()
        self._blocked_entities.clear()
        self._hidden_messages.clear()
        self._held.clear()
        self._mirror.reset()
        self._use_table(0)

    # -- assistant messages emptied by the filter ------------------------------

    def _text_start(self, event: ag.TextMessageStartEvent) -> Sequence[BaseEvent]:
        """Hold an assistant message's start until something shows it is not left empty.

        A message whose only contents were blocked calls would reach the client as
        an empty assistant message. So its START (and END) wait while only blocked
        events follow; the first event that is kept decides: an allowed call or
        content of the message — or a message that lost no call — releases them
        first; a message that ended having lost a call, with nothing kept in it,
        is removed. State events pass while a start is held (an agent that
        updates its state between a removed call and the message's end must not
        bring the empty message back), and so do the ends of other messages and
        calls (``_PASS_WHILE_HOLDING``): they add nothing to a message, so only the
        held START moves, after them; no other kept event is ever reordered.
        """
        if self._blocked_subagents:
            kept = self._by_tag(event)
            if not kept:
                return kept
        if event.role != "assistant" or len(self._held) >= _MAX_HELD:
            return (event,)
        self._held[event.message_id] = _Held(event)
        self._select_table()
        return ()

    def _while_holding(self, event: BaseEvent) -> Sequence[BaseEvent]:
        cls = type(event)
        if cls is ag.RunStartedEvent:
            return (*self._settle(), *self._run_started(event))  # type: ignore[arg-type]
        if cls in CHUNK_CLASSES:
            return self._chunk_while_holding(event)
        handler = self._table.get(cls)
        out = (event,) if handler is None else handler(event)
        if cls is ag.TextMessageEndEvent:
            held = self._held.get(event.message_id)  # type: ignore[attr-defined]
            if held is not None and held.item is None and not held.ended:
                held.events.extend((e, None) for e in out)
                held.ended = True
                return ()
        elif cls is ag.ToolCallStartEvent:
            parent = event.parent_message_id  # type: ignore[attr-defined]
            held = self._held.get(parent) if parent is not None else None
            if held is not None and not out:
                held.lost_call = True
                return ()
            if held is not None:
                held.lost_call = False  # it keeps a call: never empty
        if not out:
            return out
        if cls in _PASS_WHILE_HOLDING:
            self._mirror.emitted(event)
            self._select_table()
            return out
        settled = self._settle()
        self._mirror.emitted(event)  # after what it released: the order the client sees
        self._select_table()
        if cls is ag.ReasoningEncryptedValueEvent:
            out = self._encrypted(event)  # type: ignore[arg-type]  # may name a removed message
        return (*settled, *out)

    def _chunk_while_holding(self, event: BaseEvent) -> Sequence[BaseEvent]:
        """A chunk while messages are held: the handler holds, releases or drops it.

        What it adds: a removed call a tool chunk opens in a held message is a call
        that message lost (as a removed TOOL_CALL_START parented on it is).
        """
        handler = self._table[type(event)]  # every table routes the chunk classes
        if type(event) is not ag.ToolCallChunkEvent:
            return handler(event)
        assignment = self._lanes.peek(event)
        out = handler(event)
        item = assignment.item
        if not out and assignment.opened and item is not None:
            parent = item.parent_message_id
            held = self._held.get(parent) if parent is not None else None
            if held is not None:
                held.lost_call = True
        return out

    def _settle(self) -> Sequence[BaseEvent]:
        """Release every held message; those that ended with only blocked calls go.

        A message a chunk opened ended when its lane no longer holds it (another
        item replaced it, or an event closed the lane). Released after that, the
        chunk would open it again downstream, where nothing closes it (the same id
        opened later would continue it), so it goes out as what the expanded
        stream has: its START and END. What is released goes through the output
        lanes in order, so later chunks are judged against what the client really
        has open.
        """
        if not self._held:
            return ()
        out: list[BaseEvent] = []
        source = self._lanes.open
        mirror = self._mirror
        for message_id, held in self._held.items():
            item = held.item
            ended = held.ended or (item is not None and source.get(item.lane) is not item)
            if held.lost_call and ended:
                self._hidden_messages.add(message_id)
                continue
            if item is not None and ended and not _holds_id(mirror.output, item):
                for event in _start_and_end(held.events[0][0], item):
                    mirror.emitted(event)
                    out.append(event)
                continue
            for event, assignment in held.events:
                if assignment is None:
                    mirror.emitted(event)
                    out.append(event)
                else:
                    out.append(mirror.kept_assigned(event, assignment))
        self._held.clear()
        self._select_table()
        return out

    def _subagent_blocked(self, event: BaseEvent) -> bool:
        tag = event.subagent_run_id  # type: ignore[attr-defined]
        return tag is not None and tag in self._blocked_subagents

    def _by_tag(self, event: BaseEvent) -> Sequence[BaseEvent]:
        """While a subagent is blocked: drop its events and untagged continuations of them.

        Ownership is first-writer-wins, so an untagged CONTENT / END of a message a
        blocked subagent opened is that subagent's too.
        """
        ref = _ENTITY.get(type(event))
        if self._subagent_blocked(event):
            if ref is not None:
                self._blocked_entities.add((ref[0], getattr(event, ref[1])))
            return ()
        if ref is not None and (ref[0], getattr(event, ref[1])) in self._blocked_entities:
            return ()
        return (event,)

    def _routing_owned(self, event: BaseEvent) -> Sequence[BaseEvent]:
        """A text / reasoning chunk while a subagent is blocked: judged by its item's owner."""
        assignment = self._lanes.assign(event)
        self._select_table()
        item = assignment.item
        bucket = "text" if type(event) is ag.TextMessageChunkEvent else "reasoning"
        if self._subagent_blocked(event):
            if item is not None:
                self._blocked_entities.add((bucket, item.id))
            return ()
        if item is not None and (
            item.lane in self._blocked_subagents or (bucket, item.id) in self._blocked_entities
        ):
            self._blocked_entities.add((bucket, item.id))
            return ()
        return self._emit_chunk(event, assignment)

    def _in_blocked_message(self, parent_message_id: str | None) -> bool:
        return parent_message_id is not None and ("text", parent_message_id) in (
            self._blocked_entities
        )

    def _tool_start(self, event: ag.ToolCallStartEvent) -> Sequence[BaseEvent]:
        if (
            self._subagent_blocked(event)
            or self.blocks(event.tool_call_name)
            or self._in_blocked_message(event.parent_message_id)
        ):
            self._blocked.add(event.tool_call_id)
            return ()
        self._blocked.discard(event.tool_call_id)
        return (event,)

    def _result(self, event: ag.ToolCallResultEvent) -> Sequence[BaseEvent]:
        if event.tool_call_id in self._blocked or self._subagent_blocked(event):
            # Its message id is the tool message's: an encrypted value may name it.
            self._hidden_messages.add(event.message_id)
            return ()
        return (event,)

    def _by_call_id(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.tool_call_id in self._blocked or self._subagent_blocked(event):  # type: ignore[attr-defined]
            return ()
        return (event,)

    def _chunk(self, event: ag.ToolCallChunkEvent) -> Sequence[BaseEvent]:
        assignment = self._lanes.assign(event)
        self._select_table()
        item = assignment.item
        if self._subagent_blocked(event) or (
            item is not None
            and (
                item.lane in self._blocked_subagents
                or self._in_blocked_message(item.parent_message_id)
            )
        ):
            if item is not None:
                self._blocked.add(item.id)
            return ()
        if assignment.candidates:
            # Ambiguous on the client too (it will reject the stream); never let
            # the arguments of a blocked call out on a guess.
            if any(c.id in self._blocked for c in assignment.candidates):
                return ()
            return self._emit_chunk(event, assignment)
        if item is None:
            blocked = event.tool_call_id is not None and event.tool_call_id in self._blocked
            return () if blocked else self._emit_chunk(event, assignment)
        if assignment.opened:
            name = item.name
            if name is not None and self.blocks(name):
                self._blocked.add(item.id)
            elif name is not None:
                self._blocked.discard(item.id)
        return () if item.id in self._blocked else self._emit_chunk(event, assignment)

    def _encrypted(self, event: ag.ReasoningEncryptedValueEvent) -> Sequence[BaseEvent]:
        if self._subagent_blocked(event):
            return ()
        entity = event.entity_id
        if event.subtype == "tool-call":
            if entity in self._blocked:
                return ()
        elif (
            entity in self._hidden_messages
            or ("text", entity) in self._blocked_entities
            or ("reasoning", entity) in self._blocked_entities
        ):
            return ()
        return (event,)

    def _subagent_started(self, event: ag.SubagentStartedEvent) -> Sequence[BaseEvent]:
        parent_call = event.parent_tool_call_id
        parent_sub = event.parent_subagent_run_id
        if (parent_call is not None and parent_call in self._blocked) or (
            parent_sub is not None and parent_sub in self._blocked_subagents
        ):
            self._blocked_subagents.add(event.subagent_run_id)
            self._select_table()
            return ()
        return (event,)

    def _subagent_end(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.subagent_run_id in self._blocked_subagents:  # type: ignore[attr-defined]
            return ()
        return (event,)

    # -- run-level events -----------------------------------------------------

    def _run_started(self, event: ag.RunStartedEvent) -> Sequence[BaseEvent]:
        self._reset()
        echo = event.input
        if not isinstance(echo, ag.RunAgentInput):
            return (event,)
        update: dict[str, Any] = {}
        if self._state is not None and echo.state is not None:
            state = self._state.scrub(echo.state)
            if state is not echo.state:
                update["state"] = state
        messages = self._filter_messages(echo.messages)
        if messages is not None:
            update["messages"] = messages
        if echo.tools:
            tools = [t for t in echo.tools if not self.blocks(t.name)]
            if len(tools) != len(echo.tools):
                update["tools"] = tools
        if not update:
            return (event,)
        return (event.model_copy(update={"input": echo.model_copy(update=update)}),)

    def _run_finished(self, event: ag.RunFinishedEvent) -> Sequence[BaseEvent]:
        outcome = event.outcome
        if isinstance(outcome, ag.RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
            pending = [i for i in outcome.pending_tool_call_ids if i not in self._blocked]
            if len(pending) != len(outcome.pending_tool_call_ids):
                new = outcome.model_copy(update={"pending_tool_call_ids": pending or None})
                return (event.model_copy(update={"outcome": new}),)
        elif isinstance(outcome, ag.RunFinishedInterruptOutcome):
            interrupts = []
            changed = False
            for interrupt in outcome.interrupts:
                update: dict[str, Any] = {}
                if interrupt.tool_call_id is not None and interrupt.tool_call_id in self._blocked:
                    update["tool_call_id"] = None
                tag = interrupt.subagent_run_id
                if tag is not None and tag in self._blocked_subagents:
                    update["subagent_run_id"] = None
                if update:
                    changed = True
                    interrupt = interrupt.model_copy(update=update)
                interrupts.append(interrupt)
            if changed:
                new_outcome = outcome.model_copy(update={"interrupts": interrupts})
                return (event.model_copy(update={"outcome": new_outcome}),)
        return (event,)

    def _run_error(self, event: ag.RunErrorEvent) -> Sequence[BaseEvent]:
        """Take what this stage hides out of a RUN_ERROR's free text.

        A RUN_ERROR written upstream of this stage (a ``Verify(on_violation=
        "run_error")`` before it, the run driver's error for a failure) may quote
        a blocked call's id or name; every id and name this stage removed in the
        run is replaced by ``[hidden]``.
        """
        secrets = self._secrets_in(event.message)
        if not secrets:
            return (event,)
        pattern = "|".join(re.escape(s) for s in sorted(secrets, key=len, reverse=True))
        message = re.sub(rf"(?<![\w-])(?:{pattern})(?![\w-])", "[hidden]", event.message)
        return (event.model_copy(update={"message": message}),)

    def _secrets_in(self, text: str) -> list[str]:
        names = [name for name, blocked in self._decisions.items() if blocked]
        return [
            secret
            for group in (self._blocked, self._blocked_subagents, self._hidden_messages, names)
            for secret in group
            if secret and secret in text
        ]

    def _activity_snapshot(self, event: ag.ActivitySnapshotEvent) -> Sequence[BaseEvent]:
        if self._blocked_subagents and not self._by_tag(event):
            return ()
        scrub = ActivityScrub(self.blocks, self._blocked)
        content = scrub.scrubbed(event.content)
        if not scrub.changed:
            self._stale_activities.discard(event.message_id)
            return (event,)
        self._stale_activities.add(event.message_id)
        return (event.model_copy(update={"content": {} if content is None else content}),)

    def _activity_delta(self, event: ag.ActivityDeltaEvent) -> Sequence[BaseEvent]:
        if self._blocked_subagents and not self._by_tag(event):
            return ()
        if event.message_id in self._stale_activities:
            return ()
        ops = [op.model_dump(by_alias=True, exclude_none=True) for op in event.patch]
        scrub = ActivityScrub(self.blocks, self._blocked)
        scrub.scrubbed([op.get("value") for op in ops])
        if scrub.changed or any(
            secret in f"{op.get('path', '')} {op.get('from', '')}"
            for op in ops
            for secret in self._blocked
        ):
            # Half a patch would leave the client's document neither old nor new:
            # the delta goes whole, and the activity waits for its next snapshot.
            self._stale_activities.add(event.message_id)
            return ()
        return (event,)

    def _messages_snapshot(self, event: ag.MessagesSnapshotEvent) -> Sequence[BaseEvent]:
        messages = self._filter_messages(event.messages)
        if messages is None:
            return (event,)
        return (event.model_copy(update={"messages": messages}),)

    def _filter_messages(self, messages: Sequence[Any]) -> list[Any] | None:
        """The messages without any trace of a blocked call, or None when nothing changed.

        Ids of calls blocked by name here join the run's blocked set, so a later
        TOOL_CALL_RESULT or chunk for them is dropped too; ids of messages removed
        whole join the hidden messages (an encrypted value may name them).
        """
        out = scrub_messages(
            messages, MODEL_SHAPE, self._blocked, self.blocks, self._blocked_subagents
        )
        if out is not None and len(out) != len(messages):
            kept = {id(m) for m in out}
            self._hidden_messages.update(
                m.id for m in messages if id(m) not in kept and m.id is not None
            )
        return out


_PASS_WHILE_HOLDING: frozenset[type[BaseEvent]] = frozenset(
    {
        ag.StateSnapshotEvent,
        ag.StateDeltaEvent,
        ag.TextMessageEndEvent,
        ag.ReasoningMessageEndEvent,
        ag.ToolCallEndEvent,
    }
)
"""Kept events that go out past a held assistant START: they add nothing to a message.

State updates name no message; the end of *another* message or call (a held
message's own END is held with it) only closes what was opened before. So
none of them shows that a held message is not empty. The ends matter for chunk
streams too: a chunk stream ends its items implicitly (a closing event, another
item), so on the expanded stream such an END may stand anywhere; were it to
release held messages, whether an emptied message stays would depend on lane
order instead of on what the message holds.
"""

_MAX_HELD = 64
"""Assistant messages held at once (by their START or opening chunk), and events held per
message; beyond that a start passes at once (bounded memory)."""


def _start_and_end(chunk: Any, item: ChunkItem) -> tuple[BaseEvent, BaseEvent]:
    """The explicit START and END of a message an opening text chunk began (no content)."""
    tag = chunk.subagent_run_id
    start = ag.TextMessageStartEvent(
        message_id=item.id,
        role="assistant",  # only assistant messages are held
        name=chunk.name,
        subagent_run_id=tag,
        metadata=chunk.metadata,
        timestamp=chunk.timestamp,
    )
    return start, ag.TextMessageEndEvent(message_id=item.id, subagent_run_id=tag)


def _holds_id(lanes: ChunkLanes, item: ChunkItem) -> bool:
    """Whether ``lanes`` hold an item of ``item``'s kind and id (the id reused, still open).

    A chunk with that id continues it there, as the lane mirror arranges for
    any kept chunk; an explicit START would open the message a second time.
    """
    return any(i.kind is item.kind and i.id == item.id for i in lanes.open.values())


def _opens_only(chunk: BaseEvent) -> bool:
    """Whether an opening text chunk is just its message's START (no delta, no raw event)."""
    return chunk.delta is None and chunk.raw_event is None  # type: ignore[attr-defined]


def _contentless(chunk: BaseEvent) -> bool:
    """Whether a continuing text chunk folds to nothing (no delta, raw event or metadata)."""
    return (
        chunk.delta is None  # type: ignore[attr-defined]
        and chunk.raw_event is None
        and chunk.metadata is None
    )


class _Held:
    """A held assistant message and whether a blocked call was in it.

    ``events`` are its START (and END), or the chunk that opened it (and the
    content-less continuations that followed), each with its lane assignment
    in the input; ``item`` is that chunk's item (``None`` for a START).
    """

    __slots__ = ("ended", "events", "item", "lost_call")

    def __init__(self, start: BaseEvent, assignment: ChunkAssignment | None = None) -> None:
        self.events: list[tuple[BaseEvent, ChunkAssignment | None]] = [(start, assignment)]
        self.item: ChunkItem | None = None if assignment is None else assignment.item
        self.ended = False
        self.lost_call = False


def _pointers(value: Iterable[str] | str | None) -> list[tuple[str, ...]]:
    if value is None:
        return []
    pointers = [value] if isinstance(value, str) else list(value)
    if not pointers:
        raise ValueError(
            "FilterToolCalls(state_messages=[]): give at least one JSON pointer such as "
            "'/messages', or leave the option out"
        )
    return [parse_pointer(p) for p in pointers]
