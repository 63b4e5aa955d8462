"""``agui-pipes run --config CHAIN.yaml [PATH|-]`` — apply a declared chain to a stream.

Reads a recorded or piped stream (NDJSON, SSE, a JSON array or a corpus case;
see ``_input``), runs it through the chain and writes the resulting events as
NDJSON (default) or SSE. Events are written as they come out of the chain, so
it works as a filter in a shell pipe.

A chain of synchronous stages over NDJSON or SSE input runs through
``agui_pipes.relay.Relay``: each chunk read is decoded, transformed and
encoded in one pass and written with one call. Other chains (async stages,
operators) and the JSON shapes run event by event through ``chain.apply``.
Both write the same bytes, and on a rejection the events before the
rejected one are written either way.

Exit status: 0 the stream went through; 1 the stream was rejected — by a
stage (e.g. ``verify`` with ``on_violation: raise``), by the decoder (a
malformed event) or because a stage failed — with the reason on stderr, after
the events that made it through; 2 usage, I/O or config error.

With a file as input and a terminal on stderr, a progress line (events,
events/s, percent read) is kept up to date on stderr; never otherwise, so
logs and pipes stay clean.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

import anyio
from ag_ui.core import BaseEvent

from .._chain import TransformerChain
from .._errors import StageError, StreamRejected
from .._limits_scope import using_limits
from ..codecs import CodecError, NDJSONDecoder, SSEDecoder, encode_ndjson, encode_sse
from ..decode import DecodeWarning
from ..relay import Relay
from ._chainfile import EXIT_CONFIG, load_or_report
from ._input import FORMATS, InputError, OpenInput, Progress, decode_events, open_input, payloads_of
from ._limits import add_limit_options, limits_of

__all__ = ["register"]

EXIT_REJECTED = 1
_REFRESH = 0.1


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="apply a chain file to a recorded or piped event stream",
        description=(
            "Decode an AG-UI event stream (NDJSON, SSE, JSON array or corpus case), apply "
            "the chain declared in CHAIN.yaml, and write the events."
        ),
    )
    parser.add_argument("--config", "-c", required=True, metavar="CHAIN.yaml",
                        help="the chain file (see docs/yaml-reference.md)")
    parser.add_argument("input", nargs="?", default="-", metavar="PATH",
                        help="the input stream; `-` or nothing for standard input")
    parser.add_argument("--output", "-o", metavar="PATH",
                        help="write here instead of standard output")
    parser.add_argument("--format", choices=("ndjson", "sse"), default="ndjson",
                        help="output encoding (default ndjson)")
    parser.add_argument("--input-format", choices=FORMATS, default="auto",
                        help="input encoding (default: by extension, else by content)")
    parser.add_argument("--allow-imports", action="store_true",
                        help="permit `type: module:attr` references in the chain file")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no decode warnings and no progress line on stderr")
    add_limit_options(parser)
    parser.set_defaults(handler=_run)


class _ProgressLine:
    """``12,345 events  41,000 ev/s  37%`` on stderr, redrawn at most ten times a second."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._start = time.monotonic()
        self._last = 0.0
        self._shown = False

    def tick(self) -> None:
        now = time.monotonic()
        if now - self._last >= _REFRESH:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        p = self._progress
        elapsed = max(now - self._start, 1e-9)
        line = f"{p.events:,} events  {p.events / elapsed:,.0f} ev/s"
        if p.total_bytes:
            line += f"  {min(100, 100 * p.bytes_read // p.total_bytes)}%"
        sys.stderr.write(f"\r\x1b[2K{line}")
        sys.stderr.flush()
        self._shown = True

    def done(self) -> None:
        if self._shown:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def _warn(warning: DecodeWarning) -> None:
    print(f"agui-pipes: warning: {warning}", file=sys.stderr)


