"""SSE / NDJSON codecs: byte-identity with ag_ui's encoder, incremental decoding."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    TextMessageContentEvent,
    TextMessageStartEvent,
)
from ag_ui.encoder import EventEncoder
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import model_serializer

from agui_pipes.codecs import (
    DEFAULT_MAX_FRAME_BYTES,
    CodecError,
    FrameTooLarge,
    NDJSONDecoder,
    SSEDecoder,
    TruncatedFrame,
    encode_json,
    encode_ndjson,
    encode_sse,
    sse_comment,
)
from tests._event_strategies import EVENT_CLASSES, any_event, events_of

# Every test here runs on the fast path and on the reference path (tests/conftest.py).
# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = [pytest.mark.usefixtures("wire_path"), pytest.mark.wire]

_ENCODER = EventEncoder()


def official(event: BaseEvent) -> bytes:
    return _ENCODER.encode(event).encode()


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given positions (any order, duplicates allowed)."""
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    chunks, start = [], 0
    for point in points:
        chunks.append(data[start:point])
        start = point
    chunks.append(data[start:])
    return chunks


cut_lists = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


# -- encoding -------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(any_event)
def test_encode_sse_is_byte_identical_to_the_official_encoder(event: BaseEvent) -> None:
    assert encode_sse(event) == official(event)


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_event_class_encodes_identically(cls: type[BaseEvent], data: st.DataObject) -> None:
    event = data.draw(events_of(cls))
    assert encode_sse(event) == official(event)
    assert encode_ndjson(event) == event.model_dump_json(by_alias=True).encode() + b"\n"


@settings(max_examples=100, deadline=None)
@given(any_event, st.data())
def test_copies_with_updates_encode_identically(event: BaseEvent, data: st.DataObject) -> None:
    # Stages rewrite events with model_copy(update=...), which skips validation:
    # optional fields set back to None must still be omitted.
    names = [n for n in type(event).model_fields if n != "type"]
    chosen = data.draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    update: dict[str, Any] = {}
    for name in chosen:
        field = type(event).model_fields[name]
        update[name] = None if not field.is_required() else getattr(event, name)
    copy = event.model_copy(update=update)
    assert encode_sse(copy) == official(copy)


def test_none_is_kept_where_it_is_data() -> None:
    event = CustomEvent(name="n", value=None, extra_thing=None)
    assert encode_sse(event) == official(event)
    assert b'"value":null' in encode_sse(event)
    assert b'"extra_thing":null' in encode_sse(event)


def test_optional_none_is_omitted() -> None:
    event = TextMessageStartEvent(message_id="m", role=None, timestamp=None)
    assert encode_json(event) == b'{"type":"TEXT_MESSAGE_START","messageId":"m"}'


@pytest.mark.parametrize("raw", [1.5, TextMessageContentEvent(message_id="inner", delta="d")])
def test_optional_values_of_other_types(raw: Any) -> None:
    # A model inside an open field takes the official path.
    event = TextMessageStartEvent(message_id="m", raw_event=raw)
    assert encode_sse(event) == official(event)


def test_extra_field_shadowing_an_optional_alias_takes_the_official_path() -> None:
    event = TextMessageContentEvent.model_construct(
        message_id="m", delta="d", type=EventType.TEXT_MESSAGE_CONTENT
    )
    object.__setattr__(event, "__pydantic_extra__", {"rawEvent": None, "kept": None})
    assert encode_sse(event) == official(event)


class _Shouty(TextMessageContentEvent):
    """A subclass with its own serializer: the fast path must not apply."""

    @model_serializer(mode="wrap")
    def _shout(self, handler: Any) -> Any:
        out = handler(self)
        out["delta"] = str(out["delta"]).upper()
        return out


def test_subclass_with_its_own_serializer_is_respected() -> None:
    event = _Shouty(message_id="m", delta="hi")
    assert encode_sse(event) == official(event)
    assert b'"delta":"HI"' in encode_sse(event)


