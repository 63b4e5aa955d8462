"""compact(s) and thread_history(...) judged by the official TS client (@ag-ui/client 1.0.0).

The client must accept every output and assemble the same messages and state
from it as from the original stream (what our consumer folds from it, which
the differential tests tie to the client).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ag_ui.core import BaseEvent, EventType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import TransformerChain, fold, thread_history
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import ExpandChunks
from agui_pipes.transformers.compact import compact
from tests.transformers._stage_helpers import consumed
from tests.transformers.test_compact import state_bursts

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


def _expanded(run: list[BaseEvent]) -> list[BaseEvent]:
    return TransformerChain([ExpandChunks()]).apply_sync(run)


def _split_runs(events: list[BaseEvent]) -> list[list[BaseEvent]]:
    runs: list[list[BaseEvent]] = []
    for event in events:
        if event.type is EventType.RUN_STARTED or not runs:
            runs.append([])
        runs[-1].append(event)
    return runs


def test_the_ts_client_accepts_compacted_streams_and_history(ts_oracle: Oracle) -> None:
    inputs = _collect(streams(max_runs=4, reopen=True), 120) + _collect(state_bursts(), 60)
    cases: list[tuple[str, list[BaseEvent], list[BaseEvent]]] = []
    for events in inputs:
        cases.append(("compact", events, compact(events)))
        thread = events[0].thread_id if events[0].type is EventType.RUN_STARTED else "thread-1"
        cases.append(("history", events, thread_history(thread, _split_runs(events))))
    # and threads whose runs were cut short (a server died mid-run): every other run
    # loses its second half
    cut_threads = []
    for events in inputs[:60]:
        runs = _split_runs(events)
        cut = [run[: len(run) // 2 or 1] if i % 2 else run for i, run in enumerate(runs)]
        thread = events[0].thread_id if events[0].type is EventType.RUN_STARTED else "thread-1"
        cut_threads.append((cut, thread_history(thread, cut)))
    cut_results = ts_oracle([{"stream": history} for _, history in cut_threads])
    for (cut, _), theirs in zip(cut_threads, cut_results, strict=True):
        assert theirs["outcome"] == "completed", theirs["error"]
        expected = fold([e for run in cut for e in _expanded(run)])
        assert theirs["messages"] == expected.messages
        assert theirs["state"] == expected.state

    results = ts_oracle([{"stream": out} for _, _, out in cases])
    originals = ts_oracle([{"stream": events} for events in inputs])
    for i, ((what, original, _), theirs) in enumerate(zip(cases, results, strict=True)):
        assert theirs["outcome"] == "completed", (what, theirs["error"])
        expected = consumed(original)
        assert theirs["messages"] == expected.messages, what
        assert theirs["state"] == expected.state, what
        # a known-state delta that fails is left out: never more failed patches than before
        assert _failed_patches(theirs) <= _failed_patches(originals[i // 2]), what


def _failed_patches(result: dict[str, Any]) -> int:
    return sum("Failed to apply state patch" in w for w in result["warnings"])
