"""``agui-pipes repair [PATH|-] [-o OUT]`` — make a producer's broken stream valid, and say how.

Reads a recorded or piped stream (NDJSON, SSE, a JSON array or a corpus case;
see ``_input``), runs it through the ``Repair`` stage and writes the repaired
events in the input's own encoding (SSE in, SSE out; a JSON array or corpus
case comes out as a JSON array), or in ``--format``. The repaired stream is
then checked the way a 1.0 consumer checks it, so a zero exit status means
the output is a stream a client accepts, not only that Repair ran.

What Repair changed goes to stderr, one line per fix, each starting
``fix:`` and naming the input position (``event #N``, counted from 0 among
the input's events, and ``(FILE:LINE)`` for a file), then one summary line
(``repaired: ...`` or ``clean: ...``). ``--report-json`` prints one JSON
object instead: ``{"report": <RepairReport.as_dict()>, "accepted": bool,
"rejection": str | null}``, each fix also carrying its ``wireIndex``.

Exit status: 0 the stream was valid (nothing changed) or is valid once
repaired; 1 rejected — more fixes than ``--max-fixes``, a malformed event
(the decoder cannot read it, so there is nothing to repair), or a repaired
stream the consumer's verification still refuses (a case Repair does not
cover) — with one stderr line starting ``rejected:``, after the events that
made it through; 2 usage or I/O error, and an input with no
events.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import aclosing
from typing import IO, TYPE_CHECKING, Any

import anyio
from ag_ui.core import BaseEvent

from .._consumer.consume import Consumer, RunResult
from .._foundation import json as _json
from .._foundation.errors import StageError, StreamRejected
from .._pipeline.chain import TransformerChain
from ..codecs import (
    CodecError,
    DecodeError,
    DecodeWarning,
    decode,
    encode_json,
    encode_ndjson,
    encode_sse,
)
from ..verify import ProtocolViolation
from ._input import (
    FORMATS,
    InputError,
    Progress,
    input_name,
    line_of_event,
    lines_of_events,
    no_events_message,
    open_input,
    payloads_of,
    wire_index,
)
from ._limits import add_limit_options, limits_of

if TYPE_CHECKING:
    from ..transformers.repair import Repair

__all__ = ["RepairPass", "fix_lines", "new_repair", "register", "summary", "verdict_line"]

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2
OUTPUT_FORMATS = ("ndjson", "sse", "json")


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "repair",
        help="repair a recorded or piped stream that breaks the ordering rules (exit 0/1/2)",
        description=(
            "Run an AG-UI event stream (NDJSON, SSE, JSON array or corpus case) through the "
            "Repair stage: write the repaired stream, list every fix on stderr, and check "
            "that the result is valid AG-UI 1.0. Exit 0 valid (as given or once repaired), "
            "1 rejected, 2 usage or I/O error."
        ),
    )
    parser.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="PATH",
        help="the stream to repair; `-` or nothing for standard input",
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        help="write the repaired stream here instead of standard output",
    )
    parser.add_argument(
        "--format",
        choices=OUTPUT_FORMATS,
        help="output encoding (default: the input's; a JSON array for a JSON array or corpus case)",
    )
    parser.add_argument(
        "--input-format",
        choices=FORMATS,
        default="auto",
        help="input encoding (default: by extension, else by content)",
    )
    parser.add_argument(
        "--max-fixes",
        type=_max_fixes,
        default=100,
        metavar="N|none",
        help="reject the stream past this many fixes (default 100; `none`: no limit)",
    )
    parser.add_argument(
        "--emit",
        action="store_true",
        help="also write one CUSTOM event `agui_pipes.repair` per fix into the output",
    )
    parser.add_argument(
        "--thread-id", metavar="ID", help="the threadId of a RUN_STARTED Repair has to synthesize"
    )
    parser.add_argument(
        "--run-id", metavar="ID", help="the runId of a RUN_STARTED Repair has to synthesize"
    )
    parser.add_argument(
        "--report-json",
        action="store_true",
        help="print the report as one JSON object on stderr instead of lines",
    )
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no warnings, fix lines or summary (the rejection line still prints)",
    )
    add_limit_options(parser)
    parser.set_defaults(handler=_repair)


def _max_fixes(text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of fixes >= 0 or `none`, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of fixes >= 0, got {value}")
    return value


class RepairPass:
    """Decode → ``Repair`` → the consumer's verification, one wire event at a time.

    ``push`` returns the repaired events for one wire event (possibly none:
    Repair may hold an event back to move it). Decode errors and Repair's own
    rejection (``RepairLimitExceeded``) propagate, annotated with the wire
    position; a violation left in the *repaired* stream does not stop the
    pass — the output is still worth writing and reading — and is kept in
    ``violation`` (its ``index`` counts the output's events).
    """

    def __init__(
        self,
        repair: Repair,
        *,
        allow_truncated: bool = False,
        consumer: Consumer | None = None,
    ) -> None:
        self.repair = repair
        self._chain = TransformerChain([repair])
        self._chain.claim()
        self._consumer = consumer or Consumer(allow_truncated=allow_truncated)
        self.dropped: list[int] = []
        """Wire positions of the events dropped as unknown types (see ``wire_position``)."""
        self.warnings: list[DecodeWarning] = []
        self.items = 0
        self.events = 0
        self.written = 0
        self.violation: ProtocolViolation | None = None
        self.result: RunResult | None = None

    def push(self, payload: Any) -> Sequence[BaseEvent]:
        index = self.items
        self.items += 1
        decoded = decode(payload, index=index)
        self.warnings.extend(decoded.warnings)
        if decoded.event is None:
            self.dropped.append(index)
            return ()
        self.events += 1
        return self._check(self._chain.transform_at(decoded.event, index))

    def finish(self) -> Sequence[BaseEvent]:
        out = self._check(self._chain.finish_at(self.items))
        if self.violation is None:
            try:
                self.result = self._consumer.finish()
            except ProtocolViolation as violation:
                self.violation = violation
        return out

    def wire_position(self, index: int) -> int:
        """The wire position of the event Repair counted as ``index`` (among decoded ones)."""
        return wire_index(index, self.dropped)

    def _check(self, events: Sequence[BaseEvent]) -> Sequence[BaseEvent]:
        self.written += len(events)
        if self.violation is None:
            for event in events:
                try:
                    self._consumer.push(event)
                except ProtocolViolation as violation:
                    self.violation = violation
                    break
        return events


def fix_lines(
    rpass: RepairPass, path: str | None, fmt: str | None, *, prefix: str = "fix: "
) -> list[str]:
    """One human line per listed fix: ``fix: event #8 (run.sse:25): rule — action: detail``.

    Positions are the input's (wire) ones, with the file line when the input is a
    file (all looked up in one read). A fix made at the end of the stream (a
    truncated run closed) has the count of events as its index: it is named
    ``end of stream (after N events)``.
    """
    fixes = rpass.repair.report.fixes
    lines = lines_of_events(
        path, fmt, (rpass.wire_position(fix.index) for fix in fixes if fix.index < rpass.events)
    )

    def where(index: int) -> str:
        if index >= rpass.events:
            return f"end of stream (after {rpass.items} event{'s' if rpass.items != 1 else ''})"
        position = rpass.wire_position(index)
        line = lines.get(position)
        return f"event #{position}" + ("" if line is None else f" ({path}:{line})")

    return [f"{prefix}{where(fix.index)}: {fix.rule} — {fix.action}: {fix.detail}" for fix in fixes]


def summary(repair: Repair) -> str:
    """``repaired: 3 fixes (content-after-end 2, second-terminal 1)`` or ``clean: ...``."""
    report = repair.report
    if report.count == 0:
        return "clean: no fix needed"
    by_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(report.counts().items()))
    shown = f"; the first {len(report.fixes)} listed" if report.truncated else ""
    return f"repaired: {report.count} fix{'es' if report.count != 1 else ''} ({by_rule}){shown}"


def verdict_line(rpass: RepairPass) -> str:
    """Whether the repaired stream verifies, in one line."""
    if rpass.violation is not None:
        return f"the repaired stream is still invalid: {rpass.violation}"
    result = rpass.result
    assert result is not None
    runs = len(result.runs)
    return (
        f"the repaired stream verifies: {rpass.written} event"
        f"{'s' if rpass.written != 1 else ''}, {runs} run{'s' if runs != 1 else ''}, "
        f"outcome {result.outcome}"
    )


def new_repair(args: argparse.Namespace) -> Repair:
    """The ``Repair`` the options ask for (``verify --explain`` has none: the defaults)."""
    from ..transformers.repair import Repair

    return Repair(
        max_fixes=getattr(args, "max_fixes", 100),
        emit=getattr(args, "emit", False),
        thread_id=getattr(args, "thread_id", None),
        run_id=getattr(args, "run_id", None),
    )


def _open_output(path: str | None) -> IO[bytes]:
    if path is None or path == "-":
        return sys.stdout.buffer
    try:
        return open(path, "wb")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


class _Writer:
    """Writes events as NDJSON, SSE or one JSON array (opened at the first event)."""

    def __init__(self, out: IO[bytes], fmt: str) -> None:
        self._out = out
        self._fmt = fmt
        self._count = 0

    def write(self, events: Sequence[BaseEvent]) -> None:
        if self._fmt == "sse":
            self._out.write(b"".join(encode_sse(e) for e in events))
        elif self._fmt == "ndjson":
            self._out.write(b"".join(encode_ndjson(e) for e in events))
        else:
            for event in events:
                self._out.write(b"[\n  " if self._count == 0 else b",\n  ")
                self._out.write(encode_json(event))
                self._count += 1

    def close(self) -> None:
        if self._fmt == "json":
            self._out.write(b"[]\n" if self._count == 0 else b"\n]\n")


async def _pass(
    args: argparse.Namespace, rpass: RepairPass, progress: Progress, out: IO[bytes]
) -> _Writer:
    async with (
        open_input(args.input, input_format=args.input_format, progress=progress) as opened,
        aclosing(payloads_of(opened)) as payloads,
    ):
        fmt = args.format or ("json" if opened.format in ("json", "corpus") else opened.format)
        writer = _Writer(out, fmt)
        shown = 0
        try:
            async for payload in payloads:
                try:
                    events = rpass.push(payload)
                except DecodeError as error:
                    if rpass.items == 1 and not error.path:
                        # Not one event could be read: this is not an event stream at all.
                        raise InputError(
                            f"{opened.name} is not an AG-UI event stream in any supported "
                            f"format (NDJSON, SSE, JSON array, corpus case): {error.message}"
                        ) from None
                    raise
                writer.write(events)
                if not args.quiet and not args.report_json:
                    for warning in rpass.warnings[shown:]:
                        print(f"warning: {warning}", file=sys.stderr)
                    shown = len(rpass.warnings)
            if rpass.events:
                writer.write(rpass.finish())
        finally:
            if rpass.events:
                writer.close()
    return writer


def _repair(args: argparse.Namespace) -> int:
    try:
        return _repair_checked(args)
    except InputError as error:
        print(f"agui-pipes repair: {error}", file=sys.stderr)
        return EXIT_USAGE


def _repair_checked(args: argparse.Namespace) -> int:
    consumer = Consumer(limits=limits_of(args))
    rpass = RepairPass(new_repair(args), consumer=consumer)
    progress = Progress(None)
    out = _open_output(args.output)
    rejection: str | None = None
    try:
        anyio.run(_pass, args, rpass, progress, out)
    except (StreamRejected, CodecError, StageError) as failure:
        rejection = _rejection(failure, args.input, progress, rpass)
    finally:
        try:
            out.flush()
        finally:
            if out is not sys.stdout.buffer:
                out.close()
    if rejection is None and rpass.events == 0:
        raise InputError(no_events_message(input_name(args.input), progress, rpass.items))
    if rejection is None and rpass.violation is not None:
        rejection = verdict_line(rpass)
    if args.report_json:
        report = rpass.repair.report
        fixes = [
            {**fix.as_dict(), "wireIndex": rpass.wire_position(fix.index)} for fix in report.fixes
        ]
        document = {
            "report": {**report.as_dict(), "fixes": fixes},
            "accepted": rejection is None,
            "rejection": rejection,
        }
        print(_json.dumps_text(document, ensure_ascii=False), file=sys.stderr)
    elif not args.quiet:
        for line in fix_lines(rpass, args.input, progress.format):
            print(line, file=sys.stderr)
        if rejection is None:
            print(f"{summary(rpass.repair)}; {verdict_line(rpass)}", file=sys.stderr)
    if rejection is not None:
        if not args.report_json:
            print(f"rejected: {rejection}", file=sys.stderr)
        return EXIT_REJECTED
    return EXIT_OK


def _rejection(
    failure: StreamRejected | CodecError | StageError,
    path: str | None,
    progress: Progress,
    rpass: RepairPass,
) -> str:
    """What stopped the pass, at its wire position (and ``FILE:LINE``) when at an event."""
    text = str(failure)
    if isinstance(failure, CodecError) and not isinstance(failure, StreamRejected):
        return f"invalid framing: {text} (after {rpass.items} events)"
    index = getattr(failure, "index", None)
    at_event = getattr(failure, "event", None) is not None or getattr(failure, "at_event", False)
    if index is None or not at_event:
        return text
    line = line_of_event(path, progress.format, index)
    return text if line is None else f"{text} ({path}:{line})"
