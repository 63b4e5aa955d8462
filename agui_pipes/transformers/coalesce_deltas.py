"""CoalesceDeltas: merge runs of small deltas into fewer, larger events.

Token-by-token streaming produces one event per token, and every event costs
framing, JSON and a render on the client. This stage merges *consecutive*
deltas of the same item — text message content, tool-call arguments,
reasoning message content, and the chunk forms of each — into one event. A
merge never crosses another event: whatever arrives in between flushes the
pending delta first, so ordering and validity are untouched, and the client
assembles exactly the same messages from fewer events.

* ``max_chars`` (optional) flushes as soon as the merged delta reaches that
  many characters, bounding how much text one event carries and how long it
  is held back.
* Deltas carrying ``rawEvent`` or ``metadata`` are never merged (both are
  per-event information); the merged event keeps the first delta's
  ``timestamp``.
* A chunk merges only with the chunk before it when both belong to the same
  item on the client (the lane model, so an id-less chunk is never merged
  into the wrong stream); the merged chunk keeps the first chunk's fields.
* The pending delta is flushed by any other event and at the end of the
  stream (``finish``). The cost is latency: a delta is released when the next
  event arrives, so pair it with ``max_chars`` for live UIs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
)

from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer
from .._stagekit.chunk_lanes import CHUNK_CLASSES, ChunkItem, ChunkLanes

__all__ = ["CoalesceDeltas"]
__dir__ = public_dir(__all__)

_CONTENT_KEY: dict[type[BaseEvent], str] = {
    TextMessageContentEvent: "message_id",
    ToolCallArgsEvent: "tool_call_id",
    ReasoningMessageContentEvent: "message_id",
}


class CoalesceDeltas(StreamTransformer):
    """Merge consecutive content deltas of the same message into fewer, larger events."""

    def __init__(self, max_chars: int | None = None) -> None:
        if max_chars is not None and (not isinstance(max_chars, int) or max_chars < 1):
            raise ValueError(
                f"CoalesceDeltas: max_chars must be a positive integer (or None for no "
                f"limit), got {max_chars!r}"
            )
        self.max_chars = max_chars
        self._lanes = ChunkLanes()
        self._pending: BaseEvent | None = None
        self._parts: list[str] = []
        self._size = 0
        self._key: Any = None

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        cls = type(event)
        if cls in _CONTENT_KEY:
            if event.raw_event is None and event.metadata is None:
                key = (cls, getattr(event, _CONTENT_KEY[cls]), event.subagent_run_id)  # type: ignore[attr-defined]
                return self._add(event, key, event.delta)  # type: ignore[attr-defined]
        elif cls in CHUNK_CLASSES:
            return self._chunk(event)
        else:
            self._lanes.observe(event)
        if self._pending is None:
            return (event,)
        return (self._flush(), event)

    def finish(self) -> Sequence[BaseEvent]:
        return (self._flush(),) if self._pending is not None else ()

    def _chunk(self, event: BaseEvent) -> Sequence[BaseEvent]:
        assignment = self._lanes.assign(event)
        item: ChunkItem | None = assignment.item
        delta: str | None = event.delta  # type: ignore[attr-defined]
        if item is None or delta is None or event.raw_event is not None or event.metadata:
            return (event,) if self._pending is None else (self._flush(), event)
        if not assignment.opened and self._key is item:
            # A continuation may only repeat its item's fields; the pending first
            # chunk already carries them.
            return self._append(delta)
        return self._add(event, item, delta)

    def _add(self, event: BaseEvent, key: Any, delta: str) -> Sequence[BaseEvent]:
        if self._pending is not None and self._key == key and type(event) in _CONTENT_KEY:
            return self._append(delta)
        flushed = self._flush() if self._pending is not None else None
        self._pending, self._key, self._parts, self._size = event, key, [delta], len(delta)
        if self.max_chars is not None and self._size >= self.max_chars:
            out = self._flush()
            return (out,) if flushed is None else (flushed, out)
        return () if flushed is None else (flushed,)

    def _append(self, delta: str) -> Sequence[BaseEvent]:
        self._parts.append(delta)
        self._size += len(delta)
        if self.max_chars is not None and self._size >= self.max_chars:
            return (self._flush(),)
        return ()

    def _flush(self) -> BaseEvent:
        pending = self._pending
        assert pending is not None
        parts = self._parts
        self._pending, self._key, self._parts, self._size = None, None, [], 0
        if len(parts) == 1:
            return pending
        return pending.model_copy(update={"delta": "".join(parts)})
