"""``RunContext``: what an agent emits through, and the scopes that share its surface.

Three things emit: the run context itself, a step (so code inside a step
reads ``step.say(...)``, as in the seeds) and a subagent scope. They share
one surface, ``Emitter``, differing only in the attribution tag they put on
what they emit: ``None`` for the parent agent, the scope's id inside
``ctx.subagent(...)``. A step inherits the tag of whatever opened it.

Every method here is synchronous — emission never awaits — and raises
``RunError`` when the event cannot go out (cancelled, rejected by the verifier,
consumer gone), so an agent's next emit after a problem unwinds it.
"""

from __future__ import annotations

import functools
import inspect
import json
import linecache
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Generic

import anyio
import jsonpatch
from ag_ui.core import (
    BaseEvent,
    EventType,
    Interrupt,
    Message,
    ReasoningStartEvent,
    ResumeEntry,
    RunAgentInput,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallStartEvent,
)
from typing_extensions import TypeVar

from .._foundation.json_patch import LimitExceeded, measure_json
from .._foundation.principal import Principal
from ..events import ATTRIBUTABLE_TYPES, with_attribution
from ._cancel import CancelToken
from ._core import RunCore, to_json
from ._errors import RunError
from ._handles import (
    ClosesOnExit,
    MessageHandle,
    ReasoningHandle,
    ReasoningMessageHandle,
    ToolCallHandle,
    dumps_json,
    make_event,
)
from ._interrupts import build_interrupt, checked_answer
from ._pipeline import UNSET, limit_error

__all__ = ["Emitter", "RunContext", "StepHandle", "SubagentScope", "async_misuse"]

S = TypeVar("S", default=Any)
"""The state type. Its default lets user code write a bare ``ctx: RunContext`` under
``mypy --strict`` (no "missing type parameters"): an agent without a state model."""
T = TypeVar("T")

_LIFECYCLE_TYPES = frozenset({EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR})
_COMPACT = (",", ":")


