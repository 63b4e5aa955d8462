"""Events to wire JSON, the reference path: pydantic's writing, checked first.

``encode_json`` here is the plain encoder every faster writer is measured
against: it refuses what JSON cannot carry faithfully (``EncodeError``),
then lets pydantic write the event with ``ag_ui``'s own omission hook, the
official encoder's bytes. An event pydantic cannot write (nesting past its
255 levels) is written by an iterative writer after the same checks.
``agui_pipes._fastpath`` reads ``check_tree`` / ``encode_tree`` from here;
``agui_pipes.codecs`` holds the public entry points.
"""

from __future__ import annotations

from enum import Enum
from json import dumps as _json_dumps
from typing import Any, Final

from ag_ui.core import BaseEvent
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from .._foundation import json as _json
from .._foundation.errors import AguiPipesError

__all__ = ["EncodeError", "check_tree", "encode_json", "encode_tree", "require_event"]


class EncodeError(AguiPipesError, ValueError):
    """An event holds a value JSON cannot carry faithfully, so it is not written at all.

    A NaN or infinite float (the official encoder would silently write
    ``null``; ``JSON.parse`` has no such values either), arrays and objects
    nested deeper than ``agui_pipes.Limits.max_depth`` (no peer could parse the
    result back), or an object that is not a JSON value. ``path`` is the dotted
    position of the value inside the event (``value.0.a``).
    """

    def __init__(self, message: str, *, path: str = "", event_type: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.event_type = event_type


def require_event(event: object) -> None:
    """Raise the TypeError that says what to pass when ``event`` is not an event model."""
    if not isinstance(event, BaseEvent):
        raise TypeError(
            f"encode_json() takes an AG-UI event (an ag_ui.core event model), got "
            f"{type(event).__name__}; decode wire data first, e.g. with agui_pipes.decode()"
        )


def encode_json(event: BaseEvent) -> bytes:
    """The event's wire JSON, by the reference path (see ``agui_pipes.codecs.encode_json``)."""
    require_event(event)
    check_tree(event)
    try:
        return event.model_dump_json(by_alias=True).encode()
    except PydanticSerializationError:
        # pydantic's writer stops at 255 levels: an iterative writer takes over.
        return encode_tree(event)


def check_tree(event: BaseEvent) -> None:
    """Raise EncodeError for the first value of the event that is not portable JSON."""
    _check_tree(event, _event_tree(event))


def _event_tree(event: BaseEvent) -> dict[str, Any]:
    """The event as plain values, keyed and omitted as on the wire, without pydantic.

    For the checks and the deep writer: pydantic's serializer stops at 255
    levels. ag_ui's rule is applied to the event and every nested model
    (messages, content parts, outcomes — shallow by schema): an optional
    field defaulting to None is left out when None; extra fields are kept.
    Values of open fields stay as they are, however deep, for an iterative
    walk.
    """
    return _model_tree(event)


def _model_tree(model: BaseModel) -> dict[str, Any]:
    cls = type(model)
    omittable = _OMITTABLE.get(cls)
    if omittable is None:
        omittable = _OMITTABLE[cls] = frozenset(
            name
            for name, info in cls.model_fields.items()
            if not info.is_required() and info.default is None
        )
    values = model.__dict__
    tree: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        value = values.get(name)
        if value is None and name in omittable:
            continue
        tree[info.serialization_alias or info.alias or name] = _plain(value)
    for key, value in (model.__pydantic_extra__ or {}).items():
        tree[key] = _plain(value)
    return tree


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _model_tree(value)
    if isinstance(value, list) and any(isinstance(item, BaseModel) for item in value):
        return [_model_tree(item) if isinstance(item, BaseModel) else item for item in value]
    return value


_OMITTABLE: dict[type[BaseModel], frozenset[str]] = {}


def _check_tree(event: BaseEvent, tree: dict[str, Any]) -> None:
    """Raise EncodeError for the first value of ``tree`` that is not portable JSON."""
    found = _json.value_problem(tree)
    if found is None:
        return
    where, problem = found
    path = ".".join(str(p) for p in where)
    raise EncodeError(
        f"cannot encode {event.type.value}: the value at `{_json.shown_path(where)}` is not "
        f"portable JSON: {problem}. Fix the stage or agent that produced it",
        path=path,
        event_type=event.type.value,
    )


def encode_tree(event: BaseEvent) -> bytes:
    """Write an event pydantic cannot (deep values), after the same checks, iteratively."""
    tree = _event_tree(event)
    _check_tree(event, tree)
    parts: list[bytes] = []
    stack: list[Any] = [tree]
    while stack:
        item = stack.pop()
        if item.__class__ is _Fragment:
            parts.append(item.text)
        elif isinstance(item, dict):
            if not item:
                parts.append(b"{}")
                continue
            pending: list[Any] = [_CLOSE_OBJECT]
            for i, (key, value) in enumerate(reversed(item.items())):
                pending.append(value)
                opener = b"{" if i == len(item) - 1 else b","
                pending.append(_Fragment(opener + _leaf(key) + b":"))
            stack.extend(pending)
        elif isinstance(item, list | tuple):
            if not item:
                parts.append(b"[]")
                continue
            pending = [_CLOSE_ARRAY]
            for i, value in enumerate(reversed(item)):
                pending.append(value)
                pending.append(_OPEN_ARRAY if i == len(item) - 1 else _COMMA)
            stack.extend(pending)
        else:
            parts.append(_leaf(item.value if isinstance(item, Enum) else item))
    return b"".join(parts)


def _leaf(value: Any) -> bytes:
    """One scalar's JSON: orjson's writing, the standard library's where orjson refuses
    (a lone surrogate, written as its escape; an integer beyond 64 bits)."""
    if _json.orjson_dumps is not None:
        try:
            return _json.orjson_dumps(value)
        except (TypeError, ValueError):
            pass
    return _json_dumps(value, ensure_ascii=True).encode()


class _Fragment:
    """Literal JSON text on the deep writer's stack."""

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text


_CLOSE_OBJECT: Final = _Fragment(b"}")
_CLOSE_ARRAY: Final = _Fragment(b"]")
_OPEN_ARRAY: Final = _Fragment(b"[")
_COMMA: Final = _Fragment(b",")
