"""Pre-1.0 wire shapes: what reading them needs besides the event models.

AG-UI 1.0 retired two families of shapes that producers still send:

* the ``THINKING_*`` events (``THINKING_START`` / ``THINKING_END`` around a
  ``THINKING_TEXT_MESSAGE_START`` / ``_CONTENT`` / ``_END`` message), which 1.0
  names ``REASONING_*`` and which carry no ids (their models are in
  ``agui_pipes._protocol.legacy_events``);
* the ``binary`` content part (``{type: "binary", mimeType, data | url | id,
  filename?}``), which 1.0 replaced by typed media parts (``image``, ``audio``,
  ``video``, ``document``) with a ``source``.

A 1.0 consumer drops both (an unknown event type; an unknown union member),
each with a warning. The official TypeScript client translates them at an
always-on boundary instead. agui_pipes does it when a chain asks
(:func:`reads_legacy`: the ``compat`` stage), without weakening the decoder.

The content-part upgrade follows the reference client's rules exactly
(``data`` wins over ``url``; ``filename`` becomes ``metadata.filename``; a part
carrying only an ``id`` cannot be converted and is left for the 1.0 checks to
remove, with a warning; a legacy part that mirrors a modern part already in the
same content is dropped).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = ["LEGACY_TYPE_NAMES", "has_binary_part", "reads_legacy", "upgrade_binary_parts"]

LEGACY_TYPE_NAMES: Final = frozenset(
    {
        "THINKING_START",
        "THINKING_END",
        "THINKING_TEXT_MESSAGE_START",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END",
    }
)
"""The wire ``type`` of every pre-1.0 event read (``legacy_events.LegacyEventType``'s
values, which a test holds equal), known without building the models."""


def has_binary_part(raw: Mapping[str, Any]) -> bool:
    """Whether a wire MESSAGES_SNAPSHOT carries a pre-1.0 ``binary`` content part."""
    messages = raw.get("messages")
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(_is_binary(part) for part in content):
            return True
    return False


def reads_legacy(stages: Iterable[object]) -> bool:
    """Whether a chain of ``stages`` wants its decoder to read the pre-1.0 shapes.

    A stage asks by having ``reads_legacy`` true (the ``compat`` stage of
    direction ``up``). Whoever decodes for a chain (the relay, the gateway,
    ``Consumer(compat=...)``) asks this once, so a chain without such a stage
    decodes exactly as AG-UI 1.0 says.
    """
    return any(getattr(stage, "reads_legacy", False) is True for stage in stages)


def _media_kind(mime_type: str) -> str:
    for prefix in ("image", "audio", "video"):
        if mime_type.startswith(prefix + "/"):
            return prefix
    return "document"


def _is_binary(part: Any) -> bool:
    return (
        isinstance(part, Mapping)
        and part.get("type") == "binary"
        and isinstance(part.get("mimeType"), str)
    )


def _converted(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """The modern part for a legacy ``binary`` part, or None when it has only an ``id``."""
    mime_type = part["mimeType"]
    data, url = part.get("data"), part.get("url")
    if data:
        source = {"type": "data", "value": data, "mimeType": mime_type}
    elif url:
        source = {"type": "url", "value": url, "mimeType": mime_type}
    else:
        return None
    modern: dict[str, Any] = {"type": _media_kind(mime_type), "source": source}
    filename = part.get("filename")
    if filename:
        modern["metadata"] = {"filename": filename}
    return modern


def _mirrors(other: Any, modern: Mapping[str, Any], filename: Any) -> bool:
    """Whether ``other`` (a part of the original content) already is ``modern``."""
    if not isinstance(other, Mapping) or other.get("type") != modern["type"]:
        return False
    source = other.get("source")
    if not isinstance(source, Mapping):
        return False
    if any(source.get(key) != modern["source"][key] for key in ("type", "value", "mimeType")):
        return False
    if not filename:
        return True
    metadata = other.get("metadata")
    return isinstance(metadata, Mapping) and metadata.get("filename") == filename


def upgrade_binary_parts(content: Any) -> tuple[Any, list[str]]:
    """``content`` with its legacy ``binary`` parts upgraded, and notes on what could not be.

    Returns ``content`` itself (the same object) when it holds no legacy part,
    so callers can tell "nothing to do" by identity. Each note is a sentence
    about a part that could not be converted (it carries only an ``id``): the
    part is kept as it was, and a 1.0 reader removes it as an unknown member.
    """
    if not isinstance(content, list) or not any(_is_binary(part) for part in content):
        return content, []
    notes: list[str] = []
    upgraded: list[Any] = []
    for position, part in enumerate(content):
        if not _is_binary(part):
            upgraded.append(part)
            continue
        modern = _converted(part)
        if modern is None:
            notes.append(
                f"the binary content part at position {position} carries only an id "
                f"({part.get('id', '')!r}), so it cannot become a modern media part; a 1.0 "
                "peer will not accept it. Send data or a url instead"
            )
            upgraded.append(part)
        elif not any(_mirrors(other, modern, part.get("filename")) for other in content):
            upgraded.append(modern)
    return upgraded, notes
