"""Joining a run mid-way: the join head plus the tail fold to the whole run."""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent, RunStartedEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import Consumer, RunJoin
from agui_pipes.testing import strategies


def _join_stream(events: list[BaseEvent], cut: int, **seed: Any) -> list[BaseEvent]:
    join = RunJoin(**seed)
    for event in events[:cut]:
        join.feed(event)
    return [*join.head(), *events[cut:]]


def _accepted(events: list[BaseEvent], **seed: Any) -> Any:
    consumer = Consumer(**seed)
    for event in events:
        consumer.push(event)
    return consumer.finish()


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(run=strategies.runs(), data=st.data())
def test_a_join_at_any_point_folds_to_the_whole_run(
    run: list[BaseEvent], data: st.DataObject
) -> None:
    whole = _accepted(run)
    cut = data.draw(st.integers(1, len(run)), label="cut")
    joined = _join_stream(run, cut)
    assert isinstance(joined[0], RunStartedEvent)
    result = _accepted(joined)  # a cold consumer accepts the join stream
    assert result.messages == whole.messages
    assert result.state == whole.state
    assert result.outcome == whole.outcome


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(run=strategies.runs())
def test_every_cut_of_one_run_joins(run: list[BaseEvent]) -> None:
    whole = _accepted(run)
    for cut in range(1, len(run) + 1):
        result = _accepted(_join_stream(run, cut))
        assert (result.messages, result.state) == (whole.messages, whole.state), cut


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(runs=st.lists(strategies.runs(), min_size=20, max_size=20))
def test_the_reference_client_accepts_every_join_and_ends_the_same(
    ts_oracle: Any, runs: list[list[BaseEvent]]
) -> None:
    cases: list[list[BaseEvent]] = []
    owners: list[int] = []
    for index, run in enumerate(runs):
        cases.append(run)
        owners.append(index)
        for cut in range(1, len(run) + 1):
            cases.append(_join_stream(run, cut))
            owners.append(index)
    results = ts_oracle(cases)
    whole = {}
    for owner, case, result in zip(owners, cases, results, strict=True):
        if owner not in whole:
            whole[owner] = result
            continue
        assert result["outcome"] == whole[owner]["outcome"], (result["error"], case)
        assert result["messages"] == whole[owner]["messages"]
        assert result["state"] == whole[owner]["state"]
