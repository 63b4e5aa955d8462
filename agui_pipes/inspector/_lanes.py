"""The timeline's lanes: one per run, message, reasoning span or message, tool call, step
and subagent, nested the way the stream nested them.

Nesting follows PROTOCOL.md §3: an event tagged ``subagentRunId`` belongs to that
subagent, so its lanes sit under the subagent's lane; untagged ones belong to the
parent agent (under the run). A subagent sits under the tool call that spawned it:
its ``parentToolCallId``, else the tool call of its parent agent still waiting for
its result when SUBAGENT_STARTED arrives, else its ``parentSubagentRunId``'s lane,
else the run. Continuations that omit the tag inherit their opener's owner
(first-writer-wins), which is what ``owner`` reports for them.

A tool call's lane ends at its result when it has one (the wait for the result is
the part a subagent fills), else at its END. Ids may be reused after closing (the
protocol allows reopening), so lane ids get a ``#n`` suffix from the second time.
"""

from __future__ import annotations

from array import array
from typing import Any

from ag_ui.core import BaseEvent, EventType

__all__ = ["LaneBuilder"]

_STATE_TICKS = frozenset(
    {
        EventType.STATE_SNAPSHOT,
        EventType.STATE_DELTA,
        EventType.MESSAGES_SNAPSHOT,
        EventType.ACTIVITY_SNAPSHOT,
        EventType.ACTIVITY_DELTA,
    }
)


class _Lane:
    __slots__ = (
        "children",
        "depth",
        "end",
        "id",
        "kind",
        "label",
        "owner",
        "parent",
        "preview",
        "start",
        "ticks",
    )

    def __init__(
        self,
        lane_id: str,
        kind: str,
        label: str,
        parent: _Lane | None,
        start: int,
        owner: str | None,
    ) -> None:
        self.id = lane_id
        self.kind = kind
        self.label = label
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.start = start
        self.end: int | None = None
        self.ticks = array("i")
        self.owner = owner
        self.preview = ""
        """The start of what the lane carries (its text, a tool call's arguments)."""
        self.children: list[_Lane] = []
        if parent is not None:
            parent.children.append(self)


PREVIEW_CHARS = 60
"""How much of a lane's text its ``preview`` keeps (the timeline labels show it)."""


def _extend_preview(lane: _Lane, delta: Any) -> None:
    if isinstance(delta, str) and len(lane.preview) < PREVIEW_CHARS:
        lane.preview = (lane.preview + delta)[:PREVIEW_CHARS]


def _field(event: BaseEvent, name: str, default: Any = None) -> Any:
    """A field of the event, or ``default`` (pydantic's ``getattr`` fallback is slow)."""
    return event.__dict__.get(name, default)


def _thinned(ticks: array[int], cap: int) -> list[int]:
    count = len(ticks)
    if count <= cap:
        return list(ticks)
    if cap <= 1:
        return [ticks[0]] if cap == 1 else []
    step = (count - 1) / (cap - 1)
    return [ticks[round(i * step)] for i in range(cap)]


