"""The simulator behind ``agui_pipes.testing.strategies``.

A valid AG-UI stream is the interleaving of many small lifecycles (a text
message, a tool call, a step around some work, a subagent scope, ...). The
generator models each as an *actor* that knows its next event, and a run is
produced by repeatedly drawing which ready actor moves next. Shrinking the
choice towards the first ready actor turns any stream into a sequential one, so
failing examples shrink to readable shapes.

The hard part is the chunk shorthand (PROTOCOL.md §5). A ``*_CHUNK`` item
lives in a *lane* (the parent, or one subagent id) until something closes the
lane: another chunk opener in that lane, any explicit message / tool / step /
state / custom / reasoning event whose tag names that lane, a run-level event
(RUN_*, MESSAGES_SNAPSHOT), or the lane's SUBAGENT_FINISHED/ERROR. The
simulator therefore keeps

* ``lanes`` — exactly what a chunk expander holds (lane -> kind and id of the
  pending item, including items whose actor has finished but which nothing has
  closed yet), used to pick only *unambiguous* id-less continuations;
* ``held`` — lanes whose chunk item is still being written; while a lane is
  held, no other actor may emit an event that would close it.

Ownership follows first-writer-wins: every opener carries its owner's tag,
continuations carry it or nothing, and a tool call's parent message always has
the same owner as the call.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    DeveloperMessage,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessage,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    SystemMessage,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import (
    TextPart as _TextPart,
)

from ._choices import Choices
from ._patches import patch_for

Lane = str | None
"""A chunk lane: ``None`` is the parent agent, otherwise a subagent run id."""

DEFAULT_TOOL_NAMES: tuple[str, ...] = ("search", "get_weather", "internal_debug", "write_file")


@dataclass(frozen=True)
class StreamConfig:
    """Every knob of the generator (see ``strategies.streams`` for the meaning)."""

    min_runs: int = 1
    max_runs: int = 3
    max_items: int = 6
    max_deltas: int = 4
    chunks: bool = True
    subagents: bool = True
    max_subagent_depth: int = 2
    reasoning: bool = True
    steps: bool = True
    state: bool = True
    activities: bool = True
    messages_snapshots: bool = True
    raw_and_custom: bool = True
    envelope: bool = True
    reopen: bool = False
    outcomes: bool = True
    run_errors: bool = True
    untagged_continuations: bool = True
    input_echo: bool = True
    leading_run_error: bool = False
    late_run_error: bool = False
    tool_names: tuple[str, ...] = DEFAULT_TOOL_NAMES
    thread_id: str = "thread-1"

    def __post_init__(self) -> None:
        if not 0 <= self.min_runs <= self.max_runs:
            raise ValueError(
                f"need 0 <= min_runs <= max_runs, got min_runs={self.min_runs}, "
                f"max_runs={self.max_runs}"
            )
        if self.max_items < 0 or self.max_deltas < 0 or self.max_subagent_depth < 0:
            raise ValueError("max_items, max_deltas and max_subagent_depth must be >= 0")
        if not self.tool_names or not all(isinstance(n, str) and n for n in self.tool_names):
            raise ValueError(
                f"tool_names must be a non-empty sequence of non-empty strings, "
                f"got {self.tool_names!r}"
            )


# ---------------------------------------------------------------------------
# The conversation as the consumer will see it (for snapshots and references)


@dataclass
class _Msg:
    id: str
    role: str
    owner: Lane
    content: str = ""
    tool_calls: list[list[str]] = field(default_factory=list)  # [id, name, args]
    tool_call_id: str | None = None


@dataclass
class _Activity:
    owner: Lane
    activity_type: str
    content: dict[str, Any]


# ---------------------------------------------------------------------------
# Simulator state


class _Sim:
    """Stream-wide and run-wide bookkeeping shared by all actors."""

    def __init__(self, c: Choices, cfg: StreamConfig) -> None:
        self.c = c
        self.cfg = cfg
        self.out: list[BaseEvent] = []
        self._counters: dict[str, int] = {}
        self.messages: dict[str, _Msg] = {}
        self.activities: dict[str, _Activity] = {}
        self.state: Any = {}
        self.pending_interrupts: list[str] = []
        self.run_id = ""
        self.run_ids: list[str] = []
        # What each message / tool call must accumulate once chunks are expanded,
        # keyed "text:<id>", "tool:<id>", "reasoning:<id>" (a self-check for tests).
        self.expected: dict[str, str] = {}
        # Explicitly closed items that may be reopened with the same id (knob ``reopen``).
        self.closed_texts: dict[str, tuple[Lane, str | None]] = {}
        self.closed_tools: dict[str, tuple[Lane, str, str | None]] = {}
        self.reset_run()

    def reset_run(self) -> None:
        self.lanes: dict[Lane, tuple[str, str]] = {}
        self.held: dict[Lane, object] = {}
        self.actors: list[_Actor] = []
        self.open_messages = 0  # explicit text / tool / reasoning messages still open
        self.text_owner: dict[str, Lane] = {}  # ids the verifier knows as text messages
        self.tool_owner: dict[str, Lane] = {}  # tool calls started in this run
        self.answered: set[str] = set()
        self.reasoning_owner: dict[str, Lane] = {}
        self.open_steps: set[tuple[Lane, str]] = set()
        self.lifecycle_subagents: set[str] = set()  # announced in this run
        self.interrupts: list[Interrupt] = []
        self.wants_interrupt = False

    # -- ids and emission ---------------------------------------------------

    def new_id(self, prefix: str) -> str:
        n = self._counters.get(prefix, 0) + 1
        self._counters[prefix] = n
        return f"{prefix}-{n}"

    def emit(self, event: BaseEvent, closes: Lane | None = None, *, lane: bool = False) -> None:
        """Append ``event``; with ``lane=True`` it closes the chunk item of lane ``closes``."""
        if lane:
            self.lanes.pop(closes, None)
        if self.cfg.envelope:
            event = self._envelope(event)
        self.out.append(event)

    def _envelope(self, event: BaseEvent) -> BaseEvent:
        """Sometimes add the optional envelope fields every event may carry."""
        fast = self.c.content
        if not fast.chance(12):
            return event
        update: dict[str, Any] = {}
        if fast.chance(60):
            update["timestamp"] = 1_767_225_600_000 + len(self.out) * fast.integer(0, 50)
        if fast.chance(40):
            # Open by key; "ag-ui" is reserved, so user keys only.
            update["metadata"] = {fast.pick(("trace", "usage", "note")): fast.json_value(1)}
        if fast.chance(30):
            update["raw_event"] = fast.json_value(2)
        return event.model_copy(update=update) if update else event

    def lane_free(self, lane: Lane, me: object) -> bool:
        holder = self.held.get(lane)
        return holder is None or holder is me

    def tags_for(self, owner: Lane, me: object) -> list[Lane]:
        """Tags a continuation of ``owner``'s entity may carry right now."""
        tags: list[Lane] = []
        if self.lane_free(owner, me):
            tags.append(owner)
        if owner is not None and self.cfg.untagged_continuations and self.lane_free(None, me):
            tags.append(None)
        return tags

    def spawn(self, actor: _Actor) -> _Actor:
        self.actors.append(actor)
        return actor

    # -- the conversation model --------------------------------------------

    def add_message(self, msg: _Msg) -> _Msg:
        return self.messages.setdefault(msg.id, msg)

    def assistant_parent(self, owner: Lane) -> _Msg:
        """An existing assistant message of ``owner`` or a fresh id for one."""
        mine = [m for m in self.messages.values() if m.role == "assistant" and m.owner == owner]
        if mine and self.c.chance(70):
            return self.c.pick(mine)
        return _Msg(self.new_id("msg"), "assistant", owner)

    def attach_tool_call(self, call_id: str, name: str, parent: str | None, owner: Lane) -> None:
        if any(call[0] == call_id for m in self.messages.values() for call in m.tool_calls):
            return  # a reopened call: the consumer keeps its existing entry
        target: _Msg | None = None
        if parent is not None:
            existing = self.messages.get(parent)
            if existing is not None and existing.role == "assistant":
                target = existing
            elif existing is None:
                target = self.add_message(_Msg(parent, "assistant", owner))
        if target is None:
            target = self.add_message(_Msg(call_id, "assistant", owner))
        target.tool_calls.append([call_id, name, ""])

    def expect(self, kind: str, entity_id: str, delta: str) -> None:
        key = f"{kind}:{entity_id}"
        self.expected[key] = self.expected.get(key, "") + delta

    def append_args(self, call_id: str, delta: str) -> None:
        self.expect("tool", call_id, delta)
        for msg in self.messages.values():
            for call in msg.tool_calls:
                if call[0] == call_id:
                    call[2] += delta
                    return

    def append_text(self, message_id: str, delta: str) -> None:
        msg = self.messages.get(message_id)
        if msg is not None:
            msg.content += delta


