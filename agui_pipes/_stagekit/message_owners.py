"""Who owns a message id, as the client records it — for stages that remove its opener.

An untagged TOOL_CALL_START with a ``parentMessageId`` belongs to whoever owns
that message (PROTOCOL.md: a tool call belongs to the message that carries
it), so a subagent may open a call in its own message without tagging the
start, and tag only the ARGS / END. The client learns the message's owner from
the event that put it on record: the first TEXT_MESSAGE_START (or id'd
TEXT_MESSAGE_CHUNK) for it, the newest TOOL_CALL_RESULT minting it, a
MESSAGES_SNAPSHOT (authoritative) or the RUN_STARTED input echo (only for ids
not yet known). A stage that removes that event leaves the start without an
owner downstream, so the tagged continuations no longer match it and the
client rejects the stream.

``MessageOwners`` replays those rules on the input so such a start can be
given its owner's tag explicitly, which means the same thing on either side.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["MessageOwners"]

_OTHER_BUCKETS = frozenset({"reasoning", "activity"})
"""Roles whose ids the client keeps apart from text/tool/assistant message ids."""


class MessageOwners:
    """The owner (subagent id, or None for the parent) of every message id on record."""

    __slots__ = ("_owners",)

    def __init__(self) -> None:
        self._owners: dict[str, str | None] = {}

    def reset(self) -> None:
        """Forget everything (a new run)."""
        self._owners.clear()

    def opened(self, message_id: str, tag: str | None) -> None:
        """A text message start: the first writer owns the id."""
        self._owners.setdefault(message_id, tag)

    def minted(self, message_id: str, tag: str | None) -> None:
        """A tool result's message: the newest minter owns the id."""
        self._owners[message_id] = tag

    def seed(self, messages: Iterable[Any], *, authoritative: bool) -> None:
        """Replayed history: a snapshot (authoritative) or the input echo."""
        owners = self._owners
        for message in messages:
            message_id = getattr(message, "id", None)
            if not isinstance(message_id, str) or message.role in _OTHER_BUCKETS:
                continue
            if authoritative or message_id not in owners:
                owners[message_id] = getattr(message, "subagent_run_id", None)

    def owner(self, message_id: str) -> str | None:
        """The subagent owning ``message_id``; None for the parent or an unknown id."""
        return self._owners.get(message_id)
