"""Printing what the fast path generates for a shape (a debugging aid)."""

from __future__ import annotations

from collections.abc import Sequence

from .._protocol.decode import SPECS
from .builders import compile_builder
from .open_json import OPEN_BUILDERS, open_builder
from .source import source_of
from .writers import compile_common_shape

__all__ = ["generated_source"]


def generated_source(type_name: str, keys: Sequence[str] | None = None) -> str:
    """The source the fast path runs for one event type: its builder and its writer.

    ``keys`` is the wire key set (in its order) whose builder to show; by
    default the type's required keys in the model's order, the shape the
    encoder writes for the type's smallest event. Each part is headed by the
    file name it is compiled under (the name tracebacks show). Raises
    ValueError for an unknown type or a key set the fast path has no
    builder for, saying which.
    """
    spec = SPECS.get(type_name)
    if spec is None:
        raise ValueError(
            f"unknown event type {type_name!r}; expected one of the AG-UI 1.0 types, "
            f"e.g. {', '.join(sorted(SPECS)[:3])}"
        )
    if keys is None:
        chosen = ("type", *(field.key for field in spec.required))
        keys = tuple(sorted(chosen, key=spec.model_order.__getitem__))
    keys = tuple(keys)
    parts: list[str] = []
    builder = compile_builder(type_name, keys)
    if builder is None and type_name in OPEN_BUILDERS:
        builder = open_builder(type_name, keys)
    if builder is None:
        raise ValueError(
            f"the fast path has no builder for {type_name} with keys {', '.join(keys)}: "
            "a builder takes only plain-string, choice and integer fields (and, for "
            "snapshots and deltas, their described JSON values), holds every required one "
            "and 'type' once; such events take the reference decoder"
        )
    parts.append(_section(builder.__code__.co_filename))
    writer = compile_common_shape(spec.cls)
    if writer is not None:
        parts.append(_section(writer.__code__.co_filename))
    return "\n".join(parts)


def _section(filename: str) -> str:
    text = source_of(filename)
    assert text is not None, f"{filename} was compiled without its source"
    return f"# {filename}\n{text}"
