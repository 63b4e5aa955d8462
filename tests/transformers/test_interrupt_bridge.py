"""InterruptBridge: dialect → canonical on the stream, canonical → dialect on the request.

The round-trip properties: for generated interrupts and answers, canonical →
dialect → canonical is the identity, for LangGraph's legacy ``on_interrupt``
/ ``command.resume`` and for ADK's pending tool calls / tool-result messages.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag_ui.core import (
    CustomEvent,
    EventType,
    Interrupt,
    ResumeEntry,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes import RequestRefused
from agui_pipes._stagekit import adk_interrupts, langgraph_interrupts
from agui_pipes.config import ConfigError, load_chain
from agui_pipes.testing import run_transformer
from agui_pipes.testing import tool_call as tool_call_events
from agui_pipes.transformers import InterruptBridge

_STARTED = RunStartedEvent(thread_id="t-1", run_id="r-1")
_FINISHED = RunFinishedEvent(thread_id="t-1", run_id="r-1")

# -- generators -------------------------------------------------------------------

_ids = st.text("abcdef0123456789-", min_size=1, max_size=24)
_text = st.text(max_size=12)
_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_schemas = st.none() | st.just({"type": "object"}) | st.just({"type": "boolean"})
_expiry = st.none() | st.just("2026-12-02T10:00:00Z")


@st.composite
def _langgraph_interrupts(draw: st.DrawFn) -> list[Interrupt]:
    """Interrupts as a graph's interrupt(value) gives them: the fields follow the value."""
    ids = draw(st.lists(_ids, min_size=1, max_size=4, unique=True))
    made = []
    for interrupt_id in ids:
        fields: dict[str, Any] = {
            "reason": draw(st.sampled_from(["tool_approval", "langgraph:interrupt", "input"])),
            "message": draw(st.none() | _text),
            "tool_call_id": draw(st.none() | _ids),
            "response_schema": draw(_schemas),
            "expires_at": draw(_expiry),
        }
        kind = draw(st.sampled_from(["fields", "more keys", "not an object"]))
        metadata = None
        if kind == "more keys":  # the value keeps what no field holds
            value = Interrupt(id="-", **fields).model_dump(
                by_alias=True, exclude_none=True, exclude={"id"}
            )
            value["options"] = draw(st.lists(_text, max_size=3))
            metadata = {"langgraph": {"value": value}}
        elif kind == "not an object":
            value = draw(_json.filter(lambda v: not isinstance(v, (str, dict))))
            fields = {"reason": "langgraph:interrupt"}
            metadata = {"langgraph": {"value": value}}
        made.append(Interrupt(id=interrupt_id, metadata=metadata, **fields))
    return made


def _answers(ids: list[str]) -> st.SearchStrategy[list[ResumeEntry]]:
    # A resolved answer carries a payload (LangGraph reads a null resume as none).
    def one(interrupt_id: str) -> st.SearchStrategy[ResumeEntry]:
        resolved = _json.filter(lambda v: v is not None).map(
            lambda payload: ResumeEntry(
                interrupt_id=interrupt_id, status="resolved", payload=payload
            )
        )
        cancelled = st.just(ResumeEntry(interrupt_id=interrupt_id, status="cancelled"))
        return resolved | cancelled

    return st.tuples(*(one(i) for i in ids)).map(list)


def _wire(entries: list[ResumeEntry]) -> list[dict[str, Any]]:
    return [e.model_dump(by_alias=True, exclude_none=True, mode="json") for e in entries]


def _through_json(event: CustomEvent) -> CustomEvent:
    """The event as the bridge receives it: encoded and decoded on the wire."""
    return CustomEvent.model_validate_json(event.model_dump_json(by_alias=True, exclude_none=True))


