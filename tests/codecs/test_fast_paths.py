"""The fast path is invisible: same events in, same bytes out, on both paths.

decode() builds plain-string events with generated builders instead of the
checked path, and encode_json() writes plain-valued events with orjson
instead of pydantic. Each test runs with ``fast_path=True`` and with
``fast_path=False`` (the reference path) and both must agree exactly with
the checked decoder and pydantic's writing.
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    CustomEvent,
    RawEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from agui_pipes import decode
from agui_pipes._foundation import json as _json
from agui_pipes._protocol.decode import decode_checked
from agui_pipes.codecs import DecodeError, EncodeError, encode_json, encode_sse
from agui_pipes.testing.strategies import streams

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

text = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)
paths = pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "reference-path"])


def reference_json(event: BaseEvent) -> bytes:
    return event.model_dump_json(by_alias=True).encode()


# The position fields an error may carry (DecodeError, EncodeError, VerificationError).
_ERROR_FIELDS = ("path", "index", "event_type")


def outcome(call: Callable[[], object]) -> object:
    """What ``call`` returns, or the error it raises as a comparable tuple.

    Two paths agree when their outcomes are equal: the same result, or the same
    error type with the same message and the same position fields.
    """
    try:
        return call()
    except Exception as error:
        fields = tuple(getattr(error, name, None) for name in _ERROR_FIELDS)
        return (type(error), str(error), *fields)


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
    written = outcome(lambda: encode_json(event, fast_path=fast_path))
    assert written == outcome(lambda: encode_json(event, fast_path=False))
    framed = outcome(lambda: encode_sse(event, fast_path=fast_path))
    assert framed == outcome(lambda: encode_sse(event, fast_path=False))
    try:
        expected = reference_json(event)
    except PydanticSerializationError:
        # pydantic refuses a lone surrogate; both paths write it as a \u escape (above).
        return
    assert written == expected
    assert framed == b"data: " + expected + b"\n\n"


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
def test_decode_bytes_builders_equal_checked_path(fast_path: bool, events: list[BaseEvent]) -> None:
    # every event of a generated stream, as bytes: the generated builders (or
    # the general path) must give exactly what the checked path gives
    lines = [event.model_dump_json(by_alias=True).encode() for event in events] + [
        # Defaults absent (the generated builders' case): what producers send.
        json.dumps(
            {
                "type": event.type.value,
                **event.model_dump(mode="json", by_alias=True, exclude_unset=True),
            },
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
    from agui_pipes._protocol.construct import replace

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


# -- snapshots and deltas: open JSON values ---------------------------------

_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_values = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
_pointer = st.one_of(
    st.just(""),
    st.lists(st.text(alphabet="ab~01/-", max_size=4), max_size=3).map(
        lambda parts: "".join("/" + p for p in parts)
    ),
    st.sampled_from(["a", "/a~2", "/~", "/a~1b~0", "/items/-"]),
    st.integers(0, 3),
)
_OPS_KEYS = {
    "add": ["path", "value"],
    "remove": ["path"],
    "replace": ["path", "value"],
    "move": ["from", "path"],
    "copy": ["from", "path"],
    "test": ["path", "value"],
}


@st.composite
def _patch_op(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 30)) == 0:
        return draw(st.one_of(st.none(), st.integers(), text))  # not an object: fatal
    op = draw(st.sampled_from([*_OPS_KEYS, "frobnicate"]))
    keys = list(_OPS_KEYS.get(op, ["path"]))
    if draw(st.integers(0, 15)) == 0:
        keys.append("extra")
    if draw(st.integers(0, 15)) == 0:
        keys.pop()
    item: dict[str, Any] = {}
    if draw(st.integers(0, 30)) != 0:
        item["op"] = op if draw(st.integers(0, 30)) else draw(st.one_of(st.none(), st.integers()))
    for key in draw(st.permutations(keys)):
        item[key] = draw(_pointer) if key in ("path", "from") else draw(json_values)
    return item


_OPEN_EVENTS = {
    "STATE_SNAPSHOT": {"snapshot": json_values},
    "STATE_DELTA": {"delta": st.lists(_patch_op(), max_size=4)},
    "ACTIVITY_SNAPSHOT": {
        "messageId": text,
        "activityType": text,
        "content": st.dictionaries(text, json_values, max_size=3),
        "replace": st.booleans(),
    },
    "ACTIVITY_DELTA": {
        "messageId": text,
        "activityType": text,
        "patch": st.lists(_patch_op(), max_size=4),
    },
    "RAW": {"event": json_values, "source": text},
    "CUSTOM": {"name": text, "value": json_values},
}


@st.composite
def _open_wire(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(_OPEN_EVENTS)))
    fields = dict(_OPEN_EVENTS[kind])
    optional = {
        "timestamp": st.integers(-(2**54), 2**54),
        "subagentRunId": text,
        "metadata": st.dictionaries(text, json_values, max_size=2),
        "rawEvent": json_values,
        "unknownKey": json_values,
    }
    chosen = draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=2))
    keys = draw(st.permutations([*fields, *chosen]))
    wire: dict[str, Any] = {"type": kind}
    for key in keys:
        if draw(st.integers(0, 12)) == 0:
            continue  # sometimes missing
        if draw(st.integers(0, 25)) == 0:
            wire[key] = draw(json_values)  # sometimes of the wrong kind
        else:
            wire[key] = draw(fields[key] if key in fields else optional[key])
    return wire


def _same_models(fast: Any, checked: Any) -> None:
    """Same values, same fields set, same key order, recursively through op models."""
    assert type(fast) is type(checked)
    if isinstance(fast, list):
        assert len(fast) == len(checked)
        for a, b in zip(fast, checked, strict=True):
            _same_models(a, b)
    elif isinstance(fast, BaseModel):
        assert list(fast.__dict__) == list(checked.__dict__)
        assert fast.model_fields_set == checked.model_fields_set
        assert fast.__pydantic_extra__ == checked.__pydantic_extra__
        for name in fast.__dict__:
            _same_models(fast.__dict__[name], checked.__dict__[name])
    else:
        assert fast == checked


@paths
@settings(max_examples=800, deadline=None)
@given(_open_wire())
def test_decode_open_values_equal_checked_path(fast_path: bool, wire: dict[str, Any]) -> None:
    line = json.dumps(wire).encode()
    # What the wire parser reads (beyond 64 bits an integer reads as a double).
    parse = _json.loads
    fast_error: DecodeError | None = None
    try:
        fast = decode(line, index=5, fast_path=fast_path)
    except DecodeError as error:
        fast_error = error
    if fast_error is not None:
        with pytest.raises(DecodeError) as checked_error:
            decode_checked(parse(line), wire["type"], 5)
        assert str(fast_error) == str(checked_error.value)
        assert fast_error.path == checked_error.value.path
        return
    checked = decode_checked(parse(line), wire["type"], 5)
    assert fast.warnings == checked.warnings
    assert fast.event == checked.event
    _same_models(fast.event, checked.event)
    assert fast.event is not None
    expected = encode_json(checked.event, fast_path=False)  # type: ignore[arg-type]
    assert encode_json(fast.event, fast_path=fast_path) == expected
    assert encode_sse(fast.event, fast_path=fast_path) == b"data: " + expected + b"\n\n"


class _Colour(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Mood(str, enum.Enum):
    CALM = "calm"


_exotic = st.one_of(
    _json_leaf,
    st.floats(),  # NaN and infinities: refused
    st.just(uuid.UUID(int=7)),  # not JSON: refused by the reference path
    st.just(_Colour.RED),
    st.just(_Level.HIGH),  # an int enum: written as its value
    st.just(_Mood.CALM),  # a str enum: written as its value
    st.just(orjson.Fragment(b'{"raw":1}')),  # orjson would write it as is: refused
    st.just(-0.0),
    st.tuples(st.integers(), text),
    st.just(2**65),
    st.just("lone \ud800"),
    st.dictionaries(st.integers(0, 3), st.integers(), min_size=1, max_size=2),
)
exotic_values = st.recursive(
    _exotic,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


def _encoded(event: BaseEvent, fast_path: bool) -> object:
    # What pydantic itself refuses must be refused on both paths alike, with one message.
    return outcome(lambda: encode_json(event, fast_path=fast_path))


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(["snapshot", "delta", "activity", "patch", "raw", "custom"]),
    exotic_values,
    st.none() | exotic_values,
)
def test_encode_open_values_equal_reference_path(kind: str, value: Any, metadata: Any) -> None:
    # metadata is validated (string keys); the other values are taken as they are
    meta = (
        metadata
        if isinstance(metadata, dict) and all(isinstance(k, str) for k in metadata)
        else None
    )
    ops = [
        {"op": "add", "path": "/a", "value": value},
        {"op": "move", "from": "/a", "path": "/b"},
        {"op": "remove", "path": "/b"},
    ]
    event: BaseEvent = {
        "snapshot": lambda: StateSnapshotEvent(snapshot=value, metadata=meta),
        "delta": lambda: StateDeltaEvent.model_validate(
            {"delta": ops, "metadata": meta, "timestamp": 12}
        ),
        "activity": lambda: ActivitySnapshotEvent(
            message_id="m", activity_type="PLAN", content={"v": value}, replace=False
        ),
        "patch": lambda: ActivityDeltaEvent.model_validate(
            {"messageId": "m", "activityType": "PLAN", "patch": ops}
        ),
        "raw": lambda: RawEvent(event=value, source="s"),
        "custom": lambda: CustomEvent(name="n", value=value, raw_event=metadata),
    }[kind]()
    assert _encoded(event, True) == _encoded(event, False)
    fast = outcome(lambda: encode_sse(event, fast_path=True))
    assert fast == outcome(lambda: encode_sse(event, fast_path=False))


@paths
def test_open_value_fallbacks_keep_the_reference_warnings(fast_path: bool) -> None:
    # An unknown op is removed with a warning, an extra member is kept on its op,
    # a pointer escape is checked by the spec's pattern: the reference path decides.
    wire = (
        b'{"type":"STATE_DELTA","delta":[{"op":"frob","path":"/a"},'
        b'{"op":"add","path":"/a~1b","value":1,"note":"x"}]}'
    )
    decoded = decode(wire, index=1, fast_path=fast_path)
    assert [w.code for w in decoded.warnings] == ["unknown-member"]
    event = decoded.event
    assert isinstance(event, StateDeltaEvent)
    assert len(event.delta) == 1
    assert event.delta[0].__pydantic_extra__ == {"note": "x"}
    with pytest.raises(DecodeError, match=r"delta\.0\.path"):
        decode(
            b'{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a~2","value":1}]}',
            fast_path=fast_path,
        )
    with pytest.raises(DecodeError, match="nest deeper"):
        decode(
            b'{"type":"STATE_SNAPSHOT","snapshot":' + b"[" * 1100 + b"]" * 1100 + b"}",
            fast_path=fast_path,
        )
    deep = b'{"type":"STATE_SNAPSHOT","snapshot":' + b"[" * 1000 + b"]" * 1000 + b"}"
    snapshot = decode(deep, fast_path=fast_path).event
    assert snapshot is not None
    assert encode_json(snapshot, fast_path=fast_path) == deep


def test_open_values_take_the_fast_path() -> None:
    # Not a timing: the plain payloads are built by the open-value builder and
    # written by its writer (the reference path would give equal results).
    from agui_pipes._fastpath.open_json import build_open
    from agui_pipes._fastpath.writers import compile_common_shape

    wire = {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 1.5}]}
    event = build_open(wire, ("STATE_DELTA", tuple(wire)))
    assert isinstance(event, StateDeltaEvent)
    writer = compile_common_shape(StateDeltaEvent)
    assert writer is not None
    assert writer(event.__dict__) == encode_json(event, fast_path=False)
    nan = StateSnapshotEvent(snapshot={"x": float("nan")})
    assert writer is not None and compile_common_shape(StateSnapshotEvent) is not None
    assert compile_common_shape(StateSnapshotEvent)(nan.__dict__) is None  # type: ignore[misc]


def test_open_value_writer_leaves_unvalidated_operations_to_the_reference_path() -> None:
    # An operation built without validation may lack a field or hold an extra
    # one: the writer does not guess what pydantic makes of it.
    valid = StateDeltaEvent.model_validate(
        {
            "delta": [
                {"op": "add", "path": "/a", "value": 1},
                {"op": "copy", "from": "/a", "path": "/b"},
            ]
        }
    )
    add_cls = type(valid.delta[0])
    partial = StateDeltaEvent.model_construct(delta=[add_cls.model_construct(path="/a")])
    extra = StateDeltaEvent.model_construct(
        delta=[add_cls.model_construct(path="/a", value=1, note="x")]
    )
    for event in (valid, partial, extra):
        assert _encoded(event, True) == _encoded(event, False)
    assert encode_json(valid, fast_path=True) == (
        b'{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1},'
        b'{"op":"copy","from":"/a","path":"/b"}]}'
    )


class _Colour(enum.Enum):
    RED = "red"


_UNPORTABLE = [
    # (value, whether the reference path refuses it): a tuple is written as an
    # array by both; the rest JSON cannot carry faithfully.
    pytest.param(uuid.UUID(int=1), True, id="uuid"),
    pytest.param(_Colour.RED, True, id="enum"),
    pytest.param((1, 2), False, id="tuple"),
    pytest.param({1: "int key"}, True, id="int-key"),
    pytest.param(float("nan"), True, id="nan"),
    pytest.param([{"deep": float("inf")}], True, id="nested-inf"),
]


def _encoded_or_error(event: BaseEvent, fast_path: bool) -> bytes | tuple[str, str]:
    try:
        return encode_json(event, fast_path=fast_path)
    except EncodeError as error:
        return str(error), error.path


@pytest.mark.parametrize(("value", "refused"), _UNPORTABLE)
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(
            lambda v: TextMessageContentEvent(message_id="m", delta="x", metadata={"a": v}),
            id="metadata",
        ),
        pytest.param(
            lambda v: TextMessageContentEvent(message_id="m", delta="x", raw_event={"a": v}),
            id="raw-event",
        ),
        pytest.param(
            lambda v: ToolCallResultEvent(
                message_id="m", tool_call_id="c", content="r", metadata={"a": v}
            ),
            id="tool-result",
        ),
    ],
)
def test_a_value_json_cannot_carry_is_refused_on_both_paths(
    build: Any, value: Any, refused: bool
) -> None:
    # Regression: in a flat event's open position (metadata, rawEvent) the fast
    # writer wrote a UUID, an enum or a tuple as pydantic does (a string, an
    # array), while the reference path refuses them with EncodeError.
    event = build(value)
    fast, reference = _encoded_or_error(event, True), _encoded_or_error(event, False)
    assert fast == reference
    assert isinstance(reference, tuple) is refused, reference


# -- messages snapshots -------------------------------------------------------

_objects = st.dictionaries(text, json_values, max_size=2)
_SOURCES = {
    "data": {"value": text, "mimeType": text},
    "url": {"value": text, "mimeType?": text},
    "file": {"value": text, "provider?": text, "mimeType?": text},
}
_PART = {"id?": text, "metadata?": json_values}
_PARTS = {
    "text": {**_PART, "text": text},
    **{kind: {**_PART, "source": "source"} for kind in ("image", "audio", "video", "document")},
}
_COMMON = {"id": text, "metadata?": _objects, "subagentRunId?": text}
_NAMED = {**_COMMON, "name?": text, "encryptedValue?": text}
_MESSAGES = {
    "user": {**_NAMED, "content": "content"},
    "system": {**_NAMED, "content": text},
    "developer": {**_NAMED, "content": text},
    "assistant": {**_NAMED, "content?": text, "toolCalls?": "toolCalls"},
    "tool": {
        **_COMMON,
        "content": "content",
        "toolCallId": text,
        "error?": text,
        "encryptedValue?": text,
    },
    "activity": {**_COMMON, "activityType": text, "content": _objects},
    "reasoning": {**_COMMON, "content": text, "encryptedValue?": text},
}


def _object(draw: st.DrawFn, tag_key: str, tags: dict[str, dict[str, Any]]) -> Any:
    """One wire object of a tagged kind, sometimes hostile (each hostility is rare)."""
    if draw(st.integers(0, 60)) == 0:
        return draw(st.one_of(st.none(), text, st.integers()))  # not an object
    tag = draw(st.sampled_from(sorted(tags)))
    fields = tags[tag]
    item: dict[str, Any] = {}
    if draw(st.integers(0, 40)):
        item[tag_key] = (
            tag
            if draw(st.integers(0, 40))
            else draw(
                st.sampled_from(["robot", "hologram", None, 7])  # unknown member / wrong type
            )
        )
    for key in draw(st.permutations(sorted(fields))):
        name = key.rstrip("?")
        if key.endswith("?") and draw(st.booleans()):
            continue
        if draw(st.integers(0, 40)) == 0:
            continue  # a required key missing, sometimes
        spec = fields[key]
        if draw(st.integers(0, 40)) == 0:
            item[name] = draw(st.one_of(st.none(), json_values))  # a wrong kind, or a null
        elif spec == "source":
            item[name] = _object(draw, "type", _SOURCES)
        elif spec == "content":
            item[name] = (
                draw(text)
                if draw(st.booleans())
                else [_object(draw, "type", _PARTS) for _ in range(draw(st.integers(0, 2)))]
            )
        elif spec == "toolCalls":
            item[name] = [_tool_call(draw) for _ in range(draw(st.integers(0, 2)))]
        else:
            item[name] = draw(spec)
    if draw(st.integers(0, 40)) == 0:
        item["futureKey"] = draw(json_values)  # an undescribed key: stripped, with a warning
    return item


def _tool_call(draw: st.DrawFn) -> Any:
    call: dict[str, Any] = {
        "id": draw(text),
        "type": "function",
        "function": {"name": draw(text), "arguments": draw(text)},
    }
    if draw(st.booleans()):
        call["encryptedValue"] = draw(text)
    if draw(st.booleans()):
        call["metadata"] = draw(_objects)
    if draw(st.integers(0, 30)) == 0:
        call[draw(st.sampled_from(["type", "function", "id"]))] = draw(json_values)
    if draw(st.integers(0, 30)) == 0:
        call["function"] = {"name": draw(text), "arguments": draw(text), "extra": 1}
    return call


@st.composite
def _messages_wire(draw: st.DrawFn) -> dict[str, Any]:
    wire: dict[str, Any] = {"type": "MESSAGES_SNAPSHOT"}
    optional = {
        "timestamp": st.integers(-(2**54), 2**54),
        "metadata": _objects,
        "rawEvent": json_values,
        "unknownKey": json_values,
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=2)):
        wire[key] = draw(optional[key])
    if draw(st.integers(0, 30)):
        wire["messages"] = [
            _object(draw, "role", _MESSAGES) for _ in range(draw(st.integers(0, 4)))
        ]
    return wire


@paths
@settings(max_examples=800, deadline=None)
@given(_messages_wire(), st.booleans())
def test_decode_messages_snapshots_equal_checked_path(
    fast_path: bool, wire: dict[str, Any], ascii_only: bool
) -> None:
    # ensure_ascii=True writes every non-ASCII character as a \u escape.
    line = json.dumps(wire, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    try:
        parsed = _json.loads(line)
    except (ValueError, UnicodeDecodeError):
        # A lone surrogate written raw is not UTF-8: no checked decode to compare
        # with, but both paths must refuse it with one error.
        refused = outcome(lambda: decode(line, index=2, fast_path=fast_path))
        assert isinstance(refused, tuple)
        assert refused[0] is DecodeError
        assert refused == outcome(lambda: decode(line, index=2, fast_path=False))
        return
    fast_error: DecodeError | None = None
    try:
        fast = decode(line, index=2, fast_path=fast_path)
    except DecodeError as error:
        fast_error = error
    if fast_error is not None:
        with pytest.raises(DecodeError) as checked_error:
            decode_checked(parsed, "MESSAGES_SNAPSHOT", 2)
        assert str(fast_error) == str(checked_error.value)
        assert fast_error.path == checked_error.value.path
        return
    checked = decode_checked(parsed, "MESSAGES_SNAPSHOT", 2)
    assert fast.warnings == checked.warnings
    assert fast.event == checked.event
    _same_models(fast.event, checked.event)
    assert fast.event is not None
    expected = _encoded(checked.event, False)  # type: ignore[arg-type]
    assert _encoded(fast.event, fast_path) == expected
    if isinstance(expected, bytes):
        assert encode_sse(fast.event, fast_path=fast_path) == b"data: " + expected + b"\n\n"


def test_messages_snapshots_take_the_fast_path() -> None:
    # Not a timing: an ordinary snapshot is built by the messages builders and
    # written by the open-value writer, equal to what the reference path gives.
    from agui_pipes._fastpath.open_json import build_open
    from agui_pipes._fastpath.writers import compile_common_shape

    wire = json.loads(
        '{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u1","role":"user","content":['
        '{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","value":"u"}}]},'
        '{"id":"a1","role":"assistant","toolCalls":[{"id":"c1","type":"function",'
        '"function":{"name":"f","arguments":"{}"}}]},'
        '{"id":"t1","role":"tool","content":"42","toolCallId":"c1"},'
        '{"id":"x1","role":"activity","activityType":"PLAN","content":{"a":[1]}},'
        '{"id":"r1","role":"reasoning","content":"hmm"}]}'
    )
    checked = decode_checked(json.loads(json.dumps(wire)), "MESSAGES_SNAPSHOT", None).event
    event = build_open(wire, ("MESSAGES_SNAPSHOT", tuple(wire)))
    assert event is not None and checked is not None
    _same_models(event, checked)
    writer = compile_common_shape(type(event))
    assert writer is not None
    assert writer(event.__dict__) == encode_json(checked, fast_path=False)


_message_parts = [
    {"type": "text", "text": "t"},
    {"type": "document", "source": {"type": "file", "value": "f", "provider": "p"}},
]


@settings(max_examples=400, deadline=None)
@given(exotic_values, st.sampled_from(["message", "call", "part", "activity", "event"]))
def test_encode_messages_snapshots_with_exotic_values_equal_reference_path(
    value: Any, where: str
) -> None:
    from ag_ui.core import MessagesSnapshotEvent

    meta = {"v": value}
    messages: list[dict[str, Any]] = [
        {
            "id": "u",
            "role": "user",
            "content": [
                {**_message_parts[0], **({"metadata": value} if where == "part" else {})},
                _message_parts[1],
            ],
            **({"metadata": meta} if where == "message" else {}),
        },
        {
            "id": "a",
            "role": "assistant",
            "content": "c",
            "toolCalls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "n", "arguments": "{}"},
                    **({"metadata": meta} if where == "call" else {}),
                },
            ],
        },
        {
            "id": "x",
            "role": "activity",
            "activityType": "A",
            "content": meta if where == "activity" else {},
        },
    ]
    event = MessagesSnapshotEvent.model_validate(
        {"messages": messages, **({"rawEvent": value} if where == "event" else {})}
    )
    assert _encoded(event, True) == _encoded(event, False)


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic's, on both paths alike
def test_message_models_built_without_validation_take_the_reference_path() -> None:
    # A field missing, an extra field, a value of another kind, a model of
    # another class: the writer does not guess what pydantic makes of them.
    from ag_ui.core import AssistantMessage, MessagesSnapshotEvent, ToolCall, UserMessage

    valid = MessagesSnapshotEvent.model_validate(
        {
            "messages": [
                {"id": "u", "role": "user", "content": "hi"},
                {
                    "id": "a",
                    "role": "assistant",
                    "toolCalls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "n", "arguments": "{}"},
                        }
                    ],
                },
            ]
        }
    )
    user, assistant = valid.messages
    call = assistant.tool_calls[0]  # type: ignore[union-attr]
    odd: list[Any] = [
        [UserMessage.model_construct(id="u")],  # content missing
        [UserMessage.model_construct(id="u", content="x", note="extra")],
        [UserMessage.model_construct(id="u", content=7)],
        [UserMessage.model_construct(id="u", role="assistant", content="x")],
        [user, call],  # a tool call where a message belongs
        [AssistantMessage.model_construct(id="a", tool_calls=[call, user])],
        [
            AssistantMessage.model_construct(
                id="a",
                tool_calls=[
                    ToolCall.model_construct(id="c", function={"name": "n", "arguments": "{}"})
                ],
            )
        ],
        [UserMessage.model_construct(id="u", content=[call])],
        (user,),
    ]
    for messages in [[user, assistant], *odd]:
        event = MessagesSnapshotEvent.model_construct(messages=messages)
        assert _encoded(event, True) == _encoded(event, False), messages
    assert encode_json(valid, fast_path=True) == encode_json(valid, fast_path=False)