# ---------------------------------------------------------------------------
# Actors


class _Actor:
    """One lifecycle. ``ready`` says whether its next event may go out now."""

    done = False

    def ready(self, sim: _Sim) -> bool:
        return True

    def step(self, sim: _Sim) -> None:
        raise NotImplementedError


def _tag(lane: Lane) -> dict[str, Any]:
    return {} if lane is None else {"subagent_run_id": lane}


class _ChunkWriter:
    """Shared logic for the three chunk forms: open, continue, release the lane."""

    def __init__(self, actor: _Actor, kind: str, owner: Lane, item_id: str) -> None:
        self.actor = actor
        self.kind = kind
        self.owner = owner
        self.item_id = item_id

    def can_open(self, sim: _Sim) -> bool:
        return sim.lane_free(self.owner, self.actor)

    def open(self, sim: _Sim, event: BaseEvent) -> None:
        sim.lanes.pop(self.owner, None)
        sim.emit(event)
        sim.lanes[self.owner] = (self.kind, self.item_id)
        sim.held[self.owner] = self.actor

    def continuation_fields(self, sim: _Sim) -> dict[str, Any]:
        """Id / tag fields for a continuation chunk that resolves to this item."""
        forms: list[dict[str, Any]] = []
        id_key = "tool_call_id" if self.kind == "tool" else "message_id"
        # The id-less forms first: they are the shorthand's point, and shrinking
        # prefers them.
        if self.owner is not None:
            forms.append({"subagent_run_id": self.owner})
        if self._untagged_idless_resolves_here(sim):
            forms.append({})
        forms.append({id_key: self.item_id})
        forms.append({id_key: self.item_id, **_tag(self.owner)})
        return sim.c.pick(forms)

    def _untagged_idless_resolves_here(self, sim: _Sim) -> bool:
        parent = sim.lanes.get(None)
        if parent is not None and parent[0] == self.kind:
            return self.owner is None
        candidates = [lane for lane, (kind, _) in sim.lanes.items() if kind == self.kind]
        return candidates == [self.owner]

    def release(self, sim: _Sim) -> None:
        if sim.held.get(self.owner) is self.actor:
            del sim.held[self.owner]


