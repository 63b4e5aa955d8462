"""``agui-pipes run --config CHAIN.yaml [PATH|-]`` — apply a declared chain to a stream.

Reads a recorded or piped stream (NDJSON, SSE, a JSON array or a corpus case;
see ``_input``), runs it through the chain and writes the resulting events as
NDJSON (default) or SSE. Events are written as they come out of the chain, so
it works as a filter in a shell pipe.

A chain of synchronous stages over NDJSON or SSE input runs through
``agui_pipes.relay.Relay``: each chunk read is decoded, transformed and
encoded in one pass and written with one call, without starting an event loop.
Other chains (async stages, operators) and the JSON shapes run event by event
through ``chain.apply``, under ``anyio.run``.
Both write the same bytes, and on a rejection the events before the
rejected one are written either way.

Exit status: 0 the stream went through; 1 the stream was rejected — by a
stage (e.g. ``verify`` with ``on_violation: raise``), by the decoder (a
malformed event) or because a stage failed — with the reason on stderr, after
the events that made it through; 2 usage, I/O or config error, and an input
that holds no event (empty, comments only, every event of an unknown type, or
read with the wrong ``--input-format``): nothing is never a valid stream.
Positions in messages are wire positions whichever path ran: ``event #N``
counts the input's events from 0 (dropped unknown ones included), and for a
file ``(FILE:LINE)`` gives its 1-based line.

With a file as input and a terminal on stderr, a progress line (events,
events/s, percent read) is kept up to date on stderr; never otherwise, so
logs and pipes stay clean.

A recorded stream is a consumer's input, so ``run`` reads it as ``verify`` and
``Consumer`` do: with the reference client's always-on compatibility boundary.
Unless the chain has a stage that reads the pre-1.0 shapes itself (``compat``)
or ``--no-compat`` is given, a ``Compat(direction="up")`` stage goes first: the
retired ``THINKING_*`` events and ``binary`` content parts are translated into
1.0 with a warning, and a 1.0 stream passes it untouched (the stage routes no
1.0 event but RUN_STARTED). ``--no-compat`` is the strict 1.0 view: those shapes
are dropped with a warning.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from ag_ui.core import BaseEvent

from .._foundation.errors import StageError, StreamRejected
from .._foundation.limits_scope import using_limits
from .._pipeline.chain import TransformerChain
from .._protocol.legacy import reads_legacy
from ..codecs import (
    CodecError,
    DecodeWarning,
    EncodeError,
    NDJSONDecoder,
    SSEDecoder,
    encode_ndjson,
    encode_sse,
)
from ..relay import Relay
from ._chainfile import EXIT_CONFIG, load_or_report
from ._input import (
    FORMATS,
    InputError,
    Progress,
    SyncInput,
    decode_events,
    input_name,
    line_of_event,
    no_events_message,
    open_input,
    open_input_sync,
    payloads_of,
    wire_index,
)
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
    parser.add_argument(
        "--config",
        "-c",
        required=True,
        metavar="CHAIN.yaml",
        help="the chain file (see docs/yaml-reference.md)",
    )
    parser.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="PATH",
        help="the input stream; `-` or nothing for standard input",
    )
    parser.add_argument(
        "--output", "-o", metavar="PATH", help="write here instead of standard output"
    )
    parser.add_argument(
        "--format",
        choices=("ndjson", "sse"),
        default="ndjson",
        help="output encoding (default ndjson)",
    )
    parser.add_argument(
        "--input-format",
        choices=FORMATS,
        default="auto",
        help="input encoding (default: by extension, else by content)",
    )
    parser.add_argument(
        "--allow-imports",
        action="store_true",
        help="permit `type: module:attr` references in the chain file",
    )
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no decode warnings and no progress line on stderr",
    )
    parser.add_argument(
        "--no-compat",
        action="store_true",
        help="the strict 1.0 view: retired THINKING_* events and binary content parts are "
        "dropped with warnings instead of being translated as the reference client does",
    )
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
            print(
                f"agui-pipes: cannot open input {args.input}: {exc.strerror or exc}",
                file=sys.stderr,
            )
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

    wire = _WireCount()

    async def apply(chain: TransformerChain, opened: SyncInput) -> None:
        async with open_input(args.input, progress=progress, resume=opened) as resumed:
            source = decode_events(
                payloads_of(resumed),
                on_warning=on_warning,
                progress=progress,
                dropped=wire.dropped,
                legacy=reads_legacy(chain.stages),
            )
            async with aclosing(source), chain.apply(source) as events:
                async for event in events:
                    out.write(encode(event))
                    if line is not None:
                        line.tick()

    try:
        chain = chain_factory()
        if not args.no_compat and not reads_legacy(chain.stages):
            from ..transformers.compat import Compat

            chain = TransformerChain([Compat(direction="up"), chain])
        with (
            _compat_warnings(on_warning),
            open_input_sync(
                args.input, input_format=args.input_format, progress=progress
            ) as opened,
        ):
            if chain.is_sync and opened.format in ("ndjson", "sse"):
                # No event loop: the relay needs none, and starting one (asyncio and
                # anyio's backend) would be most of the start-up of a short run.
                wire.by_relay = True
                _relay(chain, opened, out, encode, on_warning, progress, line, wire)
            else:
                import anyio

                anyio.run(apply, chain, opened)
    except Exception as raised:
        failure = _unwrap(raised)
        code, message = _classify(failure)
        if isinstance(failure, StreamRejected | StageError):
            message = _located(message, failure, wire, progress, args.input)
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
    if progress.events == 0:
        items = wire.total(progress)
        print(
            f"agui-pipes: {no_events_message(input_name(args.input), progress, items)}",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    return 0


class _CompatWarnings(logging.Handler):
    """The compat stage's warnings (logged on ``agui_pipes.compat``) as ``warning:`` lines."""

    def __init__(self, on_warning: Callable[[DecodeWarning], None]) -> None:
        super().__init__(logging.WARNING)
        self._on_warning = on_warning

    def emit(self, record: logging.LogRecord) -> None:
        self._on_warning(DecodeWarning("compat", record.getMessage()))


