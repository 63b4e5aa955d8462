"""The caps on chain declarations: size, nesting, values, stages — ConfigError, never a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agui_pipes.config import (
    MAX_CHAIN_BYTES,
    MAX_CHAIN_DEPTH,
    MAX_CHAIN_NODES,
    MAX_CHAIN_STAGES,
    ConfigError,
    _bounds,
    load_chain,
)


def nested(levels: int) -> str:
    """A chain whose `verify` entry nests lists to a total depth of ``levels``."""
    # The top mapping, the transformers list and the entry mapping are 3 levels.
    inner = "[" * (levels - 3) + "]" * (levels - 3)
    return f"transformers: [{{type: verify, x: {inner}}}]\n"


def test_depth_up_to_the_cap_is_not_refused_for_depth() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(nested(MAX_CHAIN_DEPTH))
    assert "MAX_CHAIN_DEPTH" not in str(info.value)  # refused for the unknown option
    assert "unknown option `x`" in str(info.value)


def test_one_level_past_the_cap_is_refused_where_it_starts() -> None:
    with pytest.raises(ConfigError) as info:
        load_chain(nested(MAX_CHAIN_DEPTH + 1))
    assert "MAX_CHAIN_DEPTH" in str(info.value)
    error = info.value
    # The bracket that opens the first level past the cap (1-based column).
    prefix = len("transformers: [{type: verify, x: ")
    assert (error.line, error.column) == (1, prefix + (MAX_CHAIN_DEPTH - 3) + 1)


@pytest.mark.parametrize("levels", [MAX_CHAIN_DEPTH + 1, 50_000])
def test_deep_text_is_a_config_error_not_a_recursion_error(levels: int) -> None:
    with pytest.raises(ConfigError, match="MAX_CHAIN_DEPTH"):
        load_chain("transformers: " + "[" * levels + "]" * levels)


@pytest.mark.parametrize("prescan", ["pure-python", "skipped"])
def test_the_caps_hold_without_libyaml_and_without_the_prescan(
    monkeypatch: pytest.MonkeyPatch, prescan: str
) -> None:
    # The pre-scan uses libyaml when PyYAML has it; without it, or when it gives
    # up (malformed YAML), composing still stops at the cap.
    if prescan == "pure-python":
        monkeypatch.setattr(_bounds, "_FASTEST_LOADER", yaml.SafeLoader)
    else:
        monkeypatch.setattr("agui_pipes.config._source.check_shape", lambda text, source: None)
    with pytest.raises(ConfigError, match="MAX_CHAIN_DEPTH"):
        load_chain("transformers: " + "[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError, match="MAX_CHAIN_NODES"):
        load_chain("transformers: [verify, {deny: [" + ",".join(["a"] * MAX_CHAIN_NODES) + "]}]")


def test_a_deep_mapping_built_in_code_is_a_config_error() -> None:
    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(5000):
        cursor["a"] = {}
        cursor = cursor["a"]
    with pytest.raises(ConfigError, match="MAX_CHAIN_DEPTH"):
        load_chain({"transformers": [{"type": "verify", "x": deep}]})


@pytest.mark.parametrize("style", ["flow", "block", "mapping"])
def test_too_many_stages_is_refused_naming_the_cap(style: str) -> None:
    count = MAX_CHAIN_STAGES + 1
    source: Any
    if style == "flow":
        source = "transformers: [" + ",".join(["expand_chunks"] * count) + "]\n"
    elif style == "block":
        source = "transformers:\n" + "- expand_chunks\n" * count
    else:
        source = {"transformers": ["expand_chunks"] * count}
    with pytest.raises(ConfigError, match="MAX_CHAIN_STAGES") as info:
        load_chain(source)
    assert info.value.key == "transformers"
    if style == "block":
        assert info.value.line == 1 + count  # the first entry past the cap


def test_the_stage_cap_itself_loads() -> None:
    chain = load_chain({"transformers": ["expand_chunks"] * MAX_CHAIN_STAGES})
    assert len(chain) == MAX_CHAIN_STAGES


def test_a_nested_list_named_transformers_is_not_the_stage_list() -> None:
    deny = ",".join(f"t{i}" for i in range(MAX_CHAIN_STAGES + 1))
    text = f"transformers:\n  - filter_tool_calls: {{transformers: [{deny}]}}\n"
    with pytest.raises(ConfigError) as info:
        load_chain(text)
    assert "MAX_CHAIN_STAGES" not in str(info.value)


def test_too_large_text_and_file_are_refused_before_parsing(tmp_path: Path) -> None:
    text = "version: 1\ntransformers: []\n# " + "é" * (MAX_CHAIN_BYTES // 2) + "\n"
    assert len(text) < MAX_CHAIN_BYTES < len(text.encode())  # the cap counts bytes
    with pytest.raises(ConfigError, match="MAX_CHAIN_BYTES"):
        load_chain(text)
    path = tmp_path / "big.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="MAX_CHAIN_BYTES") as info:
        load_chain(path)
    assert info.value.source == str(path)


def test_a_file_just_under_the_cap_loads_with_its_newlines(tmp_path: Path) -> None:
    path = tmp_path / "crlf.yaml"
    body = b"version: 1\r\ntransformers:\r\n  - expand_chunks\r\n"
    path.write_bytes(body + b"#" * (MAX_CHAIN_BYTES - len(body)))
    assert len(load_chain(path)) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"version: 1\r\ntransformers:\r\n  - expand_chunkz\r\n")
    with pytest.raises(ConfigError) as info:
        load_chain(bad)
    assert (info.value.line, info.value.column) == (3, 5)
