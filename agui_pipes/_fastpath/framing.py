"""The decoders' fast framing: whole frames and lines cut from a chunk at once.

The reference framing (``agui_pipes.codecs``: ``SSEDecoder._split_lines``,
``NDJSONDecoder._emit_lines``) reads a chunk line by line, as the specs
describe. What AG-UI servers write is simpler — SSE frames that are one
``data:`` line ending in LF LF, NDJSON lines that are plain UTF-8 — and
those can be cut from a chunk with a few calls into C. The two functions
here are the fast siblings of the reference ones, with the same
signatures; a decoder picks one of each at construction. Whatever they do
not recognise they hand to the reference framing, which then starts where
it would have, so payloads, decoder state and errors are the same.
"""

from __future__ import annotations

from typing import Any, Protocol

from .._foundation.framing import SSE_DATA, SSE_END

__all__ = ["emit_lines", "ordinary_frames", "plain_lines", "split_frames"]

_SEPARATOR = SSE_END + SSE_DATA
"""Between two ordinary frames: one's end, the next one's ``data:`` line start."""
_DATA_FIELD = SSE_DATA.rstrip(b" ")
"""The field name and colon (the space after the colon is optional)."""


class _SSEState(Protocol):
    """What ``split_frames`` reads and writes of an ``SSEDecoder``."""

    max_frame_bytes: int
    _line: bytearray
    _frame_size: int
    _skip_lf: bool

    def _split_lines(self, chunk: bytes, out: list[Any], text: bool) -> list[Any]: ...


class _NDJSONState(Protocol):
    """What ``emit_lines`` reads of an ``NDJSONDecoder``."""

    max_line_bytes: int

    def _emit_lines(self, chunk: bytes, lines: list[bytes], out: list[Any], text: bool) -> None: ...


def split_frames(decoder: _SSEState, chunk: bytes, out: list[Any], text: bool) -> list[Any]:
    """``SSEDecoder._split_lines``, with the ordinary frames leading ``chunk`` taken whole.

    Only at a frame's start with LF line ends (no CR in the chunk, none
    pending from the last one): there the line-by-line path would append
    exactly each ordinary frame's value. The rest goes line by line.
    """
    if not decoder._frame_size and not decoder._skip_lf and b"\r" not in chunk:
        if decoder._line:
            chunk = bytes(decoder._line) + chunk
            decoder._line.clear()
        chunk = ordinary_frames(chunk, out, text, decoder.max_frame_bytes)
    return decoder._split_lines(chunk, out, text)


def ordinary_frames(chunk: bytes, out: list[Any], text: bool, cap: int) -> bytes:
    """Take the frames at the head of ``chunk`` that are one ``data:`` line each.

    Such a frame is ``data:<value>\\n\\n`` with no other line end in it and
    within the size cap ``cap``; for it the line-by-line path would append
    exactly its value (one leading space dropped), so it is appended here
    without per-line work. Returns the rest of ``chunk`` from the first frame
    that is anything else (a comment, another field, several lines, an
    unfinished frame, one over the cap), for the line-by-line path, which
    then starts at a frame boundary as it would have.
    """
    end = chunk.rfind(SSE_END) + 2
    if end >= 2 and chunk.startswith(SSE_DATA):
        rest = _only_ordinary(chunk, end, out, text, cap)
        if rest is not None:
            return rest
    return _leading_ordinary(chunk, out, text, cap)


def _only_ordinary(chunk: bytes, end: int, out: list[Any], text: bool, cap: int) -> bytes | None:
    """The usual chunk: nothing but ordinary frames up to its last frame end ``end``.

    Then every line end there is one of the two that end a frame (k frame
    starts, 2k line ends), and splitting at the frame starts gives the
    values. None (nothing taken) when the chunk is not that.
    """
    starts = chunk.count(_SEPARATOR, 0, end) + 1
    if chunk.count(b"\n", 0, end) != 2 * starts:
        return None
    values = chunk[len(SSE_DATA) : end - len(SSE_END)].split(_SEPARATOR)
    if end > cap and max(map(len, values)) + len(SSE_DATA) >= cap:
        return None
    if text:
        out += [value.decode("utf-8", "replace") for value in values]
    elif chunk.isascii():
        out += values
    else:  # replace what is not UTF-8, as the text form does
        out += [
            value if value.isascii() else value.decode("utf-8", "replace").encode()
            for value in values
        ]
    return chunk[end:]


def _leading_ordinary(chunk: bytes, out: list[Any], text: bool, cap: int) -> bytes:
    """The ordinary frames leading a chunk that holds other frames too, one by one."""
    frames = chunk.split(SSE_END)
    frames.pop()  # what follows the last frame end: never a whole frame
    ascii_only = not text and chunk.isascii()
    start = len(_DATA_FIELD)
    at = 0
    for frame in frames:
        if frame[:start] != _DATA_FIELD or b"\n" in frame or len(frame) >= cap:
            break
        at += len(frame) + len(SSE_END)
        value = frame[start + 1 :] if frame[start : start + 1] == b" " else frame[start:]
        if ascii_only:
            out.append(value)
        elif text:
            out.append(value.decode("utf-8", "replace"))
        elif value.isascii():
            out.append(value)
        else:  # replace what is not UTF-8, as the text form does
            out.append(value.decode("utf-8", "replace").encode())
    return chunk[at:] if at else chunk


def emit_lines(
    decoder: _NDJSONState, chunk: bytes, lines: list[bytes], out: list[Any], text: bool
) -> None:
    """``NDJSONDecoder._emit_lines``, with plain lines kept as they are, all at once.

    When every line is already what the reference would append (see
    ``plain_lines``), the non-blank ones are the payloads; otherwise the
    lines go through the reference, one by one, with its own errors.
    """
    if not text and plain_lines(chunk, lines, decoder.max_line_bytes):
        out.extend(filter(bytes.strip, lines))
        return
    decoder._emit_lines(chunk, lines, out, text)


def plain_lines(chunk: bytes, lines: list[bytes], cap: int) -> bool:
    """Whether the reference would pass each of ``lines`` (cut from ``chunk``) through as is.

    True when no line ends in CR, none is over the cap and all are UTF-8 —
    checked over the whole chunk in C rather than line by line, which is
    most of what decoding a long NDJSON file cost. Only ``lines[0]`` can
    hold bytes from an earlier chunk, so it is checked apart. Anything else
    (a CR, a long line, bytes that are not UTF-8 — or a character split
    across chunks, which a chunk-wide check cannot tell from one) goes
    through the reference line by line.
    """
    first = lines[0]
    if b"\r" in chunk or first[-1:] == b"\r":
        return False
    if max(map(len, lines)) > cap:
        return False
    if chunk.isascii() and first.isascii():
        return True
    start = chunk.index(b"\n") + 1
    end = chunk.rindex(b"\n") + 1
    try:
        if not first.isascii():
            first.decode("utf-8")
        str(memoryview(chunk)[start:end], "utf-8")
    except UnicodeDecodeError:
        return False
    return True
