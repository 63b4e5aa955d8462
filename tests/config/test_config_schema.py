"""chain_schema(): generated from the options models, covering every shape the loader accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

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


# -- the schema as an editor uses it (validated with jsonschema) ---------------------------

ROOT = Path(__file__).resolve().parents[2]


def validator() -> jsonschema.protocols.Validator:
    schema = chain_schema(Registry(plugins=False))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize(
    "path", sorted((ROOT / "examples" / "chains").glob("*.yaml")), ids=lambda p: p.stem
)
def test_example_chains_are_valid_against_the_schema(path: Path) -> None:
    document = yaml.safe_load(path.read_text())
    # ${VAR} values are strings to an editor; substitute plausible typed values.
    for entry in document["transformers"]:
        if isinstance(entry, dict):
            for key, value in list(entry.items()):
                if isinstance(value, str) and value.startswith("${"):
                    entry[key] = {"max_chars": 256, "enabled": True}.get(key, "attributed")
    errors = list(validator().iter_errors(document))
    assert errors == [], [e.message for e in errors]


@pytest.mark.parametrize(
    "document",
    [
        {"transformers": [{"type": "verify", "profle": "producer"}]},
        {"transformers": [{"type": "no_such_stage"}]},
        {"transformers": [{"subagent_visibility": {"mode": "inlined"}}]},
        {"transformers": [{"type": "tool_result_to_state"}]},  # `tool` is required
        {"transformers": ["redact"]},  # bare name needs every option to have a default
        {"version": 2, "transformers": []},
        {"transformers": [], "extra": 1},
    ],
)
def test_schema_rejects_what_the_loader_rejects(document: dict[str, Any]) -> None:
    assert list(validator().iter_errors(document))
