"""The messages of a ``MESSAGES_SNAPSHOT``, on the fast path, both ways.

A snapshot's messages are nested models (a message, its tool calls and
their function, its content parts and their sources). The reference path
checks the parsed array with the decode spec's checkers, then has pydantic
validate the whole event; it writes the event with pydantic, whose
``ag_ui`` hook runs in Python once per nested model, after a walk over the
whole tree for values JSON cannot carry. Here each message kind is a
*shape* read from its ``ag_ui`` model (its wire keys, which of them the
wire requires, what each holds), and one loop per model does both the
checks and the building (``build_messages``) or the writing
(``message_values``).

What is taken is what the reference path keeps as it is: every key of a
message, tool call, part or source described and of its kind (strings
exact ``str``, a discriminator its one value, ``metadata`` a JSON object on
messages and tool calls and anything but ``null`` on parts), every required
key present, every role and part type known. Anything else — an unknown key
or role (stripped with a warning there), a ``null`` (fatal, or a legacy
spelling read as absent), a wrong type — returns None and the reference path
decides, with its warnings and errors. A model is built as ``model_validate``
builds it from those values: every field in model order (defaults for the
absent ones), the given fields set, no extras.

Writing takes models of exactly these classes, with no extra fields and
every field of its declared kind (what pydantic writes without a warning),
and gives the values pydantic writes: fields in model order under their wire
names, optional fields without a value left out (``ag_ui``'s rule). The
caller writes them with ``open_json.finish_open``, which refuses what the
reference path refuses.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from functools import partial
from typing import Any, Final, Literal, get_args, get_origin

from ag_ui.core import MessagesSnapshotEvent
from pydantic import BaseModel

from .._protocol.construct import DICT_SLOT, EXTRA_SLOT, FIELDS_SET_SLOT, PRIVATE_SLOT
from .source import compile_function, origin

__all__ = ["SHAPES", "Shape", "build_messages", "message_values"]

# What a wire key holds.
_STR, _LITERAL, _OBJECT, _NON_NULL, _MODEL, _MODELS, _CONTENT, _UNION = range(8)

_new = object.__new__


class Shape:
    """One model class as it is on the wire: its keys, what each holds, what is required.

    ``table`` maps a wire key to (attribute, kind, argument): the literal
    value of a discriminator, the shape of a nested model, or the shapes of a
    union's members by their discriminator value. ``layout`` is the same in
    model order for writing, with whether a ``None`` is left out.
    """

    __slots__ = (
        "cls",
        "layout",
        "order",
        "renamed",
        "required",
        "table",
        "template",
    )

    def __init__(self, cls: type[BaseModel]) -> None:
        self.cls = cls
        self.table: dict[str, tuple[str, int, Any]] = {}
        self.layout: tuple[tuple[str, str, bool, int, Any], ...] = ()
        self.required: frozenset[str] = frozenset()
        self.renamed: frozenset[str] = frozenset()
        self.order = tuple(cls.model_fields)
        self.template = {name: info.default for name, info in cls.model_fields.items()}


_SHAPES: dict[type[BaseModel], Shape] = {}


def _members(annotation: Any) -> tuple[Any, ...]:
    """The classes of a (possibly ``Annotated``) union."""
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    return get_args(annotation)


class _Union:
    """A discriminated union's member shapes, by discriminator value and by class."""

    __slots__ = ("builders", "by_class", "by_tag", "tag", "writers")

    def __init__(self, annotation: Any) -> None:
        members = _members(annotation)
        self.tag = "role" if all("role" in m.model_fields for m in members) else "type"
        self.by_tag: dict[str, Shape] = {
            m.model_fields[self.tag].default: _shape(m) for m in members
        }
        self.by_class: dict[type[BaseModel], Shape] = {
            shape.cls: shape for shape in self.by_tag.values()
        }
        # The members' generated builders by tag and writers by class, compiled on
        # first use (with the fast path off nothing is generated).
        self.builders: dict[str, Callable[[Any], BaseModel | None]] = {}
        self.writers: dict[type[BaseModel], Callable[[Any], dict[str, Any] | None]] = {}

    def compile(self) -> None:
        self.builders.update({tag: builder(shape) for tag, shape in self.by_tag.items()})
        self.writers.update({cls: writer(shape) for cls, shape in self.by_class.items()})


