"""The pre-1.0 event models (``THINKING_*``), built only when legacy shapes are read.

A module of their own so that defining five pydantic models costs nothing to a
process that never reads a pre-1.0 stream: the decoder imports it on its first
legacy decode, the ``compat`` stage with itself. See ``agui_pipes._protocol.legacy`` for
the rest of what pre-1.0 shapes need, and docs/compat.md.

The models are ``ag_ui.core`` events in every respect the pipeline relies on (a
``type`` enum, camelCase wire names, the base fields), so they flow through
chains and encode as their own pre-1.0 wire shape, which is what the ``compat``
stage relies on when it serves an old client. Their ``type`` is a
:class:`LegacyEventType`, never an ``ag_ui.core.EventType``: a consumer
pipeline without ``compat`` recognises them by that (the verifier lets them
pass without effect and the fold drops them with the ``unknown-event-type``
warning the decoder would have given).
"""

from __future__ import annotations

from enum import Enum
from typing import Final, Literal

from ag_ui.core import BaseEvent
from pydantic import Field

__all__ = [
    "LEGACY_EVENT_CLASSES",
    "LegacyEvent",
    "LegacyEventType",
    "ThinkingEndEvent",
    "ThinkingStartEvent",
    "ThinkingTextMessageContentEvent",
    "ThinkingTextMessageEndEvent",
    "ThinkingTextMessageStartEvent",
]


class LegacyEventType(str, Enum):
    """The wire ``type`` values of the pre-1.0 events agui_pipes can read."""

    THINKING_START = "THINKING_START"
    THINKING_END = "THINKING_END"
    THINKING_TEXT_MESSAGE_START = "THINKING_TEXT_MESSAGE_START"
    THINKING_TEXT_MESSAGE_CONTENT = "THINKING_TEXT_MESSAGE_CONTENT"
    THINKING_TEXT_MESSAGE_END = "THINKING_TEXT_MESSAGE_END"


class LegacyEvent(BaseEvent):
    """A pre-1.0 event: built by the decoder only when legacy shapes were asked for.

    ``type`` is a :class:`LegacyEventType`, never an ``ag_ui.core.EventType``:
    no 1.0 code path can mistake one for a 1.0 event.
    """

    type: LegacyEventType  # type: ignore[assignment]  # a pre-1.0 type, by design


class ThinkingStartEvent(LegacyEvent):
    """``THINKING_START``: opens a reasoning span (1.0: ``REASONING_START``, with an id)."""

    type: Literal[LegacyEventType.THINKING_START] = LegacyEventType.THINKING_START
    title: str | None = Field(default=None)
    """The span's label; 1.0 has no field for it."""


class ThinkingEndEvent(LegacyEvent):
    """``THINKING_END``: closes the open span (1.0: ``REASONING_END``)."""

    type: Literal[LegacyEventType.THINKING_END] = LegacyEventType.THINKING_END


class ThinkingTextMessageStartEvent(LegacyEvent):
    """``THINKING_TEXT_MESSAGE_START`` (1.0: ``REASONING_MESSAGE_START``, with an id)."""

    type: Literal[LegacyEventType.THINKING_TEXT_MESSAGE_START] = (
        LegacyEventType.THINKING_TEXT_MESSAGE_START
    )


class ThinkingTextMessageContentEvent(LegacyEvent):
    """``THINKING_TEXT_MESSAGE_CONTENT`` (1.0: ``REASONING_MESSAGE_CONTENT``)."""

    type: Literal[LegacyEventType.THINKING_TEXT_MESSAGE_CONTENT] = (
        LegacyEventType.THINKING_TEXT_MESSAGE_CONTENT
    )
    delta: str


class ThinkingTextMessageEndEvent(LegacyEvent):
    """``THINKING_TEXT_MESSAGE_END`` (1.0: ``REASONING_MESSAGE_END``)."""

    type: Literal[LegacyEventType.THINKING_TEXT_MESSAGE_END] = (
        LegacyEventType.THINKING_TEXT_MESSAGE_END
    )


LEGACY_EVENT_CLASSES: Final[tuple[type[LegacyEvent], ...]] = (
    ThinkingStartEvent,
    ThinkingEndEvent,
    ThinkingTextMessageStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
)

# Their public home (docs, reprs, pickling): the compat stage's module, which
# re-exports them; defined here so the decoder needs no stage to build them.
for _cls in (LegacyEventType, LegacyEvent, *LEGACY_EVENT_CLASSES):
    _cls.__module__ = "agui_pipes.transformers.compat"
