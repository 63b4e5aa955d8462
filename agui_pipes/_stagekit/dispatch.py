"""Dispatch by event class through a table of handlers, for stages built that way.

Most built-in stages handle a handful of event classes, each with its own
method, and which methods depends on configuration (a mode, an option). Such a
stage builds a table ``{event class: handler}`` in ``__init__`` and inherits
from :class:`TableDispatch`:

* ``transform`` looks the event's class up and calls its handler (a class
  with none passes unchanged);
* ``route`` hands the chain the handler itself, or None for a class with
  none, so the chain calls the handler directly: no call layer is added per
  event over a hand-written ``transform``.

A stage whose dispatch needs more than the table (a fast case, work after the
handler) overrides ``transform`` and ``route`` and keeps the table here;
``handled_types`` gives its ``event_types`` from the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ag_ui.core import BaseEvent, EventType

from .._pipeline.transformer import StreamTransformer, Transform

__all__ = ["Handler", "HandlerTable", "TableDispatch", "handled_types"]

Handler = Callable[[Any], Sequence[BaseEvent]]
"""One event class's handler: the event in, what goes downstream out."""

HandlerTable = dict[type[BaseEvent], Handler]
"""Each handled event class (exactly: subclasses are other classes) -> its handler."""


class TableDispatch(StreamTransformer):
    """A stage whose ``transform`` and ``route`` answer from ``self._handlers``."""

    _handlers: HandlerTable
    """Set by the stage's ``__init__``; read by ``transform`` and ``route``."""

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        handler = self._handlers.get(type(event))
        return (event,) if handler is None else handler(event)

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        # The handler itself; a class with none skips the stage.
        return self._handlers.get(event_class)


def handled_types(handlers: Mapping[type[BaseEvent], object]) -> tuple[EventType, ...]:
    """The event types of a table's classes (a stage's ``event_types``), in table order."""
    return tuple(EventType(cls.model_fields["type"].default) for cls in handlers)