class _DeltaActor(_Actor):
    """An actor streaming ``deltas`` into one item, possibly in chunk form.

    Subclasses set ``id``, ``deltas``, ``pos``, ``chunk`` and the kind the
    oracle check expects (``text`` / ``reasoning``).
    """

    _kind: str
    _content_cls: type[TextMessageContentEvent] | type[ReasoningMessageContentEvent]
    _end_cls: type[TextMessageEndEvent] | type[ReasoningMessageEndEvent]
    owner: Lane
    id: str
    deltas: list[str]
    pos: int
    chunk: _ChunkWriter | None

    def ready(self, sim: _Sim) -> bool:
        """Start once the lane is free; after that the chunk form may always go on,
        while the START/CONTENT/END form waits for a tag its next event may carry."""
        if self.pos == -1:
            return sim.lane_free(self.owner, self)
        if self.chunk is not None:
            return True
        return bool(sim.tags_for(self.owner, self))

    def _next_delta(self, sim: _Sim) -> str:
        delta = self.deltas[self.pos]
        self.pos += 1
        sim.append_text(self.id, delta)
        sim.expect(self._kind, self.id, delta)
        return delta

    def _triad_step(self, sim: _Sim) -> bool:
        """One step of the START/CONTENT/END form: a delta, or the END (returns True)."""
        tag = sim.c.pick(sim.tags_for(self.owner, self))
        if self.pos < len(self.deltas):
            delta = self._next_delta(sim)
            content = self._content_cls(message_id=self.id, delta=delta, **_tag(tag))
            sim.emit(content, tag, lane=True)
            return False
        sim.open_messages -= 1
        sim.emit(self._end_cls(message_id=self.id, **_tag(tag)), tag, lane=True)
        self.done = True
        return True

    def _finish_chunk_if_done(self, sim: _Sim) -> None:
        assert self.chunk is not None
        if self.pos >= len(self.deltas):
            self.chunk.release(sim)
            self.done = True


class _Text(_DeltaActor):
    _kind = "text"
    _content_cls = TextMessageContentEvent
    _end_cls = TextMessageEndEvent

    def __init__(self, sim: _Sim, owner: Lane, chunk: bool) -> None:
        self.owner = owner
        self.id = sim.new_id("msg")
        self.deltas = [sim.c.word() for _ in range(sim.c.integer(0, sim.cfg.max_deltas))]
        self.role: str | None = None
        if sim.c.chance(25):
            self.role = sim.c.pick(("assistant", "user", "system", "developer"))
        self.name = "agent" if sim.c.chance(10) else None
        self.chunk = _ChunkWriter(self, "text", owner, self.id) if chunk else None
        self.pos = -1

    def _maybe_reopen(self, sim: _Sim) -> None:
        """Reuse the id of a closed message of the same owner (content appends)."""
        mine = [i for i, (owner, _) in sim.closed_texts.items() if owner == self.owner]
        if not (sim.cfg.reopen and mine and sim.c.chance(50)):
            return
        self.id = sim.c.pick(mine)
        self.role = sim.closed_texts.pop(self.id)[1]
        if self.chunk is not None:
            self.chunk.item_id = self.id

    def step(self, sim: _Sim) -> None:
        c = sim.c
        if self.pos == -1:
            self._maybe_reopen(sim)
            self.pos = 0
            sim.add_message(_Msg(self.id, self.role or "assistant", self.owner))
            sim.text_owner.setdefault(self.id, self.owner)
            fields: dict[str, Any] = {"message_id": self.id, **_tag(self.owner)}
            if self.role is not None:
                fields["role"] = self.role
            if self.name is not None:
                fields["name"] = self.name
            if self.chunk is None:
                sim.open_messages += 1
                sim.emit(TextMessageStartEvent(**fields), self.owner, lane=True)
                return
            if self.deltas and c.chance(80):
                fields["delta"] = self._next_delta(sim)
            self.chunk.open(sim, TextMessageChunkEvent(**fields))
            self._finish_chunk_if_done(sim)
            return
        if self.chunk is not None:
            fields = self.chunk.continuation_fields(sim)
            if self.role is not None and c.chance(20):
                fields["role"] = self.role
            fields["delta"] = self._next_delta(sim)
            sim.emit(TextMessageChunkEvent(**fields))
            self._finish_chunk_if_done(sim)
            return
        if self._triad_step(sim):
            sim.closed_texts[self.id] = (self.owner, self.role)


