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

import itertools
import json
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator
from contextlib import aclosing, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from ag_ui.core import BaseEvent

from .._foundation import json as _json
from ..codecs import DecodeWarning, NDJSONDecoder, SSEDecoder, decode

__all__ = [
    "FORMATS",
    "MAX_DOCUMENT_BYTES",
    "InputError",
    "OpenInput",
    "Progress",
    "SyncInput",
    "decode_events",
    "input_name",
    "line_of_event",
    "lines_of_events",
    "no_events_message",
    "open_input",
    "open_input_sync",
    "payloads_of",
    "read_events",
    "read_wire_events",
    "wire_index",
]

InputFormat = Literal["auto", "ndjson", "sse", "json", "corpus"]
FORMATS: tuple[str, ...] = ("auto", "ndjson", "sse", "json", "corpus")
_CHUNK = 64 * 1024
_BOM = b"\xef\xbb\xbf"
_BY_SUFFIX = {".ndjson": "ndjson", ".jsonl": "ndjson", ".sse": "sse", ".json": "json"}


class InputError(Exception):
    """The input could not be opened or is not in any event-stream format (exit 2)."""


@dataclass
class Progress:
    """How far reading has got: bytes of the source, events decoded so far.

    ``format`` is the input's settled format once ``open_input`` knows it.
    """

    total_bytes: int | None
    bytes_read: int = 0
    events: int = 0
    format: str | None = None


def _sniff(head: bytes) -> str:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"["):
        return "json"
    if text.startswith((b"data:", b":", b"event:", b"id:", b"retry:")):
        return "sse"
    return "ndjson"


async def _chunks(path: str | None, progress: Progress) -> AsyncGenerator[bytes, None]:
    import anyio  # here, not with the module: a synchronous `run` starts no event loop

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
        raise InputError(
            f"{name} is not valid JSON ({exc}); expected a JSON array of "
            "events or a corpus case, or pass --input-format"
        ) from None
    if isinstance(document, dict) and isinstance(document.get("stream"), list):
        return list(document["stream"])
    if fmt == "corpus":
        raise InputError(f"{name} is not a corpus case: expected an object with a `stream` list")
    if isinstance(document, list):
        return document
    raise InputError(
        f"{name} holds a JSON {type(document).__name__}; expected an array of events, a "
        'corpus case ({"stream": [...]}) or NDJSON (one event per line)'
    )


MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""A JSON-array or corpus input is parsed whole, at several times its size in
memory; past this cap it is refused with the way to stream it instead. NDJSON and
SSE input have no size cap: they are read an event at a time (each frame capped)."""


@dataclass
class OpenInput:
    """An opened input whose format is settled: ``chunks`` yields all its bytes."""

    format: str  # ndjson, sse, json or corpus
    name: str
    chunks: AsyncIterator[bytes]


@dataclass
class SyncInput:
    """An input opened without an event loop, its format settled: ``chunks`` yields all
    its bytes (blocking reads)."""

    format: str  # ndjson, sse, json or corpus
    name: str
    chunks: Iterator[bytes]


def _settled_format(path: str | None, input_format: str, first: bytes) -> str:
    if input_format != "auto":
        return input_format
    suffix = Path(path).suffix.lower() if path not in (None, "-") else ""
    return _BY_SUFFIX.get(suffix) or _sniff(first)


def _chunks_sync(source: IO[bytes], progress: Progress) -> Iterator[bytes]:
    while True:
        try:
            chunk = source.read(_CHUNK)
        except OSError as exc:
            raise InputError(f"cannot read input: {exc.strerror or exc}") from None
        if not chunk:
            return
        progress.bytes_read += len(chunk)
        yield chunk


@contextmanager
def open_input_sync(
    path: str | None, *, input_format: str = "auto", progress: Progress | None = None
) -> Iterator[SyncInput]:
    """``open_input`` for a reader that needs no event loop (a sync chain's relay).

    Starting an event loop is most of a short run's start-up, so ``run`` opens
    its input this way and starts one only when the chain or the format needs
    it, handing the input over with ``open_input(..., resume=...)``.
    """
    if input_format not in FORMATS:
        raise InputError(f"unknown input format {input_format!r}; use one of {FORMATS}")
    if progress is None:
        progress = Progress(None)
    owned = path is not None and path != "-"
    if path is not None and owned:
        try:
            source: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise InputError(f"cannot open input {path}: {exc.strerror or exc}") from None
    else:
        source = sys.stdin.buffer
    try:
        chunks = _chunks_sync(source, progress)
        first = next(chunks, b"")
        fmt = _settled_format(path, input_format, first)
        progress.format = fmt
        yield SyncInput(fmt, input_name(path), itertools.chain((first,) if first else (), chunks))
    finally:
        if owned:
            source.close()


async def _in_thread(chunks: Iterator[bytes]) -> AsyncGenerator[bytes, None]:
    """The chunks of a ``SyncInput``, each read in a worker thread (as ``anyio.wrap_file``)."""
    from anyio import to_thread

    while True:
        chunk = await to_thread.run_sync(next, chunks, b"")
        if not chunk:
            return
        yield chunk


async def _prepend(first: bytes, chunks: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    if first:
        yield first
    async for chunk in chunks:
        yield chunk


@asynccontextmanager
async def open_input(
    path: str | None,
    *,
    input_format: str = "auto",
    progress: Progress | None = None,
    resume: SyncInput | None = None,
) -> AsyncIterator[OpenInput]:
    """Open ``path`` (``None`` or ``-``: standard input) and settle its format.

    ``auto`` looks at the file extension, then at the first chunk read (which
    ``chunks`` still yields). Raises ``InputError`` like ``read_events``.
    ``resume`` goes on reading an input ``open_input_sync`` opened instead.
    """
    if resume is not None:
        async with aclosing(_in_thread(resume.chunks)) as resumed:
            yield OpenInput(resume.format, resume.name, resumed)
        return
    if input_format not in FORMATS:
        raise InputError(f"unknown input format {input_format!r}; use one of {FORMATS}")
    name = input_name(path)
    if progress is None:
        progress = Progress(None)
    # Every generator is closed here, in order, whatever ends the block: left to
    # the garbage collector, nested async generators are finalised concurrently
    # at loop shutdown ("aclose(): asynchronous generator is already running").
    async with aclosing(_chunks(path, progress)) as chunks:
        first = b""
        async for chunk in chunks:
            first = chunk
            break
        fmt = _settled_format(path, input_format, first)
        progress.format = fmt
        async with aclosing(_prepend(first, chunks)) as all_chunks:
            yield OpenInput(fmt, name, all_chunks)


def input_name(path: str | None) -> str:
    """How messages name the input: its path, or ``standard input``."""
    return "standard input" if path in (None, "-") else str(path)


def no_events_message(name: str, progress: Progress, items: int = 0) -> str:
    """Why an input that gave no event is refused, and what to check (exit 2).

    ``items`` counts the wire events read, all dropped (unknown types) when
    there were some. Nothing is never a valid stream: an empty ``curl`` body
    or a wrong ``--input-format`` must fail a CI check, not pass it.
    """
    if items:
        dropped = (
            "its one event was dropped as an unknown event type"
            if items == 1
            else f"its {items} events were all dropped as unknown event types"
        )
        return (
            f"no events: {dropped} in {name} (see the warnings); AG-UI 1.0 describes "
            f"{'it' if items == 1 else 'none of them'} — is --input-format right?"
        )
    if progress.bytes_read == 0:
        return (
            f"no events: {name} is empty (0 bytes); an empty file or response body is not "
            "a valid stream"
        )
    return (
        f"no events: {progress.bytes_read} bytes of {name} read as {progress.format} hold "
        "no event; is the input empty (only comments or blank lines), or is "
        "--input-format wrong?"
    )


async def payloads_of(opened: OpenInput) -> AsyncGenerator[Any, None]:
    """The wire events of an opened input: JSON texts (NDJSON, SSE) or parsed objects."""
    if opened.format in ("json", "corpus"):
        data = bytearray()
        async for chunk in opened.chunks:
            data += chunk
            if len(data) > MAX_DOCUMENT_BYTES:
                raise InputError(
                    f"{opened.name} is a JSON document of more than {MAX_DOCUMENT_BYTES:,} "
                    "bytes (the cap for JSON-array and corpus input, which is parsed whole); "
                    "give it as NDJSON, which is read an event at a time, e.g. "
                    "`jq -c '.[]' FILE > FILE.ndjson`"
                )
        if not data.removeprefix(_BOM).strip():
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


async def _payloads(path: str | None, fmt: str, progress: Progress) -> AsyncGenerator[Any, None]:
    async with (
        open_input(path, input_format=fmt, progress=progress) as opened,
        aclosing(payloads_of(opened)) as payloads,
    ):
        async for payload in payloads:
            yield payload


async def read_wire_events(
    path: str | None, *, input_format: str = "auto", progress: Progress | None = None
) -> AsyncGenerator[Any, None]:
    """The raw wire events of ``path`` (``None`` or ``-``: standard input), undecoded.

    Each item is a JSON text (NDJSON line, SSE ``data:`` payload) or an
    already-parsed object (JSON array / corpus case), ready for
    ``agui_pipes.decode`` or ``agui_pipes.Consumer.push``. Raises
    ``InputError`` like ``read_events``.
    """
    if input_format not in FORMATS:
        raise InputError(f"unknown input format {input_format!r}; use one of {FORMATS}")
    async with aclosing(_payloads(path, input_format, progress or Progress(None))) as payloads:
        async for payload in payloads:
            yield payload


async def read_events(
    path: str | None,
    *,
    input_format: str = "auto",
    on_warning: Callable[[DecodeWarning], None] | None = None,
    progress: Progress | None = None,
) -> AsyncGenerator[BaseEvent, None]:
    """The decoded events of ``path`` (``None`` or ``-``: standard input), in order.

    Raises ``InputError`` when the input cannot be read or has no recognisable
    format, and ``agui_pipes.DecodeError`` (a ``ProtocolViolation``)
    for a malformed event — the stream is rejected at that event.
    """
    if input_format not in FORMATS:
        raise InputError(f"unknown input format {input_format!r}; use one of {FORMATS}")
    if progress is None:
        progress = Progress(None)
    events = decode_events(
        _payloads(path, input_format, progress), on_warning=on_warning, progress=progress
    )
    async with aclosing(events):
        async for event in events:
            yield event


async def decode_events(
    payloads: AsyncGenerator[Any, None],
    *,
    on_warning: Callable[[DecodeWarning], None] | None = None,
    progress: Progress | None = None,
    dropped: list[int] | None = None,
    legacy: bool = False,
) -> AsyncGenerator[BaseEvent, None]:
    """``agui_pipes.decode`` over wire events, numbering them from 0 (see ``read_events``).

    ``legacy`` reads the pre-1.0 shapes too, for a chain with a ``compat`` stage.

    ``payloads`` is closed when this generator is. The positions of the wire
    events dropped as unknown types are appended to ``dropped``, so a driver
    that numbers the decoded events can name wire positions (see ``wire_index``).
    """
    index = 0
    async with aclosing(payloads):
        async for payload in payloads:
            decoded = decode(payload, index=index, legacy=legacy)
            if on_warning is not None:
                for warning in decoded.warnings:
                    on_warning(warning)
            if decoded.event is not None:
                if progress is not None:
                    progress.events += 1
                index += 1
                yield decoded.event
                continue
            if dropped is not None:
                dropped.append(index)
            index += 1


def wire_index(index: int, dropped: list[int]) -> int:
    """The wire position of decoded event ``index``, given the dropped positions (sorted)."""
    for position in dropped:
        if position > index:
            break
        index += 1
    return index


def line_of_event(path: str | None, fmt: str | None, index: int) -> int | None:
    """The 1-based line where wire event ``index`` (0-based) starts in file ``path``.

    Only asked after a rejection, so it re-reads the file instead of making
    every event pay for line counting. ``None`` for standard input (it cannot
    be read twice), a corpus case, or when the event is not found.
    """
    return lines_of_events(path, fmt, (index,)).get(index)


def lines_of_events(path: str | None, fmt: str | None, indices: Iterable[int]) -> dict[int, int]:
    """``line_of_event`` for many events in one read of the file: ``{index: line}``.

    A report naming a hundred events (``agui-pipes repair``) must not read a
    large recording a hundred times. Events not found are left out.
    """
    wanted = {index for index in indices if index >= 0}
    if path in (None, "-") or fmt not in ("ndjson", "sse", "json") or not wanted:
        return {}
    last = max(wanted)
    found: dict[int, int] = {}
    try:
        with open(str(path), "rb") as source:
            if fmt == "json":
                starts: Iterator[int] = _json_starts(source.read())
            else:
                starts = _ndjson_starts(source) if fmt == "ndjson" else _sse_starts(source)
            for index, line in enumerate(starts):
                if index in wanted:
                    found[index] = line
                if index >= last:
                    break
    except (OSError, ValueError):
        pass  # what was found before the unreadable part stays
    return found


def _lines(source: Any) -> Any:
    """(1-based number, line without its end) for LF, CRLF or CR ends, BOM dropped."""
    number = 0
    first = True
    for raw in source:
        if first:
            raw = raw.removeprefix(_BOM)
            first = False
        parts = raw.rstrip(b"\n").split(b"\r")
        if len(parts) > 1 and parts[-1] == b"":
            parts.pop()  # a CRLF end
        for part in parts:
            number += 1
            yield number, part


def _ndjson_starts(source: Any) -> Iterator[int]:
    """The line of each NDJSON event, in order."""
    # NDJSON lines end with LF only (a CR before it is dropped).
    for number, raw in enumerate(source, 1):
        if number == 1:
            raw = raw.removeprefix(_BOM)
        if raw.strip():
            yield number


def _sse_starts(source: Any) -> Iterator[int]:
    """The line of the first ``data`` field of each frame that has data, in order."""
    start: int | None = None
    for number, line in _lines(source):
        if not line:
            if start is not None:
                yield start
                start = None
            continue
        field = line.split(b":", 1)[0]
        if field == b"data" and start is None:
            start = number
    if start is not None:
        yield start


def _json_starts(data: bytes) -> Iterator[int]:
    """The line where each element of a JSON array starts, in order."""
    text = data.decode("utf-8-sig")
    decoder = json.JSONDecoder()
    position = _skip_space(text, 0)
    if not text.startswith("[", position):
        return
    position += 1
    line, counted = 1, 0
    while True:
        position = _skip_space(text, position)
        if position >= len(text) or text.startswith("]", position):
            return
        line += text.count("\n", counted, position)
        counted = position
        yield line
        _, position = decoder.raw_decode(text, position)
        position = _skip_space(text, position)
        if not text.startswith(",", position):
            return
        position += 1


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position
