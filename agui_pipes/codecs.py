"""Wire codecs: events to SSE / NDJSON bytes, and incremental decoders back.

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

import math
import operator
from collections.abc import Callable
from enum import Enum
from json import dumps as _json_dumps
from typing import Any, Final

from ag_ui.core import BaseEvent
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, SchemaSerializer

from . import _json
from ._errors import AguiPipesError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "NDJSON_CONTENT_TYPE",
    "SSE_CONTENT_TYPE",
    "CodecError",
    "EncodeError",
    "FrameTooLarge",
    "NDJSONDecoder",
    "SSEDecoder",
    "TruncatedFrame",
    "encode_json",
    "encode_ndjson",
    "encode_sse",
    "sse_comment",
]

SSE_CONTENT_TYPE: Final = "text/event-stream"
NDJSON_CONTENT_TYPE: Final = "application/x-ndjson"
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
"""Default cap on one SSE frame / NDJSON line (16 MiB): generous for snapshots,
small enough that a runaway peer fails fast instead of eating memory."""

_BOM: Final = b"\xef\xbb\xbf"


class CodecError(AguiPipesError, ValueError):
    """The bytes on the wire cannot be decoded into frames."""


class EncodeError(AguiPipesError, ValueError):
    """An event holds a value JSON cannot carry faithfully, so it is not written at all.

    A NaN or infinite float (the official encoder would silently write
    ``null``; ``JSON.parse`` has no such values either), arrays and objects
    nested deeper than ``agui_pipes.Limits.max_depth`` (no peer could parse the
    result back), or an object that is not a JSON value. ``path`` is the dotted
    position of the value inside the event (``value.0.a``).
    """

    def __init__(self, message: str, *, path: str = "", event_type: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.event_type = event_type


class FrameTooLarge(CodecError):
    """One frame (or NDJSON line) grew past the decoder's size cap."""


class TruncatedFrame(CodecError):
    """The stream ended in the middle of a frame (or line)."""


# -- encoding -------------------------------------------------------------


class _FastSerializer:
    """The hook-free serializer of one event class, plus what it must exclude."""

    __slots__ = (
        "all_omitted",
        "all_omitted_set",
        "get_omittable",
        "omittable_fields",
        "omittable_keys",
        "serializer",
    )

    def __init__(
        self,
        serializer: SchemaSerializer,
        omittable_fields: tuple[str, ...],
        omittable_keys: frozenset[str],
    ) -> None:
        self.serializer = serializer
        self.omittable_fields = omittable_fields
        self.omittable_keys = omittable_keys
        # The common case — every optional field absent — gets a prebuilt
        # exclude set; values are fetched in one C call.
        self.all_omitted: set[str] | None = set(omittable_fields) or None
        self.all_omitted_set: frozenset[str] = frozenset(omittable_fields)
        getter = operator.itemgetter(*omittable_fields) if omittable_fields else None
        if len(omittable_fields) == 1:
            assert getter is not None
            single = getter
            self.get_omittable: Callable[[dict[str, Any]], tuple[Any, ...]] = (
                lambda values: (single(values),)
            )
        elif getter is not None:
            self.get_omittable = getter
        else:
            self.get_omittable = lambda values: ()


def _omission_hook() -> object:
    """The wrap serializer ag_ui's base model installs (identity is what we check)."""
    schema = BaseEvent.__pydantic_core_schema__
    return schema.get("serialization", {}).get("function")


_HOOK: Final = _omission_hook()
_SERIALIZERS: dict[type[BaseEvent], _FastSerializer | None] = {}


