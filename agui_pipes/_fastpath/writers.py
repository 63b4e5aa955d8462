"""Fast encoders: a generated writer per event class, and pydantic without the hook.

``agui_pipes._protocol.encode`` is the reference: pydantic with ``ag_ui``'s omission
hook, checked first. What is here writes the same bytes faster:

* the *common-shape writer* of a class (generated: every optional field
  absent, every required one a plain string — deltas, starts and ends) and
  the plain-values loop, both through orjson, whose writing of strings,
  bools, small ints and ``None`` is pydantic's byte for byte;
* for everything else, a serializer for the class's core schema without
  the per-event Python hook, given the optional-and-``None`` fields as
  ``exclude``. Nested models keep their own hook. Anything unusual — a
  subclass with its own serializer, an extra field shadowing an omittable
  name, a value that cannot be judged cheaply — takes the reference path.
"""

from __future__ import annotations

import math
import operator
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, Final

from ag_ui.core import BaseEvent
from pydantic_core import PydanticSerializationError, SchemaSerializer

from .._foundation import json as _json
from .._protocol import encode as _encode
from .open_json import OPEN_CLASSES, open_writer
from .source import compile_function, origin

__all__ = [
    "PLAIN_LAYOUTS",
    "SERIALIZERS",
    "WRITERS",
    "FastSerializer",
    "PlainLayout",
    "Writer",
    "build_fast",
    "compile_common_shape",
    "encode_json",
    "encode_model",
    "encode_plain",
    "fast_for",
    "plain_layout",
]


class FastSerializer:
    """The hook-free serializer of one event class, plus what it must exclude."""

    __slots__ = (
        "all_omitted",
        "all_omitted_set",
        "get_omittable",
        "omittable_fields",
        "omittable_keys",
        "serializer",
    )

    def __init__(
        self,
        serializer: SchemaSerializer,
        omittable_fields: tuple[str, ...],
        omittable_keys: frozenset[str],
    ) -> None:
        self.serializer = serializer
        self.omittable_fields = omittable_fields
        self.omittable_keys = omittable_keys
        # The common case — every optional field absent — gets a prebuilt
        # exclude set; values are fetched in one C call.
        self.all_omitted: set[str] | None = set(omittable_fields) or None
        self.all_omitted_set: frozenset[str] = frozenset(omittable_fields)
        getter = operator.itemgetter(*omittable_fields) if omittable_fields else None
        if len(omittable_fields) == 1:
            assert getter is not None
            single = getter
            self.get_omittable: Callable[[dict[str, Any]], tuple[Any, ...]] = lambda values: (
                single(values),
            )
        elif getter is not None:
            self.get_omittable = getter
        else:
            self.get_omittable = lambda values: ()


def _omission_hook() -> object:
    """The wrap serializer ag_ui's base model installs (identity is what we check)."""
    schema = BaseEvent.__pydantic_core_schema__
    return schema.get("serialization", {}).get("function")


_HOOK: Final = _omission_hook()
SERIALIZERS: dict[type[BaseEvent], FastSerializer | None] = {}


def build_fast(cls: type[BaseEvent]) -> FastSerializer | None:
    """A serializer for ``cls`` minus the root omission hook, or None if unsafe."""
    schema: Any = cls.__pydantic_core_schema__
    if schema.get("type") != "model" or schema.get("cls") is not cls or cls in OPEN_CLASSES:
        # Snapshots and deltas the open-value writer refuses hold a value it
        # cannot vouch for (a UUID, an enum, a NaN): pydantic would write some
        # of those without the reference path's EncodeError, so they take it.
        return None
    serialization = schema.get("serialization")
    if (
        _HOOK is None
        or not isinstance(serialization, dict)
        or serialization.get("type") != "function-wrap"
        or serialization.get("function") is not _HOOK
    ):
        return None
    stripped = {k: v for k, v in schema.items() if k != "serialization"}
    # Non-finite floats come out as the NaN / Infinity literals instead of a silent
    # ``null``: encode_json notices them with one scan of the output and refuses.
    config = {**(schema.get("config") or {}), "ser_json_inf_nan": "constants"}
    serializer = SchemaSerializer(stripped, config)  # type: ignore[arg-type]
    fields: list[str] = []
    keys: set[str] = set()
    # The same rule as ag_ui's hook: optional and defaulting to None.
    for name, field in cls.model_fields.items():
        if not field.is_required() and field.default is None:
            fields.append(name)
            keys.add(name)
            if field.alias is not None:
                keys.add(field.alias)
            if field.serialization_alias is not None:
                keys.add(field.serialization_alias)
    return FastSerializer(serializer, tuple(fields), frozenset(keys))


def fast_for(cls: type[BaseEvent]) -> FastSerializer | None:
    try:
        return SERIALIZERS[cls]
    except KeyError:
        fast = SERIALIZERS[cls] = build_fast(cls)
        return fast


