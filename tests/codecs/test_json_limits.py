"""Deep nesting, huge numbers and NaN / Infinity: one clean refusal on every path.

JSON has no NaN or Infinity, a number beyond a double reads as infinity in
every JSON peer, and orjson parses at most 1024 levels of arrays and objects
(``agui_pipes.Limits.max_depth``). Whatever path an event takes — ``decode``
of text or bytes, ``decode_many``, the standard-library fallback parser, the
codecs' incremental decoders, the relay's fast path and its bypass —
such input is a ``DecodeError`` naming the event, where it is and the limit,
never a ``RecursionError`` / ``ValueError`` traceback or a silent ``null``.
The encoder refuses the same values when a stage or agent builds them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    UserMessage,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes import DecodeError, StreamTransformer, TransformerChain
from agui_pipes._cli import main
from agui_pipes._foundation import json as agui_json
from agui_pipes._foundation.limits import DEFAULT_LIMITS
from agui_pipes._protocol.encode import encode_tree
from agui_pipes.codecs import (
    EncodeError,
    NDJSONDecoder,
    SSEDecoder,
    decode,
    decode_many,
    encode_json,
    encode_ndjson,
    encode_sse,
)
from agui_pipes.relay import Relay
from tests._event_strategies import any_event

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

LIMIT = DEFAULT_LIMITS.max_depth


def nested(levels: int, leaf: str = "0") -> str:
    """``levels`` arrays around ``leaf`` (levels of the value itself)."""
    return "[" * levels + leaf + "]" * levels


def custom(value: str) -> str:
    return '{"type":"CUSTOM","name":"n","value":' + value + "}"


# The event object is level 1, so its value may nest LIMIT - 1 levels.
DEEPEST_ACCEPTED = custom(nested(LIMIT - 1))
ONE_TOO_DEEP = custom(nested(LIMIT))
VERY_DEEP = custom(nested(100_000))
HUGE_INT = custom("1" * 1_000_000)

# (wire text, the words the error must contain, the field path)
HOSTILE: dict[str, tuple[str, str, str]] = {
    "1025-deep": (ONE_TOO_DEEP, f"limit of {LIMIT} levels", ""),
    "100k-deep": (VERY_DEEP, f"limit of {LIMIT} levels", ""),
    "1M-digit integer": (HUGE_INT, "range of a double", "value"),
    "1e400": (custom("1e400"), "range of a double", "value"),
    "NaN": (custom("NaN"), "NaN is not JSON", "value"),
    "Infinity": (custom("Infinity"), "Infinity is not JSON", "value"),
    "-Infinity": (custom("-Infinity"), "-Infinity is not JSON", "value"),
    "nested NaN": (custom('{"a":[1,{"b":NaN}]}'), "NaN is not JSON", "value.a.1.b"),
    "NaN timestamp": (
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","timestamp":NaN}',
        "NaN is not JSON",
        "timestamp",
    ),
    "NaN in state": (
        '{"type":"STATE_SNAPSHOT","snapshot":{"x":[Infinity]}}',
        "Infinity is not JSON",
        "snapshot.x.0",
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
@pytest.mark.parametrize("form", ["text", "bytes"])
def test_decode_refuses_with_a_clean_error_naming_event_path_and_limit(
    name: str, form: str
) -> None:
    wire, words, path = HOSTILE[name]
    payload: str | bytes = wire if form == "text" else wire.encode()
    with pytest.raises(DecodeError) as caught:
        decode(payload, index=7)
    error = caught.value
    assert words in str(error)
    assert error.index == 7
    assert error.path == path
    assert str(json.loads(wire.split(",")[0] + "}")["type"]) in str(error)  # names the type


@pytest.mark.parametrize("name", list(HOSTILE))
def test_decode_many_names_the_index(name: str) -> None:
    wire, words, _ = HOSTILE[name]
    good = '{"type":"TEXT_MESSAGE_START","messageId":"m"}'
    decoded = decode_many([good, wire.encode()], start=3)
    assert next(decoded).event is not None
    with pytest.raises(DecodeError) as caught:
        next(decoded)
    assert words in str(caught.value)
    assert caught.value.index == 4


def test_the_deepest_nesting_orjson_accepts_is_accepted_and_re_encoded_unchanged() -> None:
    event = decode(DEEPEST_ACCEPTED.encode()).event
    assert isinstance(event, CustomEvent)
    # pydantic's serializer stops at 255 levels: the encoder writes deeper
    # values itself, byte for byte what the compact encoding is.
    assert encode_json(event) == DEEPEST_ACCEPTED.encode()
    assert encode_sse(event) == b"data: " + DEEPEST_ACCEPTED.encode() + b"\n\n"
    assert encode_ndjson(event) == DEEPEST_ACCEPTED.encode() + b"\n"


def test_big_integers_read_as_orjson_and_json_parse_read_them() -> None:
    # Within 64 bits an integer stays exact; beyond, a double (as JSON.parse);
    # both parsers agree.
    for text in (str(2**64 - 1), str(-(2**63)), "1" + "0" * 30, "-" + "9" * 300):
        assert agui_json._stdlib_loads(text) == orjson.loads(text)
        assert type(agui_json._stdlib_loads(text)) is type(orjson.loads(text))


@pytest.mark.parametrize(
    ("wire", "path"),
    [
        # orjson refuses the lone surrogate first, so the standard-library
        # fallback parses these: it must refuse what orjson would have.
        ('{"type":"CUSTOM","name":"\\ud800","value":NaN}', "value"),
        ('{"type":"CUSTOM","name":"\\ud800","value":[1e999]}', "value.0"),
        ('{"type":"CUSTOM","name":"\\ud800","value":%s}' % ("7" * 5000), "value"),
        (custom('"\\ud800"')[:-1] + ',"metadata":{"k":-Infinity}}', "metadata.k"),
    ],
)
def test_the_fallback_parser_refuses_what_orjson_refuses(wire: str, path: str) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(wire)
    with pytest.raises(DecodeError) as caught:
        decode(wire)
    assert caught.value.path == path


def test_the_fallback_parser_refuses_nesting_past_the_limit() -> None:
    surrogate = '{"type":"CUSTOM","name":"\\ud800","value":%s}'
    assert decode(surrogate % nested(LIMIT - 1)).event is not None
    for levels in (LIMIT, 100_000):
        with pytest.raises(DecodeError, match=f"limit of {LIMIT} levels"):
            decode(surrogate % nested(levels))


def test_strings_that_spell_nan_are_plain_strings() -> None:
    wire = custom('["NaN","Infinity"]')
    event = decode(wire).event
    assert isinstance(event, CustomEvent)
    assert encode_json(event) == wire.encode()


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_incremental_decoders_hand_the_relay_a_clean_error(name: str) -> None:
    wire, words, path = HOSTILE[name]
    good = b'{"type":"TEXT_MESSAGE_START","messageId":"m"}'
    for framed, decoder in (
        (b"data: " + good + b"\n\ndata: " + wire.encode() + b"\n\n", SSEDecoder()),
        (good + b"\n" + wire.encode() + b"\n", NDJSONDecoder()),
    ):
        payloads = decoder.feed_bytes(framed)
        assert len(payloads) == 2
        relay = Relay(TransformerChain([]))
        with pytest.raises(DecodeError) as caught:
            relay.feed(payloads)
        assert caught.value.index == 1
        assert caught.value.path == path
        assert words in str(caught.value)
        assert relay.take_unsent() == b"data: " + good + b"\n\n"


class _PassContent(StreamTransformer):
    """Promises to pass every TEXT_MESSAGE_CONTENT: the relay's lane is on for it."""

    event_types = ("TEXT_MESSAGE_CONTENT",)

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event,)

    def passes(self, event_class: type[BaseEvent], fields: frozenset[str]) -> tuple[()]:
        return ()