def test_encode_rejects_non_events() -> None:
    with pytest.raises(TypeError, match="AG-UI event"):
        encode_sse({"type": "RUN_STARTED"})  # type: ignore[arg-type]


def test_sse_comment() -> None:
    assert sse_comment() == b":\n\n"
    assert sse_comment("keep-alive") == b": keep-alive\n\n"
    with pytest.raises(ValueError, match="line break"):
        sse_comment("a\nb")


# -- SSE decoding ---------------------------------------------------------


def decode_sse(chunks: list[bytes], **kwargs: Any) -> list[str]:
    decoder = SSEDecoder(**kwargs)
    out: list[str] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(any_event, max_size=6), cut_lists)
def test_sse_round_trip_split_anywhere(events: list[BaseEvent], cuts: list[int]) -> None:
    wire = b"".join(encode_sse(e) for e in events)
    payloads = decode_sse(split_at(wire, cuts))
    assert payloads == [encode_json(e).decode() for e in events]
    assert [type(e).model_validate_json(p) for e, p in zip(events, payloads, strict=True)] == [
        type(e).model_validate_json(encode_json(e)) for e in events
    ]


# A generated event stream *with its expected payloads*: an oracle independent
# of the decoder. Values never contain line breaks (they cannot on the wire).
line_values = st.text(
    alphabet=st.characters(codec="utf-8", blacklist_characters="\r\n"), max_size=10
)
field_names = st.text(
    alphabet=st.characters(codec="utf-8", blacklist_characters="\r\n:"), min_size=1, max_size=6
).filter(lambda name: name != "data" and not name.startswith("\ufeff"))
newlines = st.sampled_from(["\n", "\r", "\r\n"])


@st.composite
def data_line(draw: st.DrawFn) -> tuple[str, str]:
    """(line, the value it contributes)."""
    value = draw(line_values)
    form = draw(st.sampled_from(["space", "nospace", "bare"]))
    if form == "bare":
        return "data", ""
    if form == "space":
        return "data: " + value, value
    return "data:" + value, value[1:] if value.startswith(" ") else value


@st.composite
def noise_line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["comment", "event", "id", "retry", "unknown", "bare"]))
    if kind == "comment":
        return ":" + draw(line_values)
    if kind == "retry":
        return "retry: " + draw(st.sampled_from(["10", "x", ""]))
    if kind in ("event", "id"):
        return f"{kind}: " + draw(line_values)
    name = draw(field_names)
    return name if kind == "bare" else name + ":" + draw(line_values)