def _build_fast(cls: type[BaseEvent]) -> _FastSerializer | None:
    """A serializer for ``cls`` minus the root omission hook, or None if unsafe."""
    schema: Any = cls.__pydantic_core_schema__
    if schema.get("type") != "model" or schema.get("cls") is not cls:
        return None
    serialization = schema.get("serialization")
    if (
        _HOOK is None
        or not isinstance(serialization, dict)
        or serialization.get("type") != "function-wrap"
        or serialization.get("function") is not _HOOK
    ):
        return None
    stripped = {k: v for k, v in schema.items() if k != "serialization"}
    # Non-finite floats come out as the NaN / Infinity literals instead of a silent
    # ``null``: encode_json notices them with one scan of the output and refuses.
    config = {**(schema.get("config") or {}), "ser_json_inf_nan": "constants"}
    serializer = SchemaSerializer(stripped, config)  # type: ignore[arg-type]
    fields: list[str] = []
    keys: set[str] = set()
    # The same rule as ag_ui's hook: optional and defaulting to None.
    for name, field in cls.model_fields.items():
        if not field.is_required() and field.default is None:
            fields.append(name)
            keys.add(name)
            if field.alias is not None:
                keys.add(field.alias)
            if field.serialization_alias is not None:
                keys.add(field.serialization_alias)
    return _FastSerializer(serializer, tuple(fields), frozenset(keys))


def _fast_for(cls: type[BaseEvent]) -> _FastSerializer | None:
    try:
        return _SERIALIZERS[cls]
    except KeyError:
        fast = _SERIALIZERS[cls] = _build_fast(cls)
        return fast


_SAFE_INT: Final = 2**53 - 1
_PlainLayout = tuple[str, tuple[tuple[str, str, bool], ...]]
_PLAIN_LAYOUTS: dict[type[BaseEvent], _PlainLayout | None] = {}


def _plain_layout(cls: type[BaseEvent]) -> _PlainLayout | None:
    """(type value, ((attribute, wire key, omit-when-None), ...)) in serialisation order."""
    fast = _fast_for(cls)
    layout: _PlainLayout | None = None
    if fast is not None:
        fields = tuple(
            (name, info.serialization_alias or info.alias or name, name in fast.all_omitted_set)
            for name, info in cls.model_fields.items()
            if name != "type"
        )
        layout = (cls.model_fields["type"].default.value, fields)
    _PLAIN_LAYOUTS[cls] = layout
    return layout


_Compiled = Callable[[dict[str, Any]], "bytes | None"]
_COMPILED: dict[type[BaseEvent], _Compiled | None] = {}


def _compile_common_shape(cls: type[BaseEvent]) -> _Compiled | None:
    """A straight-line writer for the class's most common shape.

    That shape is: every optional field absent and every required field a
    plain string — what deltas, starts and ends look like on the wire. The
    generated function checks exactly that and writes the JSON with orjson;
    for any other shape it returns None and the general loop below runs.
    Generating the code (as dataclasses do) removes the per-field loop from
    the hottest path of a relay.
    """
    layout = _PLAIN_LAYOUTS.get(cls) or _plain_layout(cls)
    if layout is None or not _json.HAVE_ORJSON:
        _COMPILED[cls] = None
        return None
    type_value, fields = layout
    optional = [attr for attr, _, omit in fields if omit]
    required = [(attr, key) for attr, key, omit in fields if not omit]
    lines = ["def write(d):"]
    if optional:
        absent = " and ".join(f"d[{attr!r}] is None" for attr in optional)
        lines.append(f"    if not ({absent}): return None")
    for i, (attr, _) in enumerate(required):
        lines.append(f"    v{i} = d[{attr!r}]")
        lines.append(f"    if type(v{i}) is not str: return None")
    items = ", ".join([f"'type': {type_value!r}"] + [
        f"{key!r}: v{i}" for i, (_, key) in enumerate(required)
    ])
    lines.append("    try:")
    lines.append(f"        return dumps({{{items}}})")
    lines.append("    except Exception:")
    lines.append("        return None")
    namespace: dict[str, Any] = {"dumps": _json.orjson_dumps}
    exec("\n".join(lines), namespace)  # generated from the model's own field names
    compiled: _Compiled = namespace["write"]
    _COMPILED[cls] = compiled
    return compiled