class LaneBuilder:
    """Lanes, grown one delivered (chunk-expanded) event at a time."""

    def __init__(self) -> None:
        self._roots: list[_Lane] = []
        self._count = 0
        self._used: dict[str, int] = {}
        self._run: _Lane | None = None
        self._messages: dict[str, _Lane] = {}
        self._reasoning_messages: dict[str, _Lane] = {}
        self._spans: dict[str, _Lane] = {}
        self._calls: dict[str, _Lane] = {}
        self._waiting: dict[str, _Lane] = {}  # tool calls without a result yet
        self._every_call: dict[str, _Lane] = {}  # the latest lane of every tool call id
        self._message_owner: dict[str, str | None] = {}
        self._steps: dict[tuple[str | None, str], _Lane] = {}
        self._subagents: dict[str, _Lane] = {}
        self._subagent_lanes: dict[str, _Lane] = {}  # every subagent seen, open or not

    def _new(
        self, base: str, kind: str, label: str, parent: _Lane | None, start: int, owner: str | None
    ) -> _Lane:
        seen = self._used.get(base, 0) + 1
        self._used[base] = seen
        lane = _Lane(base if seen == 1 else f"{base}#{seen}", kind, label, parent, start, owner)
        if parent is None:
            self._roots.append(lane)
        self._count += 1
        return lane

    def _home(self, owner: str | None) -> _Lane | None:
        """Where a lane of ``owner`` goes: its subagent's lane, else the run."""
        if owner is not None:
            lane = self._subagent_lanes.get(owner)
            if lane is not None:
                return lane
        return self._run

    def observe(self, index: int, event: BaseEvent) -> str | None:
        """Place one event; returns its owner (the tag, or its opener's)."""
        kind = event.type
        tag: str | None = _field(event, "subagent_run_id", None)
        if kind is EventType.RUN_STARTED:
            run_id = _field(event, "run_id", "") or "?"
            self._run = self._new(f"run:{run_id}", "run", f"run {run_id}", None, index, None)
            return None
        if kind in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
            if self._run is not None:
                self._run.end = index
                self._run = None
            return None
        if kind is EventType.TEXT_MESSAGE_START:
            return self._open(
                self._messages,
                "message",
                index,
                event,
                tag,
                f"{_field(event, 'role', None) or 'assistant'} message",
            )
        if kind in (EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END):
            return self._continue(self._messages, index, event, kind, tag)
        if kind is EventType.REASONING_MESSAGE_START:
            return self._open(
                self._reasoning_messages, "reasoning", index, event, tag, "reasoning message"
            )
        if kind in (EventType.REASONING_MESSAGE_CONTENT, EventType.REASONING_MESSAGE_END):
            return self._continue(self._reasoning_messages, index, event, kind, tag)
        if kind is EventType.REASONING_START:
            return self._open(self._spans, "reasoning", index, event, tag, "reasoning")
        if kind is EventType.REASONING_END:
            return self._continue(self._spans, index, event, kind, tag)
        if kind is EventType.TOOL_CALL_START:
            return self._tool_start(index, event, tag)
        if kind in (EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END, EventType.TOOL_CALL_RESULT):
            return self._tool_more(index, event, kind, tag)
        if kind in (EventType.STEP_STARTED, EventType.STEP_FINISHED):
            return self._step(index, event, kind, tag)
        if kind is EventType.SUBAGENT_STARTED:
            return self._subagent_start(index, event)
        if kind in (EventType.SUBAGENT_FINISHED, EventType.SUBAGENT_ERROR):
            lane = self._subagents.pop(str(tag), None)
            if lane is not None:
                lane.end = index
            return tag
        if kind in _STATE_TICKS:
            home = self._home(tag)
            if home is not None:
                home.ticks.append(index)
        return tag

    def _open(
        self,
        table: dict[str, _Lane],
        kind: str,
        index: int,
        event: BaseEvent,
        tag: str | None,
        label: str,
    ) -> str | None:
        key = str(_field(event, "message_id", ""))
        parent = self._home(tag)
        if table is self._reasoning_messages:
            for span in reversed(self._spans.values()):
                if span.owner == tag:
                    parent = span
                    break
        lane = self._new(
            f"{kind}:{key}" if kind != "message" else f"message:{key}",
            kind,
            f"{label} {key}",
            parent,
            index,
            tag,
        )
        table[key] = lane
        if kind == "message":
            self._message_owner[key] = tag
        return tag

    def _continue(
        self,
        table: dict[str, _Lane],
        index: int,
        event: BaseEvent,
        kind: EventType,
        tag: str | None,
    ) -> str | None:
        key = str(_field(event, "message_id", ""))
        lane = table.get(key)
        if lane is None:
            return tag
        if kind.name.endswith("_CONTENT"):
            lane.ticks.append(index)
            _extend_preview(lane, _field(event, "delta", ""))
        else:
            lane.end = index
            del table[key]
        return lane.owner if tag is None else tag

    def _tool_start(self, index: int, event: BaseEvent, tag: str | None) -> str | None:
        call_id = str(_field(event, "tool_call_id", ""))
        owner = tag
        parent_message = _field(event, "parent_message_id", None)
        if owner is None and parent_message is not None:
            owner = self._message_owner.get(parent_message)
        name = _field(event, "tool_call_name", "") or "tool call"
        lane = self._new(f"tool_call:{call_id}", "tool_call", name, self._home(owner), index, owner)
        self._calls[call_id] = lane
        self._waiting[call_id] = lane
        self._every_call[call_id] = lane
        return owner

    def _tool_more(
        self, index: int, event: BaseEvent, kind: EventType, tag: str | None
    ) -> str | None:
        call_id = str(_field(event, "tool_call_id", ""))
        if kind is EventType.TOOL_CALL_RESULT:
            lane = self._waiting.pop(call_id, None)
            if lane is None:
                return tag
            lane.end = index
            self._calls.pop(call_id, None)
            return tag if tag is not None else lane.owner
        lane = self._calls.get(call_id)
        if lane is None:
            return tag
        if kind is EventType.TOOL_CALL_ARGS:
            lane.ticks.append(index)
            _extend_preview(lane, _field(event, "delta", ""))
        else:
            lane.end = index
        return lane.owner if tag is None else tag

    def _step(self, index: int, event: BaseEvent, kind: EventType, tag: str | None) -> str | None:
        name = str(_field(event, "step_name", ""))
        if kind is EventType.STEP_STARTED:
            self._steps[(tag, name)] = self._new(
                f"step:{tag or ''}:{name}", "step", name, self._home(tag), index, tag
            )
            return tag
        lane = self._steps.pop((tag, name), None)
        if lane is not None:
            lane.end = index
        return tag

    def _subagent_start(self, index: int, event: BaseEvent) -> str | None:
        run_id = str(_field(event, "subagent_run_id", ""))
        parent_run: str | None = _field(event, "parent_subagent_run_id", None)
        parent_call: str | None = _field(event, "parent_tool_call_id", None)
        parent: _Lane | None = None
        if parent_call is not None:
            parent = self._waiting.get(parent_call) or self._every_call.get(parent_call)
        if parent is None:
            for call in reversed(self._waiting.values()):
                if call.owner == parent_run:
                    parent = call
                    break
        if parent is None:
            parent = self._home(parent_run)
        name = _field(event, "name", "") or "subagent"
        lane = self._new(f"subagent:{run_id}", "subagent", name, parent, index, run_id)
        self._subagents[run_id] = lane
        self._subagent_lanes[run_id] = lane
        return run_id

    def _walk(self) -> list[_Lane]:
        order: list[_Lane] = []
        stack = list(reversed(self._roots))
        while stack:
            lane = stack.pop()
            order.append(lane)
            stack.extend(reversed(lane.children))
        return order

    def close(self) -> None:
        """The stream ended: lanes still open keep ``end: null``."""

    def __len__(self) -> int:
        return self._count

    def rows(self, ticks_cap: int) -> list[dict[str, Any]]:
        """The lanes in display order: each after its parent, siblings by start."""
        return [
            {
                "id": lane.id,
                "kind": lane.kind,
                "label": lane.label,
                "parent": lane.parent.id if lane.parent is not None else None,
                "depth": lane.depth,
                "start": lane.start,
                "end": lane.end,
                "ticks": _thinned(lane.ticks, ticks_cap),
                "tick_count": len(lane.ticks),
                "owner": lane.owner,
                "preview": " ".join(lane.preview.split()),
            }
            for lane in self._walk()
        ]