_SAFE_INT: Final = 2**53 - 1
PlainLayout = tuple[str, tuple[tuple[str, str, bool], ...]]
PLAIN_LAYOUTS: dict[type[BaseEvent], PlainLayout | None] = {}


def plain_layout(cls: type[BaseEvent]) -> PlainLayout | None:
    """(type value, ((attribute, wire key, omit-when-None), ...)) in serialisation order."""
    fast = fast_for(cls)
    layout: PlainLayout | None = None
    if fast is not None:
        fields = tuple(
            (name, info.serialization_alias or info.alias or name, name in fast.all_omitted_set)
            for name, info in cls.model_fields.items()
            if name != "type"
        )
        layout = (cls.model_fields["type"].default.value, fields)
    PLAIN_LAYOUTS[cls] = layout
    return layout


Writer = Callable[[dict[str, Any]], "bytes | None"]
WRITERS: dict[type[BaseEvent], Writer | None] = {}


def compile_common_shape(cls: type[BaseEvent]) -> Writer | None:
    """A straight-line writer for the class's most common shape.

    That shape is: every optional field absent and every required field a
    plain string — what deltas, starts and ends look like on the wire. The
    generated function checks exactly that and writes the JSON with orjson;
    for any other shape it returns None and the general loop below runs.
    Generating the code (as dataclasses do) removes the per-field loop from
    the hottest path of a relay. Classes whose required fields hold open JSON
    (snapshots, deltas) get ``open_json``'s writer instead.
    """
    open_write = open_writer(cls)
    if open_write is not None:
        WRITERS[cls] = open_write
        return open_write
    layout = PLAIN_LAYOUTS.get(cls) or plain_layout(cls)
    if layout is None or not _json.HAVE_ORJSON:
        WRITERS[cls] = None
        return None
    type_value, fields = layout
    optional = [attr for attr, _, omit in fields if omit]
    required = [(attr, key) for attr, key, omit in fields if not omit]
    lines = ["def write(d):"]
    if optional:
        absent = " and ".join(f"d[{attr!r}] is None" for attr in optional)
        lines.append(f"    if not ({absent}): return None")
    for i, (attr, _) in enumerate(required):
        lines.append(f"    v{i} = d[{attr!r}]")
        lines.append(f"    if type(v{i}) is not str: return None")
    items = ", ".join(
        [f"'type': {type_value!r}"] + [f"{key!r}: v{i}" for i, (_, key) in enumerate(required)]
    )
    lines.append("    try:")
    lines.append(f"        return dumps({{{items}}})")
    lines.append("    except Exception:")
    lines.append("        return None")
    namespace: dict[str, Any] = {"dumps": _json.orjson_dumps}
    compiled: Writer = compile_function(
        "\n".join(lines), origin("writer", type_value), namespace, "write"
    )
    WRITERS[cls] = compiled
    return compiled


def encode_plain(event: BaseEvent) -> bytes | None:
    """The wire JSON of an event whose every value is a string, bool, small int or None.

    Those are exactly the values whose JSON text orjson and pydantic write
    byte for byte alike (the codec tests prove it on generated events), and
    they are what the hot events — deltas, starts, ends — carry. Anything
    else (floats, nested objects, extra fields) returns None for the general
    serializer.
    """
    if event.__pydantic_extra__:
        return None
    cls = type(event)
    try:
        compiled = WRITERS[cls]
    except KeyError:
        compiled = compile_common_shape(cls)
    if compiled is not None:
        written = compiled(event.__dict__)
        if written is not None:
            return written
    return _plain_values(event, cls)


def _plain_values(event: BaseEvent, cls: type[BaseEvent]) -> bytes | None:
    """``encode_plain`` past the common-shape writer: one loop over the plain layout."""
    try:
        layout = PLAIN_LAYOUTS[cls]
    except KeyError:
        layout = plain_layout(cls)
    if layout is None:
        return None
    type_value, fields = layout
    values = event.__dict__
    out: dict[str, Any] = {"type": type_value}
    for attr, key, omit in fields:
        value = values[attr]
        kind = type(value)
        if kind is str or kind is bool:
            out[key] = value
        elif value is None:
            if not omit:
                out[key] = None
        elif kind is int and -_SAFE_INT <= value <= _SAFE_INT:
            out[key] = value
        else:
            return None
    return _json.dumps_plain(out)


_UNSURE: Final[set[str]] = set()
"""Marker: a value might serialize to ``null`` — let the official path decide."""
_PLAIN: Final = (str, int, dict, list)


