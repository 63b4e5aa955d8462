"""The TypeScript oracle harness itself: wire encoding, case validation, verdicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _oracle import OracleResult, run_one, to_wire
from _oracle import _wire_case as wire_case
from ag_ui.core import (
    CustomEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageStartEvent,
)

from agui_pipes.testing import run, text, text_chunks, tool_call

Oracle = Callable[..., list[OracleResult]]


def _delta(*ops: dict[str, Any]) -> StateDeltaEvent:
    return StateDeltaEvent.model_validate({"delta": list(ops)})


def test_to_wire_omits_absent_fields_and_keeps_required_nulls() -> None:
    assert to_wire(TextMessageStartEvent(message_id="m1")) == {
        "type": "TEXT_MESSAGE_START",
        "messageId": "m1",
    }
    assert to_wire(StateSnapshotEvent(snapshot=None)) == {
        "type": "STATE_SNAPSHOT",
        "snapshot": None,
    }
    assert to_wire(CustomEvent(name="n", value=None))["value"] is None
    delta = to_wire(_delta({"op": "add", "path": "/a", "value": None}))
    assert delta["delta"] == [{"op": "add", "path": "/a", "value": None}]


def test_cases_are_validated_before_node_runs() -> None:
    with pytest.raises(ValueError, match="no 'stream' key"):
        wire_case({"events": []}, 3)
    with pytest.raises(ValueError, match="not both"):
        wire_case({"stream": [], "deny": ["a"], "allow": ["b"]}, 0)
    with pytest.raises(TypeError, match="case #2 event #1"):
        wire_case([{"type": "RUN_STARTED"}, 42], 2)
    with pytest.raises(TypeError, match="list of tool names"):
        wire_case({"stream": [], "deny": "internal_x"}, 0)
    assert wire_case(run(), 0)["stream"][0]["type"] == "RUN_STARTED"


def _types(result: OracleResult) -> list[str]:
    return [e["type"] for e in result["events"]]


@pytest.mark.node
def test_verdicts_come_back_in_case_order(ts_oracle: Oracle) -> None:
    good = run(text("m1", "Hel", "lo"))
    bad_first = text("m1", "x")
    unclosed = [*run()[:1], *text("m1", "x")[:2], *run()[1:]]
    results = ts_oracle([good, bad_first, {"stream": unclosed}, good])
    assert [r["outcome"] for r in results] == ["completed", "failed", "failed", "completed"]
    assert results[0]["messages"] == [{"id": "m1", "role": "assistant", "content": "Hello"}]
    assert "First event must be 'RUN_STARTED'" in (results[1]["error"] or "")
    assert "text messages are still active" in (results[2]["error"] or "")
    assert results[0] == results[3]  # a fresh agent per case: nothing leaks between cases


@pytest.mark.node
def test_chunks_are_delivered_expanded(ts_oracle: Oracle) -> None:
    (result,) = ts_oracle([run(text_chunks("m1", "a", "b"))])
    assert result["outcome"] == "completed"
    assert _types(result) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]


@pytest.mark.node
def test_filter_tool_calls_middleware_per_case(ts_oracle: Oracle) -> None:
    stream = run(
        text("m1", "hi")
        + tool_call("c1", "internal_debug", '{"a":1}', parent_message_id="m1")
        + tool_call("c2", "search", '{"q":2}', parent_message_id="m1")
    )
    plain, denied, allowed = ts_oracle(
        [
            stream,
            {"stream": stream, "deny": ["internal_debug"]},
            {"stream": stream, "allow": ["internal_debug"]},
        ]
    )

    def calls(result: OracleResult) -> list[str]:
        return [
            call["function"]["name"]
            for message in result["messages"]
            for call in message.get("toolCalls", [])
        ]

    assert calls(plain) == ["internal_debug", "search"]
    assert calls(denied) == ["search"]
    assert calls(allowed) == ["internal_debug"]


@pytest.mark.node
def test_state_application_and_patch_warnings(ts_oracle: Oracle) -> None:
    ok = run(
        [StateSnapshotEvent(snapshot={"n": 1}), _delta({"op": "replace", "path": "/n", "value": 2})]
    )
    failing = run([_delta({"op": "replace", "path": "/missing", "value": 2})])
    applied, skipped = ts_oracle([ok, failing])
    assert applied["state"] == {"n": 2}
    assert applied["warnings"] == []
    assert skipped["outcome"] == "completed"
    assert skipped["state"] == {}
    assert any("Failed to apply state patch" in w for w in skipped["warnings"])


@pytest.mark.node
def test_run_one_and_empty_batch(ts_oracle: Oracle) -> None:
    assert ts_oracle([]) == []
    result = run_one(run(tool_call("c1", "lookup", "{}", result="ok")))
    assert result["outcome"] == "completed"
    assert [m["role"] for m in result["messages"]] == ["assistant", "tool"]