class _Tool(_Actor):
    def __init__(self, sim: _Sim, owner: Lane, chunk: bool) -> None:
        c = sim.c
        self.owner = owner
        self.id = sim.new_id("call")
        self.name = c.pick(sim.cfg.tool_names)
        self.args = c.split(c.args_json(), max(1, sim.cfg.max_deltas))
        if c.chance(20):
            self.args = []
        self.result = c.chance(50)
        self.parent: str | None = None
        self.chunk = _ChunkWriter(self, "tool", owner, self.id) if chunk else None
        self.pos = -1
        self.ended = False

    def ready(self, sim: _Sim) -> bool:
        if self.pos == -1:
            return sim.lane_free(self.owner, self)
        if self.ended:
            return bool(self._result_tags(sim))
        if self.chunk is None:
            return bool(sim.tags_for(self.owner, self))
        return True

    def _result_tags(self, sim: _Sim) -> list[Lane]:
        """Tags the result may carry: it must come after the call's (synthetic) END.

        A chunk call still pending in its lane is only ended when something closes
        that lane, so its result must be in that lane (which closes it first).
        """
        tags = sim.tags_for(self.owner, self)
        if sim.lanes.get(self.owner) == ("tool", self.id):
            tags = [t for t in tags if t == self.owner]
        return tags

    def step(self, sim: _Sim) -> None:
        c = sim.c
        if self.pos == -1:
            self._start(sim)
            return
        if self.ended:
            self._result(sim)
            return
        if self.chunk is not None:
            fields = self.chunk.continuation_fields(sim)
            if c.chance(15):
                fields["tool_call_name"] = self.name
            if self.parent is not None and c.chance(15):
                fields["parent_message_id"] = self.parent
            fields["delta"] = self._next_args(sim)
            sim.emit(ToolCallChunkEvent(**fields))
            self._after_chunk(sim)
            return
        tag = c.pick(sim.tags_for(self.owner, self))
        if self.pos < len(self.args):
            delta = self._next_args(sim)
            sim.emit(
                ToolCallArgsEvent(tool_call_id=self.id, delta=delta, **_tag(tag)), tag, lane=True
            )
            return
        sim.open_messages -= 1
        sim.emit(ToolCallEndEvent(tool_call_id=self.id, **_tag(tag)), tag, lane=True)
        sim.closed_tools[self.id] = (self.owner, self.name, self.parent)
        self._ended()

    def _reopen(self, sim: _Sim) -> bool:
        """Reuse a closed call of the same owner: same name and parent, no second result."""
        mine = [i for i, (owner, _, _) in sim.closed_tools.items() if owner == self.owner]
        if not (sim.cfg.reopen and mine and sim.c.chance(50)):
            return False
        self.id = sim.c.pick(mine)
        _, self.name, self.parent = sim.closed_tools.pop(self.id)
        self.result = False
        if self.chunk is not None:
            self.chunk.item_id = self.id
        return True

    def _start(self, sim: _Sim) -> None:
        c = sim.c
        self.pos = 0
        tag: Lane = self.owner
        if self._reopen(sim):
            pass
        elif c.chance(60):
            parent = sim.assistant_parent(self.owner)
            self.parent = parent.id
            # An untagged opener inherits its parent message's owner — only when
            # the consumer already knows that message as a text message.
            if (
                self.chunk is None
                and self.owner is not None
                and sim.cfg.untagged_continuations
                and sim.text_owner.get(parent.id, "") == self.owner
                and sim.lane_free(None, self)
                and c.chance(30)
            ):
                tag = None
        sim.attach_tool_call(self.id, self.name, self.parent, self.owner)
        sim.tool_owner[self.id] = self.owner
        fields: dict[str, Any] = {
            "tool_call_id": self.id,
            "tool_call_name": self.name,
            **_tag(tag),
        }
        if self.parent is not None:
            fields["parent_message_id"] = self.parent
        if self.chunk is None:
            sim.open_messages += 1
            sim.emit(ToolCallStartEvent(**fields), tag, lane=True)
            return
        if self.args and c.chance(80):
            fields["delta"] = self._next_args(sim)
        self.chunk.open(sim, ToolCallChunkEvent(**fields))
        self._after_chunk(sim)

    def _next_args(self, sim: _Sim) -> str:
        delta = self.args[self.pos]
        self.pos += 1
        sim.append_args(self.id, delta)
        return delta

    def _after_chunk(self, sim: _Sim) -> None:
        assert self.chunk is not None
        if self.pos >= len(self.args):
            self.chunk.release(sim)
            self._ended()

    def _ended(self) -> None:
        self.ended = True
        if not self.result:
            self.done = True

    def _result(self, sim: _Sim) -> None:
        c = sim.c
        tag = c.pick(self._result_tags(sim))
        result_id = sim.new_id("result")
        content: Any = c.sentence() if c.chance(70) else c.args_json()
        if c.chance(10):
            content = [_TextPart(text=c.sentence())]
        fields: dict[str, Any] = {"message_id": result_id, "tool_call_id": self.id, **_tag(tag)}
        if c.chance(30):
            fields["role"] = "tool"
        sim.emit(ToolCallResultEvent(content=content, **fields), tag, lane=True)
        text = content if isinstance(content, str) else "".join(p.text for p in content)
        sim.add_message(_Msg(result_id, "tool", tag, text, tool_call_id=self.id))
        sim.text_owner[result_id] = tag
        sim.answered.add(self.id)
        self.done = True


class _ReasoningMessage(_DeltaActor):
    _kind = "reasoning"
    _content_cls = ReasoningMessageContentEvent
    _end_cls = ReasoningMessageEndEvent

    def __init__(self, sim: _Sim, owner: Lane, chunk: bool, message_id: str | None = None) -> None:
        self.owner = owner
        self.id = message_id or sim.new_id("reasoning")
        self.deltas = [sim.c.word() for _ in range(sim.c.integer(0, sim.cfg.max_deltas))]
        self.chunk = _ChunkWriter(self, "reasoning", owner, self.id) if chunk else None
        self.pos = -1

    def step(self, sim: _Sim) -> None:
        c = sim.c
        if self.pos == -1:
            self.pos = 0
            sim.add_message(_Msg(self.id, "reasoning", self.owner))
            sim.reasoning_owner.setdefault(self.id, self.owner)
            if self.chunk is None:
                sim.open_messages += 1
                sim.emit(
                    ReasoningMessageStartEvent(
                        message_id=self.id, role="reasoning", **_tag(self.owner)
                    ),
                    self.owner,
                    lane=True,
                )
                return
            fields: dict[str, Any] = {"message_id": self.id, **_tag(self.owner)}
            if self.deltas and c.chance(80):
                fields["delta"] = self._next_delta(sim)
            self.chunk.open(sim, ReasoningMessageChunkEvent(**fields))
            self._finish_chunk_if_done(sim)
            return
        if self.chunk is not None:
            fields = self.chunk.continuation_fields(sim)
            fields["delta"] = self._next_delta(sim)
            sim.emit(ReasoningMessageChunkEvent(**fields))
            self._finish_chunk_if_done(sim)
            return
        self._triad_step(sim)


class _Scope(_Actor):
    """Something that opens, runs child actors, and closes once they are all done."""

    def __init__(self) -> None:
        self.children: list[_Actor] = []
        self.opened = False

    def children_done(self) -> bool:
        return all(child.done for child in self.children)