# -- LangGraph ------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(_langgraph_interrupts())
def test_langgraph_interrupts_round_trip(interrupts: list[Interrupt]) -> None:
    customs = [_through_json(langgraph_interrupts.custom_for_interrupt(i)) for i in interrupts]
    out = run_transformer(InterruptBridge("langgraph"), [_STARTED, *customs, _FINISHED])
    assert out[1:-1] == customs  # the legacy events pass on as they are
    outcome = out[-1].outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    assert outcome.interrupts == interrupts


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_langgraph_answers_round_trip(data: st.DataObject) -> None:
    ids = data.draw(st.lists(_ids, min_size=1, max_size=4, unique=True))
    answers = data.draw(_answers(ids))
    request = {"threadId": "t-1", "runId": "r-2", "messages": [], "resume": _wire(answers)}
    forwarded = InterruptBridge("langgraph").rewrite_request(request)
    assert "resume" not in forwarded
    resume = json.loads(json.dumps(forwarded["forwardedProps"]["command"]["resume"]))
    back = langgraph_interrupts.resume_from_command(resume, ids)
    assert back == answers


def test_langgraph_answers_are_what_the_adapter_resumes_with() -> None:
    # The value interrupt() returns is the one ag-ui-langgraph's canonical mode gives.
    one = langgraph_interrupts.command_resume([{"interruptId": "i-1", "status": "cancelled"}])
    assert one == {"__agui_cancelled__": True, "interrupt_id": "i-1"}
    assert langgraph_interrupts.command_resume(
        [{"interruptId": "i-1", "status": "resolved", "payload": {"approved": True}}]
    ) == {"approved": True}
    # A string is JSON-encoded, because the adapter json.loads a string resume.
    assert (
        langgraph_interrupts.command_resume(
            [{"interruptId": "i-1", "status": "resolved", "payload": "123"}]
        )
        == '"123"'
    )
    several = langgraph_interrupts.command_resume(
        [
            {"interruptId": "i-1", "status": "resolved", "payload": 1},
            {"interruptId": "i-2", "status": "cancelled"},
        ]
    )
    assert several == {"i-1": 1, "i-2": {"__agui_cancelled__": True, "interrupt_id": "i-2"}}


def test_an_answer_langgraph_cannot_carry_is_refused_with_the_fix() -> None:
    bridge = InterruptBridge("langgraph")
    empty = {"resume": [{"interruptId": "i-1", "status": "resolved"}], "messages": []}
    with pytest.raises(RequestRefused) as refused:
        bridge.rewrite_request(empty)
    assert refused.value.code == "resume_not_translatable"
    assert "give a payload" in refused.value.message
    derived = langgraph_interrupts.DERIVED_PREFIX + "abc"
    two = {
        "resume": [
            {"interruptId": derived, "status": "resolved", "payload": 1},
            {"interruptId": "i-2", "status": "resolved", "payload": 2},
        ]
    }
    with pytest.raises(RequestRefused, match="rawEvent"):
        bridge.rewrite_request(two)


def test_the_adapters_own_event_becomes_its_canonical_interrupt() -> None:
    # ag-ui-langgraph 0.0.47's CUSTOM on_interrupt, as recorded from interrupt({...}).
    value = {
        "reason": "tool_approval",
        "message": "Transfer $5?",
        "responseSchema": {"type": "object"},
    }
    recorded = CustomEvent(
        type=EventType.CUSTOM,
        name="on_interrupt",
        value=json.dumps(value),
        raw_event={
            "value": value,
            "id": "aa189355f5a557736afd360ec9a2143b",
            "response_schema": None,
        },
    )
    out = run_transformer(InterruptBridge(), [_STARTED, recorded, _FINISHED])
    outcome = out[-1].outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    assert outcome.interrupts == [
        Interrupt(
            id="aa189355f5a557736afd360ec9a2143b",
            reason="tool_approval",
            message="Transfer $5?",
            response_schema={"type": "object"},
        )
    ]


def test_an_interrupt_without_rawevent_gets_a_stable_derived_id() -> None:
    bare = CustomEvent(type=EventType.CUSTOM, name="on_interrupt", value="Approve the plan?")
    first = run_transformer(InterruptBridge(), [_STARTED, bare, _FINISHED])[-1].outcome
    again = run_transformer(InterruptBridge(), [_STARTED, bare, _FINISHED])[-1].outcome
    assert isinstance(first, RunFinishedInterruptOutcome) and first == again
    (interrupt,) = first.interrupts
    assert interrupt.id.startswith(langgraph_interrupts.DERIVED_PREFIX)
    assert (interrupt.reason, interrupt.message) == ("langgraph:interrupt", "Approve the plan?")


