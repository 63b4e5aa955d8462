"""ADK's interrupt dialect (a run that stops on frontend tool calls), both ways.

What ag-ui-adk (0.11.0, with its defaults) does when the model calls a tool
the client declared: the run streams the call (``TOOL_CALL_START`` / ``ARGS``
/ ``END``) and ends with a plain ``RUN_FINISHED``, the call left without a
result; the next run answers it with a ``tool`` message in ``messages``
(``toolCallId`` naming the call, ``content`` the result as text, parsed as
JSON when it parses). Its own answers to ``resume[]`` are rendered the same
way (``ADKAgent._resume_entry_content``): ``cancelled`` →
``{"status": "cancelled", "cancelled": true}``, no payload → ``""``, a
string as it is, anything else ``json.dumps``; the message id is
``resume-<toolCallId>``, and it goes right after the assistant message that
issued the call (at the end when none does), replacing a tool message for
the same call.

Canonical (AG-UI 1.0) from the dialect: one interrupt per call left
unanswered, ``id`` and ``toolCallId`` the call's id, ``reason`` the bridge's
(``tool_call`` by default), with its ``responseSchema`` and ``expiresAt``
when configured. One change to ADK's rendering so that every payload comes
back as it went: a string that would parse as JSON (``"123"``, ``"true"``)
or is empty is sent JSON-encoded (the tool, which parses, still receives the
string).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ag_ui.core import Interrupt, ResumeEntry

__all__ = [
    "CANCELLED_RESULT",
    "DEFAULT_REASON",
    "interrupt_for_call",
    "resume_from_tool_message",
    "tool_message_content",
    "with_tool_results",
]

DEFAULT_REASON: Final = "tool_call"
"""The reason of a pending tool call's interrupt unless the bridge names another."""

CANCELLED_RESULT: Final = json.dumps({"status": "cancelled", "cancelled": True})
"""The tool result of a cancelled call (ag-ui-adk's ``_CANCELLED_TOOL_RESULT``)."""


def interrupt_for_call(
    tool_call_id: str,
    *,
    reason: str = DEFAULT_REASON,
    response_schema: dict[str, Any] | None = None,
    expires_at: str | None = None,
    subagent_run_id: str | None = None,
) -> Interrupt:
    """The canonical interrupt of a tool call the run left unanswered."""
    return Interrupt(
        id=tool_call_id,
        reason=reason,
        tool_call_id=tool_call_id,
        response_schema=response_schema,
        expires_at=expires_at,
        subagent_run_id=subagent_run_id,
    )


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def tool_message_content(entry: Mapping[str, Any]) -> str:
    """The tool result text answering one wire resume entry (module doc)."""
    if entry.get("status") == "cancelled":
        return CANCELLED_RESULT
    payload = entry.get("payload")
    if payload is None:
        return ""
    if isinstance(payload, str) and payload and not _parses(payload):
        return payload
    return json.dumps(payload, ensure_ascii=False)


def resume_from_tool_message(tool_call_id: str, content: str) -> ResumeEntry:
    """The canonical answer a tool result gives its call's interrupt (the inverse)."""
    if content == CANCELLED_RESULT:
        return ResumeEntry(interrupt_id=tool_call_id, status="cancelled")
    if content == "":
        return ResumeEntry(interrupt_id=tool_call_id, status="resolved")
    try:
        payload: Any = json.loads(content)
    except ValueError:
        payload = content
    return ResumeEntry(interrupt_id=tool_call_id, status="resolved", payload=payload)


def with_tool_results(messages: Sequence[Any], entries: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``messages`` (wire dicts) with one tool message per resume entry, placed as ADK does."""
    answered = {str(entry.get("interruptId")) for entry in entries}
    kept = [
        message
        for message in messages
        if not (
            isinstance(message, Mapping)
            and message.get("role") == "tool"
            and message.get("toolCallId") in answered
        )
    ]
    issuer: dict[str, int] = {}
    for position, message in enumerate(kept):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            for call in message.get("toolCalls") or ():
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    issuer[call["id"]] = position
    after: dict[int, list[dict[str, Any]]] = {}
    trailing: list[dict[str, Any]] = []
    for entry in entries:
        call_id = str(entry.get("interruptId"))
        result = {
            "id": f"resume-{call_id}",
            "role": "tool",
            "toolCallId": call_id,
            "content": tool_message_content(entry),
        }
        anchor = issuer.get(call_id)
        if anchor is None:
            trailing.append(result)
        else:
            after.setdefault(anchor, []).append(result)
    placed: list[Any] = []
    for position, message in enumerate(kept):
        placed.append(message)
        placed.extend(after.get(position, ()))
    return placed + trailing
