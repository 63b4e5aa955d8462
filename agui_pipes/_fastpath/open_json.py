"""Snapshots, deltas and other events with open JSON values, on the fast path.

The generated builders and writers take only events whose values are
strings, choices and integers. ``STATE_SNAPSHOT``, ``STATE_DELTA``,
``ACTIVITY_*``, ``RAW`` and ``CUSTOM`` carry open JSON (any value, an object,
a JSON Patch array) and ``MESSAGES_SNAPSHOT`` nested message models; they
would otherwise take the reference path both ways: every value through its
checker and pydantic validation in, pydantic with ``ag_ui``'s per-model hook
(once per patch operation or message) out.

Decoding (``build_open``): a payload is taken only when it provably needs
nothing but the checks done here — every key described and of its kind, every
patch operation of a known ``op`` with exactly its keys and JSON Pointers
that match the spec's pattern, every message as ``messages.build_messages``
takes it. An unknown ``op``, an extra member on an operation, a legacy
``null`` or any malformed value returns None, and the reference path decides
(with its warnings or its error). The values were parsed by orjson, which
enforces ``Limits.max_depth`` while parsing, as the reference path's parser
does; open values are kept as they are, as the reference path keeps them.

Encoding (``open_writer``): the event as plain values (patch operations as
dicts in their models' key order, optional fields without value left out, as
``ag_ui``'s hook does) written by orjson, whose writing of JSON values is
pydantic's byte for byte (strings, integers, finite floats: the fast-path
tests check it on generated values). What orjson would write otherwise than
the reference path — a NaN as ``null``, a UUID or an enum as its value — is
caught by ``finish_open``; that, and anything orjson refuses (deep nesting,
huge integers, lone surrogates, non-string keys, subclasses, dataclasses,
dates), returns None for the general path, which raises the reference path's
errors.
"""

from __future__ import annotations

from collections.abc import Callable
from marshal import dumps as _marshal
from typing import Any, Final, get_args

from ag_ui.core import BaseEvent, StateDeltaEvent
from pydantic import BaseModel

from .._foundation import json as _json
from .._protocol.construct import DICT_SLOT, EXTRA_SLOT, FIELDS_SET_SLOT, PRIVATE_SLOT
from .._protocol.decode import PATCH_OP_KEYS, POINTER, SPECS, EventSpec
from .builders import BUILDER_LIMIT, NEGATIVE_LIMIT
from .messages import build_messages, message_values
from .source import compile_function, origin

__all__ = [
    "OPEN_BUILDERS",
    "OPEN_CLASSES",
    "OPEN_TYPES",
    "build_open",
    "open_builder",
    "open_writer",
]

OPEN_TYPES: Final = frozenset(
    {
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
        "RAW",
        "CUSTOM",
    }
)
"""The event types whose required fields hold open JSON."""
OPEN_CLASSES: Final = frozenset(SPECS[name].cls for name in OPEN_TYPES)

# Value kinds, as the reference specs state them.
_TYPE, _STR, _INT, _BOOL, _OBJECT, _ANY, _PATCH, _MESSAGES = range(8)

_match = POINTER.match
_new = object.__new__


def _op_models() -> dict[str, tuple[type[BaseModel], frozenset[str], tuple[tuple[str, str], ...]]]:
    """Per patch ``op``: its model, its wire keys and (wire key, attribute) in model order."""
    annotation = StateDeltaEvent.model_fields["delta"].annotation
    (element,) = get_args(annotation)
    union = get_args(element)[0]
    models: dict[str, tuple[type[BaseModel], frozenset[str], tuple[tuple[str, str], ...]]] = {}
    for cls in get_args(union):
        op = cls.model_fields["op"].default
        pairs = tuple((info.alias or name, name) for name, info in cls.model_fields.items())
        keys = frozenset(key for key, _ in pairs)
        if keys != PATCH_OP_KEYS.get(op):
            raise RuntimeError(f"ag_ui's {cls.__name__} does not have the keys of a {op!r} op")
        models[op] = (cls, keys, pairs)
    if set(models) != set(PATCH_OP_KEYS):
        raise RuntimeError("ag_ui's JSON Patch operations differ from the decode spec's")
    return models