def _encode_plain(event: BaseEvent) -> bytes | None:
    """The wire JSON of an event whose every value is a string, bool, small int or None.

    Those are exactly the values whose JSON text orjson and pydantic write
    byte for byte alike (the codec tests prove it on generated events), and
    they are what the hot events — deltas, starts, ends — carry. Anything
    else (floats, nested objects, extra fields) returns None for the general
    serializer.
    """
    if event.__pydantic_extra__:
        return None
    cls = type(event)
    try:
        compiled = _COMPILED[cls]
    except KeyError:
        compiled = _compile_common_shape(cls)
    if compiled is not None:
        written = compiled(event.__dict__)
        if written is not None:
            return written
    try:
        layout = _PLAIN_LAYOUTS[cls]
    except KeyError:
        layout = _plain_layout(cls)
    if layout is None:
        return None
    type_value, fields = layout
    values = event.__dict__
    out: dict[str, Any] = {"type": type_value}
    for attr, key, omit in fields:
        value = values[attr]
        kind = type(value)
        if kind is str or kind is bool:
            out[key] = value
        elif value is None:
            if not omit:
                out[key] = None
        elif kind is int and -_SAFE_INT <= value <= _SAFE_INT:
            out[key] = value
        else:
            return None
    return _json.dumps_plain(out)


_UNSURE: Final[set[str]] = set()
"""Marker: a value might serialize to ``null`` — let the official path decide."""
_PLAIN: Final = (str, int, dict, list)


def _exclusions(names: tuple[str, ...], values: tuple[Any, ...]) -> set[str] | None:
    """The optional fields ag_ui's hook would drop: those that serialize to ``null``.

    That is ``None``. A value of any type that cannot be judged cheaply
    returns ``_UNSURE`` (a non-finite float among them: the official hook
    would write it as ``null`` and drop the key; ``encode_json`` refuses it).
    """
    exclude: set[str] = set()
    for name, value in zip(names, values, strict=True):
        if value is None:
            exclude.add(name)
        elif isinstance(value, float):
            if not math.isfinite(value):
                return _UNSURE
        elif not isinstance(value, _PLAIN):
            return _UNSURE
    return exclude or None


def encode_json(event: BaseEvent) -> bytes:
    """The event's wire JSON (camelCase, optional-without-value omitted), as UTF-8.

    Raises :class:`EncodeError` for an event that holds a NaN or infinite
    float, nesting deeper than ``Limits.max_depth``, or a value that is not
    JSON: writing ``null`` (as the official encoder does) would change the
    event silently, and a deeper document could not be parsed back.
    """
    if not isinstance(event, BaseEvent):
        raise TypeError(
            f"encode_json() takes an AG-UI event (an ag_ui.core event model), got "
            f"{type(event).__name__}; decode wire data first, e.g. with agui_pipes.decode()"
        )
    plain = _encode_plain(event)
    if plain is not None:
        return plain
    try:
        out = _encode_model(event)
    except PydanticSerializationError:
        # pydantic's writer stops at 255 levels and at values it cannot write:
        # the event's own tree, checked, written by an iterative writer.
        return _encode_tree(event)
    if b"NaN" in out or b"Infinity" in out:
        # A non-finite float written as a literal, or just those letters in a
        # string: the check tells which.
        _check_tree(event, _event_tree(event))
    return out


def _encode_model(event: BaseEvent) -> bytes:
    """pydantic's writing of the event, the hook-free serializer when it is safe."""
    fast = _fast_for(type(event))
    if fast is not None:
        present = fast.get_omittable(event.__dict__)
        exclude: set[str] | None
        if all(value is None for value in present):
            exclude = fast.all_omitted
        else:
            exclude = _exclusions(fast.omittable_fields, present)
        extra = event.__pydantic_extra__
        if exclude is not _UNSURE and (
            not extra
            or not any(
                value is None and key in fast.omittable_keys for key, value in extra.items()
            )
        ):
            return fast.serializer.to_json(event, by_alias=True, exclude=exclude)
    # The official path writes a non-finite float as null: look before writing.
    _check_tree(event, _event_tree(event))
    return event.model_dump_json(by_alias=True).encode()


def _event_tree(event: BaseEvent) -> dict[str, Any]:
    """The event as plain values, keyed and omitted as on the wire, without pydantic.

    For the checks and the deep writer: pydantic's serializer stops at 255
    levels. ag_ui's rule is applied to the event and every nested model
    (messages, content parts, outcomes — shallow by schema): an optional
    field defaulting to None is left out when None; extra fields are kept.
    Values of open fields stay as they are, however deep, for an iterative
    walk.
    """
    return _model_tree(event)


