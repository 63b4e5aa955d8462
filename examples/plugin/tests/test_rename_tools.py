"""Unit tests of the example plugin, written with agui_pipes.testing."""

from __future__ import annotations

import pytest
from agui_pipes_rename_tools import RenameTools
from pydantic import ValidationError

from agui_pipes.config import Registry, TransformerSpec, load_chain
from agui_pipes.testing import assert_events_equal, run_events, run_transformer, text, tool_call


def test_renames_only_the_mapped_tools() -> None:
    events = run_events(
        text("m1", "Looking it up")
        + tool_call("c1", "pg_search_v2", '{"q": "x"}', result="[]")
        + tool_call("c2", "weather", "{}", result="sunny")
    )
    expected = run_events(
        text("m1", "Looking it up")
        + tool_call("c1", "search", '{"q": "x"}', result="[]")
        + tool_call("c2", "weather", "{}", result="sunny")
    )
    assert_events_equal(run_transformer(RenameTools({"pg_search_v2": "search"}), events), expected)


def test_options_are_validated() -> None:
    with pytest.raises(ValidationError, match="at least one"):
        RenameTools.Options(names={})


def test_declared_in_yaml() -> None:
    # Without installing the package: register the class the way its entry point would.
    registry = Registry(plugins=False)
    registry.register(TransformerSpec("rename_tools", RenameTools, RenameTools.Options))
    make_chain = load_chain(
        "transformers:\n  - rename_tools: {names: {pg_search_v2: search}}\n", registry=registry
    )
    out = make_chain().apply_sync(run_events(tool_call("c1", "pg_search_v2", "{}")))
    assert [getattr(e, "tool_call_name", None) for e in out][1] == "search"