@st.composite
def sse_stream(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    text, expected = "", []

    def newline() -> str:
        # A CR followed by an LF would be one CRLF, not two line ends.
        end = draw(newlines)
        return "\r" if text.endswith("\r") and end == "\n" else end

    if draw(st.booleans()):
        text += "\ufeff"
    for _ in range(draw(st.integers(0, 5))):
        values: list[str] = []
        lines = draw(st.lists(st.one_of(data_line(), noise_line()), max_size=5))
        for line in lines:
            if isinstance(line, tuple):
                values.append(line[1])
                line = line[0]
            text += line
            text += newline()
        text += newline()  # the blank line that ends the frame
        if values:
            expected.append("\n".join(values))
    return text.encode(), expected


@settings(max_examples=300, deadline=None)
@given(sse_stream(), cut_lists)
def test_sse_decoder_follows_the_spec_whatever_the_chunking(
    stream: tuple[bytes, list[str]], cuts: list[int]
) -> None:
    wire, expected = stream
    assert decode_sse(split_at(wire, cuts)) == expected
    assert decode_sse([bytes([b]) for b in wire]) == expected


def test_crlf_split_between_chunks_is_one_line_end() -> None:
    assert decode_sse([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == ["a\nb"]
    # A lone CR then a blank LF line: CR ends 'data: a', LF is an empty line.
    assert decode_sse([b"data: a\r", b"\r\n"]) == ["a"]


def test_utf8_split_inside_a_code_point() -> None:
    wire = "data: h\u00e9llo \U0001f600\n\n".encode()
    assert decode_sse([wire[:9], wire[9:19], wire[19:]]) == ["h\u00e9llo \U0001f600"]


def test_fields_are_recorded_but_do_not_filter() -> None:
    decoder = SSEDecoder()
    out = decoder.feed(b"event: other\nid: 7\nretry: 1500\ndata: x\n\n")
    assert out == ["x"]
    assert decoder.last_event_id == "7"
    assert decoder.dispatched_event_id == "7"
    assert decoder.retry_ms == 1500


@pytest.mark.parametrize("fast", [True, False])
def test_dispatched_event_id_counts_only_frames_that_ended(fast: bool) -> None:
    # A resuming client must send the id of the last frame it was given: a frame
    # cut after its id line (the connection dropped mid-frame) must not count.
    decoder = SSEDecoder(fast_path=fast)
    assert decoder.feed(b"id: e:r:1\ndata: a\n\nid: e:r:2\ndata: b") == ["a"]
    assert decoder.last_event_id == "e:r:2"  # the buffer: set at the id line
    assert decoder.dispatched_event_id == "e:r:1"  # the last frame dispatched
    assert decoder.feed(b"\n\n") == ["b"]
    assert decoder.dispatched_event_id == "e:r:2"
    # Frames without an id (the fast path's) keep the last id, as the spec says.
    assert decoder.feed(b"data: c\n\ndata: d\n\n") == ["c", "d"]
    assert decoder.dispatched_event_id == "e:r:2"
    # An id with no data still sets it at dispatch (WHATWG), and an empty id resets it.
    assert decoder.feed(b"id: e:r:3\n\n") == []
    assert decoder.dispatched_event_id == "e:r:3"
    assert decoder.feed(b"id\ndata: e\n\n") == ["e"]
    assert decoder.dispatched_event_id == ""


def test_truncated_frame_is_reported_on_close() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"type":"RUN_STARTED"}\n\ndata: {"type"') == [
        '{"type":"RUN_STARTED"}'
    ]
    with pytest.raises(TruncatedFrame, match="middle of a frame"):
        decoder.close()


def test_data_without_blank_line_is_truncated() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\n") == []
    assert decoder.in_frame
    with pytest.raises(TruncatedFrame):
        decoder.close()


def test_clean_end_after_comment_or_fields() -> None:
    assert decode_sse([b"data: x\n\n: bye\n"]) == ["x"]
    assert decode_sse([b"data: x\n\nevent: y\n"]) == ["x"]


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=8, max_value=200), cut_lists, st.booleans())
def test_frame_cap_is_enforced_whatever_the_chunking(
    cap: int, cuts: list[int], many_lines: bool
) -> None:
    small = b"data: " + b"s" * (cap // 4) + b"\n\n"
    big_value = b"x" * (cap + 1)
    if many_lines:
        big = b"".join(b"data: " + big_value[i : i + 3] + b"\n" for i in range(0, cap + 1, 3))
    else:
        big = b"data: " + big_value + b"\n"
    decoder = SSEDecoder(max_frame_bytes=cap)
    out: list[str] = []

    def feed_all() -> None:
        for chunk in split_at(small + big + b"\n", cuts):
            out.extend(decoder.feed(chunk))

    with pytest.raises(FrameTooLarge, match=f"cap of {cap} bytes.*max_frame_bytes"):
        feed_all()
    # Payloads completed by the chunk that overflowed are not returned.
    assert out in ([], ["s" * (cap // 4)])
    with pytest.raises(CodecError, match="already failed"):
        decoder.feed(b"data: y\n\n")


def test_frame_of_exactly_the_cap_is_accepted() -> None:
    # The frame's line with its line end: 5 + 4 + 1 bytes.
    assert decode_sse([b"data:vvvv\n\n"], max_frame_bytes=10) == ["vvvv"]
    with pytest.raises(FrameTooLarge):
        decode_sse([b"data:vvvvv\n\n"], max_frame_bytes=10)


def test_decoder_rejects_bad_use() -> None:
    with pytest.raises(ValueError, match="positive"):
        SSEDecoder(max_frame_bytes=0)
    with pytest.raises(TypeError, match="bytes"):
        SSEDecoder().feed("data: x\n\n")  # type: ignore[arg-type]
    decoder = SSEDecoder()
    decoder.close()
    with pytest.raises(CodecError, match="closed"):
        decoder.feed(b"data: x\n\n")


# -- NDJSON ---------------------------------------------------------------


def decode_ndjson(chunks: list[bytes], **kwargs: Any) -> list[str]:
    decoder = NDJSONDecoder(**kwargs)
    out: list[str] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(any_event, max_size=6), cut_lists, st.booleans(), st.booleans())
def test_ndjson_round_trip_split_anywhere(
    events: list[BaseEvent], cuts: list[int], crlf: bool, last_newline: bool
) -> None:
    lines = [encode_ndjson(e) for e in events]
    if crlf:
        lines = [line[:-1] + b"\r\n" for line in lines]
    wire = b"".join(lines)
    if wire and not last_newline:
        wire = wire.rstrip(b"\r\n")
    assert decode_ndjson(split_at(wire, cuts)) == [encode_json(e).decode() for e in events]


def test_ndjson_skips_blank_lines() -> None:
    assert decode_ndjson([b'\n{"a":1}\n  \n\r\n{"b":2}']) == ['{"a":1}', '{"b":2}']


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=4, max_value=100), cut_lists)
def test_ndjson_line_cap(cap: int, cuts: list[int]) -> None:
    wire = b"ok\n" + b"x" * (cap + 1) + b"\nafter\n"
    with pytest.raises(FrameTooLarge, match=f"cap of {cap} bytes"):
        decode_ndjson(split_at(wire, cuts), max_line_bytes=cap)


# -- bytes payloads (feed_bytes / close_bytes) -----------------------------


def _run_decoder(decoder: SSEDecoder | NDJSONDecoder, chunks: list[bytes], text: bool) -> Any:
    """Every payload the decoder yields, then the error that stopped it (type and text)."""
    out: list[Any] = []
    try:
        for chunk in chunks:
            out.extend(decoder.feed(chunk) if text else decoder.feed_bytes(chunk))
        out.extend(decoder.close() if text else decoder.close_bytes())
    except CodecError as exc:
        return out, (type(exc), str(exc))
    return out, None


# Invalid UTF-8 of every kind (stray continuation, overlong, surrogate, truncated
# sequence) spliced into otherwise valid streams.
bad_utf8 = st.sampled_from([b"\xff", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\xf0"])


@st.composite
def spliced(draw: st.DrawFn, wire: bytes) -> bytes:
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(wire)))
        wire = wire[:at] + draw(st.one_of(bad_utf8, st.binary(max_size=4))) + wire[at:]
    return wire


@settings(max_examples=300, deadline=None)
@given(sse_stream(), cut_lists, st.data())
def test_sse_bytes_payloads_are_the_text_payloads_encoded(
    stream: tuple[bytes, list[str]], cuts: list[int], data: st.DataObject
) -> None:
    wire = data.draw(spliced(stream[0]))
    chunks = split_at(wire, cuts)
    texts, text_error = _run_decoder(SSEDecoder(), chunks, text=True)
    raw, raw_error = _run_decoder(SSEDecoder(), chunks, text=False)
    assert all(type(payload) is bytes for payload in raw)
    assert raw == [payload.encode() for payload in texts]
    assert raw_error == text_error


@settings(max_examples=200, deadline=None)
@given(st.lists(any_event, max_size=6), cut_lists, st.data())
def test_ndjson_bytes_lines_are_the_text_lines_encoded(
    events: list[BaseEvent], cuts: list[int], data: st.DataObject
) -> None:
    wire = data.draw(spliced(b"".join(encode_ndjson(e) for e in events)))
    chunks = split_at(wire, cuts)
    texts, text_error = _run_decoder(NDJSONDecoder(), chunks, text=True)
    raw, raw_error = _run_decoder(NDJSONDecoder(), chunks, text=False)
    assert all(type(line) is bytes for line in raw)
    assert raw == [line.encode() for line in texts]
    assert raw_error == text_error


@settings(max_examples=200, deadline=None)
@given(st.lists(any_event, max_size=6), cut_lists, st.data())
def test_ndjson_fast_lines_are_the_reference_lines(
    events: list[BaseEvent], cuts: list[int], data: st.DataObject
) -> None:
    # The fast framing keeps a chunk of plain lines at once; the reference checks
    # each line in turn. Same lines, same errors, on spliced (broken) bytes too.
    wire = data.draw(spliced(b"".join(encode_ndjson(e) for e in events)))
    chunks = split_at(wire, cuts)
    cap = data.draw(st.sampled_from([1 << 24, 64, 8]))  # lines over the cap fail alike
    fast = _run_decoder(NDJSONDecoder(max_line_bytes=cap, fast_path=True), chunks, text=False)
    reference = _run_decoder(NDJSONDecoder(max_line_bytes=cap, fast_path=False), chunks, text=False)
    assert fast == reference


def test_sse_bytes_mode_replaces_invalid_utf8_like_the_text_mode() -> None:
    decoder = SSEDecoder()
    assert decoder.feed_bytes(b"data: caf\xc3\xa9 \xff!\n\n") == ["café \ufffd!".encode()]
    assert decoder.feed_bytes(b"data: plain\n\n") == [b"plain"]
    assert decoder.feed(b"data: mixed \xe2\x82\n\n") == ["mixed \ufffd"]
    assert decoder.close_bytes() == []


def test_ndjson_bytes_mode_rejects_invalid_utf8() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed_bytes('{"a":"é"}\n'.encode()) == ['{"a":"é"}'.encode()]
    with pytest.raises(CodecError, match="not valid UTF-8"):
        decoder.feed_bytes(b'{"a":"\xff"}\n')
    assert NDJSONDecoder().close_bytes() == []
    last = NDJSONDecoder()
    assert last.feed_bytes(b'{"a":1}\r\n{"b":2}') == [b'{"a":1}']
    assert last.close_bytes() == [b'{"b":2}']


@pytest.mark.parametrize(
    "payload",
    [
        b'\xef\xbb\xbf{"type":"RUN_STARTED","threadId":"t","runId":"r"}',  # a BOM
        b'{\x00"\x00t\x00',  # looks like UTF-16 to json's encoding detection
        b"\x00\x00\x00{",
    ],
)
def test_decode_treats_bytes_and_their_text_alike(payload: bytes) -> None:
    # Relays hand decode() bytes where they used to hand it text: the outcome must not
    # depend on which (the standard library would guess UTF-16/32 or skip a BOM for bytes).
    from agui_pipes.codecs import decode

    def outcome(wire: bytes | str) -> str:
        try:
            return repr(decode(wire, index=0))
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"

    assert outcome(payload) == outcome(payload.decode("utf-8"))
    assert outcome(payload).startswith("DecodeError")


@pytest.mark.parametrize("split", [0, 1, 2, 3, 4])
def test_ndjson_decoder_drops_a_leading_bom_however_it_is_chunked(split: int) -> None:
    # SSE and the JSON readers accepted a BOM; NDJSON refused the first line.
    data = b'\xef\xbb\xbf{"a": 1}\n{"b": 2}\n'
    decoder = NDJSONDecoder()
    lines = decoder.feed(data[:split]) + decoder.feed(b"") + decoder.feed(data[split:])
    assert lines == ['{"a": 1}', '{"b": 2}']
    assert decoder.close() == []


def test_ndjson_decoder_keeps_a_bom_that_is_not_at_the_start() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed_bytes(b'{"a": 1}\n\xef\xbb\xbf{"b": 2}\n') == [
        b'{"a": 1}',
        b'\xef\xbb\xbf{"b": 2}',
    ]


# -- the SSE fast path for ordinary frames ---------------------------------

# Pieces of SSE text: mostly ordinary frames (one ``data:`` line, LF, blank
# line), mixed with everything the fast path must leave to the line-by-line
# path: CR and CRLF, comments, other fields, multi-line data, stray blank lines.
_sse_values = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", blacklist_characters="\r\n"), max_size=8),
    st.sampled_from(['{"type":"RUN_STARTED"}', " lead", ""]),
)


