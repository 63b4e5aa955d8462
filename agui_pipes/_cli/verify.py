"""``agui-pipes verify [PATH|-]`` — is this recorded or piped stream valid AG-UI 1.0?

Runs the consumer pipeline (decode, chunk expansion, verification, fold) over
the input, auto-detected as NDJSON, SSE (``data:`` frames, multi-line data,
comments, CRLF), a JSON array of events or a corpus case (an object with a
``stream`` array); ``--input-format`` overrides the detection.

Options: ``--profile consumer|producer`` (default consumer: exactly what AG-UI
1.0 requires a client to reject; producer adds the strict rules),
``--allow-truncated`` (a stream that stops mid-run is accepted, outcome
``truncated``), ``--result`` (print the folded result as one JSON object:
``{"outcome", "messages", "state", "interrupts", "runError", "usage"}``),
``--quiet`` (no warnings, no summary), ``--explain`` (also run the stream
through the ``Repair`` stage and tell what it would change, one ``fix:`` line
per fix, and whether the repaired stream verifies; on stdout, or on stderr
with ``--result``; the exit status is still the verdict on the stream as given),
``--all`` (report every finding, not only the first, each with its rule, severity
— error / warning / hygiene —, event, ``FILE:LINE`` and AG-UI 1.0 rules section;
see ``agui_pipes._consumer.findings`` for the recovery rule) and ``--format
text|json|sarif|junit`` (how ``--all`` writes its report, on stdout; any format but
``text`` implies ``--all``).

``agui-pipes verify URL`` (an http or https URL) POSTs a run to a live
endpoint and checks its transport as well as its events (``--input``,
``--header``, ``--keepalive-within``, ``--timeout``, ``--max-bytes``; see
``_verify_live``), reporting as ``--all`` does.

Exit status: 0 accepted; 1 rejected, with one stderr line starting
``rejected:`` (where: ``event #N``, counted from 0, and for a file
``(FILE:LINE)``, lines counted from 1); 2 usage or I/O error (missing file,
input in none of the formats) and an input with no events (empty, comments
only, or read with the wrong ``--input-format``): nothing is never a valid
stream. Warnings go to stderr, one per line, each starting ``warning:``.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import anyio

from .._consumer.consume import Consumer, RunResult
from .._consumer.findings import MALFORMED, Finding, FindingCollector, Severity
from .._foundation import json as _json
from .._protocol.decode import as_object
from ..codecs import CodecError, DecodeError, DecodeWarning
from ..verify import ProtocolViolation
from ._findings_report import REPORTERS, Located, Report
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
)
from ._limits import add_limit_options, limits_of
from ._verify_live import (
    DEFAULT_KEEPALIVE_WITHIN,
    DEFAULT_MAX_BYTES,
    DEFAULT_TIMEOUT,
    URL_OPTIONS,
    is_url,
    verify_url,
)

__all__ = ["register"]

EXIT_ACCEPTED = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "verify",
        help="check that a recorded or piped stream is valid AG-UI 1.0 (exit 0/1/2)",
        description=(
            "Decode, expand and verify an AG-UI event stream (NDJSON, SSE, JSON array or "
            "corpus case) the way a 1.0 consumer must. Exit 0 accepted, 1 rejected, "
            "2 usage or I/O error."
        ),
    )
    parser.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="PATH|URL",
        help="the stream to check; `-` or nothing for standard input; an "
        "http(s) URL: POST a run to that live endpoint and check its "
        "transport too (every finding, as --all)",
    )
    parser.add_argument(
        "--profile",
        choices=("consumer", "producer"),
        default="consumer",
        help="consumer (default): what AG-UI 1.0 requires a client to reject; "
        "producer: those rules plus the strict ones",
    )
    parser.add_argument(
        "--allow-truncated",
        action="store_true",
        help="accept a stream that ends while a run is open (outcome 'truncated')",
    )
    parser.add_argument(
        "--result", action="store_true", help="print the folded result as one JSON object on stdout"
    )
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no warnings and no summary (the rejection line still prints)",
    )
    parser.add_argument(
        "--input-format",
        choices=FORMATS,
        default="auto",
        help="input encoding (default: by extension, else by content)",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also show what the repair stage would change and whether the "
        "repaired stream verifies (the exit status stays the verdict on "
        "the stream as given)",
    )
    parser.add_argument(
        "--no-compat",
        action="store_true",
        help="the strict 1.0 view: retired THINKING_* events and binary "
        "content parts are dropped with warnings instead of being "
        "translated as the reference client does",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="all_findings",
        help="report every finding (rule, severity, event, FILE:LINE, spec "
        "section), not only the first; the exit status is unchanged",
    )
    parser.add_argument(
        "--format",
        choices=sorted(REPORTERS),
        default="text",
        dest="report_format",
        help="the --all report's format on stdout (default text; json, sarif or junit imply --all)",
    )
    add_limit_options(parser)
    live = parser.add_argument_group("checking a live endpoint (PATH|URL is an http(s) URL)")
    live.add_argument(
        "--input",
        dest="run_input",
        metavar="RUN.json",
        help="the RunAgentInput to POST (default: a minimal one, the user message 'Hello')",
    )
    live.add_argument(
        "--header",
        dest="headers",
        action="append",
        metavar="'NAME: VALUE'",
        help="a header sent with every request (e.g. authorization); repeatable",
    )
    live.add_argument(
        "--keepalive-within",
        type=float,
        metavar="SECONDS",
        help="flag a silence longer than this in a stream that lasted longer "
        f"(default {DEFAULT_KEEPALIVE_WITHIN:g})",
    )
    live.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help=f"bound on the whole check, every request included (default {DEFAULT_TIMEOUT:g})",
    )
    live.add_argument(
        "--max-bytes",
        type=int,
        metavar="N",
        help=f"largest response read (default {DEFAULT_MAX_BYTES:,})",
    )
    parser.set_defaults(handler=_verify)


class _Rejected(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _warn(warning: DecodeWarning | str) -> None:
    print(f"warning: {warning}", file=sys.stderr)


@dataclass
class _Kept:
    """The input's wire events and settled format, kept for ``--explain``."""

    payloads: list[Any] = field(default_factory=list)
    format: str | None = None
    broken: CodecError | None = None
    """What stopped the reading (bad framing), raised after the events before it."""


