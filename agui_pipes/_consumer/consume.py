"""The consumer side of AG-UI: from a stream of events to a checked :class:`RunResult`.

Three layers, usable separately:

* :func:`fold` — *application* only: turn already-valid events into messages,
  state, tool calls, outcome, interrupts, the run error and usage (PROTOCOL.md
  §7). No verification; garbage in, best effort out.
* :class:`Consumer` — the whole 1.0 processing model, incrementally: each
  pushed item (wire dict / JSON text / bytes, or an event) is decoded, chunk-
  expanded, verified (consumer profile) and folded, in that order, one at a
  time, so the first problem in stream order is the one reported.
  ``finish()`` checks for truncation and returns the result.
* :func:`consume` — the same over a sync or async source, in one call.

Application follows the official TypeScript client, so the same stream gives
the same messages and state there and here:

* the state starts as ``{}``; STATE_SNAPSHOT replaces it (copied);
  STATE_DELTA applies atomically in place on a private document — a patch
  that does not apply is skipped with a warning and the old state kept;
* text and reasoning content is buffered per message and joined once, so a
  long message in many deltas costs linear time;
* TOOL_CALL_START attaches ``{id, type: "function", function: {name,
  arguments: ""}}`` to the assistant message ``parentMessageId`` (created when
  missing); ARGS append to ``arguments``; TOOL_CALL_RESULT mints a ``tool``
  message placed after the assistant message that owns the call (and after
  tool messages already answering it);
* MESSAGES_SNAPSHOT reconciles by id (matching replaced in place, new
  appended, missing dropped), except client-side activity/reasoning messages,
  which survive unless the snapshot carries messages of that role;
* ACTIVITY_SNAPSHOT creates/replaces an activity message (``replace: false``
  keeps an existing one); ACTIVITY_DELTA patches its content (a missing
  target is ignored);
* ``metadata`` merges per key, last write wins;
* several runs may share a stream: messages and state carry over, the
  outcome is the last run's.

Messages are plain dicts in wire shape (camelCase keys, absent fields
omitted) — exactly what ``MESSAGES_SNAPSHOT`` or a ``RunAgentInput`` would
carry, ready for ``json.dumps`` or ``ag_ui.core`` model validation.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    EventType,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from .._foundation.json_patch import JsonDocument, LimitExceeded, PatchError, clone_json
from .._foundation.limits import Limits
from .._foundation.limits_scope import resolve_limits
from .._protocol.chunks import ChunkExpander
from .._protocol.decode import (
    DecodeWarning,
    as_object,
    decode_event,
    decode_legacy_event,
    unknown_type_warning,
)
from .._protocol.legacy import LEGACY_TYPE_NAMES, has_binary_part
from ..verify import Profile, ProtocolViolation, Rule, VerificationError, Verifier

if TYPE_CHECKING:
    from ..transformers.compat import Compat

__all__ = [
    "Consumer",
    "Outcome",
    "RunInfo",
    "RunResult",
    "consume",
    "fold",
]

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

Outcome = Literal["success", "interrupt", "cancelled", "error", "truncated"]

_ACTIVITY_HISTORY_KEY: Final = "@ag-ui/client"
_UNSET: Final = object()


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run in the stream: its ids, how it ended (``truncated`` if it did not), its error."""

    thread_id: str | None
    run_id: str | None
    outcome: Outcome
    error: dict[str, Any] | None = None


@dataclass(slots=True)
class RunResult:
    """What a consumer ends up with after a stream (see module doc for the shapes).

    ``outcome``/``interrupts``/``usage``/``result``/``pending_tool_call_ids``
    describe the *last* run; ``runs`` lists every run in order. ``run_error``
    is the most recent RUN_ERROR the stream carried (``{"message", "code"?}``),
    even when a later run recovered — check ``outcome`` for how the stream
    ended. ``outcome`` is ``None`` only before the first run: in a
    ``snapshot()`` taken before any event, or from :func:`fold` over events
    that hold no run. ``consume``/``Consumer.finish`` never return it: a
    stream with no event is rejected (rule ``first-event``).
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    state: Any = field(default_factory=dict)
    outcome: Outcome | None = None
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    run_error: dict[str, Any] | None = None
    usage: list[dict[str, Any]] = field(default_factory=list)
    result: Any = None
    pending_tool_call_ids: list[str] = field(default_factory=list)
    runs: list[RunInfo] = field(default_factory=list)
    warnings: list[DecodeWarning] = field(default_factory=list)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Every tool call, in message order: id, name, arguments, parent message, result.

        ``result`` is the content of the first tool message answering the
        call (absent when none did).
        """
        results: dict[str, Any] = {}
        for message in self.messages:
            if message.get("role") == "tool":
                results.setdefault(str(message.get("toolCallId")), message.get("content"))
        calls: list[dict[str, Any]] = []
        for message in self.messages:
            for call in message.get("toolCalls") or ():
                entry: dict[str, Any] = {
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                    "parentMessageId": message["id"],
                }
                if "subagentRunId" in message:
                    entry["subagentRunId"] = message["subagentRunId"]
                if call["id"] in results:
                    entry["result"] = results[call["id"]]
                calls.append(entry)
        return calls

    @property
    def succeeded(self) -> bool:
        """True when the last run finished with outcome ``success``."""
        return self.outcome == "success"

    def to_json(self) -> dict[str, Any]:
        """The result as one JSON object (what ``agui-pipes verify --result`` prints)."""
        return {
            "outcome": self.outcome,
            "messages": self.messages,
            "state": self.state,
            "interrupts": self.interrupts,
            "runError": self.run_error,
            "usage": self.usage,
        }


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json")