def _kind(annotation: Any) -> tuple[int, Any]:
    """What a field of this annotation holds on the wire (``None`` aside: never taken)."""
    origin = get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _kind(args[0])  # Optional[X]: a None is left out or declined
        if args[0] is str and get_origin(args[1]) is list:  # text, or content parts
            return _CONTENT, _Union(get_args(args[1])[0])
        return _UNION, _Union(annotation)
    if origin is typing.Annotated:
        return _UNION, _Union(annotation)
    if annotation is str:
        return _STR, None
    if annotation is Any:
        return _NON_NULL, None
    if origin is dict:
        return _OBJECT, None
    if origin is list:
        (element,) = get_args(annotation)
        return _MODELS, _shape(element)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _MODEL, _shape(annotation)
    raise RuntimeError(f"the messages fast path does not know the field type {annotation!r}")


def _shape(cls: type[BaseModel]) -> Shape:
    shape = _SHAPES.get(cls)
    if shape is not None:
        return shape
    shape = _SHAPES[cls] = Shape(cls)
    table: dict[str, tuple[str, int, Any]] = {}
    layout: list[tuple[str, str, bool, int, Any]] = []
    required: set[str] = set()
    for name, info in cls.model_fields.items():
        key = info.serialization_alias or info.alias or name
        if get_origin(info.annotation) is Literal:
            kind, argument = _LITERAL, info.default
            required.add(key)  # the decode spec requires every literal on the wire
        else:
            kind, argument = _kind(info.annotation)
            if info.is_required():
                required.add(key)
        table[key] = (name, kind, argument)
        layout.append((name, key, not info.is_required() and info.default is None, kind, argument))
    shape.table = table
    shape.layout = tuple(layout)
    shape.required = frozenset(required)
    shape.renamed = frozenset(key for key, (name, _, _) in table.items() if key != name)
    return shape


_MESSAGES: Final = _Union(get_args(MessagesSnapshotEvent.model_fields["messages"].annotation)[0])
SHAPES: Final = _SHAPES
"""Every model class a snapshot's messages are made of, with its shape."""


# -- generated code ---------------------------------------------------------
#
# Per shape, one straight-line builder and one writer (compiled on first use:
# with the fast path off nothing is generated). A builder reads each of its
# model's wire keys once; a key it does not read makes the count of keys it
# took differ from the object's length.


