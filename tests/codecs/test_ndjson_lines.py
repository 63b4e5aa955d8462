"""NDJSONDecoder.feed_bytes: the chunk-wide fast path gives what the per-line path gives.

``feed_bytes`` checks a whole chunk at once (no CR, no line over the cap, all
UTF-8) and then keeps its non-blank lines as they are; anything else goes
line by line. The text mode (``feed``) always goes line by line, so it is the
reference: on any stream, cut anywhere, the bytes lines must be the text lines
encoded, and the error (type and message) the same.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes.codecs import NDJSONDecoder

_line_text = st.text(alphabet=st.sampled_from(list('{}":,ab01é✓€𝄞 \t\x0b\x0c')), max_size=24)
_line = st.one_of(
    _line_text.map(lambda s: s.encode()),
    st.sampled_from([b"", b" ", b"\t \x0c", b"\r", b"  \r"]),  # blank and whitespace-only
    st.binary(max_size=6),  # anything, invalid UTF-8 included
)
_ending = st.sampled_from([b"\n", b"\r\n", b"\n\n"])


@st.composite
def _wire(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(st.tuples(_line, _ending), max_size=12))
    wire = b"".join(line + end for line, end in parts)
    return wire + draw(st.one_of(st.just(b""), _line))  # sometimes no final newline


def _cut(wire: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(wire)) for c in cuts})
    chunks, start = [], 0
    for point in points:
        chunks.append(wire[start:point])
        start = point
    chunks.append(wire[start:])
    return chunks


def _decode(chunks: list[bytes], text: bool, cap: int) -> tuple[list[Any], Any]:
    decoder = NDJSONDecoder(max_line_bytes=cap)
    out: list[Any] = []
    try:
        for chunk in chunks:
            out.extend(decoder.feed(chunk) if text else decoder.feed_bytes(chunk))
        out.extend(decoder.close() if text else decoder.close_bytes())
    except Exception as exc:  # the error itself is compared
        return out, (type(exc), str(exc))
    return out, None


@settings(max_examples=400, deadline=None)
@given(_wire(), st.lists(st.integers(0, 400), max_size=6), st.sampled_from([8, 30, 1 << 20]))
def test_bytes_lines_are_the_text_lines_encoded(wire: bytes, cuts: list[int], cap: int) -> None:
    chunks = _cut(wire, cuts)
    texts, text_error = _decode(chunks, text=True, cap=cap)
    raw, raw_error = _decode(chunks, text=False, cap=cap)
    assert raw_error == text_error
    if text_error is None:
        assert all(type(line) is bytes for line in raw)
        assert raw == [line.encode() for line in texts]


def test_a_character_split_between_chunks_is_joined_not_refused() -> None:
    decoder = NDJSONDecoder()
    encoded = '{"d":"✓"}\n{"d":"é"}\n'.encode()
    at = encoded.index("✓".encode()) + 1  # inside the three bytes of ✓
    assert decoder.feed_bytes(encoded[:at]) == []
    assert decoder.feed_bytes(encoded[at:]) == ['{"d":"✓"}'.encode(), '{"d":"é"}'.encode()]
    assert decoder.close_bytes() == []


def test_blank_crlf_and_whitespace_lines_are_handled_in_one_chunk() -> None:
    decoder = NDJSONDecoder()
    chunk = b'{"a":1}\n\n  \t\n{"b":2}\r\n{"c":3}\n'
    assert decoder.feed_bytes(chunk) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