def _model_tree(model: BaseModel) -> dict[str, Any]:
    cls = type(model)
    omittable = _OMITTABLE.get(cls)
    if omittable is None:
        omittable = _OMITTABLE[cls] = frozenset(
            name for name, info in cls.model_fields.items()
            if not info.is_required() and info.default is None
        )
    values = model.__dict__
    tree: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        value = values.get(name)
        if value is None and name in omittable:
            continue
        tree[info.serialization_alias or info.alias or name] = _plain(value)
    for key, value in (model.__pydantic_extra__ or {}).items():
        tree[key] = _plain(value)
    return tree


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _model_tree(value)
    if isinstance(value, list) and any(isinstance(item, BaseModel) for item in value):
        return [_model_tree(item) if isinstance(item, BaseModel) else item for item in value]
    return value


_OMITTABLE: dict[type[BaseModel], frozenset[str]] = {}


def _check_tree(event: BaseEvent, tree: dict[str, Any]) -> None:
    """Raise EncodeError for the first value of ``tree`` that is not portable JSON."""
    found = _json.value_problem(tree)
    if found is None:
        return
    where, problem = found
    path = ".".join(str(p) for p in where)
    raise EncodeError(
        f"cannot encode {event.type.value}: the value at `{_json.shown_path(where)}` is not "
        f"portable JSON: {problem}. Fix the stage or agent that produced it",
        path=path,
        event_type=event.type.value,
    )


def _encode_tree(event: BaseEvent) -> bytes:
    """Write an event pydantic cannot (deep values), after the same checks, iteratively."""
    tree = _event_tree(event)
    _check_tree(event, tree)
    parts: list[bytes] = []
    stack: list[Any] = [tree]
    while stack:
        item = stack.pop()
        if item.__class__ is _Fragment:
            parts.append(item.text)
        elif isinstance(item, dict):
            if not item:
                parts.append(b"{}")
                continue
            pending: list[Any] = [_CLOSE_OBJECT]
            for i, (key, value) in enumerate(reversed(item.items())):
                pending.append(value)
                opener = b"{" if i == len(item) - 1 else b","
                pending.append(_Fragment(opener + _leaf(key) + b":"))
            stack.extend(pending)
        elif isinstance(item, list | tuple):
            if not item:
                parts.append(b"[]")
                continue
            pending = [_CLOSE_ARRAY]
            for i, value in enumerate(reversed(item)):
                pending.append(value)
                pending.append(_OPEN_ARRAY if i == len(item) - 1 else _COMMA)
            stack.extend(pending)
        else:
            parts.append(_leaf(item.value if isinstance(item, Enum) else item))
    return b"".join(parts)


def _leaf(value: Any) -> bytes:
    """One scalar's JSON: orjson's writing, the standard library's where orjson refuses
    (a lone surrogate, written as its escape; an integer beyond 64 bits)."""
    if _json.orjson_dumps is not None:
        try:
            return _json.orjson_dumps(value)
        except (TypeError, ValueError):
            pass
    return _json_dumps(value, ensure_ascii=True).encode()


class _Fragment:
    """Literal JSON text on the deep writer's stack."""

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text


_CLOSE_OBJECT: Final = _Fragment(b"}")
_CLOSE_ARRAY: Final = _Fragment(b"]")
_OPEN_ARRAY: Final = _Fragment(b"[")
_COMMA: Final = _Fragment(b",")


def encode_sse(event: BaseEvent) -> bytes:
    """One SSE frame, byte-identical to ``EventEncoder().encode(event).encode()``."""
    plain = _encode_plain(event) if isinstance(event, BaseEvent) else None
    return b"data: " + (plain if plain is not None else encode_json(event)) + b"\n\n"


def encode_ndjson(event: BaseEvent) -> bytes:
    """One NDJSON line: the event's wire JSON and a newline."""
    return encode_json(event) + b"\n"


def sse_comment(text: str = "") -> bytes:
    """An SSE comment frame (keep-alive); clients ignore it.

    Line breaks in ``text`` are rejected: they would end the comment and turn
    the rest into fields.
    """
    if "\n" in text or "\r" in text:
        raise ValueError(f"an SSE comment cannot contain a line break: {text!r}")
    return b":" + (b" " + text.encode() if text else b"") + b"\n\n"


