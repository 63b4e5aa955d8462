"""Human-readable descriptions of options models, shared by ``agui-pipes list`` and the docs.

Types are rendered in the vocabulary of the chain file (``list of string``,
``"a" | "b"``), not Python's, because the reader is writing YAML.
"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["OptionInfo", "describe_options", "render_type"]

_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    Any: "any",
}


def render_type(annotation: Any) -> str:
    """``list[str] | None`` -> ``list of string or null``."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(render_type(a) for a in get_args(annotation))
    if origin in (list, tuple, set, frozenset):
        items = [a for a in get_args(annotation) if a is not Ellipsis]
        return f"list of {render_type(items[0])}" if items else "list"
    if origin is dict:
        pair = get_args(annotation)
        return f"mapping of {render_type(pair[1])}" if len(pair) == 2 else "mapping"
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return getattr(annotation, "__name__", str(annotation))


@dataclass(frozen=True)
class OptionInfo:
    """One option of a transformer, ready to print."""

    name: str
    type: str
    required: bool
    default: str
    """The default in YAML spelling (``null``, ``false``, ``"[REDACTED]"``); empty when required."""
    description: str


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return ""
    value = field.get_default(call_default_factory=True)
    return json.dumps(value) if value is not None else "null"


def describe_options(model: type[BaseModel]) -> list[OptionInfo]:
    """The options of ``model``, in declaration order."""
    return [
        OptionInfo(
            name=name,
            type=render_type(field.annotation),
            required=field.is_required(),
            default=_default(field),
            description=field.description or "",
        )
        for name, field in model.model_fields.items()
    ]