@st.composite
def _sse_piece(draw: st.DrawFn) -> bytes:
    value = draw(_sse_values).encode()
    kind = draw(
        st.sampled_from(
            [
                "data",
                "data",
                "data",
                "nospace",
                "bare",
                "multi",
                "crlf",
                "cr",
                "comment",
                "event",
                "id",
                "retry",
                "blank",
                "open",
                "bad",
            ]
        )
    )
    pieces = {
        "data": b"data: " + value + b"\n\n",
        "nospace": b"data:" + value + b"\n\n",
        "bare": b"data\n\n",
        "multi": b"data: " + value + b"\ndata: " + value + b"\n\n",
        "crlf": b"data: " + value + b"\r\n\r\n",
        "cr": b"data: " + value + b"\r\r",
        "comment": b":" + value + b"\n",
        "event": b"event: " + value + b"\n",
        "id": b"id: " + value + b"\n",
        "retry": b"retry: " + draw(st.sampled_from([b"10", b"x"])) + b"\n",
        "blank": b"\n",
        "open": b"data: " + value,  # a frame still open (the stream may end in it)
        "bad": draw(bad_utf8),
    }
    return pieces[kind]


def _decoder_run(wire: bytes, cuts: list[int], text: bool, fast: bool, cap: int) -> tuple[Any, ...]:
    """Payloads, error, and the decoder's visible state after feeding ``wire``."""
    decoder = SSEDecoder(max_frame_bytes=cap, fast_path=fast)
    payloads, error = _run_decoder(decoder, split_at(wire, cuts), text)
    state = (
        decoder.last_event_id,
        decoder.dispatched_event_id,
        decoder.retry_ms,
        decoder.event_type,
        decoder.in_frame,
    )
    return payloads, error, state


