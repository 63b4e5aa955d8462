"""Wire to events, the reference path: the AG-UI 1.0 processing model for what arrives.

This module is the plain decoder every answer is measured against: the event
specs (``SPECS``), the field checks, and ``decode`` / ``decode_many``. The
public names are exported by ``agui_pipes.codecs`` (and ``agui_pipes``);
``agui_pipes._fastpath`` reads ``SPECS`` to generate its builders and never
the other way round.

``decode(wire)`` takes one event as a ``dict``, a JSON ``str`` or UTF-8
``bytes`` and returns a :class:`Decoded`: the ``ag_ui.core`` event (or ``None``
when the event was dropped) plus structured :class:`DecodeWarning` values.

The rules (PROTOCOL.md §6), which follow the official TypeScript client's
enforcement stage so both SDKs accept and reject the same wire:

* an unknown event ``type`` is dropped, with a warning;
* an undescribed property on a closed object is stripped, with a warning
  naming its path (``/futureProp``); open positions (``metadata``, state,
  ``rawEvent``, JSON Patch operations) are never touched;
* an unknown member of a closed union — a RUN_FINISHED outcome type, a content
  part type, a message role inside a snapshot, a patch ``op`` — is removed
  from its optional position or its array, with a warning; an outcome removed
  this way reads as success;
* a malformed value on a described field (wrong type, missing required field,
  ``null`` where the field must be absent) is fatal: :class:`DecodeError`,
  naming the field path;
* five pre-1.0 ``null`` spellings the reference client still tolerates
  (``rawEvent``, ``result``, ``parentMessageId``, ``RUN_FINISHED.outcome`` and
  optional JSON fields of a RUN_STARTED input echo) are read as absent, with a
  warning.

The other pre-1.0 shapes (``THINKING_*`` events, ``binary`` content parts) are
unknown in 1.0 and dropped as such, unless the caller asks to read them
(``decode_legacy_object``, which the ``compat`` stage arranges): then each
``THINKING_*`` type is checked as strictly as a 1.0 event and built as its
``agui_pipes._protocol.legacy_events`` model, and ``binary`` parts in a MESSAGES_SNAPSHOT or a
RUN_STARTED input echo are upgraded to media parts before the 1.0 checks, with
a ``legacy-content`` warning. Nothing else changes: what 1.0 rejects is still
rejected.

Validation is strict the way the JSON Schema is (a number is not a string,
``true`` is not an integer), not pydantic's lax coercion. Warnings are also
logged on the ``agui_pipes.decode`` logger (the name is kept for
configurations that select it); the library never prints.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    CustomEvent,
    EventType,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from .._foundation import json as _json
from ..verify import ProtocolViolation
from .construct import construct
from .legacy import upgrade_binary_parts

__all__ = [
    "PATCH_OP_KEYS",
    "POINTER",
    "PROTOCOL_VERSION",
    "SPECS",
    "DecodeError",
    "DecodeWarning",
    "Decoded",
    "EventSpec",
    "as_object",
    "decode",
    "decode_all",
    "decode_checked",
    "decode_event",
    "decode_legacy_event",
    "decode_legacy_object",
    "decode_many",
    "decode_object",
    "event_type_names",
    "legacy_specs",
    "unknown_type_warning",
]

logger = logging.getLogger("agui_pipes.decode")
logger.addHandler(logging.NullHandler())

PROTOCOL_VERSION: Final = "1.0"
"""The protocol version this decoder implements."""


@dataclass(frozen=True, slots=True)
class DecodeWarning:
    """Something the decoder removed or noticed without failing the stream.

    ``code`` is one of ``unknown-event-type``, ``unknown-property``,
    ``unknown-member``, ``legacy-null``, ``protocol-version`` (and, when
    legacy shapes are read, ``legacy-content``; the ``compat`` stage adds
    ``compat``); ``index`` is
    the position of the wire event in its stream when the caller gave one.
    """

    code: str
    message: str
    index: int | None = None

    def __str__(self) -> str:
        where = f"event #{self.index}: " if self.index is not None else ""
        return f"{where}{self.message}"


@dataclass(frozen=True, slots=True, init=False)
class Decoded:
    """The outcome of decoding one wire event: the event (``None`` if dropped) and warnings."""

    event: BaseEvent | None
    warnings: tuple[DecodeWarning, ...] = ()

    def __init__(self, event: BaseEvent | None, warnings: tuple[DecodeWarning, ...] = ()) -> None:
        # One is built per event decoded: the slots' own setters cost less than the
        # frozen dataclass's ``object.__setattr__`` by name (a third of a microsecond).
        _SET_EVENT(self, event)
        _SET_WARNINGS(self, warnings)


_SET_EVENT: Final = vars(Decoded)["event"].__set__
_SET_WARNINGS: Final = vars(Decoded)["warnings"].__set__


class DecodeError(ProtocolViolation):
    """A described field holds a malformed value (or the input is not JSON at all).

    ``path`` is the dotted field path inside the event (``delta``,
    ``outcome.interrupts``, ``messages.0.role``); empty for whole-input
    problems. The message ends with the equivalent validator issue of the
    reference client, so both SDKs report the same wording.
    """

    at_event = True  # ``index`` is the malformed event's own position, never the end

    path: str
    event_type: str | None

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        event_type: str | None = None,
        index: int | None = None,
    ) -> None:
        super().__init__(message, index=index)
        self.path = path
        self.event_type = event_type


# ---------------------------------------------------------------------------
# Validation primitives. A checker gets (value, path) and returns the cleaned
# value, or _DROP (an unrecognised union member), or raises _Invalid.

_DROP: Final = object()
_ABSENT: Final = object()
_SAFE: Final = 9007199254740991


class _Invalid(Exception):
    """A malformed value; carries the zod-style issue for the message."""

    def __init__(self, path: tuple[str | int, ...], expected: str, message: str, code: str):
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.message = message
        self.code = code


class _Context:
    """Per-event accumulator of stripped paths (each becomes a warning)."""

    __slots__ = ("legacy", "stripped")

    def __init__(self) -> None:
        self.stripped: list[tuple[str, str]] = []  # (code, pointer)
        self.legacy: list[str] = []


Checker = Callable[[Any, tuple[str | int, ...], _Context], Any]


def _received(value: Any) -> str:
    if value is _ABSENT:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_error(expected: str, value: Any, path: tuple[str | int, ...]) -> _Invalid:
    return _Invalid(
        path,
        expected,
        f"Invalid input: expected {expected}, received {_received(value)}",
        "invalid_type",
    )


def _str(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
    if value.__class__ is str or isinstance(value, str):
        return value
    raise _type_error("string", value, path)


_STR_KEPT: set[Checker] = {_str}
"""Checkers that accept a string value and keep it unchanged (for the generated builders)."""


def _bool(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
    if isinstance(value, bool):
        return value
    raise _type_error("boolean", value, path)


_INT_BOUNDS: dict[Checker, tuple[int, int]] = {}
"""Integer checkers and their bounds: an int within them is kept as it is (for builders)."""


def _int_between(low: int, high: int) -> Checker:
    def check(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error("number", value, path)
        if isinstance(value, float):
            if not value.is_integer():
                raise _Invalid(
                    path, "int", "Invalid input: expected int, received number", "invalid_type"
                )
            value = int(value)
        if value < low:
            raise _Invalid(path, "number", f"Too small: expected number to be >={low}", "too_small")
        if value > high:
            raise _Invalid(path, "number", f"Too big: expected number to be <={high}", "too_big")
        return value

    _INT_BOUNDS[check] = (low, high)

    return check


def _any(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
    return value


def _non_null(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
    if value is None:
        raise _Invalid(path, "any", "Invalid input", "custom")
    return value


def _json_object(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
    if isinstance(value, dict):
        return value
    raise _Invalid(path, "object", "Invalid input", "custom")


_CHOICES: dict[Checker, frozenset[str]] = {}
"""The allowed strings of each literal / enum checker (for the generated builders)."""


def _literal(expected: str) -> Checker:
    shown = json.dumps(expected)

    def check(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
        if value == expected and isinstance(value, str):
            return value
        raise _Invalid(path, shown, f"Invalid input: expected {shown}", "invalid_value")

    _CHOICES[check] = frozenset((expected,))
    return check


def _enum(*options: str) -> Checker:
    allowed = frozenset(options)
    shown = "|".join(json.dumps(o) for o in options)

    def check(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
        if isinstance(value, str) and value in allowed:
            return value
        raise _Invalid(path, shown, f"Invalid option: expected one of {shown}", "invalid_value")

    _CHOICES[check] = allowed
    return check


_POINTER = re.compile(r"^(/([^/~]|~[01])*)*$")


def _pointer(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
    if not isinstance(value, str):
        raise _type_error("string", value, path)
    if _POINTER.match(value) is None:
        raise _Invalid(
            path,
            "string",
            f"Invalid string: must match pattern /{_POINTER.pattern}/",
            "invalid_format",
        )
    return value


def _pointer_of(path: tuple[str | int, ...]) -> str:
    return "".join(f"/{p}" for p in path)


class _Field:
    """One described property: its wire key, attribute name, checker and optionality."""

    __slots__ = ("attr", "check", "key", "required")

    def __init__(self, key: str, attr: str, check: Checker, required: bool) -> None:
        self.key = key
        self.attr = attr
        self.check = check
        self.required = required


def _snake(key: str) -> str:
    out = []
    for ch in key:
        if ch.isupper():
            out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    name = "".join(out)
    return "from_" if name == "from" else name


class _Object:
    """A described object: unknown keys stripped (unless the spec leaves it open)."""

    __slots__ = ("fields", "open", "required")

    def __init__(self, fields: Mapping[str, tuple[Checker, bool]], *, open: bool = False) -> None:
        self.fields = {k: _Field(k, _snake(k), c, r) for k, (c, r) in fields.items()}
        self.required = tuple(f for f in self.fields.values() if f.required)
        self.open = open

    def __call__(self, value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
        if not isinstance(value, dict):
            raise _type_error("object", value, path)
        fields = self.fields
        result: dict[str, Any] = {}
        for key, item in value.items():
            field = fields.get(key)
            if field is None:
                if self.open:
                    result[key] = item
                else:
                    ctx.stripped.append(("unknown-property", _pointer_of((*path, key))))
                continue
            mark = len(ctx.stripped)
            checked = field.check(item, (*path, key), ctx)
            if checked is _DROP:
                del ctx.stripped[mark:]
                if field.required:
                    return _DROP
                ctx.stripped.append(("unknown-member", _pointer_of((*path, key))))
                continue
            if checked is _LEGACY_NULL:
                continue
            result[key] = checked
        for field in self.required:
            if field.key not in result:
                _missing(field, path)
        return result


def _missing(field: _Field, path: tuple[str | int, ...]) -> None:
    """Raise the issue for an absent required field (the checker's own wording)."""
    where = (*path, field.key)
    field.check(_ABSENT, where, _Context())
    raise _Invalid(
        where, "value", "Invalid input: expected value, received undefined", "invalid_type"
    )


def _array(element: Checker, min_items: int = 0) -> Checker:
    def check(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
        if not isinstance(value, list):
            raise _type_error("array", value, path)
        result = []
        for index, item in enumerate(value):
            mark = len(ctx.stripped)
            checked = element(item, (*path, index), ctx)
            if checked is _DROP:
                del ctx.stripped[mark:]
                ctx.stripped.append(("unknown-member", _pointer_of((*path, index))))
                continue
            result.append(checked)
        if len(result) < min_items:
            raise _Invalid(
                path,
                "array",
                f"Too small: expected array to have >={min_items} items",
                "too_small",
            )
        return result

    return check


def _union(discriminator: str, options: Mapping[str, _Object]) -> Checker:
    """A discriminated union: an unknown tag is an unrecognised member (dropped)."""

    def check(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
        if not isinstance(value, dict):
            raise _type_error("object", value, path)
        option = options.get(value.get(discriminator))  # type: ignore[arg-type]
        if option is None:
            return _DROP
        return option(value, path, ctx)

    return check


def _string_or_array(element: Checker) -> Checker:
    as_array = _array(element)

    def check(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return as_array(value, path, ctx)
        raise _Invalid(path, "string | array", "Invalid input", "invalid_union")

    _STR_KEPT.add(check)
    return check


def _optional_legacy_null(inner: Checker) -> Checker:
    """A pre-1.0 peer may send ``null`` for this optional field; read it as absent."""

    def check(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
        if value is None:
            ctx.legacy.append(_pointer_of(path))
            return _LEGACY_NULL
        return inner(value, path, ctx)

    if inner in _STR_KEPT:
        _STR_KEPT.add(check)
    return check


_LEGACY_NULL: Final = object()

# ---------------------------------------------------------------------------
# The schema (AG-UI 1.0), as the reference client's generated validators have it.

_R, _O = True, False
_TS = _int_between(-_SAFE, _SAFE)
_COUNT = _int_between(0, _SAFE)
_BASE: dict[str, tuple[Checker, bool]] = {
    "timestamp": (_TS, _O),
    "rawEvent": (_optional_legacy_null(_non_null), _O),
    "metadata": (_json_object, _O),
}
_TAGGED: dict[str, tuple[Checker, bool]] = {**_BASE, "subagentRunId": (_str, _O)}

_PART_SOURCE = _union(
    "type",
    {
        "data": _Object(
            {"type": (_literal("data"), _R), "value": (_str, _R), "mimeType": (_str, _R)}
        ),
        "url": _Object(
            {"type": (_literal("url"), _R), "value": (_str, _R), "mimeType": (_str, _O)}
        ),
        "file": _Object(
            {
                "type": (_literal("file"), _R),
                "value": (_str, _R),
                "provider": (_str, _O),
                "mimeType": (_str, _O),
            }
        ),
    },
)


def _media(kind: str, metadata: Checker) -> _Object:
    return _Object(
        {
            "type": (_literal(kind), _R),
            "id": (_str, _O),
            "source": (_PART_SOURCE, _R),
            "metadata": (metadata, _O),
        }
    )


def _content_part(media_metadata: Checker) -> Checker:
    return _union(
        "type",
        {
            "text": _Object(
                {
                    "type": (_literal("text"), _R),
                    "id": (_str, _O),
                    "text": (_str, _R),
                    "metadata": (_non_null, _O),
                }
            ),
            **{
                kind: _media(kind, media_metadata)
                for kind in ("image", "audio", "video", "document")
            },
        },
    )


_CONTENT_PART = _content_part(_non_null)
_CONTENT = _string_or_array(_CONTENT_PART)
# Inside replayed messages a pre-1.0 peer may send media-part ``metadata: null``.
_MESSAGE_CONTENT = _string_or_array(_content_part(_optional_legacy_null(_non_null)))

_OP_FIELDS: dict[str, dict[str, tuple[Checker, bool]]] = {
    "add": {"path": (_pointer, _R), "value": (_any, _R)},
    "remove": {"path": (_pointer, _R)},
    "replace": {"path": (_pointer, _R), "value": (_any, _R)},
    "move": {"from": (_pointer, _R), "path": (_pointer, _R)},
    "copy": {"from": (_pointer, _R), "path": (_pointer, _R)},
    "test": {"path": (_pointer, _R), "value": (_any, _R)},
}
_PATCH = _array(
    _union(
        "op",
        {
            op: _Object({"op": (_literal(op), _R), **fields}, open=True)
            for op, fields in _OP_FIELDS.items()
        },
    )
)

PATCH_OP_KEYS: Final[dict[str, frozenset[str]]] = {
    op: frozenset({"op", *fields}) for op, fields in _OP_FIELDS.items()
}
"""Each patch op's keys (all required), for the fast path: any other key set is not its to
decide (an extra member is kept with the op; ``_decode`` builds those)."""
POINTER: Final = _POINTER
"""The JSON Pointer pattern every patch ``path`` / ``from`` must match."""

_MESSAGE_BASE: dict[str, tuple[Checker, bool]] = {
    "subagentRunId": (_str, _O),
    "id": (_str, _R),
    "metadata": (_json_object, _O),
}
_TOOL_CALL = _Object(
    {
        "id": (_str, _R),
        "type": (_literal("function"), _R),
        "function": (_Object({"name": (_str, _R), "arguments": (_str, _R)}), _R),
        "encryptedValue": (_str, _O),
        "metadata": (_json_object, _O),
    }
)
_MESSAGE = _union(
    "role",
    {
        "developer": _Object(
            {
                **_MESSAGE_BASE,
                "role": (_literal("developer"), _R),
                "name": (_str, _O),
                "encryptedValue": (_str, _O),
                "content": (_str, _R),
            }
        ),
        "system": _Object(
            {
                **_MESSAGE_BASE,
                "role": (_literal("system"), _R),
                "name": (_str, _O),
                "encryptedValue": (_str, _O),
                "content": (_str, _R),
            }
        ),
        "assistant": _Object(
            {
                **_MESSAGE_BASE,
                "role": (_literal("assistant"), _R),
                "name": (_str, _O),
                "encryptedValue": (_str, _O),
                "content": (_str, _O),
                "toolCalls": (_array(_TOOL_CALL), _O),
            }
        ),
        "user": _Object(
            {
                **_MESSAGE_BASE,
                "role": (_literal("user"), _R),
                "name": (_str, _O),
                "encryptedValue": (_str, _O),
                "content": (_MESSAGE_CONTENT, _R),
            }
        ),
        "tool": _Object(
            {
                **_MESSAGE_BASE,
                "role": (_literal("tool"), _R),
                "content": (_MESSAGE_CONTENT, _R),
                "toolCallId": (_str, _R),
                "error": (_str, _O),
                "encryptedValue": (_str, _O),
            }
        ),
        "activity": _Object(
            {
                **_MESSAGE_BASE,
                "role": (_literal("activity"), _R),
                "activityType": (_str, _R),
                "content": (_json_object, _R),
            }
        ),
        "reasoning": _Object(
            {
                **_MESSAGE_BASE,
                "role": (_literal("reasoning"), _R),
                "content": (_str, _R),
                "encryptedValue": (_str, _O),
            }
        ),
    },
)
_MESSAGES = _array(_MESSAGE)


def _input_state(value: Any, path: tuple[str | int, ...], ctx: _Context) -> Any:
    # RunAgentInput.state: null is accepted and means absent.
    return _LEGACY_NULL if value is None else value


_RUN_AGENT_INPUT = _Object(
    {
        "threadId": (_str, _R),
        "runId": (_str, _R),
        "protocolVersion": (_str, _O),
        "parentRunId": (_str, _O),
        "state": (_input_state, _O),
        "messages": (_MESSAGES, _R),
        "tools": (
            _array(
                _Object(
                    {
                        "name": (_str, _R),
                        "description": (_str, _R),
                        "parameters": (_optional_legacy_null(_non_null), _O),
                        "metadata": (_json_object, _O),
                    }
                )
            ),
            _O,
        ),
        "context": (_array(_Object({"description": (_str, _R), "value": (_str, _R)})), _O),
        "forwardedProps": (_optional_legacy_null(_non_null), _O),
        "resume": (
            _array(
                _Object(
                    {
                        "interruptId": (_str, _R),
                        "status": (_enum("resolved", "cancelled"), _R),
                        "payload": (_optional_legacy_null(_non_null), _O),
                        "metadata": (_json_object, _O),
                    }
                )
            ),
            _O,
        ),
    }
)
_USAGE = _array(
    _Object(
        {
            "provider": (_str, _O),
            "model": (_str, _O),
            "inputTokens": (_COUNT, _O),
            "outputTokens": (_COUNT, _O),
            "totalTokens": (_COUNT, _O),
            "reasoningTokens": (_COUNT, _O),
            "cachedInputTokens": (_COUNT, _O),
            "cacheWriteInputTokens": (_COUNT, _O),
        }
    )
)
_INTERRUPT = _Object(
    {
        "subagentRunId": (_str, _O),
        "id": (_str, _R),
        "reason": (_str, _R),
        "message": (_str, _O),
        "toolCallId": (_str, _O),
        "responseSchema": (_json_object, _O),
        "expiresAt": (_str, _O),
        "metadata": (_json_object, _O),
    }
)
_RUN_OUTCOME = _union(
    "type",
    {
        "success": _Object(
            {"type": (_literal("success"), _R), "pendingToolCallIds": (_array(_str), _O)}
        ),
        "interrupt": _Object(
            {"type": (_literal("interrupt"), _R), "interrupts": (_array(_INTERRUPT, 1), _R)}
        ),
        "cancelled": _Object({"type": (_literal("cancelled"), _R)}),
    },
)
_SUBAGENT_OUTCOME = _union(
    "type",
    {
        "success": _Object({"type": (_literal("success"), _R)}),
        "suspended": _Object(
            {"type": (_literal("suspended"), _R), "interruptIds": (_array(_str), _O)}
        ),
    },
)
_TEXT_ROLE = _enum("developer", "system", "assistant", "user")


class EventSpec:
    """How one event type is checked and turned into its ``ag_ui.core`` model.

    Besides the checks, a spec states as plain data what a generated builder
    may take over (``str_attrs``, ``choice_attrs``, ``int_attrs``: wire keys
    whose check keeps a string, a choice or a bounded integer as it is; and
    for the open-value builders ``open_attrs``, ``object_attrs``,
    ``bool_attrs``, ``patch_attrs``, ``messages_attrs``: any JSON value, a JSON
    object, a boolean, a JSON Patch array, an array of messages) and the
    model's key order (``model_order``), which is the encoder's.
    """

    __slots__ = (
        "bool_attrs",
        "choice_attrs",
        "cls",
        "fields",
        "flat",
        "int_attrs",
        "messages_attrs",
        "model_order",
        "object_attrs",
        "open_attrs",
        "patch_attrs",
        "required",
        "required_attrs",
        "str_attrs",
        "type_name",
    )

    def __init__(
        self, cls: type[BaseEvent], fields: Mapping[str, tuple[Checker, bool]], flat: bool
    ) -> None:
        self.cls = cls
        self.type_name: str = cls.model_fields["type"].default.value
        self.fields = {k: _Field(k, _snake(k), c, r) for k, (c, r) in fields.items()}
        self.required = tuple(f for f in self.fields.values() if f.required)
        self.flat = flat
        self.required_attrs = frozenset(f.attr for f in self.required)
        self.str_attrs = {
            "type": "type",
            **{f.key: f.attr for f in self.fields.values() if f.check in _STR_KEPT},
        }
        self.choice_attrs = {
            f.key: (f.attr, _CHOICES[f.check]) for f in self.fields.values() if f.check in _CHOICES
        }
        self.int_attrs = {
            f.key: (f.attr, *_INT_BOUNDS[f.check])
            for f in self.fields.values()
            if f.check in _INT_BOUNDS
        }
        # Open JSON values kept as they are, JSON objects, booleans, JSON Patch
        # arrays and message arrays: what the fast path's open-value builders may
        # take over.
        by_check = {
            check: {f.key: f.attr for f in self.fields.values() if f.check is check}
            for check in (_any, _json_object, _bool, _PATCH, _MESSAGES)
        }
        self.open_attrs = by_check[_any]
        self.object_attrs = by_check[_json_object]
        self.bool_attrs = by_check[_bool]
        self.patch_attrs = by_check[_PATCH]
        self.messages_attrs = by_check[_MESSAGES]
        positions = {name: i for i, name in enumerate(cls.model_fields)}
        self.model_order: dict[str, int] = {
            "type": positions["type"],
            **{k: positions[f.attr] for k, f in self.fields.items()},
        }

    def builder_attr(self, key: str) -> str | None:
        """The attribute a generated builder sets from wire ``key``, or None (it cannot)."""
        attr = self.str_attrs.get(key)
        if attr is not None:
            return attr
        if key in self.choice_attrs:
            return self.choice_attrs[key][0]
        if key in self.int_attrs:
            return self.int_attrs[key][0]
        return None

    def in_model_order(self, keys: Iterable[str]) -> bool:
        """Whether ``keys`` are all the type's and come in the model's (the encoder's) order."""
        order = self.model_order
        last = -1
        for key in keys:
            position = order.get(key)
            if position is None or position < last:
                return False
            last = position
        return True


def _spec(
    cls: type[BaseEvent], tagged: bool = True, flat: bool = True, **fields: tuple[Checker, bool]
) -> EventSpec:
    base = _TAGGED if tagged else _BASE
    return EventSpec(cls, {**base, **fields}, flat)


SPECS: Final[dict[str, EventSpec]] = {
    spec.type_name: spec
    for spec in (
        _spec(TextMessageStartEvent, messageId=(_str, _R), role=(_TEXT_ROLE, _O), name=(_str, _O)),
        _spec(TextMessageContentEvent, messageId=(_str, _R), delta=(_str, _R)),
        _spec(TextMessageEndEvent, messageId=(_str, _R)),
        _spec(
            TextMessageChunkEvent,
            messageId=(_str, _O),
            role=(_TEXT_ROLE, _O),
            delta=(_str, _O),
            name=(_str, _O),
        ),
        _spec(
            ToolCallStartEvent,
            toolCallId=(_str, _R),
            toolCallName=(_str, _R),
            parentMessageId=(_optional_legacy_null(_str), _O),
        ),
        _spec(ToolCallArgsEvent, toolCallId=(_str, _R), delta=(_str, _R)),
        _spec(ToolCallEndEvent, toolCallId=(_str, _R)),
        _spec(
            ToolCallChunkEvent,
            toolCallId=(_str, _O),
            toolCallName=(_str, _O),
            parentMessageId=(_optional_legacy_null(_str), _O),
            delta=(_str, _O),
        ),
        _spec(
            ToolCallResultEvent,
            flat=False,
            messageId=(_str, _R),
            toolCallId=(_str, _R),
            content=(_CONTENT, _R),
            role=(_literal("tool"), _O),
        ),
        _spec(StateSnapshotEvent, snapshot=(_any, _R)),
        _spec(StateDeltaEvent, flat=False, delta=(_PATCH, _R)),
        _spec(MessagesSnapshotEvent, tagged=False, flat=False, messages=(_MESSAGES, _R)),
        _spec(
            ActivitySnapshotEvent,
            messageId=(_str, _R),
            activityType=(_str, _R),
            content=(_json_object, _R),
            replace=(_bool, _O),
        ),
        _spec(
            ActivityDeltaEvent,
            flat=False,
            messageId=(_str, _R),
            activityType=(_str, _R),
            patch=(_PATCH, _R),
        ),
        _spec(RawEvent, event=(_any, _R), source=(_str, _O)),
        _spec(CustomEvent, name=(_str, _R), value=(_any, _R)),
        _spec(
            RunStartedEvent,
            tagged=False,
            flat=False,
            threadId=(_str, _R),
            runId=(_str, _R),
            protocolVersion=(_str, _O),
            parentRunId=(_str, _O),
            input=(_RUN_AGENT_INPUT, _O),
        ),
        _spec(
            RunFinishedEvent,
            tagged=False,
            flat=False,
            threadId=(_str, _R),
            runId=(_str, _R),
            result=(_optional_legacy_null(_non_null), _O),
            outcome=(_optional_legacy_null(_RUN_OUTCOME), _O),
            usage=(_USAGE, _O),
        ),
        _spec(
            RunErrorEvent,
            tagged=False,
            flat=False,
            message=(_str, _R),
            code=(_str, _O),
            usage=(_USAGE, _O),
        ),
        _spec(StepStartedEvent, stepName=(_str, _R)),
        _spec(StepFinishedEvent, stepName=(_str, _R)),
        _spec(ReasoningStartEvent, messageId=(_str, _R)),
        _spec(ReasoningMessageStartEvent, messageId=(_str, _R), role=(_literal("reasoning"), _R)),
        _spec(ReasoningMessageContentEvent, messageId=(_str, _R), delta=(_str, _R)),
        _spec(ReasoningMessageEndEvent, messageId=(_str, _R)),
        _spec(ReasoningMessageChunkEvent, messageId=(_str, _O), delta=(_str, _O)),
        _spec(ReasoningEndEvent, messageId=(_str, _R)),
        _spec(
            ReasoningEncryptedValueEvent,
            subtype=(_enum("tool-call", "message"), _R),
            entityId=(_str, _R),
            encryptedValue=(_str, _R),
        ),
        _spec(
            SubagentStartedEvent,
            tagged=False,
            subagentRunId=(_str, _R),
            name=(_str, _R),
            description=(_str, _O),
            parentSubagentRunId=(_str, _O),
            parentToolCallId=(_str, _O),
            parentMessageId=(_str, _O),
        ),
        _spec(
            SubagentFinishedEvent,
            tagged=False,
            flat=False,
            subagentRunId=(_str, _R),
            result=(_optional_legacy_null(_non_null), _O),
            outcome=(_SUBAGENT_OUTCOME, _O),
        ),
        _spec(
            SubagentErrorEvent,
            tagged=False,
            subagentRunId=(_str, _R),
            message=(_str, _R),
            code=(_str, _O),
        ),
    )
}
"""Every AG-UI 1.0 event type's spec, by wire ``type``."""

_LEGACY_SPECS: dict[str, EventSpec] = {}


def legacy_specs() -> dict[str, EventSpec]:
    """The pre-1.0 event types read when legacy shapes are asked for (never otherwise).

    Built on first use: their models (``agui_pipes._protocol.legacy_events``) cost an
    import that a process which never reads a pre-1.0 stream does not pay.
    """
    if not _LEGACY_SPECS:
        from .legacy_events import (
            ThinkingEndEvent,
            ThinkingStartEvent,
            ThinkingTextMessageContentEvent,
            ThinkingTextMessageEndEvent,
            ThinkingTextMessageStartEvent,
        )

        for spec in (
            _spec(ThinkingStartEvent, tagged=False, title=(_str, _O)),
            _spec(ThinkingEndEvent, tagged=False),
            _spec(ThinkingTextMessageStartEvent, tagged=False),
            _spec(ThinkingTextMessageContentEvent, tagged=False, delta=(_str, _R)),
            _spec(ThinkingTextMessageEndEvent, tagged=False),
        ):
            _LEGACY_SPECS[spec.type_name] = spec
    return _LEGACY_SPECS


def _build(spec: EventSpec, values: dict[str, Any], snake: dict[str, Any]) -> BaseEvent:
    """The event model for already-validated values (no second validation pass)."""
    if spec.flat:
        return construct(spec.cls, snake)
    return spec.cls.model_validate(values)


def decode_object(raw: dict[str, Any], index: int | None) -> Decoded:
    """The outcome for one parsed wire object (the reference path's one step)."""
    sink: list[DecodeWarning] = []
    event = decode_event(raw, index, sink)
    return Decoded(event, tuple(sink))


def decode_checked(raw: dict[str, Any], type_name: Any, index: int | None) -> Decoded:
    """The fully checked path, without the plain-string shortcut (tests compare the two)."""
    sink: list[DecodeWarning] = []
    spec = SPECS.get(type_name) if isinstance(type_name, str) else None
    if spec is None:
        _unknown_type(type_name, index, sink)
        return Decoded(None, tuple(sink))
    event = _decode_general(spec, raw, index, sink)
    return Decoded(event, tuple(sink))


def _unknown_type(type_name: Any, index: int | None, sink: list[DecodeWarning]) -> None:
    warning = unknown_type_warning(type_name, index)
    logger.warning("%s", warning)
    sink.append(warning)


def unknown_type_warning(type_name: Any, index: int | None) -> DecodeWarning:
    """The warning for an event dropped because AG-UI 1.0 does not describe its type."""
    shown = type_name if isinstance(type_name, str) else json.dumps(type_name)
    return DecodeWarning(
        "unknown-event-type",
        f"dropped an event of unrecognised type '{shown}': AG-UI {PROTOCOL_VERSION} "
        "does not describe it",
        index,
    )


def decode_legacy_object(raw: dict[str, Any], index: int | None) -> Decoded:
    """``decode_object`` reading the pre-1.0 shapes too (see the module doc)."""
    sink: list[DecodeWarning] = []
    event = decode_legacy_event(raw, index, sink)
    return Decoded(event, tuple(sink))


def decode_legacy_event(
    raw: dict[str, Any], index: int | None, sink: list[DecodeWarning]
) -> BaseEvent | None:
    """``decode_event`` reading the pre-1.0 shapes too (see the module doc).

    A legacy type gets exactly the 1.0 treatment of a described event
    (malformed fields fatal, undescribed ones stripped with a warning); a
    snapshot or input echo has its ``binary`` parts upgraded first, so that
    the 1.0 checks that follow see media parts, not unknown members.
    """
    type_name = raw.get("type")
    if type_name.__class__ is str:
        spec = (_LEGACY_SPECS or legacy_specs()).get(type_name)
        if spec is not None:
            return _decode_general(spec, raw, index, sink)
        if type_name == "MESSAGES_SNAPSHOT":
            raw = _upgraded(raw, "messages", (), raw.get("messages"), type_name, index, sink)
        elif type_name == "RUN_STARTED":
            echo = raw.get("input")
            if isinstance(echo, dict):
                upgraded = _upgraded(
                    echo, "messages", ("input",), echo.get("messages"), type_name, index, sink
                )
                if upgraded is not echo:
                    raw = {**raw, "input": upgraded}
    return decode_event(raw, index, sink)


def _upgraded(
    holder: dict[str, Any],
    key: str,
    at: tuple[str, ...],
    messages: Any,
    type_name: str,
    index: int | None,
    sink: list[DecodeWarning],
) -> dict[str, Any]:
    """``holder`` with the legacy ``binary`` parts of its ``key`` messages upgraded."""
    if not isinstance(messages, list):
        return holder
    out: list[Any] | None = None
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        content, notes = upgrade_binary_parts(message.get("content"))
        if content is message.get("content"):
            continue
        if out is None:
            out = list(messages)
        out[position] = {**message, "content": content}
        pointer = _pointer_of((*at, key, position, "content"))
        for warning in (
            DecodeWarning(
                "legacy-content",
                f"converted the pre-1.0 binary content part(s) at '{pointer}' on {type_name} "
                "to modern media parts (image, audio, video, document); send those instead",
                index,
            ),
            *(
                DecodeWarning("legacy-content", f"at '{pointer}' on {type_name}: {note}", index)
                for note in notes
            ),
        ):
            logger.warning("%s", warning)
            sink.append(warning)
    return holder if out is None else {**holder, key: out}


def decode_event(
    raw: dict[str, Any], index: int | None, sink: list[DecodeWarning]
) -> BaseEvent | None:
    """The event for one parsed wire object; warnings are appended to ``sink``."""
    type_name = raw.get("type")
    spec = SPECS.get(type_name) if type_name.__class__ is str else None
    if spec is None:
        _unknown_type(type_name, index, sink)
        return None
    if spec.flat:
        # Fast path: every field a plain string, no unknown keys (the common case).
        snake: dict[str, Any] = {}
        str_attrs = spec.str_attrs
        for key, value in raw.items():
            attr = str_attrs.get(key)
            if attr is None or value.__class__ is not str:
                break
            snake[attr] = value
        else:
            del snake["type"]  # the model's own enum member stays the default
            if spec.required_attrs <= snake.keys():
                return construct(spec.cls, snake)
    return _decode_general(spec, raw, index, sink)


def _decode_general(
    spec: EventSpec, raw: dict[str, Any], index: int | None, sink: list[DecodeWarning]
) -> BaseEvent:
    ctx: _Context | None = None
    values: dict[str, Any] = {}
    snake: dict[str, Any] = {}
    fields = spec.fields
    try:
        for key, value in raw.items():
            field = fields.get(key)
            if field is None:
                if key != "type":
                    if ctx is None:
                        ctx = _Context()
                    ctx.stripped.append(("unknown-property", f"/{key}"))
                continue
            check = field.check
            if check is _str:
                if value.__class__ is not str:
                    _str(value, (key,), _Context())
            else:
                if ctx is None:
                    ctx = _Context()
                mark = len(ctx.stripped)
                value = check(value, (key,), ctx)
                if value is _DROP:
                    del ctx.stripped[mark:]
                    ctx.stripped.append(("unknown-member", f"/{key}"))
                    continue
                if value is _LEGACY_NULL:
                    continue
            values[key] = value
            snake[field.attr] = value
        for field in spec.required:
            if field.key not in values:
                _missing(field, ())
    except _Invalid as invalid:
        raise _decode_error(spec.type_name, invalid, index) from None
    values["type"] = spec.type_name
    event = _build(spec, values, snake)
    if ctx is not None or spec.cls is RunStartedEvent:
        sink.extend(_warnings(spec, ctx, raw, index))
    return event


def _warnings(
    spec: EventSpec, ctx: _Context | None, raw: dict[str, Any], index: int | None
) -> tuple[DecodeWarning, ...]:
    out: list[DecodeWarning] = []
    name = spec.type_name
    if ctx is not None:
        for code, pointer in ctx.stripped:
            what = "property" if code == "unknown-property" else "union member"
            out.append(
                DecodeWarning(
                    code,
                    f"removed unrecognised material at '{pointer}' on {name} (an undescribed "
                    f"{what}); AG-UI {PROTOCOL_VERSION} does not describe it",
                    index,
                )
            )
        for pointer in ctx.legacy:
            out.append(
                DecodeWarning(
                    "legacy-null",
                    f"read the pre-1.0 spelling '{name}{pointer.replace('/', '.')}: null' as an "
                    "absent field; omit the field instead",
                    index,
                )
            )
    if spec.cls is RunStartedEvent:
        declared = raw.get("protocolVersion")
        if isinstance(declared, str) and declared != PROTOCOL_VERSION:
            if re.fullmatch(r"\d+\.\d+", declared) is None:
                out.append(
                    DecodeWarning(
                        "protocol-version",
                        f"the producer declared protocol version '{declared}', which this client "
                        "cannot interpret; proceeding under the 1.0 processing model",
                        index,
                    )
                )
            elif tuple(int(p) for p in declared.split(".")) > (1, 0):
                out.append(
                    DecodeWarning(
                        "protocol-version",
                        f"the producer speaks protocol {declared}; this client speaks "
                        f"{PROTOCOL_VERSION}. Unrecognised material will be stripped with warnings",
                        index,
                    )
                )
    for warning in out:
        logger.warning("%s", warning)
    return tuple(out)


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


def _decode_error(type_name: str, invalid: _Invalid, index: int | None) -> DecodeError:
    dotted = _dotted(invalid.path)
    issue = {
        "code": invalid.code,
        "expected": invalid.expected,
        "path": list(invalid.path),
        "message": invalid.message,
    }
    what = (
        f"is missing the required field `{dotted}`"
        if "received undefined" in invalid.message
        else f"has a malformed value at `{dotted}`"
    )
    message = (
        f"{type_name} {what} ({invalid.message}); a malformed described field is fatal. "
        f"Validator issue: {json.dumps(issue)}"
    )
    return DecodeError(message, path=dotted, event_type=type_name, index=index)


def _unportable(
    exc: _json.JSONValueError, wire: str | bytes | bytearray, index: int | None
) -> DecodeError:
    """The DecodeError for JSON-shaped text that is not portable JSON (NaN, overflow, depth)."""
    document = exc.document
    type_name = document.get("type") if isinstance(document, dict) else None
    if not isinstance(type_name, str):
        type_name = _json.leading_type(wire)
    dotted = _dotted(exc.path) if exc.path else ""
    at = f" at `{_json.shown_path(exc.path)}`" if exc.path else ""
    message = f"{type_name or 'event'} is malformed{at}: {exc.problem}; a malformed event is fatal"
    known = type_name if type_name in SPECS else None
    return DecodeError(message, path=dotted, event_type=known, index=index)


def as_object(wire: dict[str, Any] | str | bytes, index: int | None) -> dict[str, Any]:
    """The wire event as a parsed JSON object, or the DecodeError saying why it is none."""
    if wire.__class__ is dict:
        return wire
    if isinstance(wire, bytes | bytearray | memoryview | str):
        if isinstance(wire, memoryview):
            wire = wire.tobytes()
        try:
            # orjson when it can, the standard library's semantics and errors always.
            parsed = _json.loads(wire)
        except _json.JSONValueError as exc:
            raise _unportable(exc, wire, index) from None
        except json.JSONDecodeError as exc:
            raise DecodeError(
                f"event is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; "
                "each AG-UI event is one JSON object",
                index=index,
            ) from None
        except UnicodeDecodeError as exc:
            raise DecodeError(
                f"event is not valid UTF-8 ({exc}); AG-UI events are UTF-8 JSON objects",
                index=index,
            ) from None
    elif isinstance(wire, dict):
        return wire
    else:
        raise TypeError(
            f"decode() takes a dict, str or bytes, got {type(wire).__name__}; pass the parsed "
            "JSON object or its text"
        )
    if parsed.__class__ is not dict:
        raise DecodeError(
            f"event is a JSON {_received(parsed)}, not an object; each AG-UI event is a JSON "
            "object with a 'type'",
            index=index,
        )
    return parsed


def decode(wire: dict[str, Any] | str | bytes, *, index: int | None = None) -> Decoded:
    """Decode one wire event (a parsed object, JSON text or UTF-8 bytes).

    Returns the event (``None`` when dropped as an unknown type) and any
    warnings; raises :class:`DecodeError` for a malformed described field or
    input that is not one JSON object. ``index`` (the event's position in its
    stream) is stamped on warnings and errors.

    This is the reference path: every field through its check, no generated
    code. ``agui_pipes.codecs.decode`` is the public entry point, which takes
    ``agui_pipes._fastpath`` when it has a plan for the wire's key set.
    """
    return decode_object(as_object(wire, index), index)


def decode_many(
    wires: Iterable[dict[str, Any] | str | bytes], *, start: int = 0
) -> Iterator[Decoded]:
    """Decode a sequence of wire events lazily, numbering them from ``start``.

    Lazy on purpose: the consumer pipeline decodes, verifies and applies one
    event at a time, so the first problem *in stream order* is the one
    reported, exactly as the reference client does.
    """
    for index, wire in enumerate(wires, start):
        yield decode_object(as_object(wire, index), index)


def decode_all(
    wires: Iterable[dict[str, Any] | str | bytes], *, start: int = 0
) -> tuple[list[BaseEvent], list[DecodeWarning]]:
    """Decode everything eagerly: the surviving events and all warnings, in order."""
    events: list[BaseEvent] = []
    warnings: list[DecodeWarning] = []
    for decoded in decode_many(wires, start=start):
        if decoded.event is not None:
            events.append(decoded.event)
        warnings.extend(decoded.warnings)
    return events, warnings


def event_type_names() -> frozenset[str]:
    """The wire ``type`` values this decoder recognises (the 31 of AG-UI 1.0)."""
    return frozenset(SPECS)


assert set(SPECS) == {t.value for t in EventType}, "decode spec out of sync with EventType"
assert all(
    f.attr in spec.cls.model_fields for spec in SPECS.values() for f in spec.fields.values()
), "decode spec names a field the ag_ui.core model lacks"
