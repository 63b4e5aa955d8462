"""ToolResultToState: a tool's result becomes shared state the client mirrors.

Many agents compute state with a tool (a planner returns the plan, a search
returns results the UI shows in a side panel) and would otherwise have to
publish it a second time. This stage watches one tool's calls and, when a
call's TOOL_CALL_RESULT arrives, emits the state event the result describes:

* ``snapshot`` — the result content, parsed as JSON, replaces the whole state
  (STATE_SNAPSHOT);
* ``delta`` — the content is an RFC 6902 patch (STATE_DELTA);
* ``at`` — the content's JSON is set at a JSON Pointer inside the current
  state, creating missing parent objects (a STATE_DELTA). The stage follows
  the state through the stream (RUN_STARTED ``input.state``, snapshots,
  deltas) to know which parents exist.

The result stays in the stream and the state event follows it, unless the
stage is ``replacing()``, which drops the result. A call is promoted at most
once. Content given as content parts uses its text parts, joined. Content
that does not parse (or is not a patch in ``delta`` mode) passes through
untouched with a warning — logged, and recorded in ``warnings`` — and no
state event is made: a tool returning prose must not take the run down. The
state event carries the result's subagent tag (provenance).

``limits`` (None: the limits in effect — the server's, else
``DEFAULT_LIMITS``) bounds the state: a result whose value would make a
state past them (nesting, values, bytes) makes no state event and passes
with a ``tool-result-too-large`` warning, since a consumer with those
limits would refuse the event. In mode ``at`` the state followed through the
stream is bounded the same way: a delta that would cross the limits is
skipped, as such a consumer skips it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final, Literal

import ag_ui.core as ag
from ag_ui.core import BaseEvent, EventType
from pydantic import ValidationError

from .._foundation import json as _json
from .._foundation.json_patch import JsonDocument, LimitExceeded, PatchError, measure_json
from .._foundation.limits import Limits
from .._foundation.limits_scope import resolve_limits
from .._lazy import public_dir
from .._protocol.decode import DecodeWarning
from .._stagekit.dispatch import HandlerTable, TableDispatch

__all__ = ["ToolResultToState"]
__dir__ = public_dir(__all__)

logger = logging.getLogger(__name__)

Mode = Literal["snapshot", "delta", "at"]
_MODES: Final = ("snapshot", "delta", "at")


def _check_pointer(pointer: str) -> list[str]:
    """The unescaped tokens of an RFC 6901 pointer, or a clear ValueError."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(
            f"ToolResultToState: pointer {pointer!r} is not a JSON Pointer; it must be empty "
            "(the whole state) or start with '/', e.g. '/search/results'"
        )
    tokens = pointer[1:].split("/")
    for token in tokens:
        rest = token.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise ValueError(
                f"ToolResultToState: pointer {pointer!r} has a bare '~'; write '~0' for '~' "
                "and '~1' for '/'"
            )
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _content_text(content: Any) -> str | None:
    """The text of a result: the string itself, or its text parts joined (None if none)."""
    if isinstance(content, str):
        return content
    texts = [part.text for part in content if getattr(part, "type", None) == "text"]
    return "".join(texts) if texts else None