def test_other_values_are_kept_whole_in_the_metadata() -> None:
    value = {"question": "Which city?", "options": ["Oslo", "Rome"]}
    event = CustomEvent(
        type=EventType.CUSTOM,
        name="on_interrupt",
        value=json.dumps(value),
        raw_event={"value": value, "id": "lg-1"},
    )
    outcome = run_transformer(InterruptBridge(), [_STARTED, event, _FINISHED])[-1].outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    assert outcome.interrupts[0].metadata == {"langgraph": {"value": value}}


def test_a_canonical_outcome_passes_unchanged() -> None:
    # ag-ui-langgraph with emit_interrupt_outcome=True sends both: nothing is added.
    own = RunFinishedInterruptOutcome(
        type="interrupt", interrupts=[Interrupt(id="x", reason="approval")]
    )
    finished = RunFinishedEvent(thread_id="t-1", run_id="r-1", outcome=own)
    event = CustomEvent(type=EventType.CUSTOM, name="on_interrupt", value="{}")
    out = run_transformer(InterruptBridge(), [_STARTED, event, finished])
    assert out[-1] is finished
    success = RunFinishedEvent(
        thread_id="t-1", run_id="r-1", outcome=RunFinishedSuccessOutcome(type="success")
    )
    assert run_transformer(InterruptBridge("adk"), [_STARTED, success])[-1] is success


def test_a_request_without_resume_is_the_same_object() -> None:
    request = {"threadId": "t-1", "runId": "r-1", "messages": []}
    assert InterruptBridge().rewrite_request(request) is request
    assert InterruptBridge("adk").rewrite_request(request) is request


def test_the_langgraph_request_keeps_other_forwarded_props() -> None:
    request = {
        "forwardedProps": {"command": {"goto": "x"}, "stream_subgraphs": False},
        "resume": [{"interruptId": "i", "status": "resolved", "payload": True}],
    }
    forwarded = InterruptBridge().rewrite_request(request)
    assert forwarded == {
        "forwardedProps": {"command": {"goto": "x", "resume": True}, "stream_subgraphs": False}
    }
    assert request["forwardedProps"] == {"command": {"goto": "x"}, "stream_subgraphs": False}


# -- ADK ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_ids, min_size=1, max_size=4, unique=True),
    _schemas,
    st.sampled_from(["tool_call", "approval"]),
)
def test_adk_pending_calls_round_trip(ids: list[str], schema: Any, reason: str) -> None:
    interrupts = [
        adk_interrupts.interrupt_for_call(i, reason=reason, response_schema=schema) for i in ids
    ]
    # The dialect: each interrupt's call streamed and left without a result.
    calls = [e for i in interrupts for e in tool_call_events(i.id, "approve", "{}")]
    bridge = InterruptBridge("adk", tools=["approve"], reason=reason, response_schema=schema)
    out = run_transformer(bridge, [_STARTED, *calls, _FINISHED])
    outcome = out[-1].outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    assert outcome.interrupts == interrupts


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_adk_answers_round_trip(data: st.DataObject) -> None:
    ids = data.draw(st.lists(_ids, min_size=1, max_size=4, unique=True))
    answers = data.draw(_answers(ids))
    # A resolved payload equal to ADK's cancelled result reads back as cancelled.
    cancelled = json.loads(adk_interrupts.CANCELLED_RESULT)
    answers = [a for a in answers if a.payload != cancelled] or answers[:0]
    issued = {
        "id": "a-1",
        "role": "assistant",
        "toolCalls": [
            {"id": i, "type": "function", "function": {"name": "approve", "arguments": "{}"}}
            for i in ids
        ],
    }
    request = {"messages": [{"id": "u-1", "role": "user", "content": "go"}, issued]}
    forwarded = InterruptBridge("adk").rewrite_request({**request, "resume": _wire(answers)})
    if not answers:
        return
    assert "resume" not in forwarded
    results = forwarded["messages"][2:]
    assert [m["toolCallId"] for m in results] == [a.interrupt_id for a in answers]
    back = [adk_interrupts.resume_from_tool_message(m["toolCallId"], m["content"]) for m in results]
    assert back == answers