_OPS: Final = _op_models()
_OP_CLASSES: Final = {
    cls: (
        tuple(attr for _, attr in pairs),
        None if all(key == attr for key, attr in pairs) else pairs,
    )
    for cls, _, pairs in _OPS.values()
}
"""Per op model: its attributes in model order, and None when its wire keys are its
attribute names, else the (key, attr) pairs."""


def _operations_source() -> tuple[str, dict[str, Any]]:
    """Generated: the op models of a JSON Patch array the reference path keeps as it is.

    One function for the whole array (no call per operation). An operation is
    taken when its key order is one of its op's (every key, nothing else: a
    missing key is fatal and an extra one is kept as an extra member, the
    reference path's cases) and each pointer matches the spec's pattern:
    without a "~" a string is a pointer when empty or starting with "/";
    escapes take the pattern itself (a regex costs a microsecond, most
    pointers have no escape). When the wire order is the model's and the
    wire keys are the attribute names, the parsed dict itself becomes the
    model's field dict, as ``model_validate`` would have built it (same keys,
    same order, same values): the caller hands over a freshly parsed payload
    and keeps no other use of it.
    """
    lines = [
        "def operations(items):",
        "    if items.__class__ is not list: return None",
        "    out = []",
        "    append = out.append",
        "    for item in items:",
        "        if item.__class__ is not dict: return None",
        "        op = item.get('op')",
        "        if op.__class__ is not str: return None",
        "        order = tuple(item)",
    ]
    namespace: dict[str, Any] = {
        "match": _match,
        "new": _new,
        "set_dict": DICT_SLOT,
        "set_fields": FIELDS_SET_SLOT,
        "set_extra": EXTRA_SLOT,
        "set_private": PRIVATE_SLOT,
    }
    branch = "if"
    for n, (op, (cls, keys, pairs)) in enumerate(_OPS.items()):
        namespace[f"CLS{n}"] = cls
        namespace[f"KEYS{n}"] = keys
        model_order = tuple(key for key, _ in pairs)
        same_names = all(key == attr for key, attr in pairs)
        lines.append(f"        {branch} op == {op!r}:")
        branch = "elif"
        lines.append(f"            if order != {model_order!r}:")
        lines.append(f"                if item.keys() != KEYS{n}: return None")
        lines.append("                reuse = False")
        lines.append("            else:")
        lines.append(f"                reuse = {same_names!r}")
        for i, (key, _) in enumerate(pairs):
            if key == "op":
                continue
            lines.append(f"            v{i} = item[{key!r}]")
            if key in ("path", "from"):
                lines.append(
                    f"            if v{i}.__class__ is not str or (v{i} and v{i}[0] != '/') or "
                    f"('~' in v{i} and match(v{i}) is None): return None"
                )
        items = ", ".join(
            f"{attr!r}: op" if key == "op" else f"{attr!r}: v{i}"
            for i, (key, attr) in enumerate(pairs)
        )
        attrs = ", ".join(repr(attr) for _, attr in pairs)
        lines += [
            f"            model = new(CLS{n})",
            f"            set_dict(model, item if reuse else {{{items}}})",
            f"            set_fields(model, {{{attrs}}})",
        ]
    lines += [
        "        else:",
        "            return None  # an unknown op: removed with a warning by the reference path",
        "        set_extra(model, {})",
        "        set_private(model, None)",
        "        append(model)",
        "    return out",
    ]
    return "\n".join(lines), namespace


_OPERATIONS: list[Callable[[Any], list[BaseModel] | None]] = []
"""Compiled on first use: with the fast path off, nothing is generated."""


def patch_builder() -> Callable[[Any], list[BaseModel] | None]:
    """The generated JSON Patch builder (``_operations_source``), compiled once."""
    if not _OPERATIONS:
        source, namespace = _operations_source()
        _OPERATIONS.append(
            compile_function(source, origin("patch ops", "JSON Patch"), namespace, "operations")
        )
    return _OPERATIONS[0]


