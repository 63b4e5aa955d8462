"""Short builders for events and the sequences tests keep writing by hand.

Every builder returns ``list[BaseEvent]`` (even single events), so sequences
compose with ``+`` and ``*``::

    events = run_events(text("m1", "Hello", "world") + tool_call("c1", "search", '{"q":1}',
                        result="[]"))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
)
from ag_ui.core import (
    ReasoningEndEvent as _ReasoningEnd,
)
from ag_ui.core import (
    ReasoningMessageContentEvent as _ReasoningContent,
)
from ag_ui.core import (
    ReasoningMessageEndEvent as _ReasoningMessageEnd,
)
from ag_ui.core import (
    ReasoningMessageStartEvent as _ReasoningMessageStart,
)
from ag_ui.core import (
    ReasoningStartEvent as _ReasoningStart,
)
from ag_ui.core import (
    TextMessageChunkEvent as _TextChunk,
)
from ag_ui.core import (
    TextMessageContentEvent as _TextContent,
)
from ag_ui.core import (
    TextMessageEndEvent as _TextEnd,
)
from ag_ui.core import (
    TextMessageStartEvent as _TextStart,
)
from ag_ui.core import (
    ToolCallArgsEvent as _ToolArgs,
)
from ag_ui.core import (
    ToolCallChunkEvent as _ToolChunk,
)
from ag_ui.core import (
    ToolCallEndEvent as _ToolEnd,
)
from ag_ui.core import (
    ToolCallResultEvent as _ToolResult,
)
from ag_ui.core import (
    ToolCallStartEvent as _ToolStart,
)

from ..events import ATTRIBUTABLE_TYPES

__all__ = [
    "reasoning",
    "run_error",
    "run_events",
    "run_finished",
    "run_started",
    "step",
    "subagent",
    "tagged",
    "text",
    "text_chunks",
    "tool_call",
    "tool_call_chunks",
]


def _tag(subagent: str | None) -> dict[str, Any]:
    return {} if subagent is None else {"subagent_run_id": subagent}


def tagged(events: Iterable[BaseEvent], subagent_run_id: str) -> list[BaseEvent]:
    """Copies of ``events`` attributed to ``subagent_run_id`` (untaggable ones unchanged)."""
    return [
        e.model_copy(update={"subagent_run_id": subagent_run_id})
        if e.type in ATTRIBUTABLE_TYPES
        else e
        for e in events
    ]


def text(
    message_id: str,
    *deltas: str,
    role: str | None = None,
    subagent: str | None = None,
) -> list[BaseEvent]:
    """TEXT_MESSAGE_START, one CONTENT per delta, END."""
    start: dict[str, Any] = {"message_id": message_id, **_tag(subagent)}
    if role is not None:
        start["role"] = role
    return [
        _TextStart(**start),
        *(_TextContent(message_id=message_id, delta=d, **_tag(subagent)) for d in deltas),
        _TextEnd(message_id=message_id, **_tag(subagent)),
    ]


def text_chunks(
    message_id: str, *deltas: str, role: str | None = None, subagent: str | None = None
) -> list[BaseEvent]:
    """The chunk form: the first TEXT_MESSAGE_CHUNK carries the id, the rest only deltas."""
    out: list[BaseEvent] = []
    for i, delta in enumerate(deltas or ("",)):
        fields: dict[str, Any] = {"delta": delta, **_tag(subagent)}
        if i == 0:
            fields["message_id"] = message_id
            if role is not None:
                fields["role"] = role
        out.append(_TextChunk(**fields))
    return out


def _args_text(args: str | Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def tool_call(
    tool_call_id: str,
    name: str,
    *args: str | Any,
    result: str | Any | None = None,
    result_message_id: str | None = None,
    parent_message_id: str | None = None,
    subagent: str | None = None,
) -> list[BaseEvent]:
    """START, one ARGS per argument fragment, END, and a RESULT when ``result`` is given.

    Non-string ``args`` and ``result`` values are JSON-encoded.
    """
    start: dict[str, Any] = {
        "tool_call_id": tool_call_id,
        "tool_call_name": name,
        **_tag(subagent),
    }
    if parent_message_id is not None:
        start["parent_message_id"] = parent_message_id
    out: list[BaseEvent] = [
        _ToolStart(**start),
        *(
            _ToolArgs(tool_call_id=tool_call_id, delta=_args_text(a), **_tag(subagent))
            for a in args
        ),
        _ToolEnd(tool_call_id=tool_call_id, **_tag(subagent)),
    ]
    if result is not None:
        out.append(
            _ToolResult(
                message_id=result_message_id or f"{tool_call_id}-result",
                tool_call_id=tool_call_id,
                content=_args_text(result),
                **_tag(subagent),
            )
        )
    return out


def tool_call_chunks(
    tool_call_id: str,
    name: str,
    *args: str,
    parent_message_id: str | None = None,
    subagent: str | None = None,
) -> list[BaseEvent]:
    """The chunk form of a tool call: the first chunk names it, the rest carry only deltas."""
    out: list[BaseEvent] = []
    for i, delta in enumerate(args or ("",)):
        fields: dict[str, Any] = {"delta": delta, **_tag(subagent)}
        if i == 0:
            fields["tool_call_id"] = tool_call_id
            fields["tool_call_name"] = name
            if parent_message_id is not None:
                fields["parent_message_id"] = parent_message_id
        out.append(_ToolChunk(**fields))
    return out


def reasoning(
    message_id: str, *deltas: str, span_id: str | None = None, subagent: str | None = None
) -> list[BaseEvent]:
    """A reasoning span holding one reasoning message: REASONING_START, MESSAGE_*, END."""
    span = span_id or f"{message_id}-span"
    return [
        _ReasoningStart(message_id=span, **_tag(subagent)),
        _ReasoningMessageStart(message_id=message_id, role="reasoning", **_tag(subagent)),
        *(_ReasoningContent(message_id=message_id, delta=d, **_tag(subagent)) for d in deltas),
        _ReasoningMessageEnd(message_id=message_id, **_tag(subagent)),
        _ReasoningEnd(message_id=span, **_tag(subagent)),
    ]


def step(
    name: str, inner: Sequence[BaseEvent] = (), *, subagent: str | None = None
) -> list[BaseEvent]:
    """STEP_STARTED, ``inner``, STEP_FINISHED."""
    return [
        StepStartedEvent(step_name=name, **_tag(subagent)),
        *inner,
        StepFinishedEvent(step_name=name, **_tag(subagent)),
    ]


def subagent(
    subagent_run_id: str,
    name: str,
    inner: Sequence[BaseEvent] = (),
    *,
    parent: str | None = None,
    parent_tool_call_id: str | None = None,
    result: Any = None,
    error: str | None = None,
    tag_inner: bool = True,
) -> list[BaseEvent]:
    """A subagent scope: SUBAGENT_STARTED, ``inner`` (tagged unless already), the end.

    ``error`` ends the scope with SUBAGENT_ERROR instead of SUBAGENT_FINISHED.
    Inner events that already carry a tag keep it (nested scopes).
    """
    started: dict[str, Any] = {"subagent_run_id": subagent_run_id, "name": name}
    if parent is not None:
        started["parent_subagent_run_id"] = parent
    if parent_tool_call_id is not None:
        started["parent_tool_call_id"] = parent_tool_call_id
    body = list(inner)
    if tag_inner:
        body = [
            e.model_copy(update={"subagent_run_id": subagent_run_id})
            if e.type in ATTRIBUTABLE_TYPES and getattr(e, "subagent_run_id", None) is None
            else e
            for e in body
        ]
    end: BaseEvent
    if error is not None:
        end = SubagentErrorEvent(subagent_run_id=subagent_run_id, message=error)
    else:
        fields: dict[str, Any] = {"subagent_run_id": subagent_run_id}
        if result is not None:
            fields["result"] = result
        end = SubagentFinishedEvent(**fields)
    return [SubagentStartedEvent(**started), *body, end]


def run_started(
    thread_id: str = "thread-1",
    run_id: str = "run-1",
    *,
    input: RunAgentInput | None = None,
    **fields: Any,
) -> list[BaseEvent]:
    """A RUN_STARTED event (as a one-element list)."""
    if input is not None:
        fields["input"] = input
    return [RunStartedEvent(thread_id=thread_id, run_id=run_id, **fields)]


def run_finished(
    thread_id: str = "thread-1", run_id: str = "run-1", **fields: Any
) -> list[BaseEvent]:
    """A RUN_FINISHED event (as a one-element list); pass ``outcome=`` / ``result=``."""
    return [RunFinishedEvent(thread_id=thread_id, run_id=run_id, **fields)]


def run_error(message: str = "failed", code: str | None = None) -> list[BaseEvent]:
    """A RUN_ERROR event (as a one-element list)."""
    return [RunErrorEvent(message=message, code=code)]


def run_events(
    inner: Sequence[BaseEvent] = (),
    *,
    thread_id: str = "thread-1",
    run_id: str = "run-1",
    error: str | None = None,
    **finished: Any,
) -> list[BaseEvent]:
    """A whole run: RUN_STARTED, ``inner``, RUN_FINISHED (or RUN_ERROR when ``error``)."""
    end = run_error(error) if error is not None else run_finished(thread_id, run_id, **finished)
    return [*run_started(thread_id, run_id), *inner, *end]