def _open_output(path: str | None) -> IO[bytes]:
    if path is None or path == "-":
        return sys.stdout.buffer
    try:
        return open(path, "wb")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _run(args: argparse.Namespace) -> int:
    # The chain's stages are built inside: those that follow the state take these limits.
    with using_limits(limits_of(args)):
        return _run_chain(args)


def _run_chain(args: argparse.Namespace) -> int:
    chain_factory = load_or_report(args.config, allow_imports=args.allow_imports)
    if chain_factory is None:
        return EXIT_CONFIG
    from_file = args.input not in (None, "-")
    progress = Progress(None)
    if from_file:
        import os

        try:
            progress.total_bytes = os.path.getsize(args.input)
        except OSError as exc:
            print(f"agui-pipes: cannot open input {args.input}: {exc.strerror or exc}",
                  file=sys.stderr)
            return EXIT_CONFIG
    show_progress = from_file and not args.quiet and sys.stderr.isatty()
    line = _ProgressLine(progress) if show_progress else None
    encode = encode_sse if args.format == "sse" else encode_ndjson

    try:
        out = _open_output(args.output)
    except InputError as exc:
        print(f"agui-pipes: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    on_warning = None if args.quiet else _warn

    async def main() -> None:
        chain = chain_factory()
        async with open_input(
            args.input, input_format=args.input_format, progress=progress
        ) as opened:
            if chain.is_sync and opened.format in ("ndjson", "sse"):
                await _relay(chain, opened, out, encode, on_warning, progress, line)
                return
            source: AsyncIterator[BaseEvent] = decode_events(
                payloads_of(opened), on_warning=on_warning, progress=progress
            )
            async with chain.apply(source) as events:
                async for event in events:
                    out.write(encode(event))
                    if line is not None:
                        line.tick()

    try:
        anyio.run(main)
    except Exception as raised:
        code, message = _classify(_unwrap(raised))
        if line is not None:
            line.done()
        print(message, file=sys.stderr)
        return code
    finally:
        try:
            out.flush()
        finally:
            if out is not sys.stdout.buffer:
                out.close()
    if line is not None:
        line.done()
    return 0


async def _relay(
    chain: TransformerChain,
    opened: OpenInput,
    out: IO[bytes],
    encode: Callable[[BaseEvent], bytes],
    on_warning: Callable[[DecodeWarning], None] | None,
    progress: Progress,
    line: _ProgressLine | None,
) -> None:
    """Decode, transform and write NDJSON/SSE input a chunk at a time (sync chains)."""
    decoder = NDJSONDecoder() if opened.format == "ndjson" else SSEDecoder()
    # No per-event hooks: the relay's pass-through lane stays on.
    relay = Relay(chain, encode=encode, on_warning=on_warning)

    def feed(payloads: list[bytes]) -> None:
        if not payloads:
            return
        try:
            data = relay.feed(payloads)
        except Exception:
            # The events before the failing one are written, as event by event.
            out.write(relay.take_unsent())
            raise
        finally:
            progress.events = relay.events_in - relay.events_unknown
        out.write(data)
        if line is not None:
            line.tick()

    async for chunk in opened.chunks:
        feed(decoder.feed_bytes(chunk))
    feed(decoder.close_bytes())
    out.write(relay.finish())


def _unwrap(exc: BaseException) -> BaseException:
    """The lone exception inside (nested) single-member exception groups."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, tuple) or len(inner) != 1:
            return exc
        exc = inner[0]


def _classify(exc: BaseException) -> tuple[int, str]:
    """Exit status and stderr message for what ended the run; re-raise what is not ours."""
    if isinstance(exc, InputError):
        return EXIT_CONFIG, f"agui-pipes: {exc}"
    if isinstance(exc, StreamRejected):
        return EXIT_REJECTED, f"agui-pipes: stream rejected: {exc}"
    if isinstance(exc, CodecError):
        return EXIT_REJECTED, f"agui-pipes: stream rejected: invalid framing: {exc}"
    if isinstance(exc, StageError):
        return EXIT_REJECTED, f"agui-pipes: a stage failed: {exc}"
    raise exc