class _Plan:
    """What ``build_open`` needs of one event type."""

    __slots__ = ("cls", "flat", "kinds", "required", "template")

    def __init__(self, spec: EventSpec) -> None:
        self.cls = spec.cls
        self.flat = spec.flat
        kinds: dict[str, tuple[str, int, int, int]] = {"type": ("type", _TYPE, 0, 0)}
        for key, attr in spec.str_attrs.items():
            if key != "type":
                kinds[key] = (attr, _STR, 0, 0)
        for key, (attr, low, high) in spec.int_attrs.items():
            kinds[key] = (attr, _INT, low, high)
        for table, kind in (
            (spec.bool_attrs, _BOOL),
            (spec.object_attrs, _OBJECT),
            (spec.open_attrs, _ANY),
            (spec.patch_attrs, _PATCH),
            (spec.messages_attrs, _MESSAGES),
        ):
            for key, attr in table.items():
                kinds[key] = (attr, kind, 0, 0)
        self.kinds = kinds
        self.required = spec.required_attrs
        self.template = {name: info.default for name, info in spec.cls.model_fields.items()}


OPEN_BUILDERS: Final = {
    name: _Plan(SPECS[name]) for name in sorted(OPEN_TYPES | {"MESSAGES_SNAPSHOT"})
}
"""The types ``build_open`` takes: ``OPEN_TYPES`` and ``MESSAGES_SNAPSHOT``, whose messages
are built by ``messages.build_messages``."""


OpenBuilder = Callable[[dict[str, Any]], "BaseEvent | None"]
_BY_ORDER: dict[tuple[str, tuple[str, ...]], OpenBuilder | None] = {}
"""Per wire key order, the key set's builder (or None): bounded as ``builders.BUILDERS``."""
_BY_SET: dict[tuple[str, frozenset[str]], OpenBuilder | None] = {}
_COMPILED = [0]


def build_open(raw: dict[str, Any], key: tuple[str, tuple[str, ...]]) -> BaseEvent | None:
    """The event of a parsed payload of an ``OPEN_TYPES`` type, or None for the reference path.

    ``key`` is (type, the payload's keys in order), as the callers' builder
    lookup has it. Builds what the reference path builds (same field values,
    the same fields set, ``type`` among them where it validates with
    pydantic) for payloads it would accept without a warning.
    """
    try:
        builder = _BY_ORDER[key]
    except KeyError:
        builder = _builder_for(*key)
    return None if builder is None else builder(raw)


def open_builder(type_name: str, keys: tuple[str, ...]) -> OpenBuilder | None:
    """The generated builder of an ``OPEN_TYPES`` key set, or None (for ``show``)."""
    return _builder_for(type_name, keys)


def _builder_for(type_name: str, keys: tuple[str, ...]) -> OpenBuilder | None:
    """Compile (or find) the builder of a key set; remember it for this order, bounded."""
    canonical = (type_name, frozenset(keys))
    try:
        builder = _BY_SET[canonical]
    except KeyError:
        builder = _generate(type_name, keys)
        if builder is not None or len(_BY_SET) < NEGATIVE_LIMIT:
            _BY_SET[canonical] = builder
    limit = BUILDER_LIMIT if builder is not None else NEGATIVE_LIMIT
    if len(_BY_ORDER) < limit or (builder is not None and SPECS[type_name].in_model_order(keys)):
        _BY_ORDER[(type_name, keys)] = builder
    return builder


