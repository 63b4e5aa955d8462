"""docs/yaml-reference.md is generated: the committed file must equal the generator's output."""

from __future__ import annotations

from pathlib import Path

from agui_pipes.config import Registry
from agui_pipes.config._docgen import generate

ROOT = Path(__file__).resolve().parents[2]


def test_yaml_reference_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "yaml-reference.md").read_text(encoding="utf-8")
    assert committed == generate(), (
        "docs/yaml-reference.md is stale: run "
        "`python -m agui_pipes.config._docgen > docs/yaml-reference.md` and commit it"
    )


def test_reference_documents_every_option_of_every_builtin() -> None:
    text = generate()
    for spec in Registry(plugins=False).specs():
        assert f"### `{spec.name}`" in text
        for name in spec.options.model_fields:
            assert f"| `{name}` |" in text


def test_examples_in_the_models_are_valid_options() -> None:
    for spec in Registry(plugins=False).specs():
        extra = spec.options.model_config.get("json_schema_extra")
        examples = extra.get("examples", []) if isinstance(extra, dict) else []
        for example in examples:
            spec.options.model_validate(example)
