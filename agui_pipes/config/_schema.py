"""``chain_schema()``: the JSON Schema of a chain declaration, for editors.

Built from the same options models the loader validates with, so the schema
cannot disagree with the loader about a field's type or default. Each entry
may take any of the three accepted shapes (long form with ``type``, single-key
shorthand, bare name when nothing is required).

Two things the schema cannot express are checked only by the loader: rules
written as validators in Python (a regex that compiles, a well-formed JSON
Pointer) beyond the hints given here, and ``${VAR}`` interpolation (a value
written as ``${MAX}`` is a string to an editor).
"""

from __future__ import annotations

from typing import Any

from ._registry import Registry, TransformerSpec, default_registry

__all__ = ["chain_schema"]

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _options_schema(spec: TransformerSpec, defs: dict[str, Any]) -> dict[str, Any]:
    schema = spec.options.model_json_schema(ref_template="#/$defs/{model}")
    defs.update(schema.pop("$defs", {}))
    schema.pop("title", None)
    schema["additionalProperties"] = False
    schema.setdefault("properties", {})
    return schema


def _entry_shapes(spec: TransformerSpec, options: dict[str, Any]) -> list[dict[str, Any]]:
    description = spec.summary or spec.name
    long_form = dict(options)
    long_form["properties"] = {
        "type": {"const": spec.name, "description": description},
        **options["properties"],
    }
    long_form["required"] = ["type", *options.get("required", [])]
    long_form["title"] = spec.name
    long_form.pop("description", None)
    short_options = dict(options)
    short_options.pop("description", None)
    shapes: list[dict[str, Any]] = [
        long_form,
        {
            "type": "object",
            "title": f"{spec.name} (shorthand)",
            "properties": {
                spec.name: (
                    short_options
                    if options.get("required")
                    else {"anyOf": [short_options, {"type": "null"}]}
                )
            },
            "required": [spec.name],
            "additionalProperties": False,
        },
    ]
    if not options.get("required"):
        shapes.append({"const": spec.name, "description": description})
    return shapes


def chain_schema(registry: Registry | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a chain file, covering every registered transformer."""
    registry = registry or default_registry()
    defs: dict[str, Any] = {}
    shapes: list[dict[str, Any]] = []
    for spec in registry.specs():
        shapes.extend(_entry_shapes(spec, _options_schema(spec, defs)))
    schema: dict[str, Any] = {
        "$schema": _DRAFT,
        "title": "agui-pipes chain",
        "description": "An ordered list of AG-UI stream transformers (see docs/yaml-reference.md).",
        "type": "object",
        "properties": {
            "version": {"const": 1, "description": "Format version; always 1."},
            "transformers": {
                "type": ["array", "null"],
                "description": "The stages, in order; each sees every output of the previous.",
                "items": {"anyOf": shapes},
            },
        },
        "required": ["transformers"],
        "additionalProperties": False,
    }
    if defs:
        schema["$defs"] = defs
    return schema
