"""The fast path is invisible: same events in, same bytes out, on both paths.

decode() builds plain-string events with generated builders instead of the
checked path, and encode_json() writes plain-valued events with orjson
instead of pydantic. Each test runs with ``fast_path=True`` and with
``fast_path=False`` (the reference path) and both must agree exactly with
the checked decoder and pydantic's writing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallStartEvent,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes import decode
from agui_pipes._decode import decode_checked
from agui_pipes.codecs import DecodeError, encode_json, encode_sse
from agui_pipes.testing.strategies import streams

text = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)
paths = pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "reference-path"])


def reference_json(event: BaseEvent) -> bytes:
    return event.model_dump_json(by_alias=True).encode()


@paths
@settings(max_examples=300, deadline=None)
@given(streams(max_runs=2))
def test_encode_matches_pydantic_on_generated_streams(
    fast_path: bool, events: list[BaseEvent]
) -> None:
    for event in events:
        assert encode_json(event, fast_path=fast_path) == reference_json(event)
        assert encode_sse(event, fast_path=fast_path) == encode_sse(event, fast_path=not fast_path)


@settings(max_examples=500, deadline=None)
@given(
    message_id=text,
    delta=text,
    tag=st.none() | text,
    timestamp=st.none() | st.integers(-(2**53) + 1, 2**53 - 1),
)
def test_encode_plain_values_matches_pydantic(
    message_id: str, delta: str, tag: str | None, timestamp: int | None
) -> None:
    event = TextMessageContentEvent(
        message_id=message_id, delta=delta, subagent_run_id=tag, timestamp=timestamp
    )
    assert encode_json(event, fast_path=True) == reference_json(event)
    assert encode_json(event, fast_path=False) == reference_json(event)


@pytest.mark.parametrize(
    "event",
    [
        CustomEvent(name="n", value=None),
        CustomEvent(name="n", value=1.5),
        CustomEvent(name="n", value={"nested": [1, 2.25, None]}),
        TextMessageContentEvent(message_id="m", delta="x", metadata={"k": 1e16}),
        TextMessageContentEvent(message_id="m", delta="x", extra_field=1),  # type: ignore[call-arg]
        TextMessageContentEvent(message_id="m", delta="lone \ud800 surrogate"),
        StepStartedEvent.model_construct(step_name="s", timestamp=2**60),
        ToolCallStartEvent(tool_call_id="c", tool_call_name="t", parent_message_id="p"),
        TextMessageStartEvent(message_id="m", role="user", raw_event={"a": [True, None]}),
    ],
)
@paths
def test_encode_falls_back_where_plain_is_not_safe(event: BaseEvent, fast_path: bool) -> None:
    try:
        expected = reference_json(event)
    except Exception:  # pydantic cannot write it either (lone surrogate)
        return
    assert encode_json(event, fast_path=fast_path) == expected
    assert encode_sse(event, fast_path=fast_path) == b"data: " + expected + b"\n\n"


def _wire(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["TEXT_MESSAGE_CONTENT", "TOOL_CALL_START", "STEP_STARTED"]))
    fields = {
        "TEXT_MESSAGE_CONTENT": ["messageId", "delta"],
        "TOOL_CALL_START": ["toolCallId", "toolCallName", "parentMessageId"],
        "STEP_STARTED": ["stepName"],
    }[kind]
    optional = ["subagentRunId", "timestamp", "unknownKey", "metadata"]
    keys = draw(st.permutations([*fields, *draw(st.lists(st.sampled_from(optional), unique=True))]))
    wire: dict[str, Any] = {"type": kind}
    for key in keys:
        if draw(st.integers(0, 9)) == 0:
            continue  # sometimes missing (a required one missing must still be an error)
        wire[key] = draw(st.one_of(text, st.integers(-5, 5), st.none(), st.just({"a": 1})))
    return wire


@paths
@settings(max_examples=600, deadline=None)
@given(st.composite(_wire)())
def test_decode_fast_path_equals_checked_path(fast_path: bool, wire: dict[str, Any]) -> None:
    line = json.dumps(wire).encode()
    fast_error: DecodeError | None = None
    try:
        fast = decode(line, index=3, fast_path=fast_path)
    except DecodeError as error:
        fast_error = error
    if fast_error is not None:
        with pytest.raises(DecodeError) as checked_error:
            decode_checked(json.loads(line), wire["type"], 3)
        assert str(fast_error) == str(checked_error.value)
        return
    checked = decode_checked(json.loads(line), wire["type"], 3)
    assert fast.warnings == checked.warnings
    assert fast.event == checked.event
    assert fast.event is not None
    assert encode_json(fast.event) == encode_json(checked.event)  # type: ignore[arg-type]
    assert fast.event.model_fields_set == checked.event.model_fields_set  # type: ignore[union-attr]


@paths
def test_decode_bytes_errors_are_unchanged(fast_path: bool) -> None:
    with pytest.raises(DecodeError, match="not valid JSON"):
        decode(b'{"type": "RAW", ', fast_path=fast_path)
    with pytest.raises(DecodeError, match="not valid UTF-8"):
        decode(b'{"type": "STEP_STARTED", "stepName": "\xff"}', fast_path=fast_path)
    escaped = decode(b'{"type": "STEP_STARTED", "stepName": "\\ud800"}', fast_path=fast_path)
    assert escaped.event is not None
    assert escaped.event.step_name == "\ud800"  # type: ignore[attr-defined]


@paths
@settings(max_examples=300, deadline=None)
@given(streams(max_runs=2))
def test_decode_bytes_builders_equal_checked_path(
    fast_path: bool, events: list[BaseEvent]
) -> None:
    # every event of a generated stream, as bytes: the generated builders (or
    # the general path) must give exactly what the checked path gives
    lines = [event.model_dump_json(by_alias=True).encode() for event in events] + [
        # Defaults absent (the generated builders' case): what producers send.
        json.dumps(
            {"type": event.type.value,
             **event.model_dump(mode="json", by_alias=True, exclude_unset=True)},
            separators=(",", ":"),
        ).encode()
        for event in events
    ]
    for index, line in enumerate(lines):
        fast = decode(line, index=index, fast_path=fast_path)
        wire = json.loads(line)
        checked = decode_checked(wire, wire["type"], index)
        assert fast.event == checked.event
        assert fast.warnings == checked.warnings
        assert fast.event is not None
        assert checked.event is not None
        assert fast.event.model_fields_set == checked.event.model_fields_set
        assert encode_json(fast.event) == encode_json(checked.event)


@settings(max_examples=150, deadline=None)
@given(
    streams(max_runs=1),
    st.sampled_from(["timestamp", "raw_event", "subagent_run_id", "metadata"]),
    st.one_of(st.none(), st.integers(0, 2**40), st.text(max_size=5)),
)
def test_replace_equals_model_copy_with_one_update(
    events: list[BaseEvent], name: str, value: Any
) -> None:
    from agui_pipes._construct import replace

    for event in events:
        if name not in type(event).model_fields:
            continue
        fast = replace(event, name, value)
        slow = event.model_copy(update={name: value})
        assert type(fast) is type(slow)
        assert fast.__dict__ == slow.__dict__
        assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
        assert fast.__pydantic_extra__ == slow.__pydantic_extra__
        assert fast.__pydantic_private__ == slow.__pydantic_private__
        assert fast.__dict__ is not event.__dict__
        assert fast.__pydantic_fields_set__ is not event.__pydantic_fields_set__