def test_the_bypass_refuses_nan_too() -> None:
    # The relay's bypass is fast-path machinery: asked for explicitly, so this holds
    # with AGUI_PIPES_FAST_PATH=0 in the environment too.
    good = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}'
    bad = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a","timestamp":NaN}'
    relay = Relay(TransformerChain([_PassContent()]), fast_path=True)
    assert relay.feed([good]) == b"data: " + good + b"\n\n"
    assert relay.events_forwarded == 1
    with pytest.raises(DecodeError, match="NaN is not JSON") as caught:
        relay.feed([good, bad])
    assert caught.value.index == 2
    assert caught.value.path == "timestamp"


def deep_dict(levels: int) -> Any:
    value: Any = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("event", "path"),
    [
        (CustomEvent(name="n", value=float("nan")), "value"),
        (CustomEvent(name="n", value={"a": [1.5, float("inf")]}), "value.a.1"),
        (StateSnapshotEvent(snapshot={"s": 1}, metadata={"m": float("-inf")}), "metadata.m"),
        (TextMessageContentEvent(message_id="m", delta="d", raw_event=float("nan")), "rawEvent"),
        (
            MessagesSnapshotEvent(
                messages=[UserMessage(id="1", content="hi", metadata={"x": [float("inf")]})]
            ),
            "messages.0.metadata.x.0",
        ),
    ],
)
def test_a_non_finite_float_built_in_python_is_refused_not_written_as_null(
    event: BaseEvent, path: str
) -> None:
    for encode in (encode_json, encode_sse, encode_ndjson):
        with pytest.raises(EncodeError, match="not JSON") as caught:
            encode(event)
        assert caught.value.path == path
        assert caught.value.event_type == event.type.value


