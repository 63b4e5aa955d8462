"""Keeping what an id-less ``*_CHUNK`` means when a stage removes events around it.

A chunk that omits its id is resolved by the client's lane model
(``chunk_lanes.py``): it continues whatever item its lane — or the only lane with
an item of its kind — holds *at that point of the stream*. Lanes are closed by
other events (explicit message / tool / step / state / custom / reasoning
events, run-level events, a subagent's end) and replaced by chunks of another
kind. A stage that removes such an event therefore changes the lanes the
client sees downstream: an item the input closed stays open in the output, so
a later id-less chunk can become ambiguous (the client rejects the stream) or,
worse, silently continue the wrong message.

``LaneMirror`` follows two lane models side by side — the stream as it
arrives (``source``) and as the stage emits it (``output``) — and, for every
chunk the stage keeps, compares where each would send it. When they differ
the chunk gets the ids (and naming fields) of the item it belongs to, so it
resolves by id and means in the output exactly what it meant in the input.
Chunks that already resolve the same way are left untouched, so a stage that
removes nothing lane-relevant changes no event.

When a stage *delays* events (Redact holds content deltas back), a late closing
event can also end an item downstream that the input still continues; the
filled-in chunk then opens that item again by id — in the item's own lane, so
an untagged one is also given the lane's ``subagentRunId`` — and the client
appends to the same message, which is what the input meant.

Why filling in ids is enough for a stage that only removes events: an item
the output holds and the input does not (a *stale* item) only ever lingers in
a lane the input has already closed or handed to an item of a removed kind;
every item the input holds in a lane is also the output's item in that lane,
because the chunk that opened it was kept. A chunk carrying its item's id
therefore finds that item in the output. The stale item itself ends a little
later in the output (at the next kept event that closes its lane, at the
latest at the end of the run), which changes no message a consumer assembles.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent, TextMessageChunkEvent, ToolCallChunkEvent

from .chunk_lanes import CHUNK_CLASSES, ChunkAssignment, ChunkItem, ChunkLanes

__all__ = ["LaneMirror", "fill_chunk"]


def fill_chunk(event: BaseEvent, item: ChunkItem, *, lane: bool = False) -> BaseEvent:
    """The chunk with the fields its item carries that the chunk itself omits.

    ``lane``: also tag an untagged chunk with its item's lane, for a chunk that will
    open the item again downstream — there it must open where the item lives.
    """
    update: dict[str, Any] = {}
    if lane and item.lane is not None and event.subagent_run_id is None:  # type: ignore[attr-defined]
        update["subagent_run_id"] = item.lane
    cls = type(event)
    if cls is ToolCallChunkEvent:
        if event.tool_call_id is None:  # type: ignore[attr-defined]
            update["tool_call_id"] = item.id
        if event.tool_call_name is None and item.name is not None:  # type: ignore[attr-defined]
            update["tool_call_name"] = item.name
        if event.parent_message_id is None and item.parent_message_id is not None:  # type: ignore[attr-defined]
            update["parent_message_id"] = item.parent_message_id
    else:
        if event.message_id is None:  # type: ignore[attr-defined]
            update["message_id"] = item.id
        if cls is TextMessageChunkEvent:
            if event.role is None and item.role is not None:  # type: ignore[attr-defined]
                update["role"] = item.role
            if event.name is None and item.name is not None:  # type: ignore[attr-defined]
                update["name"] = item.name
    return event.model_copy(update=update) if update else event


def _same(seen: ChunkAssignment, assignment: ChunkAssignment) -> bool:
    """Whether the output resolves a chunk to the item the input resolved it to."""
    a, b = seen.item, assignment.item
    return (
        a is not None
        and b is not None
        and a.id == b.id
        and a.lane == b.lane
        and seen.opened == assignment.opened
    )


class LaneMirror:
    """The lanes of a stage's input and of its output, and the chunk fix-up between them.

    Every event the stage receives must reach :attr:`source` (``observe`` /
    ``assign``), the ones it drops included, and every event it emits must reach
    :attr:`output`. :meth:`kept` does both for an event passed on as it came (it
    returns the event to emit: a chunk may get its ids); a stage that applied an
    event to :attr:`source` itself reports the emitted one with
    :meth:`kept_assigned` (a chunk) or :meth:`emitted` (anything else).
    """

    __slots__ = ("output", "source")

    def __init__(self, source: ChunkLanes | None = None) -> None:
        self.source = source if source is not None else ChunkLanes()
        self.output = ChunkLanes()

    def reset(self) -> None:
        """Forget both models (a new run)."""
        self.source.reset()
        self.output.reset()

    def kept(self, event: BaseEvent) -> BaseEvent:
        """An event the stage emits: the event to emit instead (a chunk may get its ids)."""
        if type(event) in CHUNK_CLASSES:
            return self.kept_assigned(event, self.source.assign(event))
        self.source.observe(event)
        self.output.observe(event)
        return event

    def kept_assigned(self, event: BaseEvent, assignment: ChunkAssignment) -> BaseEvent:
        """A chunk the stage emits, already assigned on :attr:`source` (``assign``)."""
        item = assignment.item
        if item is not None and not _same(self.output.peek(event), assignment):
            held = any(i.kind is item.kind and i.id == item.id for i in self.output.open.values())
            event = fill_chunk(event, item, lane=not held)
        self.output.assign(event)
        return event

    def emitted(self, event: BaseEvent) -> None:
        """A non-chunk event the stage emits whose effect on :attr:`source` is already applied."""
        self.output.observe(event)