def _builder_source(shape: Shape) -> tuple[str, dict[str, Any]]:
    """The text of one shape's builder, and its namespace.

    Every field is read with ``get``: an absent optional field reads as its
    default (None), and a ``null`` given for one is a key not counted, so the
    count check declines it (the reference path rejects it, or reads a
    legacy spelling with a warning).
    """
    namespace: dict[str, Any] = {
        "cls": shape.cls,
        "new": _new,
        "set_dict": DICT_SLOT,
        "set_fields": FIELDS_SET_SLOT,
        "set_extra": EXTRA_SLOT,
        "set_private": PRIVATE_SLOT,
    }
    required = sorted(attr for key, (attr, _, _) in shape.table.items() if key in shape.required)
    lines = [
        "def build(value):",
        "    if value.__class__ is not dict: return None",
        ("    fields = {" + ", ".join(map(repr, required)) + "}")
        if required
        else "    fields = set()",
        f"    given = {len(required)}",
    ]
    for i, (key, (attr, kind, argument)) in enumerate(shape.table.items()):
        lines.append(f"    v{i} = value.get({key!r})")
        body: list[str] = []
        if kind is _STR:
            body.append(f"if v{i}.__class__ is not str: return None")
        elif kind is _LITERAL:
            body.append(f"if v{i} != {argument!r} or v{i}.__class__ is not str: return None")
        elif kind is _OBJECT:
            body.append(f"if v{i}.__class__ is not dict: return None")
        elif kind is not _NON_NULL:  # (a present value is not None: any will do)
            namespace[f"nested{i}"] = _nested_builder(kind, argument)
            if kind is _CONTENT:
                body.append(f"if v{i}.__class__ is not str:")
                body.append(f"    v{i} = nested{i}(v{i})")
                body.append(f"    if v{i} is None: return None")
            else:
                body.append(f"v{i} = nested{i}(v{i})")
                body.append(f"if v{i} is None: return None")
        if key in shape.required:
            # A missing key reads as None, which no check accepts.
            lines += ["    " + line for line in body or [f"if v{i} is None: return None"]]
        else:
            lines.append(f"    if v{i} is not None:")
            lines += ["        " + line for line in body]
            lines.append(f"        fields.add({attr!r})")
            lines.append("        given += 1")
    values = ", ".join(
        f"{name!r}: v{i}" for i, name in enumerate(attr for attr, _, _ in shape.table.values())
    )
    if [attr for attr, _, _ in shape.table.values()] != list(shape.order):
        raise RuntimeError(f"{shape.cls.__name__}: wire keys not in model order")
    lines += [
        "    if len(value) != given: return None  # an undescribed key, or a null",
        "    model = new(cls)",
        f"    set_dict(model, {{{values}}})",
        "    set_fields(model, fields)",
        "    set_extra(model, {})",
        "    set_private(model, None)",
        "    return model",
    ]
    return "\n".join(lines), namespace


def _nested_builder(kind: int, argument: Any) -> Callable[[Any], Any]:
    """The builder of a nested value: a model, a list of models, a union member or parts."""
    if kind is _MODEL:
        return builder(argument)
    if kind is _MODELS:
        return partial(_all, builder(argument))
    argument.compile()
    if kind is _UNION:
        return partial(_member_of, argument)
    return partial(_members_of, argument)  # _CONTENT


def _all(build: Callable[[Any], Any], items: Any) -> list[BaseModel] | None:
    if items.__class__ is not list:
        return None
    built = []
    for item in items:
        model = build(item)
        if model is None:
            return None
        built.append(model)
    return built


_BUILDERS: dict[Shape, Callable[[Any], BaseModel | None]] = {}


def builder(shape: Shape) -> Callable[[Any], BaseModel | None]:
    """The generated builder of one shape (compiled once; at most one per model class)."""
    try:
        return _BUILDERS[shape]
    except KeyError:
        source, namespace = _builder_source(shape)
        built: Callable[[Any], BaseModel | None] = compile_function(
            source, origin("messages builder", shape.cls.__name__), namespace, "build"
        )
        _BUILDERS[shape] = built
        return built


def _member_of(union: _Union, value: Any) -> BaseModel | None:
    """The model of one member of a discriminated union (a known tag only), or None.

    An unknown tag is an unrecognised member, which the reference path removes
    with a warning (or reports, where a member is required).
    """
    if value.__class__ is not dict:
        return None
    tag = value.get(union.tag)
    build = union.builders.get(tag) if tag.__class__ is str else None
    return None if build is None else build(value)


def _members_of(union: _Union, items: Any) -> list[BaseModel] | None:
    if items.__class__ is not list:
        return None
    builders = union.builders
    key = union.tag
    built: list[BaseModel] = []
    append = built.append
    for item in items:
        if item.__class__ is not dict:
            return None
        tag = item.get(key)
        build = builders.get(tag) if tag.__class__ is str else None
        model = None if build is None else build(item)
        if model is None:
            return None
        append(model)
    return built


