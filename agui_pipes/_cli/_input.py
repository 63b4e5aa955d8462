"""Reading a recorded or piped event stream, whatever shape it was saved in.

Formats: NDJSON (one event per line), SSE (``data:`` frames, as served over
HTTP), a JSON array of events, and a conformance-corpus case (a JSON object
whose ``stream`` key holds the events). ``auto`` picks by file extension
(``.ndjson``/``.jsonl``, ``.sse``, ``.json``) and otherwise by the first bytes.

NDJSON and SSE are decoded incrementally, chunk by chunk, so a command can
start emitting before a long recording (or a live pipe) has been read to the
end; the JSON shapes are parsed whole. Every wire event goes through
``agui_pipes.decode`` — the AG-UI 1.0 processing model: unknown types and
properties are dropped with a warning, malformed fields are a ``DecodeError``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
from ag_ui.core import BaseEvent

from .. import _json
from ..codecs import NDJSONDecoder, SSEDecoder
from ..decode import DecodeWarning, decode

__all__ = [
    "FORMATS",
    "InputError",
    "OpenInput",
    "Progress",
    "decode_events",
    "open_input",
    "payloads_of",
    "read_events",
    "read_wire_events",
]

InputFormat = Literal["auto", "ndjson", "sse", "json", "corpus"]
FORMATS: tuple[str, ...] = ("auto", "ndjson", "sse", "json", "corpus")
_CHUNK = 64 * 1024
_BY_SUFFIX = {".ndjson": "ndjson", ".jsonl": "ndjson", ".sse": "sse", ".json": "json"}


class InputError(Exception):
    """The input could not be opened or is not in any event-stream format (exit 2)."""


@dataclass
class Progress:
    """How far reading has got: bytes of the source, events decoded so far."""

    total_bytes: int | None
    bytes_read: int = 0
    events: int = 0


def _sniff(head: bytes) -> str:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"["):
        return "json"
    if text.startswith((b"data:", b":", b"event:", b"id:", b"retry:")):
        return "sse"
    return "ndjson"


async def _chunks(path: str | None, progress: Progress) -> AsyncGenerator[bytes, None]:
    if path is None or path == "-":
        source: Any = anyio.wrap_file(sys.stdin.buffer)
    else:
        try:
            source = await anyio.open_file(path, "rb")
        except OSError as exc:
            raise InputError(f"cannot open input {path}: {exc.strerror or exc}") from None
    try:
        while True:
            try:
                chunk: bytes = await source.read(_CHUNK)
            except OSError as exc:
                raise InputError(f"cannot read input: {exc.strerror or exc}") from None
            if not chunk:
                return
            progress.bytes_read += len(chunk)
            yield chunk
    finally:
        if path is not None and path != "-":
            await source.aclose()


def _json_items(data: bytes, fmt: str, name: str) -> list[Any]:
    try:
        document = _json.loads(data.decode("utf-8-sig"))
    except _json.JSONValueError as exc:
        # NaN / Infinity, a number beyond a double, nesting past the limit: the
        # same refusal as for an NDJSON or SSE event, for the whole document.
        where = f" at `{_json.shown_path(exc.path)}`" if exc.path else ""
        raise InputError(f"{name} is not valid JSON{where}: {exc.problem}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{name} is not valid JSON ({exc}); expected a JSON array of "
                         "events or a corpus case, or pass --input-format") from None
    if isinstance(document, dict) and isinstance(document.get("stream"), list):
        return list(document["stream"])
    if fmt == "corpus":
        raise InputError(f"{name} is not a corpus case: expected an object with a `stream` list")
    if isinstance(document, list):
        return document
    raise InputError(
        f"{name} holds a JSON {type(document).__name__}; expected an array of events, a "
        "corpus case ({\"stream\": [...]}) or NDJSON (one event per line)"
    )


@dataclass
class OpenInput:
    """An opened input whose format is settled: ``chunks`` yields all its bytes."""

    format: str  # ndjson, sse, json or corpus
    name: str
    chunks: AsyncIterator[bytes]


async def _prepend(first: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if first:
        yield first
    async for chunk in chunks:
        yield chunk


@asynccontextmanager
async def open_input(
    path: str | None, *, input_format: str = "auto", progress: Progress | None = None
) -> AsyncIterator[OpenInput]:
    """Open ``path`` (``None`` or ``-``: standard input) and settle its format.

    ``auto`` looks at the file extension, then at the first chunk read (which
    ``chunks`` still yields). Raises ``InputError`` like ``read_events``.
    """
    if input_format not in FORMATS:
        raise InputError(f"unknown input format {input_format!r}; use one of {FORMATS}")
    name = "standard input" if path in (None, "-") else str(path)
    chunks = _chunks(path, progress or Progress(None))
    try:
        first = b""
        async for chunk in chunks:
            first = chunk
            break
        fmt = input_format
        if fmt == "auto":
            suffix = Path(path).suffix.lower() if path not in (None, "-") else ""
            fmt = _BY_SUFFIX.get(suffix) or _sniff(first)
        yield OpenInput(fmt, name, _prepend(first, chunks))
    finally:
        await chunks.aclose()


async def payloads_of(opened: OpenInput) -> AsyncIterator[Any]:
    """The wire events of an opened input: JSON texts (NDJSON, SSE) or parsed objects."""
    if opened.format in ("json", "corpus"):
        data = bytearray()
        async for chunk in opened.chunks:
            data += chunk
        if not data.strip():
            return
        for item in _json_items(bytes(data), opened.format, opened.name):
            yield item
        return
    decoder = NDJSONDecoder() if opened.format == "ndjson" else SSEDecoder()
    async for chunk in opened.chunks:
        for payload in decoder.feed(chunk):
            yield payload
    for payload in decoder.close():
        yield payload


async def _payloads(path: str | None, fmt: str, progress: Progress) -> AsyncIterator[Any]:
    async with open_input(path, input_format=fmt, progress=progress) as opened:
        async for payload in payloads_of(opened):
            yield payload


async def read_wire_events(
    path: str | None, *, input_format: str = "auto", progress: Progress | None = None
) -> AsyncIterator[Any]:
    """The raw wire events of ``path`` (``None`` or ``-``: standard input), undecoded.

    Each item is a JSON text (NDJSON line, SSE ``data:`` payload) or an
    already-parsed object (JSON array / corpus case), ready for
    ``agui_pipes.decode`` or ``agui_pipes.Consumer.push``. Raises
    ``InputError`` like ``read_events``.
    """
    if input_format not in FORMATS:
        raise InputError(f"unknown input format {input_format!r}; use one of {FORMATS}")
    async for payload in _payloads(path, input_format, progress or Progress(None)):
        yield payload


async def read_events(
    path: str | None,
    *,
    input_format: str = "auto",
    on_warning: Callable[[DecodeWarning], None] | None = None,
    progress: Progress | None = None,
) -> AsyncIterator[BaseEvent]:
    """The decoded events of ``path`` (``None`` or ``-``: standard input), in order.

    Raises ``InputError`` when the input cannot be read or has no recognisable
    format, and ``agui_pipes.decode.DecodeError`` (a ``ProtocolViolation``)
    for a malformed event — the stream is rejected at that event.
    """
    if input_format not in FORMATS:
        raise InputError(f"unknown input format {input_format!r}; use one of {FORMATS}")
    if progress is None:
        progress = Progress(None)
    async for event in decode_events(
        _payloads(path, input_format, progress), on_warning=on_warning, progress=progress
    ):
        yield event


async def decode_events(
    payloads: AsyncIterator[Any],
    *,
    on_warning: Callable[[DecodeWarning], None] | None = None,
    progress: Progress | None = None,
) -> AsyncIterator[BaseEvent]:
    """``agui_pipes.decode`` over wire events, numbering them from 0 (see ``read_events``)."""
    index = 0
    async for payload in payloads:
        decoded = decode(payload, index=index)
        index += 1
        if on_warning is not None:
            for warning in decoded.warnings:
                on_warning(warning)
        if decoded.event is not None:
            if progress is not None:
                progress.events += 1
            yield decoded.event