def _generate(type_name: str, keys: tuple[str, ...]) -> OpenBuilder | None:
    """Straight-line code checking each value of one key set and building the event, or None.

    None when a key is not one this module checks (undescribed keys, legacy
    ``null`` spellings, ...), ``type`` is not there once, or a required field
    is missing: the reference path decides those. Compiled at most
    ``BUILDER_LIMIT`` times: past that, new key sets take the reference path.
    """
    plan = OPEN_BUILDERS[type_name]
    if keys.count("type") != 1 or any(k not in plan.kinds for k in keys):
        return None
    given = {plan.kinds[k][0] for k in keys if k != "type"}
    if not plan.required <= given or _COMPILED[0] >= BUILDER_LIMIT:
        return None
    _COMPILED[0] += 1
    checks = {
        _STR: "if v{i}.__class__ is not str: return None",
        _OBJECT: "if v{i}.__class__ is not dict: return None",
        _BOOL: "if v{i}.__class__ is not bool: return None",
    }
    lines = ["def build(raw):"]
    stores = []
    for i, key in enumerate(keys):
        attr, kind, low, high = plan.kinds[key]
        if kind is _TYPE:
            continue
        if kind is _PATCH or kind is _MESSAGES:
            build = "operations" if kind is _PATCH else "messages"
            lines.append(f"    v{i} = {build}(raw[{key!r}])")
            lines.append(f"    if v{i} is None: return None")
        else:
            lines.append(f"    v{i} = raw[{key!r}]")
            if kind is _INT:
                lines.append(
                    f"    if v{i}.__class__ is not int or not {low} <= v{i} <= {high}: return None"
                )
            elif kind in checks:
                lines.append("    " + checks[kind].format(i=i))
        stores.append(f"    data[{attr!r}] = v{i}")
    fields = given if plan.flat else given | {"type"}  # validated with its "type" otherwise
    lines += [
        "    data = TEMPLATE.copy()",
        *stores,
        "    event = new(cls)",
        "    set_dict(event, data)",
        "    set_fields(event, {" + ", ".join(repr(a) for a in sorted(fields)) + "})",
        "    set_extra(event, {})",
        "    set_private(event, None)",
        "    return event",
    ]
    namespace: dict[str, Any] = {
        "operations": patch_builder(),
        "messages": build_messages,
        "TEMPLATE": plan.template,
        "new": _new,
        "cls": plan.cls,
        "set_dict": DICT_SLOT,
        "set_fields": FIELDS_SET_SLOT,
        "set_extra": EXTRA_SLOT,
        "set_private": PRIVATE_SLOT,
    }
    built: OpenBuilder = compile_function(
        "\n".join(lines), origin("open-value builder", type_name, keys), namespace, "build"
    )
    return built


# -- encoding ---------------------------------------------------------------


def _refuse(value: Any) -> Any:
    raise TypeError(f"not written by the open-value writer: {type(value).__name__}")


_PASSTHROUGH = 0
_orjson_dumps: Callable[..., bytes] = _refuse
_orjson_loads: Callable[[bytes], Any] = _refuse
if _json.HAVE_ORJSON:
    import orjson

    _orjson_dumps = orjson.dumps
    _orjson_loads = orjson.loads

    # Dates, dataclasses and subclasses of str / int / dict / list go to
    # ``default``, which refuses them: pydantic and the reference checks decide.
    _PASSTHROUGH = (
        orjson.OPT_PASSTHROUGH_DATETIME
        | orjson.OPT_PASSTHROUGH_DATACLASS
        | orjson.OPT_PASSTHROUGH_SUBCLASS
    )


def finish_open(out: dict[str, Any]) -> bytes | None:
    """The reference encoder's bytes for ``out`` (an event as plain values), or None.

    orjson writes what the reference path refuses or writes otherwise in
    four cases only once its ``default`` has refused everything else
    (subclasses, dates, dataclasses, unknown objects): a NaN or an infinity
    (written as ``null``), a UUID (a string), an enum (its value) and an
    ``orjson.Fragment`` (raw text). ``marshal`` writes exact builtin types
    only (every enum, UUID and fragment raises), and costs less than reading
    the output back; a NaN or an infinity can only hide behind a ``null`` in
    the output, so only then is the output read back and compared (a NaN is
    unequal to everything, an infinity to the ``null`` it became). Tuples
    pass: pydantic writes them as arrays too.
    """
    try:
        data: bytes = _orjson_dumps(out, default=_refuse, option=_PASSTHROUGH)
        _marshal(out)
    except (TypeError, ValueError):
        return None
    # (``find``, not ``in``: ``bytes.__contains__`` first tries its operand as an
    # integer and formats the TypeError it catches, several times the search.)
    if data.find(b"null") >= 0 and _orjson_loads(data) != out:
        return None
    return data