def build_messages(items: Any) -> list[BaseModel] | None:
    """The message models of a parsed ``messages`` array the reference path keeps as it is.

    None for anything the reference path would warn about, reject or read
    otherwise. The parsed values are kept (strings, metadata, activity
    content), as ``model_validate`` keeps equal ones.
    """
    if not _MESSAGES.builders:
        _MESSAGES.compile()
    return _members_of(_MESSAGES, items)


def _writer_source(shape: Shape) -> tuple[str, dict[str, Any]]:
    """The text of one shape's writer, and its namespace."""
    namespace: dict[str, Any] = {"cls": shape.cls}
    lines = [
        "def write(model):",
        "    if model.__class__ is not cls or model.__pydantic_extra__: return None",
        "    d = model.__dict__",
        f"    if len(d) != {len(shape.layout)}: return None  # built without validation",
        "    out = {}",
    ]
    for i, (attr, key, omit, kind, argument) in enumerate(shape.layout):
        lines.append(f"    v = d[{attr!r}]")
        body: list[str] = []
        if kind is _STR:
            body.append("if v.__class__ is not str: return None")
        elif kind is _LITERAL:
            body.append(f"if v != {argument!r} or v.__class__ is not str: return None")
        elif kind is _OBJECT:
            body.append("if v.__class__ is not dict: return None")
        elif kind is not _NON_NULL:  # any value: finish_open judges it
            namespace[f"nested{i}"] = _nested_writer(kind, argument)
            if kind is _CONTENT:
                body.append("if v.__class__ is not str:")
                body.append(f"    v = nested{i}(v)")
                body.append("    if v is None: return None")
            else:
                body.append(f"v = nested{i}(v)")
                body.append("if v is None: return None")
        body.append(f"out[{key!r}] = v")
        if omit:
            lines.append("    if v is not None:")
            lines += ["        " + line for line in body]
        else:
            if kind is _NON_NULL or kind is _CONTENT or kind is _MODEL or kind is _MODELS:
                lines.append("    if v is None: return None  # pydantic would warn")
            lines += ["    " + line for line in body]
    lines.append("    return out")
    return "\n".join(lines), namespace


def _nested_writer(kind: int, argument: Any) -> Callable[[Any], Any]:
    """The writer of a nested value: a model, a list of models, a union member or parts."""
    if kind is _MODEL:
        return writer(argument)
    if kind is _MODELS:
        return partial(_all, writer(argument))
    argument.compile()
    if kind is _UNION:
        return partial(_member_values, argument)
    return partial(_all_members, argument)  # _CONTENT


_WRITERS: dict[Shape, Callable[[Any], dict[str, Any] | None]] = {}


def writer(shape: Shape) -> Callable[[Any], dict[str, Any] | None]:
    """The generated writer of one shape (compiled once; at most one per model class)."""
    try:
        return _WRITERS[shape]
    except KeyError:
        source, namespace = _writer_source(shape)
        written: Callable[[Any], dict[str, Any] | None] = compile_function(
            source, origin("messages writer", shape.cls.__name__), namespace, "write"
        )
        _WRITERS[shape] = written
        return written


def _member_values(union: _Union, model: Any) -> dict[str, Any] | None:
    write = union.writers.get(model.__class__)
    return None if write is None else write(model)


def _all_members(union: _Union, items: Any) -> list[dict[str, Any]] | None:
    if items.__class__ is not list:
        return None
    writers = union.writers
    written: list[dict[str, Any]] = []
    append = written.append
    for item in items:
        write = writers.get(item.__class__)
        values = None if write is None else write(item)
        if values is None:
            return None
        append(values)
    return written


def message_values(messages: Any) -> list[dict[str, Any]] | None:
    """Message models as the values pydantic writes for them, or None when unsure.

    A model whose field dict lacks a field (built without validation) takes
    the reference path, as one with extra fields or a value of another kind
    than its field's does.
    """
    if not _MESSAGES.writers:
        _MESSAGES.compile()
    try:
        return _all_members(_MESSAGES, messages)
    except KeyError:
        return None