async def _consume(args: argparse.Namespace, kept: _Kept | None) -> tuple[RunResult, int]:
    """The verdict on the input; with ``kept``, every wire event is also kept there.

    Kept ones are all of them, even after a rejection: ``--explain`` repairs the
    whole stream, not the part the verdict needed.
    """
    consumer = Consumer(
        allow_truncated=args.allow_truncated,
        profile=args.profile,
        limits=limits_of(args),
        compat=False if args.no_compat else None,
    )
    progress = Progress(None)
    name = input_name(args.input)
    shown = 0
    count = 0
    delivered = False
    try:
        async with (
            open_input(args.input, input_format=args.input_format, progress=progress) as opened,
            aclosing(payloads_of(opened)) as payloads,
        ):
            source: Any = payloads
            if kept is not None:
                kept.format = opened.format
                try:
                    async for payload in payloads:
                        kept.payloads.append(payload)
                except CodecError as error:
                    kept.broken = error
                source = _listed(kept)
            async for payload in source:
                try:
                    delivered = bool(consumer.push(payload)) or delivered
                except DecodeError as error:
                    if count == 0 and not error.path:
                        # Not one event could be read: this is not an event stream at all.
                        raise InputError(
                            f"{name} is not an AG-UI event stream in any supported format "
                            f"(NDJSON, SSE, JSON array, corpus case): {error.message}"
                        ) from None
                    raise
                count += 1
                if not args.quiet:
                    for warning in consumer.warnings[shown:]:
                        _warn(warning)
                    shown = len(consumer.warnings)
        if not delivered:
            raise InputError(no_events_message(name, progress, count))
        result = consumer.finish()
    except ProtocolViolation as violation:
        raise _Rejected(_located(violation, args.input, progress.format)) from None
    except CodecError as error:
        raise _Rejected(f"{error} (after {count} event{'s' if count != 1 else ''})") from None
    if not args.quiet:
        for warning in result.warnings[shown:]:
            _warn(warning)
    return result, count


