"""Handles for the things a run opens and closes: messages, reasoning, tool calls.

A handle emits its opening event when it is created and its terminator on
``end()`` — or on leaving its ``with`` block, even while an exception
unwinds, so an early failure cannot leave a message open. During unwinding
the terminator is best-effort: if it cannot be emitted (the run was
cancelled, the consumer left) the original exception is what propagates.
"""

from __future__ import annotations

import contextlib
import enum
import json
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ag_ui.core import (
    BaseEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
)
from pydantic import ValidationError

from .._protocol.construct import DICT_SLOT, EXTRA_SLOT, FIELDS_SET_SLOT, PRIVATE_SLOT
from ._errors import RunError

if TYPE_CHECKING:
    from ._core import RunCore

__all__ = [
    "ClosesOnExit",
    "MessageHandle",
    "ReasoningHandle",
    "ReasoningMessageHandle",
    "ToolCallHandle",
    "make_event",
]

Push = Callable[[BaseEvent], None]
"""Where a handle sends what it emits: its emitter's push (the run's pipeline, or a
subagent scope's guarded push)."""

_E = TypeVar("_E", bound=BaseEvent)


def make_event(cls: type[_E], **fields: Any) -> _E:
    """Build an event, turning a rejected field value into ``RunError`` PROTOCOL."""
    try:
        return cls(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunError.protocol(
            f"{cls.__name__} rejected {where}={first.get('input')!r}: {first['msg']}"
        ) from exc


def dumps_json(value: Any, what: str) -> str:
    """``value`` as compact JSON text, or ``RunError`` SERIALIZATION naming ``what``."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise RunError.serialization(f"{what} does not convert to JSON: {exc}") from exc


_W = TypeVar("_W", bound="ClosesOnExit")


class ClosesOnExit:
    """``with`` support for what emits a terminator: close on exit, best-effort if unwinding.

    The terminator may fail because the run was cancelled or the consumer
    left; a ``RunError`` then would hide the exception that ended the block,
    which is the one worth reporting, so it is dropped.
    """

    __slots__ = ()

    _open: bool

    def _close(self) -> None:
        """Emit the terminator (and mark the entity closed)."""
        raise NotImplementedError

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._open:
            return
        if exc_type is None:
            self._close()
            return
        with contextlib.suppress(RunError):
            self._close()


_new = object.__new__
_IMMUTABLE = (type(None), str, int, enum.Enum)


def _delta_template(
    cls: type[BaseEvent], id_field: str, item_id: str, kw: dict[str, Any]
) -> tuple[dict[str, Any] | None, frozenset[str]]:
    """The ``__dict__`` and fields-set every delta of one open item shares, but the text.

    A streamed item emits thousands of deltas that differ only in their text,
    and every other field (the item's id, its attribution tag) is the same.
    So the handle validates one sample event when the item opens and keeps
    its ``__dict__`` and fields-set; each ``str`` delta is then assembled
    from them: the same keys in the same order, the same fields-set, extras
    and private slot as a validated instance, so the event is equal to
    ``cls(**fields)`` and serialises byte for byte as it does, at a fraction
    of its cost. Anything but an exact ``str`` (a subclass, bytes, a wrong
    type) still goes through pydantic, so what it accepts, coerces or
    rejects is unchanged. A template is only shared when every value in it
    is immutable and the model has no extras or private state; otherwise
    (``None``) every delta is validated.
    """
    sample = cls(**{id_field: item_id, "delta": "", **kw})
    template = dict(sample.__dict__)
    fields = frozenset(sample.model_fields_set)
    plain = (
        sample.__pydantic_extra__ == {}
        and sample.__pydantic_private__ is None
        and all(isinstance(value, _IMMUTABLE) for value in template.values())
    )
    return (template if plain else None), fields


class _Closable(ClosesOnExit):
    """What every item handle holds: where it sends, the run, its tag, its id, its open flag.

    Given the pieces rather than the emitter that opened it, so the handle
    needs nothing of the emitter's internals (and holds no reference to it).
    """

    __slots__ = ("_core", "_kw", "_open", "_send", "id")

    _what = "entity"

    def __init__(self, send: Push, core: RunCore, kw: dict[str, Any], entity_id: str) -> None:
        self._send = send
        self._core = core
        self._kw = kw
        self.id = entity_id
        self._open = True

    def _require_open(self, action: str) -> None:
        if not self._open:
            raise RunError.violation(
                f"{self._what} {self.id!r} already ended, so it cannot {action}; open a new one"
            )

    @property
    def is_open(self) -> bool:
        """Whether the terminator has not been emitted yet."""
        return self._open


class _StreamingHandle(_Closable):
    """An open item that streams deltas: one content class, one terminator class."""

    __slots__ = ("_fields", "_template")
    _content: type[TextMessageContentEvent] | type[ReasoningMessageContentEvent]
    _end: type[TextMessageEndEvent] | type[ReasoningMessageEndEvent]

    def __init__(self, send: Push, core: RunCore, kw: dict[str, Any], entity_id: str) -> None:
        super().__init__(send, core, kw, entity_id)
        self._template, self._fields = _delta_template(self._content, "message_id", entity_id, kw)

    def delta(self, text: str) -> None:
        """Emit the content event carrying ``text``."""
        template = self._template
        if template is not None and text.__class__ is str and self._open:
            # The hot path (see _delta_template): a validated instance, assembled.
            data = template.copy()
            data["delta"] = text
            event = _new(self._content)
            DICT_SLOT(event, data)
            FIELDS_SET_SLOT(event, set(self._fields))
            EXTRA_SLOT(event, {})
            PRIVATE_SLOT(event, None)
            self._send(event)
            return
        if not self._open:
            self._require_open("take more content")
        content = self._content
        try:
            event = content(message_id=self.id, delta=text, **self._kw)
        except ValidationError:
            event = make_event(content, message_id=self.id, delta=text)
        self._send(event)

    def end(self) -> None:
        """Emit the terminator."""
        self._require_open("end again")
        self._close()

    def _close(self) -> None:
        self._open = False
        self._send(self._end(message_id=self.id, **self._kw))


class MessageHandle(_StreamingHandle):
    """An open text message: ``delta(text)`` streams TEXT_MESSAGE_CONTENT, ``end()`` closes it."""

    __slots__ = ()
    _what = "message"
    _content = TextMessageContentEvent
    _end = TextMessageEndEvent


class ReasoningMessageHandle(_StreamingHandle):
    """An open reasoning message inside a reasoning span (REASONING_MESSAGE_CONTENT / _END)."""

    __slots__ = ()
    _what = "reasoning message"
    _content = ReasoningMessageContentEvent
    _end = ReasoningMessageEndEvent


class ReasoningHandle(_Closable):
    """An open reasoning span (REASONING_START ... REASONING_END) holding reasoning messages."""

    __slots__ = ()
    _what = "reasoning span"

    def message(self) -> ReasoningMessageHandle:
        """Open a reasoning message in this span (REASONING_MESSAGE_START)."""
        self._require_open("open a message")
        kw = self._kw
        message_id = self._core.message_id()
        self._send(ReasoningMessageStartEvent(message_id=message_id, role="reasoning", **kw))
        return ReasoningMessageHandle(self._send, self._core, kw, message_id)

    def think(self, text: str) -> str:
        """A whole reasoning message: START, one CONTENT, END. Returns its id."""
        with self.message() as message:
            message.delta(text)
        return message.id

    def end(self) -> None:
        """Emit REASONING_END."""
        self._require_open("end again")
        self._close()

    def _close(self) -> None:
        self._open = False
        self._send(ReasoningEndEvent(message_id=self.id, **self._kw))


class ToolCallHandle(_Closable):
    """An open tool call: stream ``args``, then ``end()``; answer with ``result``.

    ``result()`` closes the arguments first if they are still open, so
    ``call.args_json({...}); call.result("42")`` is a complete call.
    """

    __slots__ = ("_answered", "_fields", "_template", "name")
    _what = "tool call"

    def __init__(
        self, send: Push, core: RunCore, kw: dict[str, Any], entity_id: str, name: str
    ) -> None:
        super().__init__(send, core, kw, entity_id)
        self.name = name
        self._answered = False
        self._template, self._fields = _delta_template(
            ToolCallArgsEvent, "tool_call_id", entity_id, kw
        )

    def args(self, delta: str) -> None:
        """Emit TOOL_CALL_ARGS with a fragment of the argument text (any string)."""
        template = self._template
        if template is not None and delta.__class__ is str and self._open:
            data = template.copy()  # assembled, as in _StreamingHandle.delta
            data["delta"] = delta
            event = _new(ToolCallArgsEvent)
            DICT_SLOT(event, data)
            FIELDS_SET_SLOT(event, set(self._fields))
            EXTRA_SLOT(event, {})
            PRIVATE_SLOT(event, None)
            self._send(event)
            return
        if not self._open:
            self._require_open("take more arguments")
        try:
            event = ToolCallArgsEvent(tool_call_id=self.id, delta=delta, **self._kw)
        except ValidationError:
            event = make_event(ToolCallArgsEvent, tool_call_id=self.id, delta=delta)
        self._send(event)

    def args_json(self, value: Any) -> None:
        """Emit the arguments as one JSON-encoded TOOL_CALL_ARGS (SERIALIZATION if it cannot)."""
        self.args(dumps_json(value, f"the arguments of tool call {self.name!r}"))

    def end(self) -> None:
        """Emit TOOL_CALL_END: the arguments are complete."""
        self._require_open("end again")
        self._close()

    def result(self, content: str) -> str:
        """Emit TOOL_CALL_RESULT (ending the arguments first if needed); returns its message id.

        The result mints a ``tool`` message, whose id comes from the run's
        message counter.
        """
        if self._answered:
            raise RunError.violation(f"tool call {self.id!r} already has a result")
        if self._open:
            self._close()
        self._answered = True
        message_id = self._core.message_id()
        self._send(
            make_event(
                ToolCallResultEvent,
                message_id=message_id,
                tool_call_id=self.id,
                content=content,
                role="tool",
                **self._kw,
            )
        )
        return message_id

    def result_json(self, value: Any) -> str:
        """``result`` with ``value`` JSON-encoded (SERIALIZATION if it cannot be)."""
        return self.result(dumps_json(value, f"the result of tool call {self.name!r}"))

    def _close(self) -> None:
        self._open = False
        self._send(ToolCallEndEvent(tool_call_id=self.id, **self._kw))
