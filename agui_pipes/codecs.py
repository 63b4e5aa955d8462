"""The wire: events to SSE / NDJSON bytes, frames back to payloads, payloads to events.

This is the public wire module. ``decode`` (and ``decode_many`` /
``decode_all``) turn wire payloads into ``ag_ui.core`` events under the
AG-UI 1.0 processing model (the rules are in ``agui_pipes._protocol.decode``);
``encode_sse`` / ``encode_json`` / ``encode_ndjson`` write them; the
``SSEDecoder`` / ``NDJSONDecoder`` cut a byte stream into payloads.

Each entry point has a reference path (``agui_pipes._protocol.decode``,
``agui_pipes._protocol.encode``) and a fast path (``agui_pipes._fastpath``:
generated builders and writers) that gives the same events, bytes and
errors. The fast path is taken when it has a plan for the shape at hand;
``fast_path=False`` on a call, or ``AGUI_PIPES_FAST_PATH=0`` in the
environment (read once, at import), keeps to the reference path.

Encoding is byte-identical to the official encoder
(``ag_ui.encoder.EventEncoder().encode(event).encode()``): same pydantic-core
JSON writer, same key order, same omission of optional fields that have no
value. It is faster because it skips the per-event Python hook that
``ag_ui``'s base model runs to drop those fields: for each event class we
build, once, a serializer for the same core schema without that hook, and
pass the (few) optional-and-``None`` field names as ``exclude``. Nested
models (messages, outcomes, usage) keep their own hook, so they come out
exactly as before. Anything unusual — a subclass with its own serializer, an
extra field shadowing an omittable name — takes the official path.

Decoding is incremental: feed the bytes as they arrive, in chunks of any size,
and get back the complete payloads. The SSE decoder follows the WHATWG
event-stream rules (LF, CR and CRLF line ends, ``:`` comments, multi-line
``data:``, unknown fields ignored) and caps the memory one frame may hold, so
a peer that never ends a frame cannot exhaust the process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ag_ui.core import BaseEvent

from . import _fastpath
from ._fastpath.decoding import decode_bytes as _fast_decode_bytes
from ._fastpath.framing import emit_lines as _fast_emit_lines
from ._fastpath.framing import split_frames as _fast_split_frames
from ._fastpath.writers import encode_json as _fast_encode_json
from ._fastpath.writers import encode_model as _fast_encode_model
from ._fastpath.writers import encode_plain as _fast_encode_plain
from ._foundation.errors import AguiPipesError
from ._foundation.framing import NDJSON_END, SSE_DATA, SSE_END
from ._lazy import public_dir, publish
from ._protocol import encode as _encode
from ._protocol.decode import (
    PROTOCOL_VERSION,
    Decoded,
    DecodeError,
    DecodeWarning,
    as_object,
    decode_all,
    decode_legacy_object,
    decode_many,
    decode_object,
    event_type_names,
)
from ._protocol.encode import EncodeError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "NDJSON_CONTENT_TYPE",
    "PROTOCOL_VERSION",
    "SSE_CONTENT_TYPE",
    "CodecError",
    "DecodeError",
    "DecodeWarning",
    "Decoded",
    "EncodeError",
    "FrameTooLarge",
    "NDJSONDecoder",
    "SSEDecoder",
    "TruncatedFrame",
    "decode",
    "decode_all",
    "decode_many",
    "encode_json",
    "encode_ndjson",
    "encode_sse",
    "event_type_names",
    "sse_comment",
]
__dir__ = public_dir(__all__)

SSE_CONTENT_TYPE: Final = "text/event-stream"
NDJSON_CONTENT_TYPE: Final = "application/x-ndjson"
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
"""Default cap on one SSE frame / NDJSON line (16 MiB): generous for snapshots,
small enough that a runaway peer fails fast instead of eating memory."""

# Defined in the reference modules, at home here (reprs, pickles, tracebacks).
publish(__name__, Decoded, DecodeError, DecodeWarning, EncodeError)
publish(__name__, decode_all, decode_many, event_type_names)

_BOM: Final = b"\xef\xbb\xbf"


class CodecError(AguiPipesError, ValueError):
    """The bytes on the wire cannot be decoded into frames."""


class FrameTooLarge(CodecError):
    """One frame (or NDJSON line) grew past the decoder's size cap."""


class TruncatedFrame(CodecError):
    """The stream ended in the middle of a frame (or line)."""


# -- encoding -------------------------------------------------------------


