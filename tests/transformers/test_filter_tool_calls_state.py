"""FilterToolCalls(state_messages=[...]): message lists kept in the state lose removed calls.

``ag-ui-langgraph`` puts the graph state — the LangChain ``messages`` list with
an internal call and its secret result — into STATE_SNAPSHOT; other agents keep
AG-UI / OpenAI-shaped messages there and update them by STATE_DELTA. The client's
state must be the input state with every removed call and result scrubbed.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    StateDeltaEvent,
    StateSnapshotEvent,
    ToolCallResultEvent,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import fold
from agui_pipes._foundation.json_patch import PatchError, apply_patch, clone_json
from agui_pipes.config import ConfigError, load_chain
from agui_pipes.testing import event_lines, run_events, run_started
from agui_pipes.transformers import FilterToolCalls
from tests.transformers._stage_helpers import through, wire

STAGE = FilterToolCalls.deny(["internal_*"], state_messages=["/messages", "/agent/history"])

YAML = """
transformers:
  - type: filter_tool_calls
    deny: ["internal_*"]
    state_messages: ["/messages", "/agent/history"]
"""


def _through(events: list[BaseEvent], path: str) -> list[BaseEvent]:
    if path == "stage":
        return through(STAGE, events)
    return list(load_chain(YAML)().apply_sync(events))


def _langgraph_state() -> dict[str, Any]:
    """What ag-ui-langgraph snapshots: the graph state with LangChain-serialized messages."""
    return {
        "messages": [
            {"type": "human", "id": "h1", "content": "What is my balance?"},
            {
                "type": "ai",
                "id": "ai1",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_int",
                        "name": "internal_ledger",
                        "args": {"acct": "A-1"},
                        "type": "tool_call",
                    },
                    {
                        "id": "call_fx",
                        "name": "fx_rate",
                        "args": {"to": "EUR"},
                        "type": "tool_call",
                    },
                ],
                "invalid_tool_calls": [],
                "additional_kwargs": {
                    "tool_calls": [
                        {
                            "id": "call_int",
                            "type": "function",
                            "function": {"name": "internal_ledger", "arguments": "{}"},
                        },
                        {
                            "id": "call_fx",
                            "type": "function",
                            "function": {"name": "fx_rate", "arguments": "{}"},
                        },
                    ]
                },
            },
            {
                "type": "tool",
                "id": "t1",
                "tool_call_id": "call_int",
                "name": "internal_ledger",
                "content": "balance=1234.56 SECRET-ROUTING-99",
            },
            {
                "type": "tool",
                "id": "t2",
                "tool_call_id": "call_fx",
                "name": "fx_rate",
                "content": "0.92",
            },
            {"type": "ai", "id": "ai2", "content": "About 1136 EUR.", "tool_calls": []},
        ],
        "step": 3,
    }


def _scrubbed_langgraph_state() -> dict[str, Any]:
    state = _langgraph_state()
    ai1 = state["messages"][1]
    ai1["tool_calls"] = ai1["tool_calls"][1:]
    ai1["additional_kwargs"]["tool_calls"] = ai1["additional_kwargs"]["tool_calls"][1:]
    del state["messages"][2]
    return state


@pytest.mark.parametrize("path", ["stage", "yaml"])
def test_langgraph_snapshot_loses_the_internal_call_and_its_result(path: str) -> None:
    out = _through(run_events([StateSnapshotEvent(snapshot=_langgraph_state())]), path)
    assert fold(out).state == _scrubbed_langgraph_state()
    for secret in ("internal_ledger", "call_int", "SECRET-ROUTING-99"):
        assert secret not in wire(out)


def test_an_ai_message_with_only_removed_calls_goes_whole() -> None:
    state = {
        "messages": [
            {"role": "user", "id": "u1", "content": "hi"},
            {
                "role": "assistant",
                "id": "a1",
                "content": "",
                "toolCalls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "internal_x", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "id": "t1", "toolCallId": "c1", "content": "secret"},
            {"role": "assistant", "id": "a2", "content": "hello"},
        ]
    }
    out = through(STAGE, run_events([StateSnapshotEvent(snapshot=state)]))
    assert [m["id"] for m in fold(out).state["messages"]] == ["u1", "a2"]


def test_nested_pointer_and_untouched_parts_of_the_state() -> None:
    state = {"agent": {"history": _langgraph_state()["messages"], "mode": "x"}, "n": 1}
    out = through(STAGE, run_events([StateSnapshotEvent(snapshot=state)]))
    expected = {"agent": {"history": _scrubbed_langgraph_state()["messages"], "mode": "x"}, "n": 1}
    assert fold(out).state == expected


def _delta(*ops: dict[str, Any]) -> StateDeltaEvent:
    return StateDeltaEvent(delta=list(ops))


def test_appended_messages_are_scrubbed_or_dropped() -> None:
    base = {"messages": [{"type": "human", "id": "h1", "content": "q"}]}
    lg = _langgraph_state()["messages"]
    events = run_events(
        [
            StateSnapshotEvent(snapshot=base),
            _delta({"op": "add", "path": "/messages/-", "value": lg[1]}),
            _delta({"op": "add", "path": "/messages/-", "value": lg[2]}),
            _delta(
                {"op": "add", "path": "/messages/-", "value": lg[3]},
                {"op": "add", "path": "/step", "value": 4},
            ),
        ]
    )
    out = through(STAGE, events)
    deltas = [e for e in out if isinstance(e, StateDeltaEvent)]
    # Three deltas in, two out: the secret tool message's append went; no snapshot needed.
    assert len(deltas) == 2
    assert sum(isinstance(e, StateSnapshotEvent) for e in out) == 1
    assert fold(out).state == {
        "messages": [base["messages"][0], *_scrubbed_langgraph_state()["messages"][1:3]],
        "step": 4,
    }
    assert "SECRET-ROUTING-99" not in wire(out) and "call_int" not in wire(out)


def test_an_index_operation_after_a_removal_is_reindexed() -> None:
    state = _langgraph_state()
    events = run_events(
        [
            StateSnapshotEvent(snapshot=state),
            # Index 3 is "t2" in the input, but index 2 on the client (t1 was removed).
            _delta({"op": "replace", "path": "/messages/3/content", "value": "0.93"}),
        ]
    )
    out = through(STAGE, events)
    delta = out[-2]
    assert isinstance(delta, StateDeltaEvent)
    assert [(op.op, op.path) for op in delta.delta] == [("replace", "/messages/2/content")]
    expected = _scrubbed_langgraph_state()
    expected["messages"][2]["content"] = "0.93"
    assert fold(out).state == expected


def test_streaming_into_a_message_after_a_removal_sends_deltas_not_snapshots() -> None:
    # An agent streaming an answer into the state by index, after an internal call:
    # one small delta in must stay one small delta out (no state-sized amplification).
    state = _langgraph_state()
    tokens = [f"tok{i} " for i in range(50)]
    events = run_events(
        [
            StateSnapshotEvent(snapshot=state),
            *(
                _delta(
                    {
                        "op": "replace",
                        "path": "/messages/4/content",
                        "value": "".join(tokens[: i + 1]),
                    },
                    {"op": "add", "path": "/step", "value": i},
                )
                for i in range(len(tokens))
            ),
            # A several-operation delta inside the list: an append that goes, an edit.
            _delta(
                {"op": "add", "path": "/messages/-", "value": state["messages"][2]},
                {"op": "replace", "path": "/messages/0/content", "value": "edited"},
            ),
        ]
    )
    out = through(STAGE, events)
    assert sum(isinstance(e, StateSnapshotEvent) for e in out) == 1  # the original one
    assert [op.path for op in out[2].delta] == ["/messages/3/content", "/step"]  # type: ignore[attr-defined]
    assert [op.path for op in out[-2].delta] == ["/messages/0/content"]  # type: ignore[attr-defined]
    expected = _scrubbed_langgraph_state()
    expected["messages"][3]["content"] = "".join(tokens)
    expected["messages"][0]["content"] = "edited"
    expected["step"] = len(tokens) - 1
    assert fold(out).state == expected
    assert "SECRET-ROUTING-99" not in wire(out)


@pytest.mark.parametrize(
    "op",
    [
        # The removed tool message itself: the client has no counterpart.
        {"op": "replace", "path": "/messages/2/content", "value": "more SECRET-ROUTING-99"},
        # A blocked call added to a kept message.
        {
            "op": "add",
            "path": "/messages/4/tool_calls/-",
            "value": {"id": "call_int2", "name": "internal_ledger", "args": {}},
        },
    ],
    ids=["removed-message", "adds-blocked-call"],
)
def test_an_operation_without_an_exact_counterpart_becomes_a_scrubbed_snapshot(
    op: dict[str, Any],
) -> None:
    events = run_events([StateSnapshotEvent(snapshot=_langgraph_state()), _delta(op)])
    out = through(STAGE, events)
    assert isinstance(out[-2], StateSnapshotEvent)
    assert fold(out).state == _scrubbed_langgraph_state()
    assert "SECRET-ROUTING-99" not in wire(out) and "call_int2" not in wire(out)


def test_index_operations_on_a_clean_list_pass_unchanged() -> None:
    clean = {"messages": [{"role": "user", "id": "u1", "content": "a"}]}
    delta = _delta({"op": "replace", "path": "/messages/0/content", "value": "b"})
    out = through(STAGE, run_events([StateSnapshotEvent(snapshot=clean), delta]))
    assert out[2] == delta


def test_replacing_the_whole_list_carries_the_scrubbed_list() -> None:
    events = run_events(
        [_delta({"op": "add", "path": "/messages", "value": _langgraph_state()["messages"]})]
    )
    out = through(STAGE, events)
    assert [e.type.value for e in out][1] == "STATE_DELTA"
    assert fold(out).state == {"messages": _scrubbed_langgraph_state()["messages"]}


def test_a_delta_that_does_not_apply_is_dropped() -> None:
    out = through(STAGE, run_events([_delta({"op": "remove", "path": "/messages/9"})]))
    assert [e.type.value for e in out] == ["RUN_STARTED", "RUN_FINISHED"]


def test_state_found_removed_calls_also_drop_their_later_events() -> None:
    # The call is announced only in the state; its TOOL_CALL_RESULT must go too.
    events = run_events(
        [
            StateSnapshotEvent(snapshot=_langgraph_state()),
            ToolCallResultEvent(message_id="r1", tool_call_id="call_int", content="secret"),
        ]
    )
    assert "call_int" not in wire(through(STAGE, events))


def test_the_run_started_echo_state_is_scrubbed() -> None:
    echo = RunAgentInput(
        thread_id="thread-1",
        run_id="run-1",
        state=_langgraph_state(),
        messages=[],
        tools=[],
        context=[],
        forwarded_props=None,
    )
    out = through(STAGE, [*run_started(input=echo), *run_events()[1:]])
    assert out[0].input.state == _scrubbed_langgraph_state()  # type: ignore[attr-defined]


def test_without_state_messages_the_state_passes_untouched() -> None:
    events = run_events([StateSnapshotEvent(snapshot=_langgraph_state())])
    assert event_lines(through(FilterToolCalls.deny(["internal_*"]), events)) == event_lines(events)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("messages", "not a JSON Pointer"), ("/a~2b", "not a JSON Pointer")],
)
def test_bad_pointers_are_configuration_errors(value: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        load_chain(
            {
                "transformers": [
                    {"type": "filter_tool_calls", "deny": ["x"], "state_messages": [value]}
                ]
            }
        )
    with pytest.raises(ValueError, match="not a JSON pointer"):
        FilterToolCalls.deny("x", state_messages=[value])
    with pytest.raises(ValueError, match="at least one"):
        FilterToolCalls.deny("x", state_messages=[])


# -- property: fold(output).state == scrub(fold(input).state) ----------------------------

_DENIED = "internal_"


def _reference_scrub(state: Any, denied: set[str]) -> Any:
    """The expected client state: written independently of the stage, for the test."""
    if not isinstance(state, dict) or not isinstance(state.get("messages"), list):
        return state
    out = []
    for m in state["messages"]:
        if not isinstance(m, dict):
            out.append(m)
            continue
        if m.get("toolCallId", m.get("tool_call_id")) in denied:
            continue
        lists = {k: m[k] for k in ("toolCalls", "tool_calls") if isinstance(m.get(k), list)}
        kept = {k: [c for c in v if c.get("id") not in denied] for k, v in lists.items()}
        if kept != lists:
            if not any(kept.values()) and not m.get("content"):
                continue  # nothing left of it but removed calls
            m = {**m, **kept}
        out.append(m)
    return {**state, "messages": out}


class _Gen:
    """Draws plausible message-list operations against the input state as it folds."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.calls: list[tuple[str, bool]] = []  # (id, denied) introduced so far
        self.pending: list[tuple[str, bool]] = []  # introduced by the event being drawn
        self.n = 0

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def _call(self) -> dict[str, Any]:
        self.n += 1
        denied = self.draw(st.booleans())
        call_id = f"{'deny' if denied else 'ok'}-{self.n}"
        name = f"{_DENIED}tool{self.n}" if denied else f"public{self.n}"
        self.pending.append((call_id, denied))
        if self.draw(st.booleans()):
            return {"id": call_id, "name": name, "args": {}}  # LangChain
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}

    def message(self) -> dict[str, Any]:
        self.n += 1
        known = self.calls + self.pending
        kind = self.draw(st.sampled_from(["user", "ai", "tool"] if known else ["user", "ai"]))
        if kind == "user":
            return {"role": "user", "id": f"u{self.n}", "content": "q"}
        if kind == "tool":
            call_id, denied = self.draw(st.sampled_from(self.calls + self.pending))
            content = f"secret-{self.n}" if denied else "fine"
            if self.draw(st.booleans()):
                return {
                    "type": "tool",
                    "id": f"t{self.n}",
                    "tool_call_id": call_id,
                    "content": content,
                }
            return {"role": "tool", "id": f"t{self.n}", "toolCallId": call_id, "content": content}
        calls = [self._call() for _ in range(self.draw(st.integers(0, 2)))]
        content = self.draw(st.sampled_from(["", "text"]))
        if self.draw(st.booleans()):
            return {"type": "ai", "id": f"a{self.n}", "content": content, "tool_calls": calls}
        return {"role": "assistant", "id": f"a{self.n}", "content": content, "toolCalls": calls}

    def event(self, state: Any) -> BaseEvent:
        """The next event; its calls count as introduced only if it applies to ``state``."""
        self.pending = []
        event = self._event(state)
        applies = True
        if isinstance(event, StateDeltaEvent):
            try:
                apply_patch(clone_json(state), event.delta)
            except PatchError:
                applies = False
        if applies:
            self.calls += self.pending
        return event

    def _event(self, state: Any) -> BaseEvent:
        messages = state.get("messages") if isinstance(state, dict) else None
        size = len(messages) if isinstance(messages, list) else 0
        kinds = ["snapshot", "append", "list", "other"]
        if size:
            kinds += ["insert", "remove", "replace", "content", "calls", "move", "copy", "test"]
        kind = self.draw(st.sampled_from(kinds))
        index = self.draw(st.integers(0, max(size - 1, 0)))
        if kind == "snapshot":
            return StateSnapshotEvent(
                snapshot={
                    "messages": [self.message() for _ in range(self.draw(st.integers(0, 3)))],
                    "other": self.n,
                }
            )
        ops: list[dict[str, Any]]
        if kind == "append":
            ops = [{"op": "add", "path": "/messages/-", "value": self.message()}]
        elif kind == "list":
            ops = [
                {
                    "op": "replace" if size else "add",
                    "path": "/messages",
                    "value": [self.message() for _ in range(self.draw(st.integers(0, 3)))],
                }
            ]
        elif kind == "other":
            ops = [{"op": "add", "path": "/other", "value": self.n}]
        elif kind == "insert":
            ops = [{"op": "add", "path": f"/messages/{index}", "value": self.message()}]
        elif kind == "remove":
            ops = [{"op": "remove", "path": f"/messages/{index}"}]
        elif kind == "replace":
            ops = [{"op": "replace", "path": f"/messages/{index}", "value": self.message()}]
        elif kind == "content":
            ops = [{"op": "replace", "path": f"/messages/{index}/content", "value": "edited"}]
        elif kind == "calls":
            ops = [{"op": "add", "path": f"/messages/{index}/tool_calls", "value": [self._call()]}]
        elif kind == "move":
            ops = [{"op": "move", "from": f"/messages/{index}", "path": "/messages/0"}]
        elif kind == "copy":
            ops = [{"op": "copy", "from": f"/messages/{index}", "path": "/messages/-"}]
        else:
            ops = [
                {
                    "op": "test",
                    "path": f"/messages/{index}/id",
                    "value": messages[index].get("id") if messages else None,
                }
            ]  # type: ignore[index]
        if self.draw(st.booleans()):
            ops.append({"op": "add", "path": "/other", "value": -self.n})
        return StateDeltaEvent(delta=ops)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_client_state_is_the_scrubbed_input_state(data: st.DataObject) -> None:
    gen = _Gen(data)
    events: list[BaseEvent] = []
    for _ in range(data.draw(st.integers(1, 12))):
        events.append(gen.event(fold(events).state))
    stream = run_events(events)
    out = through(FilterToolCalls.deny([f"{_DENIED}*"], state_messages=["/messages"]), stream)
    denied = {call_id for call_id, is_denied in gen.calls if is_denied}
    assert fold(out).state == _reference_scrub(fold(stream).state, denied)
    encoded = wire(out)
    assert _DENIED not in encoded and "deny-" not in encoded and "secret-" not in encoded
    # Exact rewriting is the rule, the snapshot fallback the exception.
    fallbacks = sum(isinstance(e, StateSnapshotEvent) for e in out) - sum(
        isinstance(e, StateSnapshotEvent) for e in stream
    )
    assert fallbacks <= sum(isinstance(e, StateDeltaEvent) for e in stream)
