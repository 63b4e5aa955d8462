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
from agui_pipes.transformers import ExpandChunks, Verify

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