class _ReasoningSpan(_Scope):
    def __init__(self, sim: _Sim, owner: Lane) -> None:
        super().__init__()
        self.owner = owner
        self.id = sim.new_id("span")

    def ready(self, sim: _Sim) -> bool:
        if not self.opened:
            return sim.lane_free(self.owner, self)
        return self.children_done() and bool(sim.tags_for(self.owner, self))

    def step(self, sim: _Sim) -> None:
        c = sim.c
        if not self.opened:
            self.opened = True
            sim.reasoning_owner.setdefault(self.id, self.owner)
            sim.emit(
                ReasoningStartEvent(message_id=self.id, **_tag(self.owner)), self.owner, lane=True
            )
            for i in range(c.integer(0, 2)):
                # The span and its first message may share one id (several producers do).
                shared = self.id if i == 0 and c.chance(30) else None
                chunk = sim.cfg.chunks and c.chance(40)
                self.children.append(sim.spawn(_ReasoningMessage(sim, self.owner, chunk, shared)))
            if c.chance(25):
                self.children.append(sim.spawn(_Encrypted(self.owner)))
            return
        tag = c.pick(sim.tags_for(self.owner, self))
        sim.emit(ReasoningEndEvent(message_id=self.id, **_tag(tag)), tag, lane=True)
        self.done = True


_STEP_NAMES = ("plan", "tools", "respond", "review")


class _Step(_Scope):
    def __init__(self, sim: _Sim, owner: Lane, depth: int) -> None:
        super().__init__()
        self.owner = owner
        self.depth = depth
        self.name = ""

    def ready(self, sim: _Sim) -> bool:
        if not self.opened:
            return sim.lane_free(self.owner, self)
        return self.children_done() and sim.lane_free(self.owner, self)

    def step(self, sim: _Sim) -> None:
        c = sim.c
        if not self.opened:
            free = [n for n in _STEP_NAMES if (self.owner, n) not in sim.open_steps]
            self.name = c.pick(free) if free else sim.new_id("step")
            sim.open_steps.add((self.owner, self.name))
            self.opened = True
            sim.emit(
                StepStartedEvent(step_name=self.name, **_tag(self.owner)), self.owner, lane=True
            )
            self.children.extend(_spawn_items(sim, self.owner, c.integer(0, 2), self.depth))
            return
        sim.open_steps.discard((self.owner, self.name))
        # A step is keyed by (owner, name): the finish must carry the same tag.
        sim.emit(StepFinishedEvent(step_name=self.name, **_tag(self.owner)), self.owner, lane=True)
        self.done = True


_SUBAGENT_NAMES = ("researcher", "coder", "critic")


class _Subagent(_Scope):
    def __init__(self, sim: _Sim, parent: Lane, depth: int) -> None:
        super().__init__()
        self.parent = parent
        self.depth = depth
        self.id = sim.new_id("sub")
        # Attribution without lifecycle events is legal and must be accepted.
        self.lifecycle = sim.c.chance(85)

    def ready(self, sim: _Sim) -> bool:
        if not self.opened:
            return True
        return self.children_done() and sim.lane_free(self.id, self)

    def step(self, sim: _Sim) -> None:
        c = sim.c
        if not self.opened:
            self.opened = True
            if self.lifecycle:
                sim.lifecycle_subagents.add(self.id)
                sim.emit(self._started(sim))
            self.children.extend(_spawn_items(sim, self.id, c.integer(1, 3), self.depth + 1))
            if not self.lifecycle:
                self.done = True  # nothing to close; the children carry on alone
            return
        sim.emit(self._finished(sim), self.id, lane=True)
        self.done = True

    def _started(self, sim: _Sim) -> SubagentStartedEvent:
        c = sim.c
        fields: dict[str, Any] = {"subagent_run_id": self.id, "name": c.pick(_SUBAGENT_NAMES)}
        if c.chance(30):
            fields["description"] = c.sentence()
        if self.parent is not None and self.parent in sim.lifecycle_subagents:
            fields["parent_subagent_run_id"] = self.parent
        calls = [t for t, owner in sim.tool_owner.items() if owner == self.parent]
        if calls and c.chance(50):
            fields["parent_tool_call_id"] = c.pick(calls)
        parents = [
            m.id for m in sim.messages.values() if m.role == "assistant" and m.owner == self.parent
        ]
        if parents and c.chance(30):
            fields["parent_message_id"] = c.pick(parents)
        return SubagentStartedEvent(**fields)

    def _finished(self, sim: _Sim) -> BaseEvent:
        c = sim.c
        if c.chance(15):
            fields: dict[str, Any] = {"subagent_run_id": self.id, "message": c.sentence()}
            if c.chance(50):
                fields["code"] = "SUBAGENT_FAILED"
            return SubagentErrorEvent(**fields)
        fields = {"subagent_run_id": self.id}
        if c.chance(40):
            fields["result"] = c.json_value(1)
        if sim.wants_interrupt and c.chance(50):
            ids = [sim.new_id("interrupt") for _ in range(c.integer(1, 2))]
            for interrupt_id in ids:
                sim.interrupts.append(
                    Interrupt(id=interrupt_id, reason="approval", subagent_run_id=self.id)
                )
            fields["outcome"] = SubagentFinishedSuspendedOutcome(interrupt_ids=ids)
        elif c.chance(30):
            fields["outcome"] = SubagentFinishedSuccessOutcome()
        return SubagentFinishedEvent(**fields)