def encode_json(event: BaseEvent, fast_path: bool | None = None) -> bytes:
    """The event's wire JSON (camelCase, optional-without-value omitted), as UTF-8.

    Raises :class:`EncodeError` for an event that holds a NaN or infinite
    float, nesting deeper than ``Limits.max_depth``, or a value that is not
    JSON: writing ``null`` (as the official encoder does) would change the
    event silently, and a deeper document could not be parsed back.

    ``fast_path=False`` writes with the reference encoder only (pydantic with
    ``ag_ui``'s hook); ``None`` follows ``AGUI_PIPES_FAST_PATH``. Both give
    the same bytes and the same errors. Pass it by keyword: it is not
    keyword-only because CPython does not specialise calls to functions with
    keyword-only parameters, which would cost every event written ~2%.
    """
    if (_fastpath.ENABLED if fast_path is None else fast_path) and isinstance(event, BaseEvent):
        return _fast_encode_json(event)
    return _encode.encode_json(event)


def encode_sse(event: BaseEvent, fast_path: bool | None = None) -> bytes:
    """One SSE frame, byte-identical to ``EventEncoder().encode(event).encode()``.

    ``fast_path`` as for :func:`encode_json`.
    """
    if (_fastpath.ENABLED if fast_path is None else fast_path) and isinstance(event, BaseEvent):
        plain = _fast_encode_plain(event)  # the generated writer of the class's common shape
        return SSE_DATA + (plain if plain is not None else _fast_encode_model(event)) + SSE_END
    return SSE_DATA + _encode.encode_json(event) + SSE_END


def encode_ndjson(event: BaseEvent, fast_path: bool | None = None) -> bytes:
    """One NDJSON line: the event's wire JSON and a newline (``fast_path`` as for
    :func:`encode_json`)."""
    return encode_json(event, fast_path=fast_path) + NDJSON_END


def sse_comment(text: str = "") -> bytes:
    """An SSE comment frame (keep-alive); clients ignore it.

    Line breaks in ``text`` are rejected: they would end the comment and turn
    the rest into fields.
    """
    if "\n" in text or "\r" in text:
        raise ValueError(f"an SSE comment cannot contain a line break: {text!r}")
    return b":" + (b" " + text.encode() if text else b"") + SSE_END


# -- decoding -------------------------------------------------------------


def decode(
    wire: dict[str, Any] | str | bytes,
    *,
    index: int | None = None,
    fast_path: bool | None = None,
    legacy: bool = False,
) -> Decoded:
    """Decode one wire event (a parsed object, JSON text or UTF-8 bytes).

    Returns the event (``None`` when dropped as an unknown type) and any
    warnings; raises :class:`DecodeError` for a malformed described field or
    input that is not one JSON object. ``index`` (the event's position in its
    stream) is stamped on warnings and errors.

    For ``bytes`` the fast path builds the event with code generated for the
    payload's key set when it can; ``fast_path=False`` keeps to the reference
    decoder (``None`` follows ``AGUI_PIPES_FAST_PATH``). Both give the same
    event, warnings and errors.

    ``legacy=True`` also reads the pre-1.0 shapes (``THINKING_*`` events as
    ``agui_pipes._protocol.legacy`` models, ``binary`` content parts upgraded), for a
    pipeline whose ``compat`` stage translates them (docs/compat.md); by
    default they are dropped as AG-UI 1.0 says.
    """
    if legacy:
        return decode_legacy_object(as_object(wire, index), index)
    if wire.__class__ is bytes and (_fastpath.ENABLED if fast_path is None else fast_path):
        return _fast_decode_bytes(wire, index)  # the generated builder of the key set
    return decode_object(as_object(wire, index), index)


# The wire's frames.


def _normalise_newlines(chunk: bytes, skip_lf: bool) -> tuple[bytes, bool]:
    """Map CRLF and lone CR to LF, across chunk boundaries.

    A CR at the end of a chunk ends a line; if the next chunk starts with LF,
    that LF belongs to the same CRLF and is dropped (``skip_lf``).
    """
    if skip_lf and chunk.startswith(b"\n"):
        chunk = chunk[1:]
    if b"\r" not in chunk:
        return chunk, False
    ends_with_cr = chunk.endswith(b"\r")
    return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), ends_with_cr


def _check_cap(kind: str, held: int, cap: int, unit: str) -> None:
    if held > cap:
        raise FrameTooLarge(
            f"{kind}: one {unit} exceeds the size cap of {cap} bytes (at least {held} bytes "
            f"without a {unit} end). The peer may be broken or hostile; if {unit}s this "
            f"large are expected, raise the cap (max_frame_bytes=...)"
        )