def test_a_value_nested_past_the_limit_is_refused_at_encode() -> None:
    for levels in (LIMIT, 5000):
        event = CustomEvent(name="n", value=deep_dict(levels))
        with pytest.raises(EncodeError, match=f"limit of {LIMIT} levels") as caught:
            encode_json(event)
        assert caught.value.path.startswith("value.a.a")
    # One level less fits exactly: the event is level 1.
    written = encode_json(CustomEvent(name="n", value=deep_dict(LIMIT - 1)))
    assert orjson.loads(written)["name"] == "n"


def test_values_past_pydantics_depth_encode_like_shallow_ones() -> None:
    # pydantic's writer stops at 255 levels; the events between it and the
    # limit are written by the iterative writer with the same bytes.
    for levels in (254, 256, 600):
        value = deep_dict(levels)
        event = CustomEvent(name="n", value=value, metadata={"k": [1, 2.5, None, "x"]})
        written = encode_json(event)
        assert orjson.loads(written) == {
            "type": "CUSTOM",
            "metadata": {"k": [1, 2.5, None, "x"]},
            "name": "n",
            "value": value,
        }
        compact = json.dumps(orjson.loads(written), separators=(",", ":"), ensure_ascii=False)
        assert written == compact.encode()


def test_an_object_that_is_not_json_is_refused_cleanly() -> None:
    event = CustomEvent(name="n", value=deep_dict(300))
    event.value["a"]["x"] = object()
    with pytest.raises(EncodeError, match="not a JSON value") as caught:
        encode_json(event)
    assert caught.value.path == "value.a.x"


class _Nan(StreamTransformer):
    """A stage that computes a NaN into a custom event."""

    event_types = ("TEXT_MESSAGE_START",)

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event, CustomEvent(name="ratio", value={"r": float("nan")}))


def test_a_stage_producing_nan_stops_the_relay_with_an_encode_error() -> None:
    relay = Relay(TransformerChain([_Nan()]))
    with pytest.raises(EncodeError, match=r"value\.r"):
        relay.feed([b'{"type":"TEXT_MESSAGE_START","messageId":"m"}'])