class _Encrypted(_Actor):
    """REASONING_ENCRYPTED_VALUE naming an entity of the same owner (closes no lane)."""

    def __init__(self, owner: Lane) -> None:
        self.owner = owner

    def step(self, sim: _Sim) -> None:
        c = sim.c
        messages = [
            i for i, o in {**sim.text_owner, **sim.reasoning_owner}.items() if o == self.owner
        ]
        # Encrypted reasoning belongs on what the model produced: assistant or reasoning.
        messages = [
            i
            for i in messages
            if i in sim.messages and sim.messages[i].role in ("assistant", "reasoning")
        ]
        calls = [i for i, o in sim.tool_owner.items() if o == self.owner]
        self.done = True
        if not messages and not calls:
            sim.emit(RawEvent(event={"note": c.word()}, **_tag(self.owner)))
            return
        subtype: Literal["tool-call", "message"] = "message"
        if calls and (not messages or c.chance(40)):
            subtype, entity = "tool-call", c.pick(calls)
        else:
            entity = c.pick(messages)
        tag = self.owner if c.chance(70) else None
        sim.emit(
            ReasoningEncryptedValueEvent(
                subtype=subtype, entity_id=entity, encrypted_value=f"enc:{c.word()}", **_tag(tag)
            )
        )


class _Single(_Actor):
    """One stand-alone event (state, raw, custom) drawn when it is emitted."""

    def __init__(self, owner: Lane, kind: str) -> None:
        self.owner = owner
        self.kind = kind

    def ready(self, sim: _Sim) -> bool:
        if self.kind in ("state", "custom"):
            # Provenance tag (or none): the event closes the chunk item of its lane.
            return sim.lane_free(self.owner, self) or (
                self.owner is not None and sim.lane_free(None, self)
            )
        return True

    def step(self, sim: _Sim) -> None:
        c = sim.c
        self.done = True
        tags = [t for t in (self.owner, None) if sim.lane_free(t, self)]
        tag = c.pick(tags) if tags else self.owner
        if self.kind == "state":
            _state_event(sim, tag)
        elif self.kind == "custom":
            sim.emit(
                CustomEvent(
                    name=c.pick(("progress", "ui", "trace")), value=c.json_value(1), **_tag(tag)
                ),
                tag,
                lane=True,
            )
        elif self.kind == "raw":
            fields: dict[str, Any] = {"event": c.json_value(2), **_tag(tag)}
            if c.chance(40):
                fields["source"] = "provider"
            sim.emit(RawEvent(**fields))


def _state_event(sim: _Sim, tag: Lane) -> None:
    c = sim.c
    if isinstance(sim.state, dict) and c.chance(65):
        ops, new_state = patch_for(c, sim.state)
        sim.state = new_state
        event: BaseEvent = StateDeltaEvent.model_validate({"delta": ops, **_alias_tag(tag)})
    else:
        snapshot: Any = c.json_object(2) if c.chance(90) else c.json_value(1)
        sim.state = copy.deepcopy(snapshot)
        event = StateSnapshotEvent(snapshot=snapshot, **_tag(tag))
    sim.emit(event, tag, lane=True)


def _alias_tag(tag: Lane) -> dict[str, Any]:
    return {} if tag is None else {"subagentRunId": tag}


class _ActivityWriter(_Actor):
    """An activity message: created by ACTIVITY_SNAPSHOT, then patched or re-snapshotted.

    ACTIVITY_* close no chunk lane, so this actor is always ready.
    """

    def __init__(self, sim: _Sim, owner: Lane) -> None:
        self.owner = owner
        self.id: str | None = None
        self.remaining = sim.c.integer(0, 3)

    def step(self, sim: _Sim) -> None:
        c = sim.c
        if self.id is None:
            existing = list(sim.activities)
            if existing and c.chance(25):
                _update_activity(sim, self.owner, c.pick(existing))
            else:
                self.id = _new_activity(sim, self.owner)
        else:
            _update_activity(sim, self.owner, self.id)
        self.remaining -= 1
        self.done = self.id is None or self.remaining < 0


def _new_activity(sim: _Sim, owner: Lane) -> str:
    c = sim.c
    activity_id = sim.new_id("activity")
    content = c.json_object(1)
    activity_type = c.pick(("PLAN", "SEARCH_PROGRESS"))
    sim.activities[activity_id] = _Activity(owner, activity_type, copy.deepcopy(content))
    sim.emit(
        ActivitySnapshotEvent(
            message_id=activity_id, activity_type=activity_type, content=content, **_tag(owner)
        )
    )
    return activity_id


def _update_activity(sim: _Sim, owner: Lane, activity_id: str) -> None:
    c = sim.c
    activity = sim.activities[activity_id]
    # A delta (or replace:false) must not disagree with the activity's owner.
    tag = activity.owner if c.chance(70) else None
    if c.chance(75):
        ops, content = patch_for(c, activity.content)
        activity.content = content
        sim.emit(
            ActivityDeltaEvent.model_validate(
                {
                    "messageId": activity_id,
                    "activityType": activity.activity_type,
                    "patch": ops,
                    **_alias_tag(tag),
                }
            )
        )
        return
    content = c.json_object(1)
    if c.chance(30):
        # replace:false leaves an activity the client already tracks (and its
        # owner) alone — but ownership is per run: in a later run it records
        # this event's tag as the owner, so it must carry the real owner.
        sim.emit(
            ActivitySnapshotEvent(
                message_id=activity_id,
                activity_type=activity.activity_type,
                content=content,
                replace=False,
                **_tag(activity.owner),
            )
        )
        return
    # A replacing snapshot re-mints the activity under its own tag.
    new_owner = owner if c.chance(80) else activity.owner
    activity.owner, activity.content = new_owner, copy.deepcopy(content)
    fields: dict[str, Any] = {"replace": True} if c.chance(30) else {}
    sim.emit(
        ActivitySnapshotEvent(
            message_id=activity_id,
            activity_type=activity.activity_type,
            content=content,
            **fields,
            **_tag(new_owner),
        )
    )


