"""What the ``compat`` stage and its request shims share: versions and the era rewrites.

The rewrites are the facts of the reference TypeScript client's shims
(``BackwardCompatibility_0_0_39`` / ``_45`` / ``_57`` and the always-on
compatibility boundary), restated for ``ag_ui.core`` models on the stream side
and for wire dicts on the request side. Each returns its input object itself
when there is nothing to change, so the stage can pass an event on untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallResultEvent,
)

__all__ = [
    "CURRENT",
    "FLAT_CONTENT",
    "PRE_SUBAGENTS",
    "THINKING_ERA",
    "Version",
    "flatten_event",
    "flatten_wire_content",
    "parse_version",
    "shown",
    "strip_subagents",
]

Version = tuple[int, int, int]

CURRENT: Final[Version] = (1, 0, 0)
"""The protocol this package speaks (AG-UI 1.0)."""
PRE_SUBAGENTS: Final[Version] = (0, 0, 57)
"""At or below: no subagents (the reference's ``BackwardCompatibility_0_0_57`` gate)."""
THINKING_ERA: Final[Version] = (0, 0, 45)
"""At or below: reasoning is spelled ``THINKING_*`` (``BackwardCompatibility_0_0_45``)."""
FLAT_CONTENT: Final[Version] = (0, 0, 39)
"""At or below: message content is one string (``BackwardCompatibility_0_0_39``)."""

_VERSION: Final = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: object, what: str) -> Version:
    """``"0.0.45"`` / ``"1.0"`` as a comparable triple; ValueError naming ``what`` otherwise."""
    match = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"{what} must be a protocol version such as '0.0.45' or '1.0' (two or three "
            f"dot-separated numbers), got {text!r}"
        )
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def shown(version: Version) -> str:
    """A version as people write it: ``1.0`` for the current one, ``0.0.45`` otherwise."""
    major, minor, patch = version
    return f"{major}.{minor}" if patch == 0 and (major or minor) else f"{major}.{minor}.{patch}"


# -- subagents (0.0.57) ------------------------------------------------------


def _without_tag(model: Any) -> Any:
    if getattr(model, "subagent_run_id", None) is None:
        return model
    return model.model_copy(update={"subagent_run_id": None})


def _untagged_all(models: list[Any]) -> list[Any] | None:
    """``models`` without their ``subagent_run_id``, or None when none carried one."""
    if not any(getattr(model, "subagent_run_id", None) is not None for model in models):
        return None
    return [_without_tag(model) for model in models]


def strip_subagents(event: BaseEvent) -> BaseEvent:
    """``event`` with every protocol-level ``subagentRunId`` removed (the lifecycle aside).

    The event's own tag, the messages of a snapshot or input echo, and the
    interrupts of an ``interrupt`` outcome; never opaque payloads (state,
    ``RAW.event``, ``CUSTOM.value``), as the reference shim does not recurse there.
    """
    event = _without_tag(event)
    cls = event.__class__
    if cls is MessagesSnapshotEvent:
        assert isinstance(event, MessagesSnapshotEvent)
        messages = _untagged_all(event.messages)
        if messages is not None:
            event = event.model_copy(update={"messages": messages})
    elif cls is RunStartedEvent:
        assert isinstance(event, RunStartedEvent)
        echo = event.input
        if echo is not None:
            messages = _untagged_all(echo.messages)
            if messages is not None:
                event = event.model_copy(
                    update={"input": echo.model_copy(update={"messages": messages})}
                )
    elif cls is RunFinishedEvent:
        assert isinstance(event, RunFinishedEvent)
        outcome = event.outcome
        interrupts = getattr(outcome, "interrupts", None)
        if outcome is not None and interrupts:
            untagged = _untagged_all(interrupts)
            if untagged is not None:
                event = event.model_copy(
                    update={"outcome": outcome.model_copy(update={"interrupts": untagged})}
                )
    return event


# -- flat content (0.0.39) ---------------------------------------------------

Warn = Callable[[str], None]