async def _collect(args: argparse.Namespace) -> Report:
    """Every finding in the input (``--all``), with the input line of each."""
    collector = FindingCollector(
        profile=args.profile,
        allow_truncated=args.allow_truncated,
        limits=limits_of(args),
        compat=False if args.no_compat else None,
    )
    progress = Progress(None)
    name = input_name(args.input)
    count = 0
    async with (
        open_input(args.input, input_format=args.input_format, progress=progress) as opened,
        aclosing(payloads_of(opened)) as payloads,
    ):
        try:
            async for payload in payloads:
                if count == 0:
                    _check_first(payload, name)
                collector.push(payload)
                count += 1
        except CodecError as error:
            collector.findings.append(
                Finding(
                    MALFORMED,
                    Severity.ERROR,
                    f"{error} (reading stopped after {count} events)",
                    count,
                )
            )
    if not collector.saw_event and not collector.findings_at_error:
        # Nothing is never a valid stream (exit 2, as without --all).
        raise InputError(no_events_message(name, progress, count))
    findings = collector.finish()
    indices = [f.index for f in findings if f.index is not None]
    lines = lines_of_events(args.input, progress.format, indices)
    located = [Located(f, None if f.index is None else lines.get(f.index)) for f in findings]
    shown = "<stdin>" if args.input in (None, "-") else str(args.input)
    return Report(shown, args.profile, count, located)


def _check_first(payload: Any, name: str) -> None:
    """Not one event can be read: this is not an event stream at all (exit 2)."""
    try:
        as_object(payload, 0)
    except DecodeError as error:
        if not error.path:
            raise InputError(
                f"{name} is not an AG-UI event stream in any supported format "
                f"(NDJSON, SSE, JSON array, corpus case): {error.message}"
            ) from None


async def _listed(kept: _Kept) -> Any:
    for item in kept.payloads:
        yield item
    if kept.broken is not None:
        raise kept.broken


def _located(violation: ProtocolViolation, path: str | None, fmt: str | None) -> str:
    """The violation's message, plus ``(FILE:LINE)`` when it is at an event of a file."""
    text = str(violation)
    at_event = violation.event is not None or violation.at_event
    if not at_event or violation.index is None:
        return text
    line = line_of_event(path, fmt, violation.index)
    return text if line is None else f"{text} ({path}:{line})"


def _verify(args: argparse.Namespace) -> int:
    if is_url(args.input):
        return verify_url(args)
    given = [option for dest, option in URL_OPTIONS.items() if getattr(args, dest) is not None]
    if given:
        print(
            f"agui-pipes verify: {', '.join(given)} go(es) with a URL, not a file or standard "
            "input",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.all_findings or args.report_format != "text":
        if args.explain or args.result:
            print(
                "agui-pipes verify: --all (and --format) report findings; --explain and "
                "--result go with the first-violation check (drop --all/--format)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        try:
            report = anyio.run(_collect, args)
        except InputError as error:
            print(f"agui-pipes verify: {error}", file=sys.stderr)
            return EXIT_USAGE
        sys.stdout.write(REPORTERS[args.report_format](report))
        return EXIT_REJECTED if report.rejected else EXIT_ACCEPTED
    kept = _Kept() if args.explain else None
    try:
        result, count = anyio.run(_consume, args, kept)
    except InputError as error:
        print(f"agui-pipes verify: {error}", file=sys.stderr)
        return EXIT_USAGE
    except _Rejected as rejected:
        print(f"rejected: {rejected.message}", file=sys.stderr)
        if kept is not None:
            _explain(args, kept, sys.stderr if args.result else sys.stdout)
        return EXIT_REJECTED
    if kept is not None:
        # The summary or the result comes first; the explanation never mixes into
        # --result's JSON on stdout.
        explain_to = sys.stderr if args.result else sys.stdout
    if args.result:
        sys.stdout.write(_json.dumps_text(result.to_json(), ensure_ascii=False) + "\n")
    elif not args.quiet:
        runs = len(result.runs)
        print(
            f"accepted: {count} event{'s' if count != 1 else ''}, {runs} "
            f"run{'s' if runs != 1 else ''}, outcome {result.outcome}"
            f" ({args.profile} profile)"
        )
    if kept is not None:
        _explain(args, kept, explain_to)
    return EXIT_ACCEPTED


def _explain(args: argparse.Namespace, kept: _Kept, out: Any) -> None:
    """What ``Repair`` would make of the stream, and whether its output verifies."""
    from .repair import RepairPass, fix_lines, new_repair, summary, verdict_line

    rpass = RepairPass(
        new_repair(args),
        consumer=Consumer(allow_truncated=args.allow_truncated, limits=limits_of(args)),
    )
    try:
        for payload in kept.payloads:
            rpass.push(payload)
        rpass.finish()
    except (ProtocolViolation, CodecError) as failure:
        print(f"explain: repair cannot make this stream valid: {failure}", file=out)
        return
    lines = fix_lines(rpass, args.input, kept.format, prefix="explain: fix: ")
    for line in lines:
        print(line, file=out)
    print(f"explain: {summary(rpass.repair)}; {verdict_line(rpass)}", file=out)