class Emitter(Generic[S]):
    """The emitting surface shared by ``RunContext``, ``StepHandle`` and ``SubagentScope``."""

    __slots__ = ("_core", "_kw", "_push", "_tag")

    def __init__(self, core: RunCore, tag: str | None) -> None:
        self._core = core
        self._tag = tag
        self._kw: dict[str, Any] = {} if tag is None else {"subagent_run_id": tag}
        # Bound once: the emit path is the hot path, and handles copy this too.
        self._push: Callable[[BaseEvent], None] = core.pipeline.push

    # -- text -------------------------------------------------------------------

    def say(self, text: str) -> str:
        """A whole assistant message (START, one CONTENT, END). Returns its message id."""
        kw = self._kw
        message_id = self._core.message_id()
        content = make_event(TextMessageContentEvent, message_id=message_id, delta=text, **kw)
        self._push(TextMessageStartEvent(message_id=message_id, role="assistant", **kw))
        self._push(content)
        self._push(TextMessageEndEvent(message_id=message_id, **kw))
        return message_id

    def assistant_message(self) -> MessageHandle:
        """Open an assistant message to stream into (``delta``, then ``end`` or leave ``with``)."""
        return self.message("assistant")

    def message(self, role: str = "assistant", *, name: str | None = None) -> MessageHandle:
        """Open a text message with ``role`` (developer, system, assistant or user)."""
        message_id = self._core.message_id()
        fields: dict[str, Any] = {"message_id": message_id, "role": role, **self._kw}
        if name is not None:
            fields["name"] = name
        self._push(make_event(TextMessageStartEvent, **fields))
        return MessageHandle(self._push, self._core, self._kw, message_id)

    # -- reasoning --------------------------------------------------------------

    def reasoning(self) -> ReasoningHandle:
        """Open a reasoning span (REASONING_START); add messages with ``think``/``message``."""
        span_id = self._core.message_id()
        self._push(ReasoningStartEvent(message_id=span_id, **self._kw))
        return ReasoningHandle(self._push, self._core, self._kw, span_id)

    def think(self, text: str) -> str:
        """A whole reasoning span holding one reasoning message. Returns the message id."""
        with self.reasoning() as span:
            return span.think(text)

    # -- tool calls, steps, subagents -------------------------------------------

    def tool_call(self, name: str, *, parent_message_id: str | None = None) -> ToolCallHandle:
        """Open a tool call named ``name`` (TOOL_CALL_START) with id ``{runId}-call-N``."""
        call_id = self._core.call_id()
        fields: dict[str, Any] = {"tool_call_id": call_id, "tool_call_name": name, **self._kw}
        if parent_message_id is not None:
            fields["parent_message_id"] = parent_message_id
        self._push(make_event(ToolCallStartEvent, **fields))
        return ToolCallHandle(self._push, self._core, self._kw, call_id, name)

    def step(self, name: str) -> StepHandle[S]:
        """Open a step (STEP_STARTED); STEP_FINISHED goes out on ``end()`` or leaving ``with``."""
        self._push(make_event(StepStartedEvent, step_name=name, **self._kw))
        return StepHandle(self._core, self._tag, name)

    def subagent(
        self,
        name: str,
        *,
        description: str | None = None,
        parent_tool_call_id: str | None = None,
        parent_message_id: str | None = None,
    ) -> SubagentScope[S]:
        """Open a subagent invocation (SUBAGENT_STARTED) with id ``{runId}-sub-N``.

        Everything emitted through the returned scope is attributed to it; a
        scope opened from another scope records it as ``parentSubagentRunId``.
        End it explicitly with ``finish``, ``finish_with``, ``fail`` or
        ``suspend`` — leaving it open ends the run in RUN_ERROR
        PROTOCOL_VIOLATION.
        """
        core = self._core
        sub_id = core.subagent_id()
        fields: dict[str, Any] = {"subagent_run_id": sub_id, "name": name}
        optional = {
            "description": description,
            "parent_subagent_run_id": self._tag,
            "parent_tool_call_id": parent_tool_call_id,
            "parent_message_id": parent_message_id,
        }
        fields.update({k: v for k, v in optional.items() if v is not None})
        self._push(make_event(SubagentStartedEvent, **fields))
        core.open_scopes[sub_id] = name
        return SubagentScope(core, sub_id, name)

    # -- raw --------------------------------------------------------------------

    def interrupt(
        self,
        interrupt_id: str,
        reason: str,
        *,
        message: str | None = None,
        tool_call_id: str | ToolCallHandle | None = None,
        response_schema: Mapping[str, Any] | None = None,
        expires_at: datetime | str | None = None,
        expires_in: float | timedelta | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Interrupt:
        """An ``Interrupt`` to end the run with: ``RunOutcome.interrupt([ctx.interrupt(...)])``.

        ``tool_call_id`` (an id or the handle of a call this run made) says which
        tool call it asks about; ``response_schema`` (a JSON Schema, checked
        here) is the answer's shape; ``expires_at`` (a timezone-aware datetime or
        ISO 8601 text) or ``expires_in`` (seconds or a timedelta from now) is when
        it stops being answerable. Inside a subagent scope the interrupt is
        attributed to that subagent. Emits nothing; a bad value is ``RunError``
        PROTOCOL at this line.
        """
        call_id = tool_call_id.id if isinstance(tool_call_id, ToolCallHandle) else tool_call_id
        return build_interrupt(
            interrupt_id,
            reason,
            tag=self._tag,
            message=message,
            tool_call_id=call_id,
            response_schema=response_schema,
            expires_at=expires_at,
            expires_in=expires_in,
            metadata=metadata,
        )

    def emit(self, event: BaseEvent) -> None:
        """Emit any event as is — still transformed and verified.

        Inside a subagent scope an untagged attributable event is tagged with
        the scope's id. RUN_STARTED / RUN_FINISHED / RUN_ERROR are refused:
        the driver owns the run's lifecycle (return a ``RunOutcome`` or raise).
        """
        if not isinstance(event, BaseEvent):
            raise RunError.protocol(
                f"emit() takes an ag_ui.core event model, got {type(event).__name__}; build "
                "one, e.g. ag_ui.core.CustomEvent(name=..., value=...)"
            )
        if event.type in _LIFECYCLE_TYPES:
            raise RunError.violation(
                f"emit({event.type.value}) is refused: the driver emits the run's start and "
                "terminal events; return a RunOutcome or raise a RunError instead"
            )
        tag = self._tag
        if (
            tag is not None
            and event.type in ATTRIBUTABLE_TYPES
            and (getattr(event, "subagent_run_id", None) is None)
        ):
            event = with_attribution(event, tag)
        self._push(event)

    # -- state ------------------------------------------------------------------

    @property
    def state(self) -> S:
        """The run's state: an instance of the agent's state model, or the raw input JSON."""
        state: S = self._core.state
        return state

    def set_state(self, value: S) -> None:
        """Replace the state and publish it."""
        self._core.state = self._core.coerce_state(value)
        self.publish_state()

    def update_state(self, change: Callable[[S], S | None]) -> None:
        """Apply ``change`` to the state (mutate in place or return a new value), then publish."""
        result = change(self._core.state)
        if result is not None:
            self._core.state = self._core.coerce_state(result)
        self.publish_state()

    def publish_state(self) -> None:
        """Send the state to the client as cheaply as possible.

        The first publish of a run is a STATE_SNAPSHOT. After that, unchanged
        state sends nothing, and a change is sent as a JSON-Patch STATE_DELTA
        against what the client last received — only when that patch
        serialises strictly smaller than the whole state; otherwise a
        snapshot. Raises ``RunError`` SERIALIZATION if the state has no JSON form, and
        ``RunError`` PROTOCOL_VIOLATION (rule ``limit-exceeded``) if it is past the
        run's ``limits`` (values, bytes, nesting) — nothing is sent then.
        """
        core = self._core
        document = to_json(core.state, "the state")
        try:
            measure_json(document, core.pipeline.limits)
        except LimitExceeded as exc:
            # Refused before anything is diffed or sent; the agent may shrink it and retry.
            raise limit_error(exc, None) from None
        baseline = core.pipeline.baseline
        kw = self._kw
        event: StateSnapshotEvent | StateDeltaEvent
        if baseline is UNSET:
            event = StateSnapshotEvent(snapshot=document, **kw)
        else:
            # Compared as canonical JSON: key order is not a change, and 1 vs true is.
            if json.dumps(document, separators=_COMPACT, sort_keys=True) == json.dumps(
                baseline, separators=_COMPACT, sort_keys=True
            ):
                return
            whole = json.dumps(document, separators=_COMPACT)
            operations = jsonpatch.make_patch(baseline, document).patch
            # make_patch compares with ==, so 1 -> true finds no change: snapshot then.
            if operations and len(json.dumps(operations, separators=_COMPACT)) < len(whole):
                event = make_event(StateDeltaEvent, delta=operations, **kw)
            else:
                event = StateSnapshotEvent(snapshot=document, **kw)
        core.pipeline.push_state(event, to_json(document, "the state"))

    # -- cancellation -------------------------------------------------------------

    @property
    def cancel_token(self) -> CancelToken:
        """The run's token; ``cancel()`` it to stop the run (every later emit fails)."""
        return self._core.pipeline.token

    def is_cancelled(self) -> bool:
        """Whether the run has been cancelled (for loop conditions)."""
        return self._core.pipeline.token.is_cancelled()

    def check_cancelled(self) -> None:
        """Raise ``RunError`` CANCELLED if the run has been cancelled (a checkpoint)."""
        token = self._core.pipeline.token
        if token.is_cancelled():
            raise RunError.cancelled(token.reason)

    async def cancelled(self) -> None:
        """Return once the run is cancelled."""
        await self._core.pipeline.token.wait()

    async def until_cancelled(self, awaitable: Awaitable[T]) -> T | None:
        """Await ``awaitable`` unless the run is cancelled first; ``None`` if cancellation won.

        The awaitable runs in the calling task inside a cancel scope that the
        token cancels when it trips, so an in-flight request really is
        abandoned (its cleanup runs) rather than left running in the background.
        """
        token = self._core.pipeline.token
        if token.is_cancelled():
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()  # an un-awaited coroutine would warn "never awaited"
            return None
        with anyio.CancelScope() as scope:
            remove = token.on_cancel(scope.cancel)
            try:
                return await awaitable
            finally:
                remove()
        return None


class StepHandle(Emitter[S], ClosesOnExit):
    """A step: emits like its opener (same attribution) and STEP_FINISHED on ``end()``/exit."""

    __slots__ = ("_open", "name")

    def __init__(self, core: RunCore, tag: str | None, name: str) -> None:
        super().__init__(core, tag)
        self.name = name
        self._open = True

    @property
    def is_open(self) -> bool:
        """Whether STEP_FINISHED has not been emitted yet."""
        return self._open

    def end(self) -> None:
        """Emit STEP_FINISHED."""
        if not self._open:
            raise RunError.violation(f"step {self.name!r} already finished")
        self._open = False
        self._push(StepFinishedEvent(step_name=self.name, **self._kw))

    def _close(self) -> None:
        self.end()


class SubagentScope(Emitter[S]):
    """One subagent invocation: everything emitted through it carries its id.

    It must be ended explicitly — ``finish()``, ``finish_with(result)``,
    ``fail(message)`` or ``suspend(interrupt_ids)`` — because how a subagent
    ended is information the client needs and a default would guess it.
    """

    __slots__ = ("_ended", "id", "name")

    def __init__(self, core: RunCore, sub_id: str, name: str) -> None:
        super().__init__(core, sub_id)
        self.id = sub_id
        self.name = name
        self._ended = False
        self._push = self._push_open

    @property
    def is_open(self) -> bool:
        """Whether the scope has not been finished, failed or suspended yet."""
        return not self._ended

    def _push_open(self, event: BaseEvent) -> None:
        if self._ended:
            raise RunError.violation(
                f"subagent {self.name!r} ({self.id}) has ended; it cannot emit "
                f"{event.type.value} any more — emit through its parent instead"
            )
        self._core.pipeline.push(event)

    def _end(self, event: BaseEvent) -> None:
        self._push(event)
        self._ended = True
        self._core.open_scopes.pop(self.id, None)

    def finish(self) -> None:
        """The subagent succeeded (SUBAGENT_FINISHED)."""
        self._end(SubagentFinishedEvent(subagent_run_id=self.id))

    def finish_with(self, result: Any) -> None:
        """The subagent succeeded with ``result`` (any JSON value) on SUBAGENT_FINISHED."""
        dumps_json(result, f"the result of subagent {self.name!r}")
        self._end(SubagentFinishedEvent(subagent_run_id=self.id, result=result))

    def fail(self, message: str, code: str | None = None) -> None:
        """The subagent failed (SUBAGENT_ERROR); the run itself may carry on."""
        fields: dict[str, Any] = {"subagent_run_id": self.id, "message": message}
        if code is not None:
            fields["code"] = code
        self._end(make_event(SubagentErrorEvent, **fields))

    def suspend(self, interrupt_ids: Sequence[str] = ()) -> None:
        """The subagent paused waiting on ``interrupt_ids`` (a suspended SUBAGENT_FINISHED)."""
        if isinstance(interrupt_ids, str):
            raise RunError.protocol(
                f"suspend() takes a list of interrupt ids, got the string {interrupt_ids!r}; "
                f"write suspend([{interrupt_ids!r}])"
            )
        outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=list(interrupt_ids))
        self._end(SubagentFinishedEvent(subagent_run_id=self.id, outcome=outcome))

    def __enter__(self) -> SubagentScope[S]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._ended or exc_type is not None:
            return  # an unwinding exception says more; the run ends in RUN_ERROR anyway
        raise unfinished_scope(self.id, self.name)