def _flat(content: Any, where: str, warn: Warn) -> Any:
    """A content list as one string (text parts joined); other parts dropped, with a warning."""
    if not isinstance(content, list):
        return content
    dropped = [
        str(getattr(part, "type", type(part).__name__))
        for part in content
        if getattr(part, "type", None) != "text"
    ]
    if dropped:
        warn(
            f"flattening {where} for a <=0.0.39 peer DROPS non-text parts "
            f"({', '.join(dropped)}): that version takes content as one string"
        )
    return "".join(part.text for part in content if getattr(part, "type", None) == "text")


def _flat_messages(messages: list[Any], where: str, warn: Warn) -> list[Any] | None:
    out: list[Any] | None = None
    for position, message in enumerate(messages):
        content = getattr(message, "content", None)
        if not isinstance(content, list):
            continue
        if out is None:
            out = list(messages)
        label = f"the content of message {getattr(message, 'id', position)!r} in {where}"
        out[position] = message.model_copy(update={"content": _flat(content, label, warn)})
    return out


def flatten_event(event: BaseEvent, warn: Warn) -> BaseEvent:
    """``event`` as a <=0.0.39 peer reads it: content as strings, no ``parentRunId``."""
    cls = event.__class__
    if cls is MessagesSnapshotEvent:
        assert isinstance(event, MessagesSnapshotEvent)
        messages = _flat_messages(event.messages, "MESSAGES_SNAPSHOT", warn)
        if messages is not None:
            event = event.model_copy(update={"messages": messages})
    elif cls is RunStartedEvent:
        assert isinstance(event, RunStartedEvent)
        update: dict[str, Any] = {}
        if event.parent_run_id is not None:
            update["parent_run_id"] = None
        echo = event.input
        if echo is not None:
            echo_update: dict[str, Any] = {}
            messages = _flat_messages(echo.messages, "the RUN_STARTED input", warn)
            if messages is not None:
                echo_update["messages"] = messages
            if echo.parent_run_id is not None:
                echo_update["parent_run_id"] = None
            if echo_update:
                update["input"] = echo.model_copy(update=echo_update)
        if update:
            event = event.model_copy(update=update)
    elif cls is ToolCallResultEvent:
        assert isinstance(event, ToolCallResultEvent)
        if isinstance(event.content, list):
            label = f"the content of the TOOL_CALL_RESULT of call {event.tool_call_id!r}"
            event = event.model_copy(update={"content": _flat(event.content, label, warn)})
    return event


def flatten_wire_content(message: dict[str, Any], warn: Warn) -> dict[str, Any]:
    """A request message (wire dict) as a <=0.0.39 peer takes it (the reference's rules).

    Array content becomes its text parts joined, other parts dropped with a
    warning; a part that claims ``text`` but holds no string is a defect the
    downgrade must not repair, so the message is left as it is (with a
    warning) for the peer to reject; absent content becomes ``""``, the one
    value the older schema requires where 1.0 allows none.
    """
    content = message.get("content")
    if isinstance(content, list):

        def claims_text(part: Any) -> bool:
            return isinstance(part, dict) and part.get("type") == "text"

        malformed = [p for p in content if claims_text(p) and not isinstance(p.get("text"), str)]
        if malformed:
            warn(
                f"not flattening the content of message {message.get('id')!r} for a <=0.0.39 "
                f"peer: {len(malformed)} part(s) claim type 'text' without a string 'text'; "
                "a downgrade does not repair a malformed value, so it goes as it is"
            )
            return message
        dropped = [
            str(p.get("type")) if isinstance(p, dict) and "type" in p else type(p).__name__
            for p in content
            if not claims_text(p)
        ]
        if dropped:
            warn(
                f"flattening the content of message {message.get('id')!r} for a <=0.0.39 peer "
                f"DROPS non-text parts ({', '.join(dropped)}): that version takes content as "
                "one string"
            )
        return {**message, "content": "".join(p["text"] for p in content if claims_text(p))}
    if "content" not in message:
        return {**message, "content": ""}
    return message