class _MessagesSnapshot(_Actor):
    """MESSAGES_SNAPSHOT restating the conversation, emitted only when nothing is open."""

    def ready(self, sim: _Sim) -> bool:
        return not sim.held and sim.open_messages == 0

    def step(self, sim: _Sim) -> None:
        c = sim.c
        self.done = True
        kept = [m for m in sim.messages.values() if c.chance(85)]
        if c.chance(30):
            kept.append(_Msg(sim.new_id("user"), "user", None, c.sentence()))
        kept_ids = {m.id for m in kept}
        # Reasoning messages the snapshot leaves out survive unless it carries its own.
        has_reasoning = any(m.role == "reasoning" for m in kept)
        survivors = [
            m
            for m in sim.messages.values()
            if m.role == "reasoning" and not has_reasoning and m.id not in kept_ids
        ]
        sim.messages = {m.id: m for m in kept + survivors}
        for m in kept:
            if m.role == "reasoning":
                sim.reasoning_owner[m.id] = m.owner
            elif m.role != "activity":
                sim.text_owner[m.id] = m.owner
        sim.lanes.clear()
        sim.emit(MessagesSnapshotEvent(messages=[_message_model(m) for m in kept]))


def _message_model(m: _Msg) -> Any:
    tag = _tag(m.owner)
    if m.role == "assistant":
        fields: dict[str, Any] = {"id": m.id, **tag}
        if m.content or not m.tool_calls:
            fields["content"] = m.content
        if m.tool_calls:
            fields["tool_calls"] = [
                ToolCall(id=i, function=FunctionCall(name=n, arguments=a))
                for i, n, a in m.tool_calls
            ]
        return AssistantMessage(**fields)
    if m.role == "tool":
        return ToolMessage(id=m.id, content=m.content, tool_call_id=m.tool_call_id or "", **tag)
    if m.role == "reasoning":
        return ReasoningMessage(id=m.id, content=m.content, **tag)
    if m.role == "user":
        return UserMessage(id=m.id, content=m.content, **tag)
    if m.role == "system":
        return SystemMessage(id=m.id, content=m.content, **tag)
    return DeveloperMessage(id=m.id, content=m.content, **tag)


# ---------------------------------------------------------------------------
# Runs and streams

_ItemFactory = Callable[[_Sim, Lane, int], _Actor]


def _item_kinds(sim: _Sim, owner: Lane, depth: int) -> list[_ItemFactory]:
    cfg = sim.cfg
    kinds: list[_ItemFactory] = [
        lambda s, o, d: _Text(s, o, False),
        lambda s, o, d: _Tool(s, o, False),
    ]
    if cfg.chunks:
        kinds.append(lambda s, o, d: _Text(s, o, True))
        kinds.append(lambda s, o, d: _Tool(s, o, True))
    if cfg.reasoning:
        kinds.append(lambda s, o, d: _ReasoningSpan(s, o))
        if cfg.chunks:
            kinds.append(lambda s, o, d: _ReasoningMessage(s, o, True))
    if cfg.steps:
        kinds.append(lambda s, o, d: _Step(s, o, d))
    if cfg.subagents and depth < cfg.max_subagent_depth:
        kinds.append(lambda s, o, d: _Subagent(s, o, d))
    if cfg.state:
        kinds.append(lambda s, o, d: _Single(o, "state"))
    if cfg.activities:
        kinds.append(lambda s, o, d: _ActivityWriter(s, o))
    if cfg.raw_and_custom:
        kinds.append(lambda s, o, d: _Single(o, "raw"))
        kinds.append(lambda s, o, d: _Single(o, "custom"))
    if cfg.reasoning:
        kinds.append(lambda s, o, d: _Encrypted(o))
    if cfg.messages_snapshots and owner is None:
        kinds.append(lambda s, o, d: _MessagesSnapshot())
    return kinds


def _spawn_items(sim: _Sim, owner: Lane, count: int, depth: int) -> list[_Actor]:
    kinds = _item_kinds(sim, owner, depth)
    return [sim.spawn(sim.c.pick(kinds)(sim, owner, depth)) for _ in range(count)]


def _run_started(sim: _Sim, index: int) -> RunStartedEvent:
    c = sim.c
    fields: dict[str, Any] = {"thread_id": sim.cfg.thread_id, "run_id": sim.run_id}
    if sim.run_ids[:-1] and c.chance(20):
        fields["parent_run_id"] = sim.run_ids[-2]
    resume = [
        ResumeEntry(interrupt_id=i, status=c.pick(("resolved", "cancelled")))
        for i in sim.pending_interrupts
    ]
    if resume or (sim.cfg.input_echo and c.chance(40)):
        echo: dict[str, Any] = {"thread_id": sim.cfg.thread_id, "run_id": sim.run_id}
        messages: list[Any] = []
        if index == 0 and c.chance(30):
            messages.append(SystemMessage(id=sim.new_id("system"), content="Be helpful."))
        if c.chance(80):
            text = c.sentence()
            user_id = sim.new_id("user")
            if c.content.chance(20):
                messages.append(UserMessage(id=user_id, content=[_TextPart(text=text)]))
            else:
                messages.append(UserMessage(id=user_id, content=text))
        for m in messages:
            content = m.content if isinstance(m.content, str) else m.content[0].text
            sim.add_message(_Msg(m.id, m.role, None, content))
            sim.text_owner.setdefault(m.id, None)
        echo["messages"] = messages
        if resume:
            echo["resume"] = resume
        if c.chance(30):
            echo["state"] = copy.deepcopy(sim.state)
        fields["input"] = RunAgentInput(**echo)
    sim.pending_interrupts = []
    return RunStartedEvent(**fields)