# -- decoding -------------------------------------------------------------


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


class SSEDecoder:
    """Incremental ``text/event-stream`` decoder: bytes in, ``data`` payloads out.

    ``feed(chunk)`` returns the payload of every frame the chunk completed (the
    ``data:`` lines of the frame joined with ``\\n``), in order; chunks may
    split anywhere, including inside a UTF-8 sequence or a CRLF. ``event:``,
    ``id:`` and ``retry:`` fields are parsed as the spec says (the last id and
    retry are kept on the decoder) but do not filter frames: AG-UI puts
    everything in ``data``. Comments and unknown fields are ignored, and a
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
    """

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError(f"max_frame_bytes must be positive, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self.last_event_id = ""
        self.retry_ms: int | None = None
        self.event_type = ""
        self._line = bytearray()  # the unfinished line
        self._data: list[bytes] = []  # data lines of the current frame
        self._frame_size = 0  # bytes of the current frame's completed lines
        self._pending_fields = False  # saw a non-data field in this frame
        self._skip_lf = False
        self._at_start = True  # a leading BOM is still possible
        self._failed: CodecError | None = None
        self._closed = False

    def feed(self, chunk: bytes) -> list[str]:
        """Consume ``chunk``; return the payloads of the frames it completed."""
        return self._feed(chunk, True)

    def feed_bytes(self, chunk: bytes) -> list[bytes]:
        """``feed``, with each payload as UTF-8 bytes (see the class docstring)."""
        return self._feed(chunk, False)

    def _feed(self, chunk: bytes, text: bool) -> list[Any]:
        if self._failed is not None:
            raise CodecError(f"SSE decoder already failed: {self._failed}") from self._failed
        if self._closed:
            raise CodecError("SSE decoder is closed; create a new one for a new stream")
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise TypeError(f"SSEDecoder.feed() takes bytes, got {type(chunk).__name__}")
        chunk = bytes(chunk)
        if self._at_start:
            if not chunk:
                return []
            pending = bytes(self._line) + chunk
            if len(pending) < len(_BOM) and _BOM.startswith(pending):
                self._line[:] = pending
                return []
            self._at_start = False
            self._line.clear()
            chunk = pending[len(_BOM):] if pending.startswith(_BOM) else pending
        chunk, self._skip_lf = _normalise_newlines(chunk, self._skip_lf)
        out: list[Any] = []
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
            field, value = line[:colon], line[colon + 1:]
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


class NDJSONDecoder:
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
    """

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_line_bytes <= 0:
            raise ValueError(f"max_line_bytes must be positive, got {max_line_bytes}")
        self.max_line_bytes = max_line_bytes
        self._line = bytearray()
        self._at_start = True  # a leading BOM is still possible
        self._failed: CodecError | None = None
        self._closed = False

    def feed(self, chunk: bytes) -> list[str]:
        """Consume ``chunk``; return the lines it completed."""
        return self._feed(chunk, True)

    def feed_bytes(self, chunk: bytes) -> list[bytes]:
        """``feed``, with each line as (UTF-8-checked) bytes."""
        return self._feed(chunk, False)

    def _feed(self, chunk: bytes, text: bool) -> list[Any]:
        if self._failed is not None:
            raise CodecError(f"NDJSON decoder already failed: {self._failed}") from self._failed
        if self._closed:
            raise CodecError("NDJSON decoder is closed; create a new one for a new stream")
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise TypeError(f"NDJSONDecoder.feed() takes bytes, got {type(chunk).__name__}")
        chunk = bytes(chunk)
        if self._at_start:
            if not chunk:
                return []
            pending = bytes(self._line) + chunk
            if len(pending) < len(_BOM) and _BOM.startswith(pending):
                self._line[:] = pending  # maybe a BOM split across chunks
                return []
            self._at_start = False
            self._line.clear()
            chunk = pending[len(_BOM):] if pending.startswith(_BOM) else pending
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
        for line in lines:
            if len(line) > self.max_line_bytes:
                self._line[:] = line
                self._check()
            self._emit(line, out, text)
        self._line += tail
        self._check()
        return out

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
