"""Remove the traces of blocked tool calls from a list of messages, in any of three shapes.

One algorithm, used by FilterToolCalls for MESSAGES_SNAPSHOT, the RUN_STARTED
input echo and message lists inside the state (``state_messages``), so the
three can never disagree on what "no trace" means:

1. every call introduced by a message whose owner is blocked, or whose tool
   name is blocked, joins the blocked ids (so its later events go too);
2. a message owned by a blocked subagent goes; a tool message answering a
   blocked call (or, when it names its tool, of a blocked tool) goes;
3. an assistant message loses its blocked calls, and goes as a whole when
   nothing (no content, no call) is left — the client would never have
   created it.

The shapes differ only in where a message keeps its calls, its answer and its
owner; a :class:`Shape` reads and rewrites those:

* ``MODEL_SHAPE`` — ``ag_ui.core`` message models (``toolCalls``, ``toolCallId``);
* ``DICT_SHAPE`` — plain JSON messages as agents keep them in their state:
  the AG-UI / OpenAI shape (``role: "assistant"`` with ``toolCalls`` or
  ``tool_calls`` of ``{"id", "function": {"name"}}``, ``role: "tool"`` with
  ``toolCallId`` / ``tool_call_id``) and the LangChain shape (``type: "ai"``
  with ``tool_calls`` / ``invalid_tool_calls`` / ``tool_call_chunks`` of
  ``{"id", "name"}``, ``additional_kwargs.tool_calls`` in the OpenAI shape,
  ``tool_use`` content blocks; ``type: "tool"`` with ``tool_call_id`` and
  ``name``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import AssistantMessage, ToolMessage

__all__ = ["DICT_SHAPE", "MODEL_SHAPE", "Shape", "scrub_messages"]


@dataclass(frozen=True, slots=True)
class Shape:
    """How one message shape exposes what the scrubbing needs."""

    owner: Callable[[Any], str | None]
    calls: Callable[[Any], Iterable[tuple[str, str | None]]]
    """(id, tool name or None) of every call the message introduces."""
    answers: Callable[[Any], tuple[str | None, str | None]]
    """(call id, tool name) a tool message answers; (None, None) for other messages."""
    without: Callable[[Any, set[str]], Any]
    """The message without the calls whose ids are given; None when nothing is left."""


def scrub_messages(
    messages: Sequence[Any],
    shape: Shape,
    blocked: set[str],
    blocks: Callable[[str], bool],
    blocked_owners: set[str],
    origins: list[int] | None = None,
) -> list[Any] | None:
    """``messages`` without any trace of a blocked call, or None when nothing changed.

    ``blocked`` (the run's blocked call ids) grows with the calls blocked here.
    ``origins``, when given, receives the input index of every message kept.
    """
    for message in messages:
        owner = shape.owner(message)
        owner_blocked = owner is not None and owner in blocked_owners
        for call_id, name in shape.calls(message):
            if owner_blocked or (name is not None and blocks(name)):
                blocked.add(call_id)
    out: list[Any] = []
    changed = False
    for index, message in enumerate(messages):
        owner = shape.owner(message)
        if owner is not None and owner in blocked_owners:
            changed = True
            continue
        answered, tool = shape.answers(message)
        if (answered is not None and answered in blocked) or (tool is not None and blocks(tool)):
            changed = True
            continue
        if any(call_id in blocked for call_id, _ in shape.calls(message)):
            changed = True
            message = shape.without(message, blocked)
            if message is None:
                continue
        out.append(message)
        if origins is not None:
            origins.append(index)
    return out if changed else None


# -- ag_ui.core models --------------------------------------------------------------


def _model_owner(message: Any) -> str | None:
    return getattr(message, "subagent_run_id", None)


def _model_calls(message: Any) -> Iterable[tuple[str, str | None]]:
    if isinstance(message, AssistantMessage) and message.tool_calls:
        return [(c.id, c.function.name) for c in message.tool_calls]
    return ()


def _model_answers(message: Any) -> tuple[str | None, str | None]:
    if isinstance(message, ToolMessage):
        return message.tool_call_id, None
    return None, None


def _model_without(message: Any, blocked: set[str]) -> Any:
    calls = [c for c in message.tool_calls if c.id not in blocked]
    if not calls and not message.content:
        return None
    return message.model_copy(update={"tool_calls": calls or None})


MODEL_SHAPE = Shape(_model_owner, _model_calls, _model_answers, _model_without)


# -- plain JSON messages (AG-UI / OpenAI and LangChain) -------------------------------

_CALL_LISTS = ("toolCalls", "tool_calls", "invalid_tool_calls", "tool_call_chunks")
"""Keys of a message holding a list of calls (the LangChain ones are lists too)."""

_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call", "server_tool_use"})
"""Content block types that are a call (Anthropic ``tool_use``, LangChain v1 ``tool_call``)."""


def _call_name(call: dict[str, Any]) -> str | None:
    name = call.get("name")
    if isinstance(name, str):
        return name
    function = call.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return str(function["name"])
    return None


def _call_id(call: Any) -> str | None:
    if isinstance(call, dict):
        value = call.get("id")
        if isinstance(value, str):
            return value
    return None


def _call_lists(message: dict[str, Any]) -> Iterable[tuple[dict[str, Any], str]]:
    """(container, key) of every list of calls in the message."""
    for key in _CALL_LISTS:
        if isinstance(message.get(key), list):
            yield message, key
    extra = message.get("additional_kwargs")
    if isinstance(extra, dict) and isinstance(extra.get("tool_calls"), list):
        yield extra, "tool_calls"


def _block_calls(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") in _CALL_BLOCKS]


def _dict_owner(message: Any) -> str | None:
    if isinstance(message, dict):
        owner = message.get("subagentRunId")
        if isinstance(owner, str):
            return owner
    return None


def _dict_calls(message: Any) -> Iterable[tuple[str, str | None]]:
    if not isinstance(message, dict):
        return ()
    found: list[tuple[str, str | None]] = []
    for container, key in _call_lists(message):
        for call in container[key]:
            call_id = _call_id(call)
            if call_id is not None:
                found.append((call_id, _call_name(call)))
    for block in _block_calls(message):
        call_id = _call_id(block)
        if call_id is not None:
            found.append((call_id, _call_name(block)))
    return found


def _dict_answers(message: Any) -> tuple[str | None, str | None]:
    if not isinstance(message, dict):
        return None, None
    if message.get("role") != "tool" and message.get("type") != "tool":
        return None, None
    answered = message.get("toolCallId", message.get("tool_call_id"))
    name = message.get("name")
    return (
        answered if isinstance(answered, str) else None,
        name if isinstance(name, str) else None,
    )


def _empty_content(content: Any) -> bool:
    return content is None or content == "" or content == []


def _dict_without(message: Any, blocked: set[str]) -> Any:
    out = dict(message)
    left = 0
    for container, key in list(_call_lists(message)):
        kept = [c for c in container[key] if _call_id(c) not in blocked]
        left += len(kept)
        if container is message:
            out[key] = kept
        else:
            out["additional_kwargs"] = {**container, key: kept}
    content = message.get("content")
    if isinstance(content, list) and _block_calls(message):
        content = [
            b
            for b in content
            if not (
                isinstance(b, dict) and b.get("type") in _CALL_BLOCKS and _call_id(b) in blocked
            )
        ]
        out["content"] = content
    if left == 0 and _empty_content(content):
        return None
    return out


DICT_SHAPE = Shape(_dict_owner, _dict_calls, _dict_answers, _dict_without)
