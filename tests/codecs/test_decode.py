"""decode(): the 1.0 processing model on single wire events."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from ag_ui.core import (
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    TextMessageContentEvent,
    ToolCallStartEvent,
)
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes import DecodeError, ProtocolViolation, TransformerChain, decode
from agui_pipes.codecs import DecodeWarning, decode_all, decode_many, event_type_names
from agui_pipes.relay import Relay

# Every test here runs on the fast path and on the reference path (tests/conftest.py).
# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = [pytest.mark.usefixtures("wire_path"), pytest.mark.wire]


def test_accepts_dict_str_and_bytes_alike() -> None:
    wire = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hé"}
    for form in (wire, json.dumps(wire), json.dumps(wire).encode()):
        decoded = decode(form)
        assert isinstance(decoded.event, TextMessageContentEvent)
        assert decoded.event.delta == "hé"
        assert decoded.warnings == ()


def test_decoded_event_serialises_like_the_wire() -> None:
    wire = {
        "type": "TOOL_CALL_START",
        "toolCallId": "c",
        "toolCallName": "t",
        "subagentRunId": "s",
        "metadata": {"k": None},
        "timestamp": 5,
    }
    event = decode(wire).event
    assert isinstance(event, ToolCallStartEvent)
    assert event.model_dump(by_alias=True, mode="json") == wire


def test_unknown_type_dropped_with_structured_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agui_pipes.decode"):
        decoded = decode({"type": "THINKING_START"}, index=4)
    assert decoded.event is None
    (warning,) = decoded.warnings
    assert warning.code == "unknown-event-type"
    assert warning.index == 4
    assert "THINKING_START" in warning.message
    assert "THINKING_START" in caplog.text


@pytest.mark.parametrize("wire", [{}, {"type": 5}, {"type": None}])
def test_missing_or_non_string_type_is_an_unknown_type(wire: dict[str, Any]) -> None:
    assert decode(wire).event is None


def test_unknown_property_stripped_but_open_positions_kept() -> None:
    decoded = decode(
        {
            "type": "STATE_DELTA",
            "futureProp": 1,
            "metadata": {"x": 1},
            "delta": [{"op": "remove", "path": "/a", "value": "leftover"}],
        }
    )
    assert [w.code for w in decoded.warnings] == ["unknown-property"]
    assert "'/futureProp'" in decoded.warnings[0].message
    dumped = decoded.event.model_dump(by_alias=True) if decoded.event else {}
    assert "futureProp" not in dumped
    assert dumped["delta"][0]["value"] == "leftover"  # patch ops are open objects
    assert dumped["metadata"] == {"x": 1}


def test_unknown_union_members_are_stripped() -> None:
    decoded = decode(
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "paused"}}
    )
    assert isinstance(decoded.event, RunFinishedEvent)
    assert decoded.event.outcome is None
    assert [w.code for w in decoded.warnings] == ["unknown-member"]
    decoded = decode(
        {
            "type": "STATE_DELTA",
            "delta": [{"op": "increment", "path": "/n"}, {"op": "add", "path": "/n", "value": 1}],
        }
    )
    assert isinstance(decoded.event, StateDeltaEvent)
    assert [op.op for op in decoded.event.delta] == ["add"]
    assert "'/delta/0'" in decoded.warnings[0].message


def test_unknown_member_cascades_from_a_required_position() -> None:
    # An image with an unknown source kind cannot stand: the whole part goes.
    decoded = decode(
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [
                {
                    "id": "u",
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "hologram", "value": "x"}},
                        {"type": "text", "text": "kept"},
                    ],
                },
                {"id": "n", "role": "narrator", "content": "dropped"},
            ],
        }
    )
    assert isinstance(decoded.event, MessagesSnapshotEvent)
    (message,) = decoded.event.messages
    assert len(message.content) == 1  # type: ignore[arg-type]
    paths = sorted(w.message.split("'")[1] for w in decoded.warnings)
    assert paths == ["/messages/0/content/0", "/messages/1"]


@pytest.mark.parametrize(
    ("wire", "path"),
    [
        ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 42}, "delta"),
        ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"}, "delta"),
        ({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "narrator"}, "role"),
        ({"type": "TEXT_MESSAGE_START", "messageId": "m", "subagentRunId": None}, "subagentRunId"),
        ({"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "assistant"}, "role"),
        ({"type": "SUBAGENT_STARTED", "subagentRunId": "s"}, "name"),
        ({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": "success"}, "outcome"),
        (
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "r",
                "outcome": {"type": "interrupt", "interrupts": []},
            },
            "outcome.interrupts",
        ),
        ({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 1.5}, "timestamp"),
        ({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": True}, "timestamp"),
        ({"type": "CUSTOM", "name": "n", "value": 1, "metadata": [1]}, "metadata"),
        (
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "no-slash", "value": 1}]},
            "delta.0.path",
        ),
        (
            {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "u", "role": "user"}]},
            "messages.0.content",
        ),
        (
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "usage": [{"inputTokens": -1}]},
            "usage.0.inputTokens",
        ),
    ],
)
def test_malformed_described_field_is_fatal_and_named(wire: dict[str, Any], path: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(wire, index=9)
    error = info.value
    assert isinstance(error, ProtocolViolation)
    assert error.path == path
    assert error.index == 9
    assert f"`{path}`" in str(error)
    assert wire["type"] in str(error)


def test_reference_validator_wording_is_quoted() -> None:
    with pytest.raises(DecodeError) as info:
        decode({"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "assistant"})
    assert 'expected \\"reasoning\\"' in str(info.value)


def test_integral_float_is_an_integer_but_not_bool() -> None:
    event = decode({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 10.0}).event
    assert isinstance(event, RunStartedEvent)
    assert event.timestamp == 10
    assert isinstance(event.timestamp, int)


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        (
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c",
                "toolCallName": "t",
                "parentMessageId": None,
            },
            "parent_message_id",
        ),
        ({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": None}, "outcome"),
        ({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": None}, "result"),
        ({"type": "CUSTOM", "name": "n", "value": None, "rawEvent": None}, "raw_event"),
    ],
)
def test_legacy_nulls_read_as_absent_with_a_warning(wire: dict[str, Any], field: str) -> None:
    decoded = decode(wire)
    assert decoded.event is not None
    assert field not in decoded.event.model_fields_set
    assert [w.code for w in decoded.warnings] == ["legacy-null"]


def test_required_nulls_are_data() -> None:
    event = decode({"type": "STATE_SNAPSHOT", "snapshot": None}).event
    assert event is not None
    assert event.model_dump(by_alias=True)["snapshot"] is None
    assert decode({"type": "CUSTOM", "name": "n", "value": None}).warnings == ()


@pytest.mark.parametrize(
    ("declared", "expected"),
    [("1.0", None), ("0.9", None), ("1.1", "1.1"), ("draft", "cannot interpret")],
)
@pytest.mark.parametrize("form", ["dict", "str", "bytes", "relay"])
def test_protocol_version_declarations(declared: str, expected: str | None, form: str) -> None:
    # Every wire form warns alike: bytes once skipped the warning (a generated
    # builder took the key set), and so did a relay, which decodes bytes.
    wire = {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "protocolVersion": declared}
    text = json.dumps(wire, separators=(",", ":"))
    warnings: tuple[DecodeWarning, ...]
    if form == "relay":
        seen: list[DecodeWarning] = []
        Relay(TransformerChain([]), on_warning=seen.append).feed([text.encode()])
        warnings = tuple(seen)
    else:
        forms: dict[str, dict[str, Any] | str | bytes] = {
            "dict": wire,
            "str": text,
            "bytes": text.encode(),
        }
        warnings = decode(forms[form]).warnings
    if expected is None:
        assert warnings == ()
    else:
        (warning,) = warnings
        assert warning.code == "protocol-version"
        assert expected in warning.message


@pytest.mark.parametrize("text", ["", "{", "[1]", "42", b"\xff"])
def test_input_that_is_not_one_json_object(text: str | bytes) -> None:
    with pytest.raises(DecodeError) as info:
        decode(text)
    assert info.value.path == ""


def test_wrong_python_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="dict, str or bytes"):
        decode(42)  # type: ignore[arg-type]


def test_many_is_lazy_and_numbered() -> None:
    wires = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "NOPE"},
        {"type": "TEXT_MESSAGE_END"},
    ]
    iterator = decode_many(wires, start=10)
    assert next(iterator).event is not None
    assert next(iterator).warnings[0].index == 11
    with pytest.raises(DecodeError) as info:
        next(iterator)
    assert info.value.index == 12
    events, warnings = decode_all(wires[:2])
    assert len(events) == 1
    assert len(warnings) == 1


def test_all_31_types_are_known() -> None:
    assert len(event_type_names()) == 31


@given(st.text(max_size=20), st.text(max_size=40))
def test_any_strings_round_trip(message_id: str, delta: str) -> None:
    wire = {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta}
    event = decode(json.dumps(wire)).event
    assert event is not None
    assert event.model_dump(by_alias=True, mode="json") == wire


def test_decode_is_a_function_and_no_module_hides_behind_it() -> None:
    """``import agui_pipes.decode`` once gave a module or the function depending on order."""
    from pathlib import Path

    import agui_pipes
    from agui_pipes import codecs

    package = Path(agui_pipes.__file__).parent
    assert not (package / "decode.py").exists() and not (package / "decode").exists()
    assert callable(agui_pipes.decode)
    assert agui_pipes.decode is codecs.decode
    assert agui_pipes.DecodeError is codecs.DecodeError
    assert set(codecs.__all__) >= {
        "decode",
        "decode_many",
        "decode_all",
        "Decoded",
        "DecodeError",
        "DecodeWarning",
        "event_type_names",
    }