@contextmanager
def _compat_warnings(on_warning: Callable[[DecodeWarning], None] | None) -> Iterator[None]:
    """Print what a compat stage says during the run, as the decoder's warnings are."""
    if on_warning is None:
        yield
        return
    logger = logging.getLogger("agui_pipes.compat")
    handler = _CompatWarnings(on_warning)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


@dataclass
class _WireCount:
    """What maps the positions a run reports to the input's own (wire) positions.

    The relay numbers wire events itself; ``chain.apply`` numbers the decoded
    ones, so there the wire positions of the events dropped as unknown types
    (``dropped``) are added back.
    """

    by_relay: bool = False
    relay_events: int = 0
    dropped: list[int] = field(default_factory=list)

    def total(self, progress: Progress) -> int:
        return self.relay_events if self.by_relay else progress.events + len(self.dropped)

    def position(self, index: int) -> int:
        return index if self.by_relay else wire_index(index, self.dropped)


def _located(
    message: str,
    failure: StreamRejected | StageError,
    wire: _WireCount,
    progress: Progress,
    path: str | None,
) -> str:
    """``message`` at the failure's wire position, plus ``(FILE:LINE)`` for a file's event."""
    index = failure.index
    if index is None or (isinstance(failure, StageError) and failure.phase == "run()"):
        return message
    at_event = failure.event is not None or (
        isinstance(failure, StreamRejected) and failure.at_event
    )
    if isinstance(failure, StreamRejected) and failure.stage is None:
        position = index  # the decoder's own numbering: already the wire position
    elif at_event:
        position = wire.position(index)
    else:
        position = wire.total(progress) - 1  # the end of stream: after every wire event
    if position != index:
        if isinstance(failure, StreamRejected):
            failure.index = position
            message = _classify(failure)[1]
        else:
            renumbered = StageError(failure.stage, failure.event, position, failure.cause)
            message = _classify(renumbered)[1]
    if not at_event:
        return message
    line = line_of_event(path, progress.format, position)
    return message if line is None else f"{message} ({path}:{line})"


def _relay(
    chain: TransformerChain,
    opened: SyncInput,
    out: IO[bytes],
    encode: Callable[[BaseEvent], bytes],
    on_warning: Callable[[DecodeWarning], None] | None,
    progress: Progress,
    line: _ProgressLine | None,
    wire: _WireCount,
) -> None:
    """Decode, transform and write NDJSON/SSE input a chunk at a time (sync chains)."""
    decoder = NDJSONDecoder() if opened.format == "ndjson" else SSEDecoder()
    # No per-event hooks: the relay's bypass stays on.
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
            wire.relay_events = relay.events_in
        out.write(data)
        if line is not None:
            line.tick()

    for chunk in opened.chunks:
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
    if isinstance(exc, EncodeError):  # a stage built a value JSON cannot carry
        return EXIT_REJECTED, f"agui-pipes: a stage produced an event that cannot be written: {exc}"
    raise exc
