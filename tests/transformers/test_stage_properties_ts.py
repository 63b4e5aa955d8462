"""Stage outputs on generated streams, judged by the official TS client (@ag-ui/client 1.0.0).

* every built-in's output is accepted by the client, which assembles the same
  messages and state from it as our consumer does;
* FilterToolCalls agrees with the official FilterToolCallsMiddleware on the
  streams the middleware covers (no snapshots restating blocked calls, no
  subagents spawned by them — where we deliberately go further; see
  docs/transformers/filter_tool_calls.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ag_ui.core import BaseEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import FilterToolCalls
from tests.transformers._stage_helpers import consumed, through
from tests.transformers.test_stage_properties import STAGES

Oracle = Callable[..., list[dict[str, Any]]]


def _collect(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    bucket: list[Any] = []

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(strategy)
    def _gather(value: Any) -> None:
        bucket.append(value)

    _gather()
    return bucket


def test_every_stage_output_is_accepted_by_the_ts_client(ts_oracle: Oracle) -> None:
    inputs = _collect(streams(), 25)
    cases: list[tuple[str, list[BaseEvent]]] = [
        (name, through(stage, events))
        for name, stage in sorted(STAGES.items())
        for events in inputs
    ]
    results = ts_oracle([{"stream": out} for _, out in cases])
    for (name, out), theirs in zip(cases, results, strict=True):
        assert theirs["outcome"] == "completed", (name, theirs["error"])
        ours = consumed(out)
        assert ours.messages == theirs["messages"], name
        assert ours.state == theirs["state"], name


def test_filter_tool_calls_agrees_with_the_middleware(ts_oracle: Oracle) -> None:
    inputs = _collect(
        streams(
            tool_names=["search", "internal_debug", "write_file"],
            messages_snapshots=False,
            subagents=False,
        ),
        120,
    )
    cases = []
    for events in inputs:
        cases.append({"stream": events, "deny": ["internal_debug"]})
        cases.append({"stream": events, "allow": ["search", "write_file"]})
    results = ts_oracle(cases)
    for case, theirs in zip(cases, results, strict=True):
        mode = "deny" if "deny" in case else "allow"
        stage = FilterToolCalls(**{mode: case[mode]})
        ours = consumed(through(stage, case["stream"]))
        assert theirs["outcome"] == "completed", theirs["error"]
        assert ours.messages == theirs["messages"]
        assert ours.state == theirs["state"]