class ToolResultToState(TableDispatch):
    """Turn one tool's results into state updates: a snapshot, a JSON Patch, or a value at a path.

    Build with ``ToolResultToState.snapshot("plan")``, ``.delta("edit_state")``
    or ``.at("search", "/search/results")``; chain ``.replacing()`` to drop the
    result event itself.
    """

    event_types = (
        EventType.RUN_STARTED,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_CHUNK,
        EventType.TOOL_CALL_RESULT,
        EventType.MESSAGES_SNAPSHOT,
        EventType.STATE_SNAPSHOT,
        EventType.STATE_DELTA,
    )

    def __init__(
        self,
        tool: str,
        mode: Mode = "snapshot",
        pointer: str | None = None,
        replace_result: bool = False,
        limits: Limits | None = None,
    ) -> None:
        if not isinstance(tool, str) or not tool:
            raise ValueError(f"ToolResultToState: tool must be a non-empty name, got {tool!r}")
        if mode not in _MODES:
            raise ValueError(
                f"ToolResultToState: mode {mode!r} is not one of 'snapshot', 'delta', 'at'"
            )
        self._tokens: list[str] = []
        if mode == "at":
            if pointer is None:
                raise ValueError(
                    "ToolResultToState: mode 'at' needs a pointer, e.g. "
                    "ToolResultToState.at('search', '/search/results')"
                )
            self._tokens = _check_pointer(pointer)
        elif pointer is not None:
            raise ValueError(
                f"ToolResultToState: pointer only applies to mode 'at' (mode is {mode!r})"
            )
        self.tool = tool
        self.mode: Mode = mode
        self.pointer = pointer
        self.replace_result = replace_result
        self._limits_given = limits
        self.limits = resolve_limits(limits)
        self.warnings: list[DecodeWarning] = []
        """Structured copies of the warnings logged (unparsable results), in order."""
        self._calls: set[str] = set()
        self._promoted: set[str] = set()
        self._state = JsonDocument({}, limits=self.limits)
        self._track_state = mode == "at"
        self._handlers: HandlerTable = {
            ag.RunStartedEvent: self._run_started,
            ag.ToolCallStartEvent: self._start,
            ag.ToolCallChunkEvent: self._chunk,
            ag.ToolCallResultEvent: self._result,
            ag.MessagesSnapshotEvent: self._messages_snapshot,
            ag.StateSnapshotEvent: self._state_snapshot,
            ag.StateDeltaEvent: self._state_delta,
        }

    @classmethod
    def snapshot(cls, tool: str, *, limits: Limits | None = None) -> ToolResultToState:
        """The result JSON replaces the whole state (STATE_SNAPSHOT)."""
        return cls(tool, "snapshot", limits=limits)

    @classmethod
    def delta(cls, tool: str, *, limits: Limits | None = None) -> ToolResultToState:
        """The result is an RFC 6902 patch applied to the state (STATE_DELTA)."""
        return cls(tool, "delta", limits=limits)

    @classmethod
    def at(cls, tool: str, pointer: str, *, limits: Limits | None = None) -> ToolResultToState:
        """The result JSON is set at ``pointer`` inside the state (STATE_DELTA)."""
        return cls(tool, "at", pointer, limits=limits)

    def replacing(self) -> ToolResultToState:
        """The same stage, but the TOOL_CALL_RESULT itself is dropped when promoted."""
        return type(self)(self.tool, self.mode, self.pointer, True, self._limits_given)

    # -- learning which calls are ours ---------------------------------------

    def _run_started(self, event: ag.RunStartedEvent) -> Sequence[BaseEvent]:
        self._calls.clear()
        self._promoted.clear()
        self._state.reset({})
        echo = event.input
        if isinstance(echo, ag.RunAgentInput):
            self._learn(echo.messages)
            if self._track_state and echo.state is not None:
                self._reset(echo.state, "the RUN_STARTED input state")
        return (event,)

    def _start(self, event: ag.ToolCallStartEvent) -> Sequence[BaseEvent]:
        if event.tool_call_name == self.tool:
            self._calls.add(event.tool_call_id)
        return (event,)

    def _chunk(self, event: ag.ToolCallChunkEvent) -> Sequence[BaseEvent]:
        if event.tool_call_name == self.tool and event.tool_call_id is not None:
            self._calls.add(event.tool_call_id)
        return (event,)

    def _messages_snapshot(self, event: ag.MessagesSnapshotEvent) -> Sequence[BaseEvent]:
        self._learn(event.messages)
        return (event,)

    def _learn(self, messages: Sequence[Any]) -> None:
        for message in messages:
            if isinstance(message, ag.AssistantMessage) and message.tool_calls:
                for call in message.tool_calls:
                    if call.function.name == self.tool:
                        self._calls.add(call.id)

    # -- following the state (mode "at") --------------------------------------

    def _state_snapshot(self, event: ag.StateSnapshotEvent) -> Sequence[BaseEvent]:
        if self._track_state:
            self._reset(event.snapshot, "a STATE_SNAPSHOT")
        return (event,)

    def _reset(self, value: Any, what: str) -> None:
        try:
            self._state.reset(value)
        except LimitExceeded as exc:
            self._log_limit(f"{what} was not followed, the previous state is kept: {exc}")

    def _log_limit(self, why: str) -> None:
        message = f"ToolResultToState({self.tool!r}, mode={self.mode!r}): {why}"
        logger.warning(message)
        self.warnings.append(DecodeWarning("state-limit-exceeded", message))

    def _state_delta(self, event: ag.StateDeltaEvent) -> Sequence[BaseEvent]:
        if self._track_state:
            self._apply(event.delta)
        return (event,)

    def _apply(self, operations: Any) -> None:
        try:
            self._state.patch(operations)
        except LimitExceeded as exc:
            self._log_limit(f"a STATE_DELTA was skipped, the previous state is kept: {exc}")
        except PatchError:
            pass  # the client skips a delta that does not apply; so do we

    # -- promotion ---------------------------------------------------------

    def _warn(self, code: str, event: ag.ToolCallResultEvent, why: str) -> None:
        message = (
            f"ToolResultToState({self.tool!r}, mode={self.mode!r}): result of tool call "
            f"{event.tool_call_id!r} {why}; passed through unchanged, no state event made"
        )
        logger.warning(message)
        self.warnings.append(DecodeWarning(code, message))

    def _result(self, event: ag.ToolCallResultEvent) -> Sequence[BaseEvent]:
        call_id = event.tool_call_id
        if call_id not in self._calls or call_id in self._promoted:
            return (event,)
        text = _content_text(event.content)
        if text is None:
            self._warn("tool-result-no-text", event, "has no text content parts")
            return (event,)
        try:
            # The strict parser: NaN/Infinity, numbers past a double and nesting past
            # the one depth limit are refused here, as a warning, instead of making
            # a state event that no encoder may write.
            value = _json.loads(text)
        except _json.JSONValueError as exc:
            self._warn("tool-result-not-json", event, f"is not portable JSON ({exc})")
            return (event,)
        except ValueError as exc:
            self._warn("tool-result-not-json", event, f"is not JSON ({exc})")
            return (event,)
        try:
            measure_json(value, self.limits)
        except LimitExceeded as exc:
            self._warn("tool-result-too-large", event, f"is too large for a state: {exc}")
            return (event,)
        state_event = self._state_event(event, value)
        if state_event is None:
            return (event,)
        self._promoted.add(call_id)
        return (state_event,) if self.replace_result else (event, state_event)

    def _state_event(self, event: ag.ToolCallResultEvent, value: Any) -> BaseEvent | None:
        tag = event.subagent_run_id
        if self.mode == "snapshot":
            return ag.StateSnapshotEvent(snapshot=value, subagent_run_id=tag)
        if self.mode == "delta":
            if not isinstance(value, list):
                self._warn("tool-result-not-a-patch", event, "is not a JSON Patch array")
                return None
            try:
                return ag.StateDeltaEvent(delta=value, subagent_run_id=tag)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = "/".join(str(p) for p in first.get("loc", ()))
                self._warn(
                    "tool-result-not-a-patch",
                    event,
                    f"is not a valid RFC 6902 patch (at {where}: {first.get('msg')})",
                )
                return None
        operations = self._set_at(event, value)
        if operations is None:
            return None
        delta = ag.StateDeltaEvent.model_validate({"delta": operations, "subagentRunId": tag})
        try:
            self._state.patch(delta.delta)
        except LimitExceeded as exc:
            self._warn("tool-result-too-large", event, f"would take the state past: {exc}")
            return None
        except PatchError:
            pass  # cannot happen (the operations were made for this state); keep the event
        return delta

    def _set_at(self, event: ag.ToolCallResultEvent, value: Any) -> list[dict[str, Any]] | None:
        """Operations that set ``value`` at the pointer, creating missing parent objects."""
        if not self._tokens:
            return [{"op": "replace", "path": "", "value": value}]
        operations: list[dict[str, Any]] = []
        node: Any = self._state.value
        path = ""
        last = len(self._tokens) - 1
        for i, token in enumerate(self._tokens):
            path = f"{path}/{_escape(token)}"
            exists = False
            child: Any = None
            if isinstance(node, dict):
                exists = token in node
                child = node.get(token)
            elif isinstance(node, list):
                if not (token.isdigit() and (token == "0" or not token.startswith("0"))):
                    self._warn(
                        "tool-result-pointer-unusable",
                        event,
                        f"cannot be set at {self.pointer!r}: {token!r} is not an index of the "
                        f"array at {path.rsplit('/', 1)[0] or '/'}",
                    )
                    return None
                exists = int(token) < len(node)
                child = node[int(token)] if exists else None
                if not exists and int(token) > len(node):
                    self._warn(
                        "tool-result-pointer-unusable",
                        event,
                        f"cannot be set at {self.pointer!r}: index {token} is past the end",
                    )
                    return None
            else:
                self._warn(
                    "tool-result-pointer-unusable",
                    event,
                    f"cannot be set at {self.pointer!r}: the state at "
                    f"{path.rsplit('/', 1)[0] or '/'} is not an object or array",
                )
                return None
            if i == last:
                op = "replace" if exists else "add"
                operations.append({"op": op, "path": path, "value": value})
            elif not exists:
                operations.append({"op": "add", "path": path, "value": {}})
                node = {}
            else:
                node = child
        return operations
