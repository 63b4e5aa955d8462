"""The stream strategies generate valid streams — proven against the official TS client.

The node test batches a few hundred generated streams into a handful of
``oracle.mjs`` invocations and requires zero rejections and zero warnings, and
that every message / tool call reassembles exactly the deltas the generator
meant for it (which checks the chunk lane reasoning, not just acceptance).
The pure-Python properties are fast sanity checks of the same promises.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

import jsonpatch
import pytest
from ag_ui.core import BaseEvent, EventType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes.events import EVENT_CLASS_BY_TYPE, attribution
from agui_pipes.testing import run_events
from agui_pipes.testing._choices import Choices
from agui_pipes.testing._streamgen import StreamConfig, simulate_stream_with_expectations
from agui_pipes.testing.strategies import (
    expanded_streams,
    json_patches,
    json_values,
    reasoning_spans,
    runs,
    streams,
    subagent_scopes,
    text_messages,
    tool_calls,
)
from tests._oracle import OracleResult, to_wire

Oracle = Callable[..., list[OracleResult]]
ET = EventType

_COLLECT = settings(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
_CHUNKS = {ET.TEXT_MESSAGE_CHUNK, ET.TOOL_CALL_CHUNK, ET.REASONING_MESSAGE_CHUNK}


def _collect(strategy: st.SearchStrategy[Any], n: int, *, derandomize: bool = False) -> list[Any]:
    """``n`` examples of ``strategy`` (hypothesis-driven, so sizes and shapes vary).

    ``derandomize`` fixes the examples, for checks about how *often* something is
    generated (those must not depend on the luck of one CI run).
    """
    bucket: list[Any] = []

    @settings(_COLLECT, max_examples=n, derandomize=derandomize)
    @given(strategy)
    def _gather(value: Any) -> None:
        bucket.append(value)

    _gather()
    return bucket


@st.composite
def _with_expectations(draw: st.DrawFn, /, **knobs: Any) -> tuple[list[BaseEvent], dict[str, str]]:
    return simulate_stream_with_expectations(Choices(draw), StreamConfig(**knobs))


_CONTENT_KEYS = {
    "TEXT_MESSAGE_CONTENT": ("text", "messageId"),
    "TOOL_CALL_ARGS": ("tool", "toolCallId"),
    "REASONING_MESSAGE_CONTENT": ("reasoning", "messageId"),
}


def _reassembled(delivered: list[dict[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for event in delivered:
        spec = _CONTENT_KEYS.get(event["type"])
        if spec is not None:
            key = f"{spec[0]}:{event[spec[1]]}"
            out[key] = out.get(key, "") + event["delta"]
    return {k: v for k, v in out.items() if v}


def _results_after_end(delivered: list[dict[str, Any]]) -> bool:
    """Every TOOL_CALL_RESULT answers a call whose (possibly synthetic) END already came."""
    ended: set[str] = set()
    for event in delivered:
        if event["type"] == "RUN_STARTED":
            ended.clear()
        elif event["type"] == "TOOL_CALL_END":
            ended.add(event["toolCallId"])
        elif event["type"] == "TOOL_CALL_RESULT" and event["toolCallId"] not in ended:
            return False
    return True


def _describe(stream: list[BaseEvent], result: OracleResult) -> str:
    lines = "\n".join(str(to_wire(e)) for e in stream)
    return f"error={result['error']!r} warnings={result['warnings']!r}\n{lines}"


# ---------------------------------------------------------------------------
# The official client accepts what the strategies generate


@pytest.mark.node
def test_typescript_client_accepts_generated_streams(ts_oracle: Oracle) -> None:
    with_expectations = [
        *_collect(_with_expectations(max_items=8, max_runs=4), 260),
        *_collect(_with_expectations(max_items=8, reopen=True), 60),
    ]
    others: list[list[BaseEvent]] = [
        *_collect(expanded_streams(), 40),
        *_collect(streams(tool_names=["internal_debug", "internal_trace", "lookup"]), 30),
        *_collect(
            streams(untagged_continuations=False, leading_run_error=True, late_run_error=True),
            30,
        ),
        *_collect(streams(max_subagent_depth=3, max_items=4, outcomes=False), 30),
        *[run_events(f) for f in _collect(text_messages(chunks=True, subagent="sub-x"), 10)],
        *[run_events(f) for f in _collect(tool_calls(["a", "b"], chunks=True), 10)],
        *[run_events(f) for f in _collect(reasoning_spans(), 10)],
        *[run_events(f) for f in _collect(subagent_scopes(), 10)],
    ]
    generated = [events for events, _ in with_expectations] + others
    assert len(generated) >= 400

    results = ts_oracle(generated)

    rejected = [
        (s, r) for s, r in zip(generated, results, strict=True) if r["outcome"] != "completed"
    ]
    warned = [(s, r) for s, r in zip(generated, results, strict=True) if r["warnings"]]
    for failures, what in ((rejected, "rejected"), (warned, "warned about")):
        if failures:
            stream, result = min(failures, key=lambda f: len(f[0]))
            pytest.fail(
                f"the TS client {what} {len(failures)} of {len(generated)} generated streams; "
                f"smallest:\n{_describe(stream, result)}"
            )

    # Every message and tool call reassembles exactly the deltas meant for it: an
    # id-less chunk continuation that landed in the wrong lane would show here.
    for (stream, expected), result in zip(
        with_expectations, results[: len(with_expectations)], strict=True
    ):
        want = {k: v for k, v in expected.items() if v}
        assert _reassembled(result["events"]) == want, _describe(stream, result)

    # Results follow their call's END (chunked calls included) in what apps receive.
    for stream, result in zip(generated, results, strict=True):
        assert _results_after_end(result["events"]), _describe(stream, result)

    # The strategies produce real content, not just empty runs.
    roles = Counter(m["role"] for r in results for m in r["messages"])
    with_text = sum(
        1
        for r in results
        if any(m["role"] == "assistant" and m.get("content") for m in r["messages"])
    )
    assert with_text >= len(results) // 4, roles
    for role in ("assistant", "tool", "user", "reasoning", "activity"):
        assert roles[role] > 0, roles
    assert any(m.get("toolCalls") for r in results for m in r["messages"])
    assert any(m.get("subagentRunId") for r in results for m in r["messages"])
    assert sum(1 for r in results if r["state"] not in ({}, None)) >= 20


# ---------------------------------------------------------------------------
# Pure-Python sanity properties


def _runs_of(events: list[BaseEvent]) -> list[list[BaseEvent]]:
    """Split a stream into runs; assert the run-level grammar on the way."""
    out: list[list[BaseEvent]] = []
    current: list[BaseEvent] | None = None
    for e in events:
        if e.type == ET.RUN_STARTED:
            assert current is None, "RUN_STARTED while a run is active"
            current = [e]
        else:
            assert current is not None, f"{e.type.value} outside a run"
            current.append(e)
            if e.type in (ET.RUN_FINISHED, ET.RUN_ERROR):
                out.append(current)
                current = None
    assert current is None, "stream ends with a run still open"
    return out


@settings(max_examples=150, deadline=None)
@given(streams(max_runs=4))
def test_streams_start_with_run_started_and_terminate_every_run(events: list[BaseEvent]) -> None:
    assert events[0].type == ET.RUN_STARTED if events else True
    runs_ = _runs_of(events)
    assert len({r[0].run_id for r in runs_}) == len(runs_)  # type: ignore[attr-defined]


def _check_expanded_run(run_events: list[BaseEvent]) -> None:
    """Open/close discipline and first-writer-wins ownership for one chunk-free run."""
    opened: dict[tuple[str, str], str | None] = {}  # (kind, id) -> owner, while open
    owners: dict[tuple[str, str], str | None] = {}
    steps: set[tuple[str | None, str]] = set()
    subagents: set[str] = set()
    pairs = {
        ET.TEXT_MESSAGE_START: ("text", "open"),
        ET.TEXT_MESSAGE_CONTENT: ("text", "cont"),
        ET.TEXT_MESSAGE_END: ("text", "close"),
        ET.TOOL_CALL_START: ("tool", "open"),
        ET.TOOL_CALL_ARGS: ("tool", "cont"),
        ET.TOOL_CALL_END: ("tool", "close"),
        ET.REASONING_START: ("span", "open"),
        ET.REASONING_END: ("span", "close"),
        ET.REASONING_MESSAGE_START: ("reasoning", "open"),
        ET.REASONING_MESSAGE_CONTENT: ("reasoning", "cont"),
        ET.REASONING_MESSAGE_END: ("reasoning", "close"),
    }
    for e in run_events:
        tag = attribution(e)
        if e.type in pairs:
            kind, action = pairs[e.type]
            key = (kind, getattr(e, "tool_call_id", None) or e.message_id)  # type: ignore[attr-defined]
            if action == "open":
                assert key not in opened, f"{e.type.value} reopens open {key}"
                owner_key = ("reasoning" if kind == "span" else kind, key[1])
                parent: str = getattr(e, "parent_message_id", None) or ""
                if tag is None and kind == "tool" and ("text", parent) in owners:
                    tag = owners[("text", parent)]  # an untagged call inherits its message's
                if owner_key not in owners:
                    owners[owner_key] = tag
                elif tag is not None:
                    assert owners[owner_key] == tag, f"{e.type.value} re-owns {key}"
                opened[key] = tag
            else:
                assert key in opened, f"{e.type.value} for {key} which is not open"
                owner = owners[("reasoning" if kind == "span" else kind, key[1])]
                assert tag is None or tag == owner, f"{e.type.value} tagged {tag}, owner {owner}"
                if action == "close":
                    del opened[key]
        elif e.type == ET.STEP_STARTED:
            assert (tag, e.step_name) not in steps  # type: ignore[attr-defined]
            steps.add((tag, e.step_name))  # type: ignore[attr-defined]
        elif e.type == ET.STEP_FINISHED:
            steps.remove((tag, e.step_name))  # type: ignore[attr-defined]
        elif e.type == ET.SUBAGENT_STARTED:
            subagents.add(e.subagent_run_id)  # type: ignore[attr-defined]
        elif e.type in (ET.SUBAGENT_FINISHED, ET.SUBAGENT_ERROR):
            subagents.remove(e.subagent_run_id)  # type: ignore[attr-defined]
        elif e.type == ET.RUN_FINISHED:
            assert not opened and not steps and not subagents, (opened, steps, subagents)


@settings(max_examples=150, deadline=None)
@given(expanded_streams(max_items=8))
def test_expanded_streams_have_no_chunks_and_balanced_lifecycles(events: list[BaseEvent]) -> None:
    assert not any(e.type in _CHUNKS for e in events)
    for one_run in _runs_of(events):
        _check_expanded_run(one_run)


@settings(max_examples=100, deadline=None)
@given(streams(tool_names=["internal_debug", "lookup"]))
def test_tool_names_come_from_the_given_list(events: list[BaseEvent]) -> None:
    for e in events:
        name = getattr(e, "tool_call_name", None)
        if e.type in (ET.TOOL_CALL_START, ET.TOOL_CALL_CHUNK) and name is not None:
            assert name in ("internal_debug", "lookup")


@settings(max_examples=100, deadline=None)
@given(streams())
def test_ids_are_unique_and_events_round_trip_the_wire(events: list[BaseEvent]) -> None:
    starts = [e.message_id for e in events if e.type == ET.TEXT_MESSAGE_START]  # type: ignore[attr-defined]
    assert len(starts) == len(set(starts))
    for e in events:
        wire = to_wire(e)
        again = EVENT_CLASS_BY_TYPE[e.type].model_validate(wire)
        assert to_wire(again) == wire


@settings(max_examples=100, deadline=None)
@given(streams(max_items=8, chunks=False))
def test_state_deltas_apply_to_the_state_at_that_point(events: list[BaseEvent]) -> None:
    state: Any = {}
    for e in events:
        if e.type == ET.STATE_SNAPSHOT:
            state = copy.deepcopy(e.snapshot)  # type: ignore[attr-defined]
        elif e.type == ET.STATE_DELTA:
            ops = to_wire(e)["delta"]
            state = jsonpatch.apply_patch(state, ops, in_place=False)  # raises if it does not apply


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_json_patches_apply_and_leave_the_document_alone(data: st.DataObject) -> None:
    document = data.draw(json_values(3).filter(lambda v: isinstance(v, (dict, list))))
    before = copy.deepcopy(document)
    patch, result = data.draw(json_patches(document))
    assert patch
    assert jsonpatch.apply_patch(document, patch, in_place=False) == result
    assert document == before


@settings(max_examples=50, deadline=None)
@given(text_messages(chunks=False), tool_calls(["only"]))
def test_fragments_are_single_items(text: list[BaseEvent], call: list[BaseEvent]) -> None:
    assert text[0].type == ET.TEXT_MESSAGE_START and text[-1].type == ET.TEXT_MESSAGE_END
    assert call[0].type == ET.TOOL_CALL_START
    assert call[0].tool_call_name == "only"  # type: ignore[attr-defined]


@settings(max_examples=30, deadline=None)
@given(runs())
def test_runs_draws_exactly_one_run(events: list[BaseEvent]) -> None:
    assert len(_runs_of(events)) == 1


def test_bad_knobs_are_explained() -> None:
    with pytest.raises(ValueError, match="min_runs <= max_runs"):
        streams(min_runs=3, max_runs=1)
    with pytest.raises(TypeError, match="not the string"):
        streams(tool_names="search")
    with pytest.raises(ValueError, match="non-empty"):
        streams(tool_names=[])
    with pytest.raises(ValueError, match="exactly one run"):
        runs(max_runs=2)
    with pytest.raises(ValueError, match="never contains chunks"):
        expanded_streams(chunks=True)
    with pytest.raises(TypeError, match="object or array"):
        json_patches(3)  # type: ignore[arg-type]


def test_reopen_knob_reuses_closed_ids_and_default_does_not() -> None:
    def reopened(events: list[BaseEvent]) -> int:
        starts = [
            getattr(e, "message_id", None) or getattr(e, "tool_call_id", None)
            for e in events
            if e.type in (ET.TEXT_MESSAGE_START, ET.TOOL_CALL_START)
        ]
        return len(starts) - len(set(starts))

    with_reopen = _collect(streams(reopen=True, max_items=8), 200, derandomize=True)
    assert sum(reopened(s) for s in with_reopen) > 0
    assert sum(reopened(s) for s in _collect(streams(max_items=8), 150)) == 0
