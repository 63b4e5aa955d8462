"""Which item an id-less ``*_CHUNK`` continues: the client's lane model, read-only.

Several built-in stages must know what a chunk *belongs to* without expanding
it: FilterToolCalls drops the id-less continuation of a blocked call,
SubagentVisibility fills in the ids a chunk omits before its tag is stripped,
Redact and CoalesceDeltas key their buffers by item. They all need the same
answer the client will reach, so this module replays PROTOCOL.md §5 (and the
official TypeScript client's ``transformChunks``) on the stream as it arrives:

* one open chunk item per lane — the parent (``None``) and each subagent id;
* an id'd chunk continues the lane holding that id, else opens in its tag's lane;
* an id-less chunk goes to its tag's lane; untagged, to the parent's lane when
  it holds an item of that kind, else to the only lane holding one (several
  is ambiguous);
* a lane closes on explicit message / tool / step / state / custom / reasoning
  events in it, all lanes close on run-level events, a subagent's lane closes
  when it finishes or errors.

The tracker never raises: an invalid chunk stream is the verifier's business,
and a stage must still decide what to do with the event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import ag_ui.core as ag
from ag_ui.core import BaseEvent

from .._protocol.chunks import ALL_LANES_CLOSERS, CHUNK_CLASSES, LANE_CLOSERS, SUBAGENT_ENDS

__all__ = [
    "CHUNK_CLASSES",
    "CLOSING_CLASSES",
    "ChunkAssignment",
    "ChunkItem",
    "ChunkLanes",
]

CLOSING_CLASSES: Final[frozenset[type[BaseEvent]]] = (
    LANE_CLOSERS | ALL_LANES_CLOSERS | SUBAGENT_ENDS
)
"""Every event class that may close a chunk lane."""


@dataclass(slots=True)
class ChunkItem:
    """An item a chunk stream opened: its kind (the chunk class), id and naming fields."""

    kind: type[BaseEvent]
    id: str
    lane: str | None
    name: str | None = None
    """``toolCallName`` for tool calls, ``name`` for text messages."""
    role: str | None = None
    parent_message_id: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkAssignment:
    """Where a chunk went: the item (``None`` when it could not open one) and how.

    ``candidates`` holds the open items an untagged id-less chunk could
    belong to when there were several (the assignment is ambiguous, ``item`` is
    ``None`` and no lane changed).
    """

    item: ChunkItem | None
    opened: bool
    candidates: tuple[ChunkItem, ...] = ()


def _chunk_id(event: BaseEvent) -> str | None:
    if type(event) is ag.ToolCallChunkEvent:
        return event.tool_call_id
    return event.message_id  # type: ignore[attr-defined, no-any-return]


class ChunkLanes:
    """The open chunk item of every lane, updated event by event."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open: dict[str | None, ChunkItem] = {}

    def reset(self) -> None:
        """Forget everything (a new run)."""
        self.open.clear()

    def observe(self, event: BaseEvent) -> None:
        """Apply a non-chunk event's effect on the lanes (closing what it closes)."""
        if not self.open:
            return
        cls = type(event)
        if cls in LANE_CLOSERS:
            self.open.pop(event.subagent_run_id, None)  # type: ignore[attr-defined]
        elif cls in ALL_LANES_CLOSERS:
            self.open.clear()
        elif cls in SUBAGENT_ENDS:
            self.open.pop(event.subagent_run_id, None)  # type: ignore[attr-defined]

    def peek(self, event: BaseEvent) -> ChunkAssignment:
        """Where a chunk would go, without changing any lane."""
        return self._assign(event, commit=False)

    def assign(self, event: BaseEvent) -> ChunkAssignment:
        """Assign a chunk to its item: continue its item or open a new one in its lane."""
        return self._assign(event, commit=True)

    def _assign(self, event: BaseEvent, *, commit: bool) -> ChunkAssignment:
        kind = type(event)
        item_id = _chunk_id(event)
        tag: str | None = event.subagent_run_id  # type: ignore[attr-defined]
        lane: str | None = tag
        if item_id is not None:
            for open_lane, item in self.open.items():
                if item.kind is kind and item.id == item_id:
                    lane = open_lane
                    break
        elif tag is None:
            parent = self.open.get(None)
            if parent is None or parent.kind is not kind:
                candidates = tuple(i for i in self.open.values() if i.kind is kind)
                if len(candidates) > 1:
                    return ChunkAssignment(None, False, candidates)
                if candidates:
                    lane = candidates[0].lane
        current = self.open.get(lane)
        if current is not None and current.kind is kind and item_id in (None, current.id):
            return ChunkAssignment(current, False)
        if item_id is None:
            return ChunkAssignment(None, False)
        item = ChunkItem(kind, item_id, lane)
        if kind is ag.ToolCallChunkEvent:
            item.name = event.tool_call_name  # type: ignore[attr-defined]
            item.parent_message_id = event.parent_message_id  # type: ignore[attr-defined]
        elif kind is ag.TextMessageChunkEvent:
            item.name = event.name  # type: ignore[attr-defined]
            item.role = event.role or "assistant"  # type: ignore[attr-defined]
        if commit:
            self.open[lane] = item
        return ChunkAssignment(item, True)