def _merge_metadata(target: dict[str, Any], event: BaseEvent) -> bool:
    incoming = event.metadata
    if incoming is None:
        return False
    existing = target.get("metadata")
    merged = dict(existing) if existing is not None else {}
    merged.update(clone_json(incoming))
    target["metadata"] = merged
    return True


class Folder:
    """The application state machine behind :func:`fold` and :class:`Consumer`."""

    def __init__(
        self,
        state: Any,
        messages: Iterable[dict[str, Any]] | None,
        limits: Limits | None = None,
        *,
        strict: bool = False,
    ) -> None:
        self.limits = resolve_limits(limits)
        self.strict = strict
        self.messages: list[dict[str, Any]] = [clone_json(m, self.limits) for m in messages or ()]
        self._state = JsonDocument(state, limits=self.limits)
        # Activity contents as documents, by message id; a stale entry (the message's
        # content is no longer that document's value) is re-measured on next use.
        self._activities: dict[str, JsonDocument] = {}
        self.warnings: list[DecodeWarning] = []
        self.runs: list[RunInfo] = []
        self.outcome: Outcome | None = None
        self.interrupts: list[dict[str, Any]] = []
        self.run_error: dict[str, Any] | None = None
        self.usage: list[dict[str, Any]] = []
        self.result: Any = None
        self.pending: list[str] = []
        self._run: tuple[str | None, str | None] | None = None
        self._run_calls: dict[str, None] = {}
        self._answered: set[str] = set()
        self._text: dict[str, list[str]] = {}
        self._args: dict[str, list[str]] = {}
        self._by_id: dict[str, dict[str, Any]] = {}
        self._calls: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._index_all()

    # -- bookkeeping ---------------------------------------------------------

    def _warn(self, code: str, message: str) -> None:
        warning = DecodeWarning(code, message)
        self.warnings.append(warning)
        logger.warning("%s", warning)

    def _index_all(self) -> None:
        self._by_id = {}
        self._calls = {}
        for message in self.messages:
            self._index(message)

    def _index(self, message: dict[str, Any]) -> None:
        self._by_id.setdefault(message["id"], message)
        for call in message.get("toolCalls") or ():
            self._calls.setdefault(call["id"], (message, call))

    def _push(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._index(message)

    def _flush(self) -> None:
        """Join buffered deltas into their messages and tool calls."""
        if self._text:
            by_id = self._by_id
            for message_id, parts in self._text.items():
                message = by_id.get(message_id)
                if message is not None:
                    message["content"] = "".join(parts)
            self._text = {}
        if self._args:
            calls = self._calls
            for call_id, parts in self._args.items():
                found = calls.get(call_id)
                if found is not None:
                    found[1]["function"]["arguments"] = "".join(parts)
            self._args = {}

    def _position(self, message: dict[str, Any]) -> int:
        messages = self.messages
        for i in range(len(messages) - 1, -1, -1):
            if messages[i] is message:
                return i
        raise LookupError("message not in list")  # pragma: no cover - index invariant

    # -- application ---------------------------------------------------------

    def apply(self, event: BaseEvent) -> None:
        handler = _FOLD_HANDLERS.get(event.__class__)
        if handler is not None:
            handler(self, event)
        elif event.type.__class__ is not EventType:
            self._legacy(event)

    def _legacy(self, event: BaseEvent) -> None:
        # A pre-1.0 event nothing translated: unknown in 1.0, so dropped as the
        # decoder drops it when not reading legacy shapes, with the same warning.
        warning = unknown_type_warning(event.type.value, None)
        self.warnings.append(warning)
        logger.warning("%s", warning)

    def _content(self, event: TextMessageContentEvent | ReasoningMessageContentEvent) -> None:
        message_id = event.message_id
        parts = self._text.get(message_id)
        if parts is None:
            message = self._by_id.get(message_id)
            if message is None or message["role"] == "activity":
                self._warn_missing(event, message)
                return
            existing = message.get("content")
            parts = self._text[message_id] = [existing] if isinstance(existing, str) else []
        parts.append(event.delta)
        if event.metadata is not None:
            _merge_metadata(self._by_id[message_id], event)

    def _warn_missing(self, event: BaseEvent, message: dict[str, Any] | None) -> None:
        name = event.type.value
        message_id = getattr(event, "message_id", "")
        if message is None:
            self._warn("apply-missing", f"{name}: no message found with ID '{message_id}'")
        else:
            self._warn(
                "apply-activity",
                f"{name}: message '{message_id}' is an activity message; message ids must be "
                "unique across activity and text messages",
            )

    def _text_start(self, event: TextMessageStartEvent) -> None:
        self._open_message(event, event.role or "assistant", event.name)

    def _reasoning_start(self, event: ReasoningMessageStartEvent) -> None:
        self._open_message(event, "reasoning", None)

    def _open_message(
        self,
        event: TextMessageStartEvent | ReasoningMessageStartEvent,
        role: str,
        name: str | None,
    ) -> None:
        """Start a text or reasoning message, or add metadata to the one with that id.

        Text and reasoning starts differ only in the role and name they give a new
        message; an id that already names an activity message is refused with a
        warning either way, since message ids are unique across all kinds.
        """
        existing = self._by_id.get(event.message_id)
        if existing is not None and existing["role"] == "activity":
            self._warn_missing(event, existing)
            return
        target = existing
        if target is None:
            target = {"id": event.message_id, "role": role, "content": ""}
            if name is not None:
                target["name"] = name
            if event.subagent_run_id is not None:
                target["subagentRunId"] = event.subagent_run_id
            self._push(target)
        _merge_metadata(target, event)

    def _text_end(self, event: TextMessageEndEvent | ReasoningMessageEndEvent) -> None:
        message = self._by_id.get(event.message_id)
        if message is None or message["role"] == "activity":
            self._warn_missing(event, message)
            return
        # Join the deltas now: memory then holds one string per finished message,
        # not one object per delta, however long the stream runs.
        parts = self._text.pop(event.message_id, None)
        if parts is not None:
            message["content"] = "".join(parts)
        _merge_metadata(message, event)

    def _tool_start(self, event: ToolCallStartEvent) -> None:
        call_id = event.tool_call_id
        self._run_calls[call_id] = None
        found = self._calls.get(call_id)
        if found is not None:
            call = found[1]
            if call["function"]["name"] != event.tool_call_name:
                self._warn(
                    "apply-renamed",
                    f"TOOL_CALL_START: tool call '{call_id}' already exists with name "
                    f"'{call['function']['name']}'; updating it to '{event.tool_call_name}'",
                )
                call["function"]["name"] = event.tool_call_name
            _merge_metadata(call, event)
            return
        parent_id = event.parent_message_id
        target: dict[str, Any] | None = None
        if parent_id is not None:
            existing = self._by_id.get(parent_id)
            if existing is not None and existing["role"] == "assistant":
                target = existing
            else:
                if existing is not None:
                    self._warn(
                        "apply-parent-role",
                        f"TOOL_CALL_START: parentMessageId '{parent_id}' matches a "
                        f"'{existing['role']}' message, not assistant; falling back to "
                        "toolCallId",
                    )
                new_id = call_id if existing is not None else parent_id
        else:
            new_id = call_id
        if target is None:
            created = new_id not in self._by_id
            target = {"id": new_id, "role": "assistant", "toolCalls": []}
            if created and event.subagent_run_id is not None:
                target["subagentRunId"] = event.subagent_run_id
            self._push(target)
        calls = target.get("toolCalls")
        if calls is None:
            calls = target["toolCalls"] = []
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": event.tool_call_name, "arguments": ""},
        }
        calls.append(call)
        _merge_metadata(call, event)
        self._calls.setdefault(call_id, (target, call))

    def _tool_args(self, event: ToolCallArgsEvent) -> None:
        call_id = event.tool_call_id
        parts = self._args.get(call_id)
        if parts is None:
            found = self._calls.get(call_id)
            if found is None:
                self._warn(
                    "apply-missing",
                    f"TOOL_CALL_ARGS: no message found containing tool call with ID '{call_id}'",
                )
                return
            parts = self._args[call_id] = [found[1]["function"]["arguments"]]
        parts.append(event.delta)
        if event.metadata is not None:
            _merge_metadata(self._calls[call_id][1], event)

    def _tool_end(self, event: ToolCallEndEvent) -> None:
        found = self._calls.get(event.tool_call_id)
        if found is None:
            self._warn(
                "apply-missing",
                "TOOL_CALL_END: no message found containing tool call with ID "
                f"'{event.tool_call_id}'",
            )
            return
        parts = self._args.pop(event.tool_call_id, None)
        if parts is not None:
            found[1]["function"]["arguments"] = "".join(parts)
        _merge_metadata(found[1], event)

    def _tool_result(self, event: ToolCallResultEvent) -> None:
        call_id = event.tool_call_id
        self._answered.add(call_id)
        content = event.content
        message: dict[str, Any] = {
            "id": event.message_id,
            "toolCallId": call_id,
            "role": event.role or "tool",
            "content": content if isinstance(content, str) else [_dump(p) for p in content],
        }
        if event.subagent_run_id is not None:
            message["subagentRunId"] = event.subagent_run_id
        _merge_metadata(message, event)
        found = self._calls.get(call_id)
        if found is None or found[0]["role"] != "assistant":
            self._push(message)
            return
        messages = self.messages
        at = self._position(found[0]) + 1
        while at < len(messages) and messages[at]["role"] == "tool":
            at += 1
        if message["id"] in self._by_id:
            # A duplicate id inserted ahead of its namesake becomes the one lookups
            # find first (list order), so re-index — after flushing buffered deltas
            # into the messages they were meant for.
            self._flush()
            messages.insert(at, message)
            self._index_all()
        else:
            messages.insert(at, message)
            self._index(message)

    @property
    def state(self) -> Any:
        return self._state.value

    def _over_limit(self, code: str, event: BaseEvent, message: str, exc: LimitExceeded) -> None:
        """A document would cross the limits: the producer profile rejects, else warn and skip."""
        if self.strict:
            raise VerificationError(Rule.LIMIT_EXCEEDED, str(exc), event)
        self._warn(code, f"{message}: {exc}")

    def _state_snapshot(self, event: StateSnapshotEvent) -> None:
        try:
            self._state.reset(event.snapshot, what="the STATE_SNAPSHOT")
        except LimitExceeded as exc:
            self._over_limit(
                "state-limit-exceeded",
                event,
                "STATE_SNAPSHOT was skipped, the previous state is kept",
                exc,
            )

    def _state_delta(self, event: StateDeltaEvent) -> None:
        try:
            self._state.patch(event.delta)
        except LimitExceeded as exc:
            self._over_limit(
                "state-limit-exceeded",
                event,
                "STATE_DELTA did not apply and was skipped, the previous state is kept",
                exc,
            )
        except PatchError as exc:
            self._warn(
                "state-patch-failed",
                f"STATE_DELTA did not apply and was skipped, the previous state is kept: {exc}",
            )

    def _messages_snapshot(self, event: MessagesSnapshotEvent) -> None:
        self._flush()
        incoming = [_dump(m) for m in event.messages]
        by_id = {m["id"]: m for m in incoming}
        owned = _authoritative_activity_types(event.metadata)
        has_activity = any(m["role"] == "activity" for m in incoming)
        has_reasoning = any(m["role"] == "reasoning" for m in incoming)

        def preserved(message: dict[str, Any]) -> bool:
            role = message["role"]
            if role == "activity":
                if isinstance(owned, list):
                    return message.get("activityType") not in owned
                return owned is not None and not has_activity
            return role == "reasoning" and not has_reasoning

        kept = [by_id.get(m["id"], m) for m in self.messages if m["id"] in by_id or preserved(m)]
        present = {m["id"] for m in kept}
        kept.extend(m for m in incoming if m["id"] not in present)
        self.messages = kept
        self._index_all()
        if self._activities:
            by_id = self._by_id
            self._activities = {k: d for k, d in self._activities.items() if k in by_id}

    def _activity_snapshot(self, event: ActivitySnapshotEvent) -> None:
        message_id = event.message_id
        existing = self._by_id.get(message_id)
        replace = event.replace if event.replace is not None else True
        if existing is not None and not replace and existing["role"] == "activity":
            _merge_metadata(existing, event)
            return
        try:
            document = JsonDocument(event.content, limits=self.limits)
        except LimitExceeded as exc:
            self._over_limit(
                "activity-limit-exceeded",
                event,
                f"ACTIVITY_SNAPSHOT for '{message_id}' was skipped",
                exc,
            )
            return
        fresh: dict[str, Any] = {
            "id": message_id,
            "role": "activity",
            "activityType": event.activity_type,
            "content": document.value,
        }
        if event.subagent_run_id is not None:
            fresh["subagentRunId"] = event.subagent_run_id
        target: dict[str, Any] | None
        if existing is None:
            self._push(fresh)
            target = fresh
        elif existing["role"] == "activity":
            if replace:
                updated = dict(existing)
                updated["activityType"] = event.activity_type
                updated["content"] = fresh["content"]
                updated.pop("subagentRunId", None)
                if event.subagent_run_id is not None:
                    updated["subagentRunId"] = event.subagent_run_id
                self._replace(existing, updated)
                target = updated
            else:
                target = existing
        elif replace:
            self._flush()
            self._replace(existing, fresh)
            self._index_all()
            target = fresh
        else:
            target = None
        if target is not None:
            if target["content"] is document.value:
                self._activities[message_id] = document
            _merge_metadata(target, event)

    def _replace(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.messages[self._position(old)] = new
        if self._by_id.get(old["id"]) is old:
            self._by_id[old["id"]] = new

    def _activity_delta(self, event: ActivityDeltaEvent) -> None:
        message = self._by_id.get(event.message_id)
        if message is None:
            return
        if message["role"] != "activity":
            self._warn(
                "apply-not-activity",
                f"ACTIVITY_DELTA: message '{event.message_id}' is not an activity message",
            )
            return
        _merge_metadata(message, event)
        what = f"ACTIVITY_DELTA for '{event.message_id}' did not apply and was skipped"
        try:
            document = self._activity_document(event.message_id, message)
            document.patch(event.patch)
        except LimitExceeded as exc:
            self._over_limit("activity-limit-exceeded", event, what, exc)
            return
        except PatchError as exc:
            self._warn("activity-patch-failed", f"{what}: {exc}")
            return
        message["content"] = document.value
        message["activityType"] = event.activity_type

    def _activity_document(self, message_id: str, message: dict[str, Any]) -> JsonDocument:
        """The content of an activity message as a sized document (measured once per content)."""
        content = message.get("content", _UNSET)
        document = self._activities.get(message_id)
        if document is None or content is not document.value:
            # Content that came some other way (a MESSAGES_SNAPSHOT, a seed): measure it
            # once, in place — it already is this consumer's private copy.
            document = JsonDocument(
                {} if content is _UNSET else content, limits=self.limits, copy=False
            )
            self._activities[message_id] = document
        return document

    def _encrypted_value(self, event: ReasoningEncryptedValueEvent) -> None:
        if event.subtype == "tool-call":
            found = self._calls.get(event.entity_id)
            if found is not None and found[0]["role"] == "assistant":
                found[1]["encryptedValue"] = event.encrypted_value
            return
        message = self._by_id.get(event.entity_id)
        if message is not None and message["role"] != "activity":
            message["encryptedValue"] = event.encrypted_value

    def _close_run(self, outcome: Outcome, error: dict[str, Any] | None = None) -> None:
        if self._run is not None:
            self.runs.append(RunInfo(self._run[0], self._run[1], outcome, error))
            self._run = None
        elif error is not None:
            self.runs.append(RunInfo(None, None, outcome, error))
        self.outcome = outcome

    def _run_started(self, event: RunStartedEvent) -> None:
        if self._run is not None:
            self._close_run("truncated")
        self._run = (event.thread_id, event.run_id)
        self.outcome = "truncated"
        self.interrupts = []
        self.usage = []
        self.result = None
        self.pending = []
        self._run_calls = {}
        self._answered = set()
        echo = event.input
        if echo is not None and echo.messages:
            for model in echo.messages:
                if model.id not in self._by_id:
                    self._push(_dump(model))

    def _run_finished(self, event: RunFinishedEvent) -> None:
        outcome = event.outcome
        kind: Outcome = "success"
        self.interrupts = []
        self.pending = []
        if isinstance(outcome, RunFinishedInterruptOutcome):
            kind = "interrupt"
            self.interrupts = [_dump(i) for i in outcome.interrupts]
        elif isinstance(outcome, RunFinishedCancelledOutcome):
            kind = "cancelled"
        elif isinstance(outcome, RunFinishedSuccessOutcome) and outcome.pending_tool_call_ids:
            self.pending = list(outcome.pending_tool_call_ids)
        else:
            self.pending = [c for c in self._run_calls if c not in self._answered]
        self.usage = [_dump(u) for u in event.usage or ()]
        self.result = event.result
        self._close_run(kind)

    def _run_error(self, event: RunErrorEvent) -> None:
        error: dict[str, Any] = {"message": event.message}
        if event.code is not None:
            error["code"] = event.code
        self.run_error = error
        self.usage = [_dump(u) for u in event.usage or ()]
        self.interrupts = []
        self.pending = []
        self._close_run("error", dict(error))

    # -- result --------------------------------------------------------------

    def result_snapshot(self, *, final: bool = False) -> RunResult:
        """The result; a deep copy unless ``final`` (nothing will touch the state again)."""
        self._flush()
        runs = list(self.runs)
        if self._run is not None:
            runs.append(RunInfo(self._run[0], self._run[1], "truncated"))
        limits = self.limits

        def copy(value: Any) -> Any:
            return value if final else clone_json(value, limits)

        return RunResult(
            messages=copy(self.messages),
            state=copy(self.state),
            outcome=self.outcome,
            interrupts=copy(self.interrupts),
            run_error=copy(self.run_error),
            usage=copy(self.usage),
            result=clone_json(self.result, limits),
            pending_tool_call_ids=list(self.pending),
            runs=runs,
            warnings=list(self.warnings),
        )


# The fold's handlers, by event class, as plain functions of the Folder: a table of
# bound methods held by each Folder would be a reference cycle, so a dropped Folder —
# and the whole conversation it folded — would wait for the cyclic collector (which
# may not run for long: an inspector recording 40 MiB runs kept several of them).
_FOLD_HANDLERS: dict[type[BaseEvent], Any] = {
    TextMessageContentEvent: Folder._content,
    ReasoningMessageContentEvent: Folder._content,
    ToolCallArgsEvent: Folder._tool_args,
    TextMessageStartEvent: Folder._text_start,
    ReasoningMessageStartEvent: Folder._reasoning_start,
    TextMessageEndEvent: Folder._text_end,
    ReasoningMessageEndEvent: Folder._text_end,
    ToolCallStartEvent: Folder._tool_start,
    ToolCallEndEvent: Folder._tool_end,
    ToolCallResultEvent: Folder._tool_result,
    StateSnapshotEvent: Folder._state_snapshot,
    StateDeltaEvent: Folder._state_delta,
    MessagesSnapshotEvent: Folder._messages_snapshot,
    ActivitySnapshotEvent: Folder._activity_snapshot,
    ActivityDeltaEvent: Folder._activity_delta,
    ReasoningEncryptedValueEvent: Folder._encrypted_value,
    RunStartedEvent: Folder._run_started,
    RunFinishedEvent: Folder._run_finished,
    RunErrorEvent: Folder._run_error,
}


def _authoritative_activity_types(metadata: dict[str, Any] | None) -> Any:
    """The reference client's activity-history convention: _UNSET, None or a list of types."""
    if not metadata or _ACTIVITY_HISTORY_KEY not in metadata:
        return _UNSET
    value = metadata[_ACTIVITY_HISTORY_KEY]
    if not value or not isinstance(value, dict):
        return []
    if "authoritativeActivityTypes" not in value:
        return _UNSET
    types = value["authoritativeActivityTypes"]
    if types is None:
        return None
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        return types
    return []


def fold(
    events: Iterable[BaseEvent],
    *,
    state: Any = _UNSET,
    messages: Iterable[dict[str, Any]] | None = None,
    limits: Limits | None = None,
) -> RunResult:
    """Apply already-expanded, already-valid events and return the result.

    ``state`` and ``messages`` seed the conversation (default: ``{}`` and no
    messages, like a fresh reference client). No verification happens here —
    use :func:`consume` / :class:`Consumer` for untrusted streams.

    ``limits`` bounds the state and every activity's content (None: the
    limits in effect, normally ``DEFAULT_LIMITS``): a snapshot or delta that
    would cross them is skipped with a ``state-limit-exceeded`` /
    ``activity-limit-exceeded`` warning and the previous document kept. A
    seed ``state`` already past them raises :class:`~agui_pipes.LimitExceeded`.
    """
    folder = Folder({} if state is _UNSET else state, messages, limits)
    apply = folder.apply
    for event in events:
        apply(event)
    return folder.result_snapshot(final=True)


WireItem = dict[str, Any] | str | bytes | BaseEvent


class Consumer:
    """Decode → expand chunks → verify (consumer profile) → fold, one pushed item at a time.

    ``profile="producer"`` verifies with the stricter producer rules instead
    (what ``agui-pipes verify --profile producer`` uses to audit a recording).

    ``limits`` bounds the state and activity documents (None: the limits in
    effect, normally ``DEFAULT_LIMITS``). A snapshot or delta that would cross
    them is, like any delta that does not apply, skipped with a warning
    (``state-limit-exceeded`` / ``activity-limit-exceeded``) and the previous
    document kept; the producer profile rejects it instead (rule
    ``limit-exceeded``).

    ``push(item)`` returns the events delivered to the application for that
    item (after expansion and verification) and raises
    :class:`~agui_pipes.ProtocolViolation` on a rejected stream (a
    :class:`~agui_pipes.DecodeError` or :class:`~agui_pipes.VerificationError`,
    with ``index`` set to the item's position). ``finish()`` returns the
    :class:`RunResult`, raising for a truncated run unless
    ``allow_truncated``. Decode warnings and application warnings are
    collected in ``warnings`` (and on the result).

    ``compat`` is the compatibility boundary between decoding and chunk
    expansion, where the reference client's always-on boundary sits. By default
    (``None``) it is the reference client's: the first pre-1.0 shape that
    arrives — a retired ``THINKING_*`` event, a ``binary`` content part — engages
    a ``Compat(direction="up")`` stage from that item on (a legacy shape is itself
    the proof the producer is old), which translates it into 1.0 with its
    warning (docs/compat.md); a 1.0 stream never pays for it. A
    :class:`~agui_pipes.transformers.compat.Compat` of direction ``up`` engages
    that stage from the first item (to name the producer's version, ``peer``).
    ``False`` is the strict 1.0 view: those shapes are dropped with warnings, as
    AG-UI 1.0 says of types and members it does not describe.
    """

    def __init__(
        self,
        *,
        allow_truncated: bool = False,
        state: Any = _UNSET,
        messages: Iterable[dict[str, Any]] | None = None,
        profile: Profile = "consumer",
        limits: Limits | None = None,
        compat: Compat | bool | None = None,
    ) -> None:
        self._auto_compat = compat is None
        if compat is None or compat is False:
            compat = None
        elif compat is True:
            compat = legacy_boundary()
        if compat is not None and not getattr(compat, "reads_legacy", False):
            raise ValueError(
                f"Consumer(compat=...) takes the consumer side's stage, Compat(direction='up', "
                f"peer=<the producer's version>); got {compat!r}. A 'down' stage rewrites a "
                "stream for an older client and belongs at the end of a server's chain"
            )
        self._compat = compat
        self._compat_warned = 0
        self._allow_truncated = allow_truncated
        self._verifier = Verifier(profile)
        self._folder = Folder(
            {} if state is _UNSET else state, messages, limits, strict=profile == "producer"
        )
        self._expand = ChunkExpander().expand
        self._observe = self._verifier.observe
        self._apply = self._folder.apply
        self._index = 0
        self._failure: ProtocolViolation | None = None
        self._finished = False

    @property
    def warnings(self) -> list[DecodeWarning]:
        """Every warning so far (decode and application), in order."""
        return self._folder.warnings

    @property
    def verifier(self) -> Verifier:
        """The consumer-profile verifier (for inspection)."""
        return self._verifier

    def push(self, item: WireItem) -> Sequence[BaseEvent]:
        """Process one wire event (dict / JSON text / bytes) or one ``ag_ui.core`` event."""
        if self._failure is not None:
            raise self._failure
        if self._finished:
            raise RuntimeError("this Consumer already finished; create a new one per stream")
        index = self._index
        self._index = index + 1
        if self._compat is not None:
            return self._push_compat(item, index)
        try:
            if isinstance(item, BaseEvent):
                if item.type.__class__ is not EventType:
                    self._apply(item)  # dropped, with the warning the decoder gives
                    return ()
                event = item
            else:
                raw = as_object(item, index)
                decoded = decode_event(raw, index, self._folder.warnings)
                if decoded is None:
                    if self._auto_compat and is_legacy_type(raw):
                        return self._engage_compat(raw, index)
                    return ()
                if (
                    decoded.__class__ is MessagesSnapshotEvent
                    and self._auto_compat
                    and has_binary_part(raw)
                ):
                    return self._engage_compat(raw, index)
                event = decoded
            expanded = self._expand(event)
            observe = self._observe
            apply = self._apply
            for out in expanded:
                observe(out)
                apply(out)
        except ProtocolViolation as violation:
            if violation.index is None:
                violation.index = index
            self._failure = violation
            raise
        return expanded

    def _engage_compat(self, raw: dict[str, Any], index: int) -> Sequence[BaseEvent]:
        """The first legacy shape: the boundary takes over from this item on.

        The warnings the 1.0 decoder just gave this item (a dropped type, a removed
        part) are withdrawn: the boundary reads it again and says what it did.
        """
        sink = self._folder.warnings
        while sink and sink[-1].index == index:
            sink.pop()
        self._auto_compat = False
        self._compat = legacy_boundary()
        return self._push_compat(raw, index)

    def _push_compat(self, item: WireItem, index: int) -> Sequence[BaseEvent]:
        """``push`` with the compat stage between decoding and chunk expansion."""
        compat = self._compat
        assert compat is not None
        delivered: list[BaseEvent] = []
        try:
            if isinstance(item, BaseEvent):
                event: BaseEvent | None = item
            else:
                event = decode_legacy_event(as_object(item, index), index, self._folder.warnings)
            translated = list(compat.transform(event)) if event is not None else []
            self._take_compat_warnings(index)
            self._deliver(translated, delivered)
        except ProtocolViolation as violation:
            if violation.index is None:
                violation.index = index
            self._failure = violation
            raise
        return delivered

    def _deliver(self, events: Iterable[BaseEvent], delivered: list[BaseEvent]) -> None:
        observe = self._observe
        apply = self._apply
        for event in events:
            for out in self._expand(event):
                observe(out)
                apply(out)
                delivered.append(out)

    def _take_compat_warnings(self, index: int | None) -> None:
        """Copy the compat stage's new warnings into ``warnings``, stamped with ``index``."""
        compat = self._compat
        assert compat is not None
        fresh = compat.warnings[self._compat_warned :]
        self._compat_warned = len(compat.warnings)
        self._folder.warnings.extend(
            DecodeWarning(w.code, w.message, index if w.index is None else w.index) for w in fresh
        )

    def push_many(self, items: Iterable[WireItem]) -> None:
        """``push`` every item (delivered events are not collected)."""
        for item in items:
            self.push(item)

    def snapshot(self) -> RunResult:
        """The result so far, without ending the stream (a copy; pushing may continue)."""
        return self._folder.result_snapshot()

    def finish(self) -> RunResult:
        """End of stream: raise if the run is truncated (unless allowed), else the result."""
        if self._failure is not None:
            raise self._failure
        self._finished = True
        try:
            if self._compat is not None:
                tail = list(self._compat.finish())
                self._take_compat_warnings(None)
                self._deliver(tail, [])
            if self._folder.outcome is None:
                # No run event was applied, so no event at all got through (the
                # verifier makes the first one RUN_STARTED or RUN_ERROR).
                raise _no_run(self._index)
            self._verifier.finish(allow_truncated=self._allow_truncated)
        except ProtocolViolation as violation:
            violation.index = self._index - 1  # the last event's; -1: there was none
            self._failure = violation
            raise
        # The consumer is done with its private documents: hand them over uncopied.
        return self._folder.result_snapshot(final=True)


def legacy_boundary() -> Compat:
    """The reference client's always-on compatibility boundary: ``Compat(direction="up")``."""
    from ..transformers.compat import Compat

    return Compat(direction="up")


def is_legacy_type(raw: Mapping[str, Any]) -> bool:
    """Whether a wire object the 1.0 decoder dropped is a retired pre-1.0 event type."""
    return raw.get("type") in LEGACY_TYPE_NAMES


def _no_run(items: int) -> VerificationError:
    """The rejection of a stream that ended before its first event (``items`` wire items)."""
    if items == 0:
        detail = (
            "the stream ended before its first event: it carried no events at all (an "
            "empty body?), so there is no run and no outcome"
        )
    else:
        detail = (
            f"the stream ended before its first event: none of its {items} items was an "
            "AG-UI event (each was dropped, see the warnings), so there is no run and no "
            "outcome"
        )
    return VerificationError(Rule.FIRST_EVENT, detail)


async def consume(
    source: AsyncIterable[WireItem] | Iterable[WireItem],
    *,
    allow_truncated: bool = False,
    state: Any = _UNSET,
    messages: Iterable[dict[str, Any]] | None = None,
    limits: Limits | None = None,
    compat: Compat | bool | None = None,
) -> RunResult:
    """Consume a whole stream: decode, expand, verify (consumer profile), fold.

    ``source`` yields wire events (dicts, JSON text, bytes) or ``ag_ui.core``
    events, synchronously or asynchronously. Raises
    :class:`~agui_pipes.ProtocolViolation` when the stream is rejected — a
    truncated run included, unless ``allow_truncated`` — and otherwise
    returns the :class:`RunResult`. ``limits`` and ``compat`` as for :class:`Consumer`. An empty
    stream (or one whose every item was dropped as unknown) is rejected too: it has
    no run, so no outcome.
    """
    if isinstance(source, str | bytes | bytearray):
        raise TypeError(
            "consume() takes an iterable of events, not one str/bytes blob; split NDJSON into "
            "lines, or feed an SSE body through agui_pipes.codecs.SSEDecoder first"
        )
    consumer = Consumer(
        allow_truncated=allow_truncated,
        state=state,
        messages=messages,
        limits=limits,
        compat=compat,
    )
    push = consumer.push
    if isinstance(source, AsyncIterable):
        async for item in source:
            push(item)
    else:
        for item in source:
            push(item)
    return consumer.finish()