def test_adk_tool_results_follow_the_issuing_message_and_replace_the_clients() -> None:
    issued = {
        "id": "a-1",
        "role": "assistant",
        "toolCalls": [
            {"id": "c-1", "type": "function", "function": {"name": "t", "arguments": ""}}
        ],
    }
    later = {"id": "u-2", "role": "user", "content": "and then?"}
    stale = {"id": "m-9", "role": "tool", "toolCallId": "c-1", "content": "old"}
    request = {
        "messages": [issued, stale, later],
        "resume": [
            {"interruptId": "c-1", "status": "resolved", "payload": {"ok": True}},
            {"interruptId": "c-2", "status": "cancelled"},
        ],
    }
    forwarded = InterruptBridge("adk").rewrite_request(request)
    assert forwarded["messages"] == [
        issued,
        {"id": "resume-c-1", "role": "tool", "toolCallId": "c-1", "content": '{"ok": true}'},
        later,
        {
            "id": "resume-c-2",
            "role": "tool",
            "toolCallId": "c-2",
            "content": '{"status": "cancelled", "cancelled": true}',
        },
    ]


def test_adk_counts_only_the_configured_tools_and_unanswered_calls() -> None:
    answered = tool_call_events("s-1", "search", "{}", result="found")
    pending = tool_call_events("p-1", "approve", "{}")
    other = tool_call_events("d-1", "draw", "{}")
    stream = [_STARTED, *answered, *pending, *other, _FINISHED]
    only = run_transformer(InterruptBridge("adk", tools=["approve"]), stream)[-1].outcome
    assert isinstance(only, RunFinishedInterruptOutcome)
    assert [i.id for i in only.interrupts] == ["p-1"]
    every = run_transformer(InterruptBridge("adk"), stream)[-1].outcome
    assert isinstance(every, RunFinishedInterruptOutcome)
    assert [i.id for i in every.interrupts] == ["p-1", "d-1"]
    nothing = run_transformer(InterruptBridge("adk"), [_STARTED, *answered, _FINISHED])
    assert nothing[-1].outcome is None


def test_adk_expiry_is_counted_from_the_runs_end() -> None:
    bridge = InterruptBridge("adk", expires_in=600, clock=lambda: 1_796_205_600.0)
    out = run_transformer(bridge, [_STARTED, *tool_call_events("c", "t", "{}"), _FINISHED])
    outcome = out[-1].outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    assert outcome.interrupts[0].expires_at == "2026-12-02T10:10:00Z"


# -- configuration ------------------------------------------------------------


def test_the_yaml_stage_builds_both_halves(tmp_path: Any) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(
        "transformers:\n"
        "  - type: interrupt_bridge\n"
        "    dialect: adk\n"
        "    tools: [approve_transfer]\n"
        "    reason: tool_approval\n"
    )
    (stage,) = load_chain(path)().stages
    assert isinstance(stage, InterruptBridge)
    assert (stage.dialect, stage.tools, stage.reason) == (
        "adk",
        frozenset({"approve_transfer"}),
        "tool_approval",
    )


def test_adk_options_on_a_langgraph_bridge_are_a_located_error(tmp_path: Any) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text("transformers:\n  - type: interrupt_bridge\n    tools: [x]\n")
    with pytest.raises(ConfigError, match="apply to dialect 'adk' only"):
        load_chain(path)
    with pytest.raises(ValueError, match="dialect 'adk' only"):
        InterruptBridge("langgraph", tools=["x"])
    with pytest.raises(ValueError, match="'langgraph' or 'adk'"):
        InterruptBridge("strands")  # type: ignore[arg-type]