@settings(max_examples=500, deadline=None)
@given(
    st.lists(_sse_piece(), max_size=12),
    st.lists(st.integers(0, 300), max_size=8),
    st.booleans(),
    st.one_of(st.just(DEFAULT_MAX_FRAME_BYTES), st.integers(1, 40)),
)
def test_sse_fast_path_matches_the_line_by_line_path(
    pieces: list[bytes], cuts: list[int], text: bool, cap: int
) -> None:
    wire = b"".join(pieces)
    fast = _decoder_run(wire, cuts, text, True, cap)
    assert fast == _decoder_run(wire, cuts, text, False, cap)
    assert all(type(p) is (str if text else bytes) for p in fast[0])


def test_sse_fast_path_takes_ordinary_frames_and_stops_at_the_first_other() -> None:
    wire = b'data: {"a":1}\n\ndata:2\n\n: keep-alive\n\ndata: 3\ndata: 4\n\ndata: 5\n\ndata: 6'
    for fast in (True, False):
        decoder = SSEDecoder(fast_path=fast)
        assert decoder.feed_bytes(wire) == [b'{"a":1}', b"2", b"3\n4", b"5"]
        assert decoder.in_frame
        assert decoder.feed(b"\n\n") == ["6"]
        assert not decoder.in_frame


def test_sse_fast_path_keeps_the_frame_cap() -> None:
    frame = b"data: " + b"x" * 10 + b"\n\n"  # 17 bytes counted (16 and one line end)
    assert SSEDecoder(max_frame_bytes=17, fast_path=True).feed_bytes(frame) == [b"x" * 10]
    for fast in (True, False):
        with pytest.raises(FrameTooLarge, match="size cap of 16 bytes"):
            SSEDecoder(max_frame_bytes=16, fast_path=fast).feed_bytes(frame)