class _ChunkDecoder:
    """What the SSE and NDJSON decoders share: the feed API and chunk intake.

    Both refuse to run after a failure or ``close()``, take only bytes-like
    chunks and drop a UTF-8 BOM at the very start, possibly split across
    chunks. The checks live here once; each ``_feed`` keeps the common case
    (a plain ``bytes`` chunk on a healthy decoder, past the start) to one
    inline test and calls ``_intake`` only otherwise, so sharing them costs no
    call per chunk.
    """

    _KIND: str  # "SSE" / "NDJSON", for error messages

    def __init__(self) -> None:
        self._line = bytearray()  # the unfinished line
        self._at_start = True  # a leading BOM is still possible
        self._failed: CodecError | None = None
        self._closed = False

    def feed(self, chunk: bytes) -> list[str]:
        """Consume ``chunk``; return the payloads it completed, in order."""
        return self._feed(chunk, True)

    def feed_bytes(self, chunk: bytes) -> list[bytes]:
        """``feed``, with each payload as UTF-8 bytes (see the class docstring)."""
        return self._feed(chunk, False)

    def _feed(self, chunk: bytes, text: bool) -> list[Any]:
        """Split ``chunk`` the decoder's way; payloads as ``str`` if ``text``, else bytes."""
        raise NotImplementedError

    def _intake(self, chunk: object) -> bytes:
        """``chunk`` as ``bytes`` with a start-of-stream BOM dropped; raise if refused.

        Returns ``b""`` when there is nothing to split yet (an empty chunk, or the
        first bytes of what may still become a BOM, which are held back).
        """
        if self._failed is not None:
            raise CodecError(
                f"{self._KIND} decoder already failed: {self._failed}"
            ) from self._failed
        if self._closed:
            raise CodecError(f"{self._KIND} decoder is closed; create a new one for a new stream")
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise TypeError(f"{type(self).__name__}.feed() takes bytes, got {type(chunk).__name__}")
        data = bytes(chunk)
        if not self._at_start or not data:
            return data
        pending = bytes(self._line) + data
        if len(pending) < len(_BOM) and _BOM.startswith(pending):
            self._line[:] = pending  # maybe a BOM split across chunks
            return b""
        self._at_start = False
        self._line.clear()
        return pending[len(_BOM) :] if pending.startswith(_BOM) else pending