def _run_finished(sim: _Sim, outcome: str) -> RunFinishedEvent:
    c = sim.c
    fields: dict[str, Any] = {"thread_id": sim.cfg.thread_id, "run_id": sim.run_id}
    unanswered = [t for t in sim.tool_owner if t not in sim.answered]
    if outcome == "interrupt":
        interrupts = list(sim.interrupts)
        for _ in range(c.integer(0 if interrupts else 1, 2)):
            extra: dict[str, Any] = {"id": sim.new_id("interrupt"), "reason": "confirm"}
            if unanswered and c.chance(50):
                extra["tool_call_id"] = c.pick(unanswered)
            if c.chance(30):
                extra["message"] = c.sentence()
            if c.chance(20):
                extra["response_schema"] = {"type": "object"}
            if c.chance(10):
                extra["expires_at"] = "2099-01-01T00:00:00Z"
            interrupts.append(Interrupt(**extra))
        sim.pending_interrupts = [i.id for i in interrupts]
        fields["outcome"] = RunFinishedInterruptOutcome(interrupts=interrupts)
    elif outcome == "cancelled":
        fields["outcome"] = RunFinishedCancelledOutcome()
    elif outcome == "success":
        success: dict[str, Any] = {}
        if unanswered and c.chance(60):
            success["pending_tool_call_ids"] = unanswered
        fields["outcome"] = RunFinishedSuccessOutcome(**success)
    if outcome in ("absent", "success") and c.chance(30):
        fields["result"] = c.json_value(1)
    if c.content.chance(20):
        fields["usage"] = [_usage(c)]
    return RunFinishedEvent(**fields)


def _usage(c: Choices) -> TokenUsage:
    fast = c.content
    prompt, completion = fast.integer(0, 5000), fast.integer(0, 2000)
    return TokenUsage(
        provider="openai",
        model=fast.pick(("gpt-x", "small-1")),
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=prompt + completion,
    )


def _run_error(sim: _Sim) -> RunErrorEvent:
    c = sim.c
    fields: dict[str, Any] = {"message": c.sentence()}
    if c.chance(50):
        fields["code"] = c.pick(("INTERNAL", "RATE_LIMITED"))
    if c.content.chance(15):
        fields["usage"] = [_usage(c)]
    return RunErrorEvent(**fields)


_OUTCOMES = ("absent", "success", "interrupt", "cancelled")


def simulate_run(sim: _Sim, index: int) -> None:
    """Append one run (RUN_STARTED .. RUN_FINISHED or RUN_ERROR) to ``sim.out``."""
    c = sim.c
    cfg = sim.cfg
    sim.reset_run()
    sim.run_id = sim.new_id("run")
    sim.run_ids.append(sim.run_id)
    outcome = c.pick(_OUTCOMES) if cfg.outcomes else "absent"
    sim.wants_interrupt = outcome == "interrupt"
    errors_at = -1
    if cfg.run_errors and c.chance(15):
        errors_at = c.integer(0, 40)
    sim.lanes.clear()
    sim.emit(_run_started(sim, index))
    _spawn_items(sim, None, c.integer(0, cfg.max_items), 0)
    steps = 0
    while sim.actors:
        if steps == errors_at:
            break
        ready = [a for a in sim.actors if a.ready(sim)]
        if not ready:
            raise AssertionError(
                "stream generator deadlocked (a bug in agui_pipes.testing): "
                f"{[type(a).__name__ for a in sim.actors]}"
            )
        actor = c.pick(ready)
        actor.step(sim)
        if actor.done:
            sim.actors.remove(actor)
        steps += 1
    sim.lanes.clear()
    sim.held.clear()
    if sim.actors or steps == errors_at:
        # A run that blew up need not close anything (RUN_ERROR is exempt).
        sim.actors.clear()
        sim.pending_interrupts = []
        sim.emit(_run_error(sim))
        return
    sim.emit(_run_finished(sim, outcome))
    if cfg.late_run_error and c.chance(10):
        sim.emit(_run_error(sim))


def simulate_stream_with_expectations(
    c: Choices, cfg: StreamConfig
) -> tuple[list[BaseEvent], dict[str, str]]:
    """A whole stream, plus the text each message / tool call accumulates.

    The second item maps ``"text:<id>"``, ``"tool:<id>"`` and
    ``"reasoning:<id>"`` to the concatenation of every delta emitted for that
    entity — what a consumer must reassemble, chunk continuations included.
    """
    sim = _Sim(c, cfg)
    if cfg.leading_run_error and c.chance(20):
        sim.emit(_run_error(sim))
    for index in range(c.integer(cfg.min_runs, cfg.max_runs)):
        simulate_run(sim, index)
    return sim.out, sim.expected


def simulate_stream(c: Choices, cfg: StreamConfig) -> list[BaseEvent]:
    """A whole stream: ``min_runs..max_runs`` runs on one thread."""
    return simulate_stream_with_expectations(c, cfg)[0]


def simulate_fragment(
    c: Choices, cfg: StreamConfig, kind: str, owner: Lane = None
) -> list[BaseEvent]:
    """The events of one item (``text``, ``tool``, ``reasoning``, ...), no run around it."""
    sim = _Sim(c, cfg)
    sim.run_id = "run-0"
    factories: dict[str, Callable[[], _Actor]] = {
        "text": lambda: _Text(sim, owner, False),
        "text_chunks": lambda: _Text(sim, owner, True),
        "tool": lambda: _Tool(sim, owner, False),
        "tool_chunks": lambda: _Tool(sim, owner, True),
        "reasoning": lambda: _ReasoningSpan(sim, owner),
        "step": lambda: _Step(sim, owner, 0),
        "subagent": lambda: _Subagent(sim, owner, 0),
    }
    sim.spawn(factories[kind]())
    while sim.actors:
        ready = [a for a in sim.actors if a.ready(sim)]
        actor = c.pick(ready)
        actor.step(sim)
        if actor.done:
            sim.actors.remove(actor)
    return sim.out
