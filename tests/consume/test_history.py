"""thread_history(): all of a thread's runs as one short valid run.

Properties on generated multi-run threads: the history folds to the same
messages and state as the runs did, and passes the consumer verifier; then
the documented choices (run id, no state snapshot for a stateless thread, a
failed run's messages kept — ag-ui #2408 —, a pending interrupt carried).
The official TS client's verdict on history runs is in
tests/transformers/test_compact_ts.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallStartEvent,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import Consumer, RunResult, TransformerChain, fold, thread_history
from agui_pipes.codecs import encode_json
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import ExpandChunks

_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def consumed(events: list[BaseEvent]) -> RunResult:
    consumer = Consumer()
    consumer.push_many(events)
    return consumer.finish()


def split_runs(events: list[BaseEvent]) -> list[list[BaseEvent]]:
    """A stream of several runs as the event log stores it: one list per run."""
    runs: list[list[BaseEvent]] = []
    for event in events:
        if event.type is EventType.RUN_STARTED or not runs:
            runs.append([])
        runs[-1].append(event)
    return runs


@_SETTINGS
@given(
    events=streams(min_runs=1, max_runs=4, reopen=True, leading_run_error=True, late_run_error=True)
)
def test_history_folds_to_the_messages_and_state_of_all_runs(events: list[BaseEvent]) -> None:
    history = thread_history("thread-1", split_runs(events))
    expected = consumed(events)
    got = consumed(history)  # one valid run: the consumer verifier accepts it
    assert got.messages == expected.messages
    assert got.state == expected.state
    assert fold(history).messages == expected.messages
    assert [e.type for e in history][:2] == [EventType.RUN_STARTED, EventType.MESSAGES_SNAPSHOT]
    assert history[-1].type is EventType.RUN_FINISHED
    assert got.outcome == ("interrupt" if expected.outcome == "interrupt" else "success")
    assert got.interrupts == (expected.interrupts if expected.outcome == "interrupt" else [])


@_SETTINGS
@given(events=streams(min_runs=2, max_runs=4), data=st.data())
def test_cut_runs_keep_what_they_produced(events: list[BaseEvent], data: st.DataObject) -> None:
    # A server that died mid-run leaves a run with no terminal event in the log.
    runs = split_runs(events)
    for i in data.draw(st.sets(st.integers(0, len(runs) - 1))):
        runs[i] = runs[i][: data.draw(st.integers(1, len(runs[i])))]
    history = thread_history("thread-1", runs)
    expanded = [e for run in runs for e in TransformerChain([ExpandChunks()]).apply_sync(run)]
    expected = fold(expanded)
    got = consumed(history)
    assert got.messages == expected.messages
    assert got.state == expected.state


def _run(run_id: str, *body: BaseEvent, error: bool = False, thread: str = "t") -> list[BaseEvent]:
    end: BaseEvent = (
        RunErrorEvent(message="boom")
        if error
        else RunFinishedEvent(thread_id=thread, run_id=run_id)
    )
    return [RunStartedEvent(thread_id=thread, run_id=run_id), *body, end]


def _say(mid: str, text: str, *, close: bool = True, role: Any = "assistant") -> list[BaseEvent]:
    events: list[BaseEvent] = [
        TextMessageStartEvent(message_id=mid, role=role),
        TextMessageContentEvent(message_id=mid, delta=text),
    ]
    return [*events, TextMessageEndEvent(message_id=mid)] if close else events


def test_the_history_run_is_named_after_the_last_run() -> None:
    history = thread_history("t", [_run("r1"), _run("r2")])
    assert history[0].run_id == "history:r2"  # type: ignore[attr-defined]
    assert history[-1].run_id == "history:r2"  # type: ignore[attr-defined]
    assert thread_history("t", [])[0].run_id == "history"  # type: ignore[attr-defined]
    assert thread_history("t", [_run("r1")], run_id="x")[0].run_id == "x"  # type: ignore[attr-defined]


def test_an_empty_thread_is_an_empty_valid_run() -> None:
    history = thread_history("t", [])
    assert [e.type.value for e in history] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert consumed(history).messages == []


def test_no_state_snapshot_for_a_thread_that_never_touched_its_state() -> None:
    stateless = thread_history("t", [_run("r1", *_say("m1", "hi"))])
    assert EventType.STATE_SNAPSHOT not in [e.type for e in stateless]
    stateful = thread_history("t", [_run("r1", StateSnapshotEvent(snapshot={}))])
    assert stateful[2] == StateSnapshotEvent(snapshot={})


def test_a_failed_run_keeps_its_messages_and_later_runs_follow() -> None:
    # ag-ui #2408: a replay holding a failed run hydrated empty. The history is one
    # run, and the failed run's messages are in it, a half-written one included.
    runs = [
        _run("r1", *_say("u1", "hello", role="user"), *_say("a1", "hi")),
        _run("r2", *_say("u2", "go", role="user"), *_say("a2", "half", close=False), error=True),
        _run("r3", *_say("u3", "again", role="user"), *_say("a3", "done")),
    ]
    messages = consumed(thread_history("t", runs)).messages
    assert [(m["id"], m.get("content")) for m in messages] == [
        ("u1", "hello"),
        ("a1", "hi"),
        ("u2", "go"),
        ("a2", "half"),
        ("u3", "again"),
        ("a3", "done"),
    ]


def test_a_cut_run_keeps_what_it_produced() -> None:
    cut = [
        RunStartedEvent(thread_id="t", run_id="r1"),
        *_say("a1", "par", close=False),
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="search"),
    ]
    result = consumed(thread_history("t", [cut, _run("r2")]))
    assert result.messages[0]["content"] == "par"
    assert [c["id"] for c in result.tool_calls] == ["c1"]


def test_chunks_are_expanded_per_run() -> None:
    run = _run(
        "r1", TextMessageChunkEvent(message_id="m1", delta="a"), TextMessageChunkEvent(delta="b")
    )
    assert consumed(thread_history("t", [run])).messages == [
        {"id": "m1", "role": "assistant", "content": "ab"}
    ]


def test_a_run_of_another_thread_is_refused() -> None:
    with pytest.raises(ValueError, match="run #1 \\('r2'\\) belongs to thread 'other'"):
        thread_history("t", [_run("r1"), _run("r2", thread="other")])


def test_stored_wire_forms_are_decoded() -> None:
    # What an event log holds: the encoded events (bytes), or parsed JSON objects.
    run = _run("r1", *_say("m1", "hi"), StateSnapshotEvent(snapshot={"n": 1}))
    as_bytes = [encode_json(e) for e in run]
    as_dicts = [json.loads(b) for b in as_bytes] + [{"type": "SOME_FUTURE_EVENT"}]
    expected = thread_history("t", [run])
    assert thread_history("t", [as_bytes]) == expected
    assert thread_history("t", [as_dicts]) == expected


def test_items_that_are_neither_events_nor_wire_forms_are_refused() -> None:
    with pytest.raises(TypeError, match="run #0, item #1 is a int"):
        thread_history("t", [[RunStartedEvent(thread_id="t", run_id="r"), 42]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="run #0 does not decode"):
        thread_history("t", [[b'{"type": "RUN_STARTED"}']])


# -- snapshots: the open fold stated and restored ----------------------------------


def _pages(history: Any) -> list[list[dict[str, Any]]]:
    pages = []
    for limit in (1, 2, 100):
        page = history.page(limit=limit)
        pages.append([json.loads(encode_json(e)) for e in page.events])
    return pages


@_SETTINGS
@given(
    events=streams(
        min_runs=1, max_runs=5, reopen=True, leading_run_error=True, late_run_error=True
    ),
    data=st.data(),
)
def test_a_restored_snapshot_folds_on_as_the_fold_it_was(
    events: list[BaseEvent], data: st.DataObject
) -> None:
    from agui_pipes._consumer.history import HistoryFold

    runs = split_runs(events)
    # Cut some runs, as a server that died mid-run leaves them.
    for i in data.draw(st.sets(st.integers(0, len(runs) - 1), max_size=2)):
        runs[i] = runs[i][: data.draw(st.integers(1, len(runs[i])))]
    split = data.draw(st.integers(0, len(runs)))
    whole = HistoryFold("thread-1")
    for i, run in enumerate(runs):
        whole.add(f"r{i}", run)
    part = HistoryFold("thread-1")
    for i, run in enumerate(runs[:split]):
        part.add(f"r{i}", run)
    restored = HistoryFold.restore("thread-1", part.snapshot())
    for i, run in enumerate(runs[split:], start=split):
        restored.add(f"r{i}", run)
    assert restored.keys == whole.keys
    assert restored.message_ids() == whole.message_ids()
    assert [json.loads(encode_json(e)) for e in restored.events()] == [
        json.loads(encode_json(e)) for e in whole.events()
    ]
    assert _pages(restored) == _pages(whole)
    if whole.keys:
        middle = whole.keys[len(whole.keys) // 2]
        assert [encode_json(e) for e in restored.page(before=middle, limit=1).events] == [
            encode_json(e) for e in whole.page(before=middle, limit=1).events
        ]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'{"format": "agui_pipes.history/0"}',
        b'{"format": "agui_pipes.history/1", "thread": "other"}',
        b'{"format": "agui_pipes.history/1", "thread": "thread-1", "keys": ["a"],'
        b' "started": [], "introduced": {}, "messages": [], "interrupts": [],'
        b' "touched": false, "lastRun": null, "outcome": null}',
        b'{"format": "agui_pipes.history/1", "thread": "thread-1", "keys": ["a"],'
        b' "started": [null], "introduced": {"m": 5}, "messages": [], "interrupts": [],'
        b' "touched": false, "lastRun": null, "outcome": null}',
        b'{"format": "agui_pipes.history/1", "thread": "thread-1", "keys": [],'
        b' "started": [], "introduced": {}, "messages": [{"role": "user"}], "interrupts": [],'
        b' "touched": false, "lastRun": null, "outcome": null}',
    ],
)
def test_what_is_not_a_snapshot_of_the_thread_is_refused(data: bytes) -> None:
    from agui_pipes._consumer.history import HistoryFold, SnapshotInvalid

    with pytest.raises(SnapshotInvalid):
        HistoryFold.restore("thread-1", data)
