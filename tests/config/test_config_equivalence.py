"""The same chain built in code and loaded from YAML gives identical output.

Run over generated streams (agui_pipes.testing.strategies): the YAML layer must
add nothing and lose nothing — same events, byte for byte on the wire, and the
same failure when a stage rejects the stream.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ag_ui.core import BaseEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import Stage, TransformerChain
from agui_pipes.codecs import encode_json
from agui_pipes.config import load_chain
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import (
    CoalesceDeltas,
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    KeepEvents,
    Redact,
    StateDiff,
    StripRawEvents,
    SubagentVisibility,
    ToolResultToState,
    Verify,
)

Case = tuple[str, str, Callable[[], TransformerChain]]


def chain(*stages: Stage) -> TransformerChain:
    return TransformerChain(stages)


CASES: list[Case] = [
    (
        "normalise-and-check",
        """
        version: 1
        transformers:
          - expand_chunks
          - type: verify
            profile: producer
            on_violation: warn
        """,
        lambda: chain(ExpandChunks(), Verify(profile="producer", on_violation="warn")),
    ),
    (
        "strict-producer",
        "transformers:\n  - expand_chunks\n  - verify: {profile: producer}\n",
        lambda: chain(ExpandChunks(), Verify(profile="producer")),
    ),
    (
        "hide-internal-tools",
        'transformers:\n  - filter_tool_calls: {deny: ["internal_*"]}\n',
        lambda: chain(FilterToolCalls.deny(["internal_*"])),
    ),
    (
        "allow-list",
        "transformers:\n  - type: filter_tool_calls\n    allow: [search, get_weather]\n",
        lambda: chain(FilterToolCalls.allow(["search", "get_weather"])),
    ),
    (
        "results-to-state",
        """
        transformers:
          - expand_chunks
          - tool_result_to_state: {tool: search, mode: at, pointer: /results/latest}
          - tool_result_to_state: {tool: get_weather, replace_result: true}
          - type: tool_result_to_state
            tool: write_file
            mode: delta
        """,
        lambda: chain(
            ExpandChunks(),
            ToolResultToState.at("search", "/results/latest"),
            ToolResultToState.snapshot("get_weather").replacing(),
            ToolResultToState.delta("write_file"),
        ),
    ),
    (
        "slim-client",
        """
        transformers:
          - strip_raw_events
          - drop_events: {families: [reasoning, activity]}
          - keep_events: {families: [text, tool_call, state, subagent, step]}
          - state_diff
        """,
        lambda: chain(
            StripRawEvents(),
            DropEvents(["reasoning", "activity"]),
            KeepEvents(["text", "tool_call", "state", "subagent", "step"]),
            StateDiff(),
        ),
    ),
    (
        "pre-subagent-client",
        "transformers:\n  - subagent_visibility: {mode: inline}\n",
        lambda: chain(SubagentVisibility.inline()),
    ),
    (
        "parent-only",
        "transformers:\n  - type: subagent_visibility\n    mode: hidden\n",
        lambda: chain(SubagentVisibility.hidden()),
    ),
    (
        "gateway",
        r"""
        transformers:
          - expand_chunks
          - strip_raw_events
          - filter_tool_calls: {deny: ["internal_*"]}
          - type: redact
            patterns: ["[0-9]{3,}", 'secret\w*']
            replacement: "#"
            hold_back: 8
          - type: coalesce_deltas
            max_chars: 12
          - subagent_visibility: {mode: attributed}
          - state_diff
          - verify: {on_violation: run_error}
        """,
        lambda: chain(
            ExpandChunks(),
            StripRawEvents(),
            FilterToolCalls.deny(["internal_*"]),
            Redact(["[0-9]{3,}", r"secret\w*"], replacement="#", hold_back=8),
            CoalesceDeltas(max_chars=12),
            SubagentVisibility.attributed(),
            StateDiff(),
            Verify(on_violation="run_error"),
        ),
    ),
    (
        "run-error-policy",
        "transformers: [{verify: {on_violation: run_error, allow_truncated: true}}]",
        lambda: chain(Verify(on_violation="run_error", allow_truncated=True)),
    ),
]

LOADED = {name: load_chain(text) for name, text, _ in CASES}


def outcome(make: Callable[[], TransformerChain], events: list[BaseEvent]) -> object:
    """The wire bytes of the output, or the failure (type and message)."""
    try:
        return [encode_json(e) for e in make().apply_sync(events)]
    except Exception as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_case_names_the_same_stages(case: Case) -> None:
    name, _, build = case
    assert [type(s) for s in LOADED[name]().stages] == [type(s) for s in build().stages]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams(), case=st.sampled_from(CASES))
def test_code_and_yaml_chains_agree_on_generated_streams(
    events: list[BaseEvent], case: Case
) -> None:
    name, _, build = case
    assert outcome(LOADED[name], events) == outcome(build, events)


@settings(max_examples=50, deadline=None)
@given(events=streams(), cut=st.integers(min_value=1, max_value=40))
def test_agree_on_rejected_streams_too(events: list[BaseEvent], cut: int) -> None:
    # Truncated streams make the strict producer profile reject: same failure both ways.
    truncated = events[: max(1, len(events) - cut)]
    name, _, build = CASES[1]
    assert outcome(LOADED[name], truncated) == outcome(build, truncated)


def test_event_families_in_the_options_match_the_stage() -> None:
    from typing import get_args

    from agui_pipes.config.options import EventFamily
    from agui_pipes.transformers.drop_events import FAMILIES

    assert set(get_args(EventFamily)) == set(FAMILIES)


def test_timestamp_from_yaml_stamps_events() -> None:
    from agui_pipes.testing import run_events, text

    out = load_chain("transformers: [timestamp]")().apply_sync(run_events(text("m1", "hi")))
    assert all(isinstance(e.timestamp, int) and e.timestamp > 0 for e in out)