class SSEDecoder(_ChunkDecoder):
    """Incremental ``text/event-stream`` decoder: bytes in, ``data`` payloads out.

    ``feed(chunk)`` returns the payload of every frame the chunk completed (the
    ``data:`` lines of the frame joined with ``\\n``), in order; chunks may
    split anywhere, including inside a UTF-8 sequence or a CRLF. ``event:``,
    ``id:`` and ``retry:`` fields are parsed as the spec says (the last id and
    retry are kept on the decoder) but do not filter frames: AG-UI puts
    everything in ``data``.

    Two ids, as the spec has two: ``last_event_id`` is the id *buffer*, set as
    soon as an ``id:`` line is read, even if the frame it belongs to is then cut;
    ``dispatched_event_id`` is the spec's *last event ID string*, copied from the
    buffer only when a frame ends (its blank line). A client resuming a dropped
    stream must send ``dispatched_event_id``: the id of the last frame it was
    actually given, never one of a frame it lost. Comments and unknown fields are ignored, and a
    frame with no ``data`` line dispatches nothing.

    ``feed_bytes(chunk)`` is the same with each payload as UTF-8 ``bytes`` —
    what a relay hands to ``agui_pipes.decode`` or ``agui_pipes.relay.Relay``
    without a decode/encode round trip. Payload bytes that are not valid UTF-8
    come out as the U+FFFD-replaced text re-encoded, exactly ``feed(chunk)``'s
    strings encoded (the spec decodes the stream with replacement). The two
    methods share the decoder's state, so a stream may mix them.

    ``max_frame_bytes`` caps the size of one frame: the bytes of its lines,
    each counted with one line end, not counting the blank line that ends it.
    Past it ``feed`` raises ``FrameTooLarge`` (however the bytes were chunked)
    and the decoder is unusable. ``close()`` at end of stream raises ``TruncatedFrame``
    if a frame was started but never ended by a blank line.

    ``fast_path`` (``None``: follow ``AGUI_PIPES_FAST_PATH``) lets the frames
    that are one ``data:`` line ending in LF LF, the ones AG-UI servers write,
    be cut from a chunk without per-line work; anything else (CR line ends,
    comments, other fields, multi-line data, a frame split across chunks, one
    over the cap) goes line by line. Both give the same payloads, state and errors.
    """

    _KIND = "SSE"

    def __init__(
        self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, fast_path: bool | None = None
    ) -> None:
        if max_frame_bytes <= 0:
            raise ValueError(f"max_frame_bytes must be positive, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        # The framing, chosen once: the reference line by line, or its fast sibling
        # (a function, called with the decoder: no reference cycle through a bound method).
        fast = _fastpath.ENABLED if fast_path is None else fast_path
        self._split: Callable[[SSEDecoder, bytes, list[Any], bool], list[Any]] = (
            _fast_split_frames if fast else SSEDecoder._split_lines
        )
        self.last_event_id = ""
        self.dispatched_event_id = ""
        self.retry_ms: int | None = None
        self.event_type = ""
        self._data: list[bytes] = []  # data lines of the current frame
        self._frame_size = 0  # bytes of the current frame's completed lines
        self._pending_fields = False  # saw a non-data field in this frame
        self._skip_lf = False
        super().__init__()

    def _feed(self, chunk: bytes, text: bool) -> list[Any]:
        if self._at_start or self._failed is not None or self._closed or type(chunk) is not bytes:
            chunk = self._intake(chunk)
            if not chunk:
                return []
        return self._split(self, chunk, [], text)

    def _split_lines(self, chunk: bytes, out: list[Any], text: bool) -> list[Any]:
        """The reference framing: ``chunk`` line by line, as the spec describes.

        Appends the payloads of the frames it completes to ``out`` and returns
        it. ``agui_pipes._fastpath.framing.split_frames`` is its fast sibling.
        """
        if not chunk:
            return out
        chunk, self._skip_lf = _normalise_newlines(chunk, self._skip_lf)
        if b"\n" not in chunk:
            self._line += chunk
            self._check(len(self._line))
            return out
        lines = chunk.split(b"\n")
        if self._line:
            lines[0] = bytes(self._line) + lines[0]
            self._line.clear()
        tail = lines.pop()
        try:
            for line in lines:
                self._line_done(line, out, text)
        except CodecError as exc:
            self._failed = exc
            raise
        self._line += tail
        self._check(len(self._line))
        return out

    def _check(self, line_size: int) -> None:
        try:
            _check_cap("SSE", self._frame_size + line_size, self.max_frame_bytes, "frame")
        except FrameTooLarge as exc:
            self._failed = exc
            raise

    def _line_done(self, line: bytes, out: list[Any], text: bool) -> None:
        if not line:
            if self._data:
                payload = b"\n".join(self._data)
                if text:
                    out.append(payload.decode("utf-8", "replace"))
                elif payload.isascii():
                    out.append(payload)
                else:  # replace what is not UTF-8, as the text form does
                    out.append(payload.decode("utf-8", "replace").encode())
            # Dispatch sets the last event ID string, data or not (WHATWG). The
            # fast framing never gets here, but only takes frames without an id
            # line, which leave it as it is.
            self.dispatched_event_id = self.last_event_id
            self._data = []
            self._frame_size = 0
            self._pending_fields = False
            self.event_type = ""
            return
        self._frame_size += len(line) + 1
        _check_cap("SSE", self._frame_size, self.max_frame_bytes, "frame")
        if line[0] == 0x3A:  # ':' — a comment
            return
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field, value = line[:colon], line[colon + 1 :]
            if value.startswith(b" "):
                value = value[1:]
        if field == b"data":
            self._data.append(value)
            return
        self._pending_fields = True
        if field == b"event":
            self.event_type = value.decode("utf-8", "replace")
        elif field == b"id":
            if b"\x00" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit():
            self.retry_ms = int(value)

    @property
    def in_frame(self) -> bool:
        """True when bytes of an unfinished frame are buffered."""
        return bool(self._data or self._line or self._pending_fields)

    def close(self) -> list[str]:
        """End of stream: raise ``TruncatedFrame`` if a frame was left unfinished.

        A frame with data but no closing blank line is what a connection cut
        mid-event looks like; the spec says to drop it silently, we make the
        truncation visible instead. Returns ``[]`` (for symmetry with ``feed``).
        """
        if self._closed:
            return []
        self._closed = True
        if self._failed is not None:
            return []
        if self._data or self._line.strip():
            held = self._frame_size + len(self._line)
            raise TruncatedFrame(
                f"SSE stream ended in the middle of a frame ({held} bytes buffered, no "
                "blank line after them): the connection was probably cut mid-event"
            )
        return []

    def close_bytes(self) -> list[bytes]:
        """``close`` (the counterpart of ``feed_bytes``; also returns ``[]``)."""
        self.close()
        return []


class NDJSONDecoder(_ChunkDecoder):
    """Incremental NDJSON decoder: bytes in, one string per non-blank line out.

    Lines end with LF (a CR before it is dropped); blank lines are skipped. A
    UTF-8 byte order mark at the very start of the stream is dropped, as
    ``SSEDecoder`` and the JSON readers do (editors on Windows write one).
    ``max_line_bytes`` caps one line; past it ``feed`` raises ``FrameTooLarge``.
    ``close()`` returns a final line that has no newline after it (many
    producers omit the last one), so nothing is lost at end of stream.
    ``feed_bytes`` / ``close_bytes`` return the lines as ``bytes`` instead
    (checked to be UTF-8 all the same); the methods share the decoder's state.
    A line that is not valid UTF-8 raises ``CodecError`` in both forms.

    ``fast_path`` (``None``: follow ``AGUI_PIPES_FAST_PATH``) lets
    ``feed_bytes`` check a chunk's lines at once and keep them as they are
    when they are plain (no CR, within the cap, UTF-8); otherwise, and with
    ``fast_path=False``, each line is checked in turn. Both give the same
    lines and errors.
    """

    _KIND = "NDJSON"

    def __init__(
        self, *, max_line_bytes: int = DEFAULT_MAX_FRAME_BYTES, fast_path: bool | None = None
    ) -> None:
        if max_line_bytes <= 0:
            raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
        self.max_line_bytes = max_line_bytes
        # Chosen once, as SSEDecoder's framing is.
        fast = _fastpath.ENABLED if fast_path is None else fast_path
        self._lines: Callable[[NDJSONDecoder, bytes, list[bytes], list[Any], bool], None] = (
            _fast_emit_lines if fast else NDJSONDecoder._emit_lines
        )
        super().__init__()

    def _feed(self, chunk: bytes, text: bool) -> list[Any]:
        if self._at_start or self._failed is not None or self._closed or type(chunk) is not bytes:
            chunk = self._intake(chunk)
            if not chunk:
                return []
        out: list[Any] = []
        if b"\n" not in chunk:
            self._line += chunk
            self._check()
            return out
        lines = chunk.split(b"\n")
        if self._line:
            lines[0] = bytes(self._line) + lines[0]
            self._line.clear()
        tail = lines.pop()
        self._lines(self, chunk, lines, out, text)
        self._line += tail
        self._check()
        return out

    def _emit_lines(self, chunk: bytes, lines: list[bytes], out: list[Any], text: bool) -> None:
        """The reference framing: each complete line of ``chunk`` checked and emitted in turn.

        ``agui_pipes._fastpath.framing.emit_lines`` is its fast sibling.
        """
        for line in lines:
            if len(line) > self.max_line_bytes:
                self._line[:] = line
                self._check()
            self._emit(line, out, text)

    def _check(self) -> None:
        try:
            _check_cap("NDJSON", len(self._line), self.max_line_bytes, "line")
        except FrameTooLarge as exc:
            self._failed = exc
            raise

    @staticmethod
    def _emit(line: bytes, out: list[Any], text: bool) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            if not text and line.isascii():
                out.append(line)
                return
            try:
                decoded = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                # Unlike SSE (whose spec says to substitute U+FFFD), NDJSON has no
                # rule for bad bytes: replacing them would silently alter an event.
                raise CodecError(
                    f"an NDJSON line is not valid UTF-8 ({exc.reason} at byte {exc.start}: "
                    f"{line[max(0, exc.start - 20) : exc.start + 20]!r}); AG-UI events are "
                    "UTF-8 JSON, one per line"
                ) from None
            out.append(decoded if text else line)

    def close(self) -> list[str]:
        """End of stream: the last line if it had no trailing newline."""
        return self._close(True)

    def close_bytes(self) -> list[bytes]:
        """``close``, with the last line as bytes."""
        return self._close(False)

    def _close(self, text: bool) -> list[Any]:
        if self._closed or self._failed is not None:
            self._closed = True
            return []
        self._closed = True
        out: list[Any] = []
        self._emit(bytes(self._line), out, text)
        self._line.clear()
        return out