def unfinished_scope(sub_id: str, name: str) -> RunError:
    """The error for a subagent scope left without an explicit ending."""
    return RunError.violation(
        f"subagent {name!r} ({sub_id}) was left open: a subagent scope requires an explicit "
        "finish, fail or suspend (call finish(), finish_with(result), fail(message) or "
        "suspend(interrupt_ids) before leaving it)"
    )


class RunContext(Emitter[S]):
    """What an agent gets: the run's input, emitters, state, resume answers, cancellation.

    ``S`` is the agent's state model (a pydantic model), or ``Any`` for an
    agent without one, whose ``state`` is the raw input JSON.
    """

    __slots__ = ()

    @property
    def input(self) -> RunAgentInput:
        """The ``RunAgentInput`` this run answers."""
        return self._core.input

    @property
    def thread_id(self) -> str:
        return self._core.input.thread_id

    @property
    def principal(self) -> Principal:
        """Who the run is for: the principal the server's ``authorize=`` hook gave
        (``ANONYMOUS``, scope ``"default"``, without one; see docs/security.md)."""
        return self._core.principal

    @property
    def run_id(self) -> str:
        return self._core.run_id

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (``input.messages``)."""
        messages: list[Message] = self._core.input.messages
        return messages

    @property
    def resume(self) -> list[ResumeEntry]:
        """The client's answers to the previous run's interrupts (empty when not resuming)."""
        return list(self._core.input.resume or ())

    @property
    def is_resume(self) -> bool:
        """Whether this run resumes an interrupted one."""
        return bool(self._core.input.resume)

    def resume_for(
        self,
        interrupt: str | Interrupt,
        *,
        schema: Mapping[str, Any] | None = None,
        required: bool = False,
    ) -> ResumeEntry | None:
        """The answer to ``interrupt`` (its id, or the ``Interrupt`` itself), or ``None``.

        Given the ``Interrupt`` (the one the previous run raised, rebuilt with
        ``ctx.interrupt(...)``), its ``responseSchema`` is checked; ``schema=``
        names one (or overrides it). A ``resolved`` payload that does not match
        raises ``RunError`` ``INVALID_RESUME`` naming the path; a ``cancelled``
        answer is returned unchecked. ``required=True`` raises
        ``INVALID_RESUME`` instead of returning ``None`` when there is no answer.
        """
        if isinstance(interrupt, Interrupt):
            interrupt_id = interrupt.id
            if schema is None:
                schema = interrupt.response_schema
        else:
            interrupt_id = interrupt
        found = None
        for entry in self._core.input.resume or ():
            if entry.interrupt_id == interrupt_id:
                found = entry
                break
        return checked_answer(found, interrupt_id, schema, required=required)


# -- the emitting surface used as if it were async -----------------------------------

_NOT_AWAITABLE = re.compile(
    r"^object (?P<old>[\w.]+) can't be used in 'await' expression$"  # Python <= 3.13
    r"|^'(?P<new>[\w.]+)' object can't be awaited$"  # Python 3.14
)
_AWAITED_CALL = re.compile(r"\bawait\s+(?P<target>[\w.]+)\.(?P<method>\w+)\s*\(")
_NO_ASYNC_WITH = re.compile(
    r"^'(?P<type>\w+)' object does not support the asynchronous context manager protocol"
)
_ASYNC_WITH_CALL = re.compile(r"\basync\s+with\s+(?P<target>[\w.]+)\.(?P<method>\w+)\s*\(")
_EMITTING_CLASSES: tuple[type, ...] = (
    RunContext,
    StepHandle,
    SubagentScope,
    MessageHandle,
    ReasoningHandle,
    ReasoningMessageHandle,
    ToolCallHandle,
)


@functools.cache
def _sync_methods() -> frozenset[str]:
    return frozenset(
        name
        for klass in _EMITTING_CLASSES
        for name, member in inspect.getmembers(klass, inspect.isfunction)
        if not name.startswith("_") and not inspect.iscoroutinefunction(member)
    )


def _failing_line(error: BaseException) -> tuple[str, str]:
    """The source line the error was raised on, and ``file:line``."""
    tb = error.__traceback__
    if tb is None:
        return "", "an unknown line"
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename, lineno = tb.tb_frame.f_code.co_filename, tb.tb_lineno
    return linecache.getline(filename, lineno).strip(), f"{filename}:{lineno}"


def _call_on_line(pattern: re.Pattern[str], line: str) -> str | None:
    for call in pattern.finditer(line):
        if call.group("method") in _sync_methods():
            return f"{call.group('target')}.{call.group('method')}"
    return None


def async_misuse(error: Exception) -> str | None:
    """The fix for ``await ctx.say(...)`` or ``async with ctx.step(...)``, if that is ``error``.

    Emitting never waits, so these methods are plain functions and their
    handles plain context managers; Python's own error names the returned
    value or the handle's type, not the call. Read on the error path only:
    the agent's source line names the call when it can be found.
    """
    message = str(error)
    if isinstance(error, TypeError) and (awaited := _NOT_AWAITABLE.match(message)):
        line, where = _failing_line(error)
        call = _call_on_line(_AWAITED_CALL, line)
        if call is not None:
            return (
                f"`{call}(...)` is not async: call it without `await` "
                f"(`{line}` at {where}); emitting never waits"
            )
        value = awaited.group("old") or awaited.group("new")
        if value not in ("str", "NoneType"):  # no emitting method returns anything else
            return None
        return (
            f"the agent awaited a {value}, which is not awaitable (`{line}` at {where}); if "
            "that is an emitting method of ctx, a step, a subagent scope or a handle (say, "
            "emit, set_state, ...), call it without `await`: emitting never waits"
        )
    no_async_with = _NO_ASYNC_WITH.match(message) if isinstance(error, TypeError) else None
    python_310 = isinstance(error, AttributeError) and message == "__aenter__"
    if no_async_with is None and not python_310:
        return None
    line, where = _failing_line(error)
    call = _call_on_line(_ASYNC_WITH_CALL, line)
    if call is not None:
        return (
            f"`{call}(...)` is a plain context manager: write `with {call}(...)`, not "
            f"`async with` (`{line}` at {where}); emitting never waits"
        )
    names = {klass.__name__ for klass in _EMITTING_CLASSES}
    if no_async_with is None or no_async_with.group("type") not in names:
        return None
    return (
        f"a {no_async_with.group('type')} is a plain context manager: write `with`, not "
        f"`async with` (`{line}` at {where}); emitting never waits"
    )
