"""Generated decode builders: one straight-line function per wire key set.

The reference decoder (``agui_pipes._protocol.decode``) checks every field through
its checker and loops over the keys. For the key sets hot events arrive with
(every key a plain string, a string choice or a bounded integer, every
required field present), a generated function does the same checks inline
and builds the model without a loop; any value it does not expect makes it
return None and the reference path decides. What a builder may take over is
read from the reference specs (``SPECS``), never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ag_ui.core import BaseEvent, RunStartedEvent

from .._protocol.construct import DICT_SLOT, EXTRA_SLOT, FIELDS_SET_SLOT, PRIVATE_SLOT
from .._protocol.decode import SPECS
from .source import compile_function, origin

__all__ = [
    "BUILDERS",
    "BUILDER_LIMIT",
    "COMPILED_BUILDERS",
    "NEGATIVE_LIMIT",
    "RELAY_ENTRIES",
    "SET_BUILDERS",
    "Builder",
    "RelayEntry",
    "canonical_framing",
    "compact_framing",
    "compile_builder",
    "generate_builder",
    "relay_entry",
]

Builder = Callable[[dict[str, Any]], "BaseEvent | None"]
BUILDERS: dict[tuple[str, tuple[str, ...]], Builder | None] = {}
"""Per wire key order (the hot path's one lookup): the key set's builder, or None.

Orders come from the wire: a peer can send one key set in thousands of
orders. The model's own order (what encoders write) is always remembered —
there are a few hundred such key sets in all — other orders up to
``BUILDER_LIMIT`` entries; past it an order is served from ``SET_BUILDERS``
on each event (the same builder, one extra lookup), never recompiled.
"""
SET_BUILDERS: dict[tuple[str, frozenset[str]], Builder | None] = {}
"""Per key set, whatever the order: one compiled builder (or None) for all its orders."""
BUILDER_LIMIT: Final = 1024
"""Bounds the compiled builders and the remembered non-model orders.

AG-UI 1.0 has 272 key sets a builder can take (strings, choices and
integers only), so the compiled builders never reach it: permutations share
one builder, and no peer can use up the budget for the shapes of others.
"""
NEGATIVE_LIMIT: Final = 4 * BUILDER_LIMIT
"""Bounds the remembered "no builder" answers, which cannot crowd out the builders."""
COMPILED_BUILDERS = [0]


def compile_builder(type_name: str, keys: tuple[str, ...]) -> Builder | None:
    """The builder of a wire key set in this order: compiled once per set, shared by orders.

    Remembered for this exact order (the hot path's key) when the order is
    the model's, or while the table has room (see ``BUILDERS``).
    """
    canonical = (type_name, frozenset(keys))
    try:
        builder = SET_BUILDERS[canonical]
    except KeyError:
        builder = generate_builder(type_name, keys)
        if builder is not None or len(SET_BUILDERS) < NEGATIVE_LIMIT:
            SET_BUILDERS[canonical] = builder
    if builder is None:
        if len(BUILDERS) < NEGATIVE_LIMIT:
            BUILDERS[(type_name, keys)] = None
    elif len(BUILDERS) < BUILDER_LIMIT or SPECS[type_name].in_model_order(keys):
        BUILDERS[(type_name, keys)] = builder
    return builder


def generate_builder(type_name: str, keys: tuple[str, ...]) -> Builder | None:
    """Straight-line code that builds the event for one wire key set (any order), or None.

    Only for key sets whose every key is a plain-string or string-choice
    field (such as a message's ``role``) and that hold every required field:
    then no nested model is involved, even for types that have nested fields
    (they take their defaults), and the checked path would build exactly what
    ``construct`` builds. The generated function checks each value's class
    (and choice) and returns None when one is off, for the checked path to
    report; otherwise it builds the instance without a per-key loop, which is
    most of a hot event's decoding cost. Generating code from the model's
    field names is the technique dataclasses use.
    """
    spec = SPECS.get(type_name)
    builder: Builder | None = None
    if (
        spec is not None
        and keys.count("type") == 1
        and not (
            # A declared protocol version may warn (``_warnings``), which a builder
            # cannot: such RUN_STARTED events take the checked path.
            spec.cls is RunStartedEvent and "protocolVersion" in keys
        )
    ):
        choices = spec.choice_attrs
        attrs = [spec.builder_attr(key) for key in keys]
        given = {a for a in attrs if a is not None and a != "type"}
        if all(a is not None for a in attrs) and spec.required_attrs <= given:
            if COMPILED_BUILDERS[0] >= BUILDER_LIMIT:
                # Key sets come from the wire: past the bound, new ones take the
                # checked path rather than costing a compilation each.
                return None
            COMPILED_BUILDERS[0] += 1
            names = [(key, attr) for key, attr in zip(keys, attrs, strict=True) if key != "type"]
            fields = dict.fromkeys(spec.cls.model_fields)
            lines = ["def build(raw):"]
            allowed: dict[str, frozenset[str]] = {}
            for i, (key, _) in enumerate(names):
                lines.append(f"    v{i} = raw[{key!r}]")
                if key in choices:
                    allowed[f"ALLOWED{i}"] = choices[key][1]
                    lines.append(
                        f"    if v{i}.__class__ is not str or v{i} not in ALLOWED{i}: return None"
                    )
                elif key in spec.int_attrs:
                    _, low, high = spec.int_attrs[key]
                    lines.append(
                        f"    if v{i}.__class__ is not int or not {low} <= v{i} <= {high}: "
                        "return None"
                    )
                else:
                    lines.append(f"    if v{i}.__class__ is not str: return None")
            defaults = {n: i.default for n, i in spec.cls.model_fields.items()}
            # The fields dict starts as a copy of the defaults (in model order, as
            # construct builds it) and gets the given values: copying a dict is
            # cheaper than building one key by key.
            template = {name: defaults[name] for name in fields}
            if not spec.flat:
                # The checked path validates such types with the wire "type" included,
                # so it counts as set there; build the same instance.
                given.add("type")
            given_set = "{" + ", ".join(repr(a) for a in sorted(given)) + "}" if given else "set()"
            lines.append("    data = TEMPLATE.copy()")
            for i, (_, attr) in enumerate(names):
                lines.append(f"    data[{str(attr)!r}] = v{i}")
            lines.append("    event = new(cls)")
            lines.append("    set_dict(event, data)")
            lines.append(f"    set_fields(event, {given_set})")
            lines.append("    set_extra(event, {})")
            lines.append("    set_private(event, None)")
            lines.append("    return event")
            namespace: dict[str, Any] = {
                "new": object.__new__,
                "cls": spec.cls,
                "set_dict": DICT_SLOT,
                "set_fields": FIELDS_SET_SLOT,
                "set_extra": EXTRA_SLOT,
                "set_private": PRIVATE_SLOT,
                "TEMPLATE": template,
                **allowed,
            }
            builder = compile_function(
                "\n".join(lines), origin("builder", type_name, keys), namespace, "build"
            )
    return builder


RelayEntry = tuple[Builder, "int | None"] | None
RELAY_ENTRIES: dict[tuple[str, tuple[str, ...]], RelayEntry] = {}
"""Per key set, for a relay: the builder and ``canonical_framing``, in one lookup."""


def canonical_framing(type_name: str, keys: tuple[str, ...]) -> int | None:
    """For a builder's key set in the encoder's order, its JSON length minus its values'.

    The encoder writes ``type`` first, then the model's fields in order,
    compactly, escaping only what JSON requires. A payload whose keys come in
    that order is at least this plus the string values' lengths long, and
    exactly that long only when it is the encoder's output: whitespace,
    escapes and multi-byte characters all make it longer. Comparing lengths is
    cheaper than re-serialising; a longer payload is compared exactly. None
    when the keys are in another order.
    """
    spec = SPECS[type_name]
    if not spec.in_model_order(keys) or any(key in spec.int_attrs for key in keys):
        return None  # (a relay sums the string values' lengths: numbers take the exact check)
    return compact_framing(keys)


def compact_framing(keys: tuple[str, ...]) -> int:
    """The compact JSON length of an object of string values with these keys, values aside."""
    # {} + each "key": + each "value" + the commas between members
    return 2 + sum(len(k) + 3 for k in keys) + 2 * len(keys) + len(keys) - 1


def relay_entry(type_name: str, keys: tuple[str, ...]) -> RelayEntry:
    """Compile (or find) the builder of a key set and pair it with its framing length."""
    key = (type_name, keys)
    builder = BUILDERS[key] if key in BUILDERS else compile_builder(type_name, keys)
    entry = None if builder is None else (builder, canonical_framing(type_name, keys))
    # Bounded as BUILDERS is: the model's orders always, other orders while
    # there is room, the answers without a builder up to their own bound.
    if entry is None:
        if len(RELAY_ENTRIES) < NEGATIVE_LIMIT:
            RELAY_ENTRIES[key] = entry
    elif len(RELAY_ENTRIES) < BUILDER_LIMIT or SPECS[type_name].in_model_order(keys):
        RELAY_ENTRIES[key] = entry
    return entry