Writer = Callable[[dict[str, Any]], "bytes | None"]


def open_writer(cls: type[BaseEvent]) -> Writer | None:
    """The writer of an ``OPEN_TYPES`` class (None for other classes, or without orjson).

    Takes the event's ``__dict__`` (the caller checks it has no extra fields,
    as for every common-shape writer) and returns the reference encoder's
    bytes, or None for the general path.
    """
    if not _json.HAVE_ORJSON:
        return None
    spec = next((s for s in OPEN_BUILDERS if SPECS[s].cls is cls), None)
    if spec is None:
        return None
    checked = SPECS[spec]
    kind_of: dict[str, int] = {}
    for attr in checked.str_attrs.values():
        kind_of[attr] = _STR
    for attr, _, _ in checked.int_attrs.values():
        kind_of[attr] = _INT
    for table, kind in (
        (checked.bool_attrs, _BOOL),
        (checked.object_attrs, _OBJECT),
        (checked.patch_attrs, _PATCH),
        (checked.messages_attrs, _MESSAGES),
    ):
        for attr in table.values():
            kind_of[attr] = kind
    type_value = cls.model_fields["type"].default.value
    layout = tuple(
        (
            name,
            info.serialization_alias or info.alias or name,
            not info.is_required() and info.default is None,
            kind_of.get(name, _ANY),
        )
        for name, info in cls.model_fields.items()
        if name != "type"
    )
    checks = {
        _STR: "    if v.__class__ is not str: return None",
        _INT: "    if v.__class__ is not int: return None",
        _BOOL: "    if v.__class__ is not bool: return None",
        _OBJECT: "    if v.__class__ is not dict: return None",
    }
    lines = ["def write(d):", f"    out = {{'type': {type_value!r}}}"]
    for attr, key, omit, kind in layout:
        lines.append(f"    v = d[{attr!r}]")
        if omit:
            lines.append("    if v is not None:")
            indent = "    "
        elif kind is _ANY:
            indent = ""  # a required open value: null is a value
        else:
            lines.append("    if v is None: return None  # pydantic would warn")
            indent = ""
        if kind is _PATCH or kind is _MESSAGES:
            values = "operations" if kind is _PATCH else "messages"
            lines.append(f"{indent}    v = {values}(v)")
            lines.append(f"{indent}    if v is None: return None")
        elif kind in checks:
            lines.append(indent + checks[kind])
        lines.append(f"{indent}    out[{key!r}] = v")
    lines += [
        "    return finish(out)",
    ]
    namespace: dict[str, Any] = {
        "finish": finish_open,
        "operations": _operation_dicts,
        "messages": message_values,
    }
    write: Writer = compile_function(
        "\n".join(lines), origin("open-value writer", type_value), namespace, "write"
    )
    return write


def _operation_dicts(operations: Any) -> list[dict[str, Any]] | None:
    """Patch op models as the dicts pydantic writes them as, or None when unsure."""
    if operations.__class__ is not list:
        return None
    out: list[dict[str, Any]] = []
    for operation in operations:
        shape = _OP_CLASSES.get(operation.__class__)
        if shape is None or operation.__pydantic_extra__:
            return None
        order, renamed = shape
        values = operation.__dict__
        if tuple(values) != order:
            # A field missing (built without validation: pydantic decides), or the
            # fields in another order than pydantic writes them.
            return None
        # The fields in model order, under their wire names: the instance dict
        # itself when those are its keys (orjson only reads it).
        out.append(values if renamed is None else {key: values[attr] for key, attr in renamed})
    return out