def _exclusions(names: tuple[str, ...], values: tuple[Any, ...]) -> set[str] | None:
    """The optional fields ag_ui's hook would drop: those that serialize to ``null``.

    That is ``None``. A value of any type that cannot be judged cheaply
    returns ``_UNSURE`` (a non-finite float among them: the official hook
    would write it as ``null`` and drop the key; ``encode_json`` refuses it).
    """
    exclude: set[str] = set()
    for name, value in zip(names, values, strict=True):
        if value is None:
            exclude.add(name)
        elif isinstance(value, float):
            if not math.isfinite(value):
                return _UNSURE
        elif not isinstance(value, _PLAIN):
            return _UNSURE
    return exclude or None


def encode_json(event: BaseEvent) -> bytes:
    """``agui_pipes._protocol.encode.encode_json``'s bytes for an event model, faster."""
    plain = encode_plain(event)
    return plain if plain is not None else encode_model(event)


def _open_positions(cls: type[BaseEvent]) -> tuple[str, ...] | None:
    """The attributes of ``cls`` that hold open JSON, or None when the class nests models.

    Only open positions (``metadata``, ``rawEvent``, a custom ``value``, ...) can
    hold a value pydantic writes but JSON cannot carry faithfully (a UUID, an
    enum, a date: written as strings without a word); the other fields are typed
    scalars. A class with nested models (messages, an outcome, the input echo)
    may have open positions inside them: it gets the reference path's
    whole-tree check.
    """
    open_attrs: list[str] = []
    for name, info in cls.model_fields.items():
        kind = _field_kind(info.annotation)
        if kind == "nested":
            return None
        if kind == "open":
            open_attrs.append(name)
    return tuple(open_attrs)


def _field_kind(annotation: Any) -> str:
    """ "scalar" (typed str/int/bool/literal/enum), "open" (any JSON) or "nested"."""
    if annotation is None or annotation is type(None):
        return "scalar"
    if annotation is Any:
        return "open"
    if isinstance(annotation, type):
        if issubclass(annotation, (str, int, bool, Enum)) or annotation is float:
            return "scalar"
        if annotation in (dict, list):
            return "open"
        return "nested"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "scalar"
    if origin in (dict, list):
        args = typing.get_args(annotation)
        return "nested" if any(_field_kind(a) == "nested" for a in args) else "open"
    if origin is typing.Annotated:
        return _field_kind(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        kinds = {_field_kind(a) for a in typing.get_args(annotation)}
        return "nested" if "nested" in kinds else "open" if "open" in kinds else "scalar"
    return "nested"


_OPEN_POSITIONS: dict[type[BaseEvent], tuple[str, ...] | None] = {}


def _check_open_values(event: BaseEvent) -> None:
    """Refuse, as the reference path does, an event with a value that is not portable JSON."""
    cls = type(event)
    try:
        attrs = _OPEN_POSITIONS[cls]
    except KeyError:
        attrs = _OPEN_POSITIONS[cls] = _open_positions(cls)
    if attrs is None or event.__pydantic_extra__:
        _encode.check_tree(event)
        return
    values = event.__dict__
    for attr in attrs:
        value = values[attr]
        if value is not None and _maybe_unportable(value):
            _encode.check_tree(event)  # raises, naming the value's path
            return


def _maybe_unportable(value: Any) -> bool:
    """Whether a value may hold something that is not portable JSON (cheap, no paths).

    False only for plain JSON: exact str / int / bool / None / finite float leaves
    in exact dicts (string keys) and lists. Anything else — a NaN, a UUID, a
    tuple, a dict subclass — sends the event to the reference check, which
    decides and names the path. Depth is left to the writer: pydantic stops at
    255 levels and the deep writer checks.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = item.__class__
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if item - item != 0:  # NaN or an infinity
                return True
        elif kind is dict:
            for key in item:
                if key.__class__ is not str:
                    return True
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        else:
            return True
    return False


def encode_model(event: BaseEvent) -> bytes:
    """``encode_json`` past the plain writers (for a caller that tried ``encode_plain``)."""
    fast = fast_for(type(event))
    if fast is None:
        return _encode.encode_json(event)
    present = fast.get_omittable(event.__dict__)
    exclude: set[str] | None
    if all(value is None for value in present):
        exclude = fast.all_omitted
    else:
        exclude = _exclusions(fast.omittable_fields, present)
    extra = event.__pydantic_extra__
    if exclude is _UNSURE or (
        extra and any(value is None and key in fast.omittable_keys for key, value in extra.items())
    ):
        return _encode.encode_json(event)
    _check_open_values(event)
    try:
        out: bytes = fast.serializer.to_json(event, by_alias=True, exclude=exclude)
    except PydanticSerializationError:
        # pydantic's writer stops at 255 levels and at values it cannot write:
        # the event's own tree, checked, written by an iterative writer.
        return _encode.encode_tree(event)
    if out.find(b"NaN") >= 0 or out.find(b"Infinity") >= 0:  # (cheaper than ``in``)
        # A non-finite float written as a literal, or just those letters in a
        # string: the check tells which.
        _encode.check_tree(event)
    return out
