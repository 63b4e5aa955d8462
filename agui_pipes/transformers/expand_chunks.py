"""ExpandChunks: ``*_CHUNK`` shorthand to explicit START / CONTENT / END events.

The stage form of ``agui_pipes._protocol.chunks.ChunkExpander``, whose module doc
gives the rules (PROTOCOL.md §5, as the official TypeScript client expands
them): chunk streams kept per lane (the parent agent and each subagent), the
fields a first chunk needs, the conflicts that are fatal, what closes a lane.
Nothing is flushed at end of stream: a chunk stream still open then belongs
to a truncated run, which verification reports.
"""

from __future__ import annotations

from collections.abc import Sequence

from ag_ui.core import BaseEvent

from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer, Transform
from .._protocol.chunks import ChunkExpander

__all__ = ["ExpandChunks"]
__dir__ = public_dir(__all__)


class ExpandChunks(StreamTransformer):
    """Expand TEXT_MESSAGE_CHUNK, TOOL_CALL_CHUNK and REASONING_MESSAGE_CHUNK (see module doc).

    Fatal chunk streams raise :class:`~agui_pipes.VerificationError` (a
    ``ProtocolViolation``) with rule ``chunk-incomplete``, ``chunk-conflict``,
    ``chunk-ambiguous`` or ``owner-mismatch``. Other events pass unchanged
    (the same object), so the stage costs a dict lookup when no chunk stream
    is open.
    """

    route_key: bool = False
    """Whether a chunk stream is open: until one is, only chunk events need this stage."""

    def __init__(self) -> None:
        self._expander = ChunkExpander(self._lanes_changed)

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        if self._expander.concerns(event_class):
            return self._expander.expand  # what ``transform`` runs, one call less
        return None  # no chunk stream open: nothing to close, the event passes untouched

    def _lanes_changed(self) -> None:
        is_open = self._expander.is_open
        if is_open is not self.route_key:
            self.route_key = is_open
            self.reroute()

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return self._expander.expand(event)
