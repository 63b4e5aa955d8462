"""load_chain: accepted shapes, interpolation, and every pointed error the issue names."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest
from ag_ui.core import BaseEvent, TextMessageContentEvent
from pydantic import BaseModel, Field

from agui_pipes import AguiPipesError, StreamTransformer, TransformerChain
from agui_pipes.config import ConfigError, Registry, TransformerSpec, load_chain
from agui_pipes.testing import run_events, text


class Suffix(StreamTransformer):
    """Append a suffix to every text delta (a stand-in stage for loader tests)."""

    class Options(BaseModel):
        model_config = {"extra": "forbid"}
        suffix: str = Field("!", description="What to append.")
        times: int = 1

    def __init__(self, suffix: str = "!", times: int = 1) -> None:
        self.suffix = suffix * times

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta + self.suffix}),)
        return (event,)


@pytest.fixture
def registry() -> Registry:
    reg = Registry(plugins=False)
    reg.register(TransformerSpec("suffix", Suffix, Suffix.Options, origin="test"))
    return reg


def load(text_: str, registry: Registry, **kwargs: object) -> object:
    return load_chain(textwrap.dedent(text_), registry=registry, **kwargs)  # type: ignore[arg-type]


def deltas(chain: TransformerChain) -> list[str]:
    out = chain.apply_sync(run_events(text("m1", "a", "b")))
    return [e.delta for e in out if isinstance(e, TextMessageContentEvent)]


# -- accepted shapes ----------------------------------------------------------------


def test_long_form_shorthand_and_bare_name_build_the_same_stage(registry: Registry) -> None:
    long_form = load_chain(
        "version: 1\ntransformers:\n  - type: suffix\n    suffix: '?'\n", registry=registry
    )
    shorthand = load_chain("transformers:\n  - suffix: {suffix: '?'}\n", registry=registry)
    assert deltas(long_form()) == deltas(shorthand()) == ["a?", "b?"]
    bare = load_chain("transformers: [suffix]", registry=registry)
    assert deltas(bare()) == ["a!", "b!"]
    empty_options = load_chain("transformers:\n  - suffix:\n", registry=registry)
    assert deltas(empty_options()) == ["a!", "b!"]


def test_factory_builds_a_fresh_chain_per_call(registry: Registry) -> None:
    factory = load_chain("transformers: [suffix, suffix]", registry=registry)
    first, second = factory(), factory()
    assert first is not second
    assert all(a is not b for a, b in zip(first.stages, second.stages, strict=True))
    assert deltas(first) == deltas(second) == ["a!!", "b!!"]
    assert factory.names == ["suffix", "suffix"]
    assert len(factory) == 2


def test_json_text_mapping_and_path_are_accepted(registry: Registry, tmp_path: Path) -> None:
    from_json = load_chain('{"transformers": [{"type": "suffix", "times": 2}]}', registry=registry)
    from_mapping = load_chain({"transformers": [{"suffix": {"times": 2}}]}, registry=registry)
    file = tmp_path / "chain.yml"
    file.write_text("transformers:\n  - type: suffix\n    times: 2\n")
    from_path = load_chain(file, registry=registry)
    from_str_path = load_chain(str(file), registry=registry)
    for factory in (from_json, from_mapping, from_path, from_str_path):
        assert deltas(factory()) == ["a!!", "b!!"]
    assert from_path.source == str(file)


def test_empty_transformer_list_is_the_identity(registry: Registry) -> None:
    factory = load_chain("transformers: []", registry=registry)
    assert deltas(factory()) == ["a", "b"]


def test_merge_keys_and_anchors_work(registry: Registry) -> None:
    factory = load(
        """
        transformers:
          - suffix: &opts {suffix: "+", times: 3}
          - suffix: *opts
          - suffix:
              <<: *opts
              times: 1
        """,
        registry,
    )
    assert deltas(factory()) == ["a+++++++", "b+++++++"]  # type: ignore[operator]


def test_nested_aliases_do_not_blow_up(registry: Registry) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    document = "\n".join(levels) + "\ntransformers: []\n"
    # 10**9 strings if aliases were expanded; an error about the unknown keys here.
    with pytest.raises(ConfigError, match="unknown top-level key `a0`"):
        load_chain(document, registry=registry)


# -- interpolation --------------------------------------------------------------------


def test_interpolation_with_defaults_and_retyping(registry: Registry) -> None:
    env = {"SUFFIX": "#", "EMPTY": ""}
    factory = load(
        """
        transformers:
          - type: suffix
            suffix: ${SUFFIX}
            times: ${TIMES:-2}
          - type: suffix
            suffix: "${EMPTY:-%}$$"
        """,
        registry,
        env=env,
    )
    assert deltas(factory()) == ["a##%$", "b##%$"]  # type: ignore[operator]


def test_quoted_interpolation_stays_a_string(registry: Registry) -> None:
    with pytest.raises(ConfigError) as info:
        load(
            """
            transformers:
              - type: suffix
                suffix: '${N:-1}'
                times: 'x${N:-1}'
            """,
            registry,
            env={},
        )
    assert info.value.key == "transformers[0].times"


def test_missing_variable_without_default_is_pointed(registry: Registry) -> None:
    with pytest.raises(ConfigError) as info:
        load(
            """
            transformers:
              - type: suffix
                suffix: ${SECRET_SUFFIX}
            """,
            registry,
            env={},
        )
    err = info.value
    assert (err.line, err.column, err.key) == (4, 13, "transformers[0].suffix")
    assert "`SECRET_SUFFIX` is not set" in err.message
    assert "${SECRET_SUFFIX:-default}" in err.message


def test_malformed_interpolation_is_pointed(registry: Registry) -> None:
    with pytest.raises(ConfigError, match="unterminated") as info:
        load("transformers:\n  - suffix: {suffix: '${OOPS'}\n", registry, env={})
    assert info.value.line == 2


def test_interpolation_in_mappings(registry: Registry) -> None:
    factory = load_chain(
        {"transformers": [{"suffix": {"times": "${T}"}}]}, registry=registry, env={"T": "3"}
    )
    assert deltas(factory()) == ["a!!!", "b!!!"]
    with pytest.raises(ConfigError, match="`T` is not set") as info:
        load_chain({"transformers": [{"suffix": {"times": "${T}"}}]}, registry=registry, env={})
    assert info.value.source == "<mapping>"
    assert info.value.key == "transformers[0].suffix.times"


# -- the errors the issue names -------------------------------------------------------------


def test_unknown_type_names_choices_and_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(
            "version: 1\ntransformers:\n  - type: tool_result_to_stat\n    tool: x\n",
            registry=Registry(plugins=False),
        )
    err = info.value
    assert isinstance(err, AguiPipesError)
    assert (err.source, err.line, err.column) == ("<string>", 3, 11)
    assert err.key == "transformers[0].type"
    assert err.suggestion == "tool_result_to_state"
    assert err.choices is not None
    assert "subagent_visibility" in err.choices
    rendered = str(err)
    assert rendered.startswith("<string>:3:11: transformers[0].type: unknown transformer type")
    assert "did you mean `tool_result_to_state`?" in rendered


def test_unknown_type_in_shorthand_points_at_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain("transformers:\n  - expand_chunk: {}\n", registry=Registry(plugins=False))
    assert (info.value.line, info.value.column) == (2, 5)
    assert info.value.suggestion == "expand_chunks"


def test_unknown_option() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(
            "transformers:\n  - type: verify\n    profle: producer\n",
            registry=Registry(plugins=False),
        )
    err = info.value
    assert (err.line, err.column, err.key) == (3, 5, "transformers[0].profle")
    assert "unknown option `profle` for `verify`" in err.message
    assert err.suggestion == "profile"
    assert err.choices == ("profile", "on_violation", "allow_truncated", "debug", "enabled")


def test_option_on_a_stage_without_options() -> None:
    with pytest.raises(ConfigError, match="`strip_raw_events` takes no options") as info:
        load_chain(
            "transformers:\n  - strip_raw_events: {x: 1}\n", registry=Registry(plugins=False)
        )
    assert (info.value.line, info.value.column) == (2, 24)


def test_wrong_type() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(
            'transformers:\n  - type: filter_tool_calls\n    deny: "internal_*"\n',
            registry=Registry(plugins=False),
        )
    err = info.value
    assert (err.line, err.column, err.key) == (3, 11, "transformers[0].deny")
    assert "valid list" in err.message
    assert "'internal_*'" in err.message


def test_wrong_type_inside_a_list_points_at_the_item() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(
            "transformers:\n  - type: filter_tool_calls\n    deny:\n      - ok\n      - [nested]\n",
            registry=Registry(plugins=False),
        )
    assert (info.value.line, info.value.column) == (5, 9)
    assert info.value.key == "transformers[0].deny[1]"


def test_invalid_choice_suggests_the_closest() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(
            "transformers:\n  - subagent_visibility:\n      mode: inlined\n",
            registry=Registry(plugins=False),
        )
    err = info.value
    assert err.suggestion == "inline"
    assert err.choices == ("attributed", "inline", "hidden")
    assert (err.line, err.column) == (3, 13)


def test_both_allow_and_deny() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(
            "transformers:\n  - type: filter_tool_calls\n    allow: [a]\n    deny: [b]\n",
            registry=Registry(plugins=False),
        )
    err = info.value
    assert "exactly one of `allow` or `deny`" in err.message
    assert (err.line, err.column, err.key) == (2, 11, "transformers[0].type")


def test_neither_allow_nor_deny() -> None:
    with pytest.raises(ConfigError, match=r"exactly one of `allow` or `deny` \(neither"):
        load_chain("transformers: [filter_tool_calls]", registry=Registry(plugins=False))


@pytest.mark.parametrize("pointer", ["results", "/a/~2", "/trailing~"])
def test_bad_pointer(pointer: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(
            "transformers:\n  - type: tool_result_to_state\n    tool: search\n"
            f"    mode: at\n    pointer: '{pointer}'\n",
            registry=Registry(plugins=False),
        )
    err = info.value
    assert (err.line, err.column, err.key) == (5, 14, "transformers[0].pointer")
    assert "is not a JSON Pointer" in err.message


def test_pointer_rules_across_fields() -> None:
    reg = Registry(plugins=False)
    with pytest.raises(ConfigError, match="`mode: at` needs a `pointer`"):
        load_chain("transformers:\n  - tool_result_to_state: {tool: t, mode: at}\n", registry=reg)
    with pytest.raises(ConfigError, match="only applies to `mode: at`"):
        load_chain(
            "transformers:\n  - tool_result_to_state: {tool: t, pointer: /x}\n", registry=reg
        )


def test_missing_required_option() -> None:
    with pytest.raises(ConfigError, match="needs the option `tool`") as info:
        load_chain(
            "transformers:\n  - tool_result_to_state: {}\n", registry=Registry(plugins=False)
        )
    assert (info.value.line, info.value.column) == (2, 5)


def test_malformed_yaml() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain("transformers:\n  - type: verify\n   profile: [producer\n")
    err = info.value
    assert err.message.startswith("malformed YAML:")
    assert err.source == "<string>"
    assert err.line is not None
    assert err.column is not None


def test_malformed_yaml_in_a_file_names_the_file(tmp_path: Path) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text("transformers:\n  - {type: verify\n")
    with pytest.raises(ConfigError) as info:
        load_chain(file)
    assert info.value.source == str(file)
    assert str(info.value).startswith(f"{file}:3:1: malformed YAML")


@pytest.mark.parametrize(
    ("document", "tag"),
    [
        ("transformers:\n  - !!python/object/apply:os.system [echo hi]\n", "!!python/object"),
        ("transformers:\n  - type: !!python/name:os.system ''\n", "!!python/name:os.system"),
        ("transformers: !!set {a: null}\n", "!!set"),
        ("transformers:\n  - type: !custom verify\n", "!custom"),
    ],
)
def test_unsafe_tags_are_refused(document: str, tag: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(document)
    err = info.value
    assert f"YAML tag `{tag}" in err.message
    assert "not allowed" in err.message
    assert err.line is not None


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_chain(missing)
    assert info.value.source == str(missing)
    assert "config file not found" in str(info.value)
    with pytest.raises(ConfigError, match="config file not found"):
        load_chain(str(missing))


# -- other structural errors ------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "fragment", "position"),
    [
        ("", "empty", (None, None)),
        ("- a\n", "top level must be a mapping", (1, 1)),
        ("transfomers: []\n", "unknown top-level key `transfomers`", (1, 1)),
        ("version: 2\ntransformers: []\n", "unsupported config version 2", (1, 10)),
        ("version: 1\n", "missing `transformers`", (1, 1)),
        ("transformers: {a: 1}\n", "must be a list", (1, 15)),
        ("transformers:\n  - 3\n", "each transformer is", (2, 5)),
        ("transformers:\n  - suffix: [1]\n", "options of `suffix` must be a mapping", (2, 13)),
        ("transformers:\n  - typ: suffix\n    times: 2\n", "needs `type: NAME`", (2, 5)),
        ("transformers:\n  - type: [suffix]\n", "`type` must be a transformer name", (2, 11)),
        ("transformers:\n  - type: suffix\n    type: suffix\n", "duplicate key `type`", (3, 5)),
        ("transformers:\n  - {1: x}\n", "mapping keys must be names", (2, 6)),
        ("a: &x [*x]\ntransformers: []\n", "refers to itself", (1, 4)),
    ],
)
def test_structural_errors_are_pointed(
    registry: Registry, document: str, fragment: str, position: tuple[int | None, int | None]
) -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(document, registry=registry)
    assert fragment in info.value.message
    assert (info.value.line, info.value.column) == position


def test_typo_of_type_key_is_suggested(registry: Registry) -> None:
    with pytest.raises(ConfigError) as info:
        load_chain("transformers:\n  - typ: suffix\n    times: 2\n", registry=registry)
    assert info.value.suggestion == "type"


def test_constructor_failure_is_a_config_error(registry: Registry) -> None:
    def broken(**_: object) -> StreamTransformer:
        raise ValueError("needs a licence key")

    registry.register(TransformerSpec("broken", broken))
    with pytest.raises(ConfigError, match="`broken` could not be created: ValueError: needs a"):
        load_chain("transformers:\n  - broken\n", registry=registry)


def test_factory_must_return_a_stage(registry: Registry) -> None:
    registry.register(TransformerSpec("not_a_stage", lambda: "nope"))  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match="returned str, not a stage"):
        load_chain("transformers: [not_a_stage]", registry=registry)


# -- import references -------------------------------------------------------------------


REFERENCE = "agui_pipes._pipeline.transformer:StreamTransformer"


def test_import_references_are_refused_by_default(registry: Registry) -> None:
    with pytest.raises(ConfigError, match="allow_imports=True") as info:
        load_chain(f"transformers:\n  - type: {REFERENCE}\n", registry=registry)
    assert (info.value.line, info.value.column) == (2, 11)


def test_import_references_when_allowed(registry: Registry) -> None:
    factory = load_chain(
        f"transformers:\n  - type: {REFERENCE}\n  - suffix\n",
        registry=registry,
        allow_imports=True,
    )
    chain = factory()
    assert type(chain.stages[0]) is StreamTransformer
    assert deltas(chain) == ["a!", "b!"]


def test_bad_import_reference_is_pointed(registry: Registry) -> None:
    with pytest.raises(ConfigError, match="cannot use `no_such_module_xyz:Thing`"):
        load_chain(
            "transformers:\n  - type: no_such_module_xyz:Thing\n",
            registry=registry,
            allow_imports=True,
        )


def test_a_missing_path_without_a_yaml_suffix_is_explained() -> None:
    with pytest.raises(ConfigError, match="if it is a file path, no such file exists"):
        load_chain("configs/prod-chain")


def test_load_chain_rejects_other_source_types() -> None:
    with pytest.raises(TypeError, match="path, YAML/JSON text or a mapping"):
        load_chain(42)  # type: ignore[arg-type]