def nesting(levels: int, kinds: list[bool]) -> str:
    """``levels`` containers, arrays or objects by ``kinds`` (cycled), around a 0."""
    opened = []
    closed = []
    for level in range(levels):
        if kinds[level % len(kinds)]:
            opened.append('{"k":')
            closed.append("}")
        else:
            opened.append("[")
            closed.append("]")
    return "".join(opened) + "0" + "".join(reversed(closed))


@settings(max_examples=40, deadline=None)
@given(
    levels=st.integers(LIMIT - 30, LIMIT + 30),
    kinds=st.lists(st.booleans(), min_size=1, max_size=5),
    surrogate=st.booleans(),
)
def test_nesting_around_the_limit_decodes_or_names_the_limit(
    levels: int, kinds: list[bool], surrogate: bool
) -> None:
    name = '"\\ud800"' if surrogate else '"n"'  # the surrogate sends it to the fallback parser
    wire = '{"type":"CUSTOM","name":' + name + ',"value":' + nesting(levels, kinds) + "}"
    for payload in (wire, wire.encode()):
        refused = _refusal(lambda p=payload: decode(p).event)  # type: ignore[misc]
        if refused is None:
            assert levels + 1 <= LIMIT
            event = decode(payload).event
            assert isinstance(event, CustomEvent)
            if not surrogate:
                assert encode_json(event) == wire.encode()
        else:
            assert f"limit of {LIMIT} levels" in refused
            assert levels + 1 > LIMIT
    relay = Relay(TransformerChain([]))
    refused = _refusal(lambda: relay.feed([wire.encode()]))
    assert (refused is None) == (levels + 1 <= LIMIT)
    assert refused is None or f"limit of {LIMIT} levels" in refused


def _refusal(attempt: Callable[[], object]) -> str | None:
    """The DecodeError's message if ``attempt`` raises one (any other exception fails)."""
    try:
        attempt()
    except DecodeError as error:
        return str(error)
    return None


@pytest.mark.parametrize("sync", [True, False])
def test_run_reports_a_stage_built_nan_as_a_rejection_not_a_traceback(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes], sync: bool
) -> None:
    chain = "version: 1\ntransformers:\n  - type: tests._cli_stages:NanRatio\n"
    if not sync:
        chain += "  - type: tests._cli_stages:AsyncPass\n"  # chain.apply instead of the relay
    chain_file = tmp_path / "chain.yaml"
    chain_file.write_text(chain)
    source = tmp_path / "input.ndjson"
    source.write_text(
        '{"type":"TEXT_MESSAGE_START","messageId":"m"}\n'
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"nan"}\n'
    )
    code = main(["run", "--allow-imports", "-c", str(chain_file), str(source)])
    captured = capsysbinary.readouterr()
    assert code == 1
    err = captured.err.decode()
    assert "cannot be written" in err
    assert "value.r" in err
    assert "Traceback" not in err
    assert b"null" not in captured.out


@settings(max_examples=200, deadline=None)
@given(any_event)
def test_the_deep_writer_writes_what_the_official_encoder_writes(event: BaseEvent) -> None:
    # The writer for events past pydantic's 255 levels applies ag_ui's omission
    # rule itself, to the event and every nested model: on events pydantic can
    # write, it must say the same (numbers may be spelled differently).
    official = event.model_dump_json(by_alias=True)
    assert json.loads(encode_tree(event)) == json.loads(official)


def test_a_deep_value_inside_a_replayed_message_is_written_too() -> None:
    # A nested model (an activity message) holding a value past pydantic's
    # 255 levels: the writer applies the omission rule to nested models too.
    wire = (
        '{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"1","role":"activity",'
        '"activityType":"x","content":{"a":' + nested(600) + '}},{"id":"2","role":"user",'
        '"content":[{"type":"text","text":"hi"}]}]}'
    )
    event = decode(wire).event
    assert event is not None
    assert encode_json(event) == wire.encode()
