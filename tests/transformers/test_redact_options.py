"""Redact beyond messages: the `state`, `errors` and `custom` options, and patch `test` ops."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    SubagentErrorEvent,
)
from hypothesis import HealthCheck, given, settings

from agui_pipes import fold
from agui_pipes.config import ConfigError, load_chain
from agui_pipes.testing import run_events, run_started, subagent, text
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import Redact
from tests.transformers._stage_helpers import consumed, through, wire

KEY = "sk-" + "A" * 24
PATTERN = r"sk-[A-Za-z0-9]{20,}"


def _scrub(**options: Any) -> Redact:
    return Redact([PATTERN], replacement="[secret]", **options)


def _only(events: list[BaseEvent], kind: EventType) -> BaseEvent:
    (found,) = [e for e in events if e.type == kind]
    return found


# -- errors --------------------------------------------------------------------


def test_run_error_messages_are_redacted_only_with_errors() -> None:
    events = run_events(text("m", "hi"), error=f"upstream 401: invalid key {KEY}")
    kept = _only(through(_scrub(), events), EventType.RUN_ERROR)
    assert isinstance(kept, RunErrorEvent) and KEY in kept.message
    out = through(_scrub(errors=True), events)
    error = _only(out, EventType.RUN_ERROR)
    assert isinstance(error, RunErrorEvent)
    assert error.message == "upstream 401: invalid key [secret]"
    assert consumed(out).run_error == {"message": "upstream 401: invalid key [secret]"}


def test_subagent_error_messages_are_redacted_with_errors() -> None:
    events = run_events(subagent("sub-1", "researcher", text("m", "x"), error=f"boom {KEY}"))
    assert KEY in wire(through(_scrub(), events))
    out = through(_scrub(errors=True), events)
    error = _only(out, EventType.SUBAGENT_ERROR)
    assert isinstance(error, SubagentErrorEvent) and error.message == "boom [secret]"
    consumed(out)


def test_a_run_error_still_releases_held_text_before_it() -> None:
    events = run_events([*text("m", f"key {KEY}")[:2]], error=f"cut off {KEY}")
    out = through(_scrub(errors=True), events)
    assert KEY not in wire(out)
    assert [e.type for e in out][-2:] == [EventType.TEXT_MESSAGE_CONTENT, EventType.RUN_ERROR]


# -- custom --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"token {KEY}", "token [secret]"),
        (
            {"auth": {"header": f"Bearer {KEY}"}, "n": 3},
            {"auth": {"header": "Bearer [secret]"}, "n": 3},
        ),
        ([1, [KEY], None], [1, ["[secret]"], None]),
    ],
)
def test_custom_values_are_redacted_anywhere_inside_with_custom(value: Any, expected: Any) -> None:
    events = run_events([CustomEvent(name="trace", value=value)])
    assert KEY in wire(through(_scrub(), events))
    out = through(_scrub(custom=True), events)
    custom = _only(out, EventType.CUSTOM)
    assert isinstance(custom, CustomEvent) and custom.value == expected


def test_a_custom_event_without_a_match_is_passed_as_the_same_event() -> None:
    event = CustomEvent(name="trace", value={"fine": ["a"]})
    assert _scrub(custom=True).transform(event) == (event,)


# -- state ---------------------------------------------------------------------


def test_state_is_redacted_by_default_and_left_alone_with_state_false() -> None:
    echo = RunAgentInput(
        thread_id="t",
        run_id="r",
        messages=[],
        state={"k": KEY},
        tools=[],
        context=[],
        forwarded_props={},
    )
    inner: list[BaseEvent] = [
        StateSnapshotEvent(snapshot={"k": KEY}),
        StateDeltaEvent.model_validate({"delta": [{"op": "add", "path": "/j", "value": [KEY]}]}),
    ]
    events = [*run_started("t", "r", input=echo), *run_events(inner)[1:]]
    assert KEY not in wire(through(_scrub(), events))
    assert consumed(through(_scrub(), events)).state == {"k": "[secret]", "j": ["[secret]"]}
    assert wire(through(_scrub(state=False), events)).count(KEY) == 3


def test_a_patch_test_holding_a_secret_is_dropped_so_the_delta_still_applies() -> None:
    # the client holds the state it sent itself, unredacted; a redacted test would
    # fail there and the whole delta would be skipped
    delta = StateDeltaEvent.model_validate(
        {
            "delta": [
                {"op": "test", "path": "/key", "value": KEY},
                {"op": "replace", "path": "/status", "value": "rotated"},
            ]
        }
    )
    out = through(_scrub(), run_events([delta]))
    sent = _only(out, EventType.STATE_DELTA)
    assert isinstance(sent, StateDeltaEvent)
    assert [op.op for op in sent.delta] == ["replace"]
    client = fold(out, state={"key": KEY, "status": "active"})
    assert client.state == {"key": KEY, "status": "rotated"}
    assert not client.warnings


def test_a_patch_test_without_a_match_is_kept() -> None:
    delta = StateDeltaEvent.model_validate({"delta": [{"op": "test", "path": "/n", "value": 1}]})
    assert _scrub().transform(delta) == (delta,)


# -- configuration -------------------------------------------------------------------


def test_yaml_options_reach_the_stage() -> None:
    factory = load_chain(
        rf"""
        transformers:
          - type: redact
            patterns: ['{PATTERN}']
            replacement: "[secret]"
            state: false
            errors: true
            custom: true
        """
    )
    events = run_events(
        [CustomEvent(name="c", value=KEY), StateSnapshotEvent(snapshot=KEY)], error=KEY
    )
    out = factory().apply_sync(events)
    assert wire(out).count(KEY) == 1  # only the state snapshot keeps it
    assert consumed(out).state == KEY


def test_yaml_rejects_a_non_boolean_flag() -> None:
    with pytest.raises(ConfigError, match="errors"):
        load_chain("transformers:\n  - type: redact\n    patterns: [x]\n    errors: maybe\n")


@pytest.mark.parametrize("option", ["state", "errors", "custom"])
def test_code_rejects_a_non_boolean_flag(option: str) -> None:
    with pytest.raises(ValueError, match=f"Redact: {option} must be True or False"):
        Redact(["x"], **{option: "yes"})


# -- property ------------------------------------------------------------------

_VOWELS = re.compile(r"[aeiou]{2}")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(events=streams())
def test_no_match_survives_in_errors_custom_values_or_state(events: list[BaseEvent]) -> None:
    out = through(Redact([_VOWELS.pattern], replacement="#", errors=True, custom=True), events)
    consumed(out)
    for event in out:
        if isinstance(event, RunErrorEvent | SubagentErrorEvent):
            found = [event.message]
        elif isinstance(event, CustomEvent):
            found = _strings(event.value)
        elif isinstance(event, StateSnapshotEvent):
            found = _strings(event.snapshot)
        elif isinstance(event, StateDeltaEvent):
            found = [s for op in event.delta for s in _strings(getattr(op, "value", None))]
        else:
            continue
        assert not any(_VOWELS.search(s) for s in found), event
