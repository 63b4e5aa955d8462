"""chain_schema(): generated from the options models, covering every shape the loader accepts."""

from __future__ import annotations

import json
from typing import Any

from agui_pipes.config import Registry, chain_schema


def shapes(schema: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = schema["properties"]["transformers"]["items"]["anyOf"]
    return items


def test_schema_is_json_and_names_the_draft() -> None:
    schema = chain_schema(Registry(plugins=False))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert json.loads(json.dumps(schema)) == schema
    assert schema["required"] == ["transformers"]
    assert schema["additionalProperties"] is False


def test_every_builtin_has_long_and_shorthand_forms() -> None:
    registry = Registry(plugins=False)
    schema = chain_schema(registry)
    long_forms = {
        s["properties"]["type"]["const"]: s
        for s in shapes(schema)
        if "type" in s.get("properties", {}) and "const" in s["properties"]["type"]
    }
    shorthands = {
        next(iter(s["properties"])): s
        for s in shapes(schema)
        if s.get("title", "").endswith("(shorthand)")
    }
    bare = {s["const"] for s in shapes(schema) if "const" in s}
    for spec in registry.specs():
        long_form = long_forms[spec.name]
        assert set(long_form["properties"]) == {"type", *spec.options.model_fields}
        assert long_form["additionalProperties"] is False
        assert spec.name in shorthands
        required = [n for n, f in spec.options.model_fields.items() if f.is_required()]
        assert long_form["required"] == ["type", *required]
        assert (spec.name in bare) == (not required)


def test_option_types_defaults_and_choices_come_from_the_models() -> None:
    schema = chain_schema(Registry(plugins=False))
    verify = next(
        s
        for s in shapes(schema)
        if s.get("properties", {}).get("type", {}).get("const") == "verify"
    )
    on_violation = verify["properties"]["on_violation"]
    assert on_violation["enum"] == ["raise", "run_error", "warn"]
    assert on_violation["default"] == "raise"
    assert "RUN_ERROR" in on_violation["description"]
    assert verify["properties"]["allow_truncated"]["type"] == "boolean"
