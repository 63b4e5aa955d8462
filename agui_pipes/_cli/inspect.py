"""``agui-pipes inspect FILE`` — look at a recorded stream in the browser.

Reads the stream (NDJSON, SSE, a JSON array or a corpus case, like ``run`` and
``verify``), builds the inspector's model of it (lanes, events index, verdict,
fold checkpoints and, with ``--config``, what each stage of the chain did), then
serves the inspector page on ``--host``/``--port`` (port 0: any free port),
prints its URL and opens it in the browser unless ``--no-open``. Runs until
Ctrl-C.

A rejected stream is still inspected (that is what the inspector is for): the
violation is shown at its event. Exit status: 0 after Ctrl-C, 2 for a usage or
I/O error, an input with no events or an invalid chain file.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import aclosing
from typing import Any

from ._chainfile import EXIT_CONFIG, load_or_report
from ._input import FORMATS, InputError, Progress, input_name, no_events_message, read_wire_events
from ._listener import send_at_once

__all__ = ["register"]

MIB = 1024 * 1024

EXIT_USAGE = 2
DEFAULT_MAX_EVENTS = 2_000_000
"""``--max-events``: a 1M-event file holds about 200 MB and loads in about a minute."""
DEFAULT_MAX_MIB = 512
"""``--max-mib``: the events' JSON read, in MiB; the inspector holds about 2.5× it."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "inspect",
        help="open a recorded stream in the browser inspector (timeline, events, pipeline, result)",
        description=(
            "Serve a local web page showing an AG-UI event stream: its lanes over time, "
            "every event, what each stage of a chain did (--config) and the state at any "
            "moment. Prints the URL; Ctrl-C stops it."
        ),
    )
    parser.add_argument(
        "input",
        metavar="FILE",
        nargs="?",
        help="the stream to inspect (NDJSON, SSE, JSON array or corpus case; "
        "`-` for standard input); optional with --target",
    )
    parser.add_argument(
        "--target",
        metavar="URL",
        help="the AG-UI endpoint the page's send tab sends runs to (http:// or https://); "
        "each run streams live into the page",
    )
    parser.add_argument(
        "--target-header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="a header sent with every run to --target, e.g. 'Authorization: Bearer TOKEN' "
        "(repeatable)",
    )
    parser.add_argument(
        "--config",
        "-c",
        metavar="CHAIN.yaml",
        help="also show what each stage of this chain does to the stream",
    )
    parser.add_argument(
        "--allow-imports",
        action="store_true",
        help="permit `type: module:attr` references in the chain file",
    )
    parser.add_argument(
        "--input-format",
        choices=FORMATS,
        default="auto",
        help="input encoding (default: by extension, else by content)",
    )
    parser.add_argument(
        "--max-events",
        type=int,
        default=DEFAULT_MAX_EVENTS,
        metavar="N",
        help=f"refuse a file of more events than this (default {DEFAULT_MAX_EVENTS:,})",
    )
    parser.add_argument(
        "--max-mib",
        type=int,
        default=DEFAULT_MAX_MIB,
        metavar="MIB",
        help=f"refuse a file whose events take more than this many MiB (default {DEFAULT_MAX_MIB})",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    parser.add_argument(
        "--no-open",
        action="store_true",
        help="do not open the page in a browser (just print its URL)",
    )
    parser.set_defaults(handler=_inspect)


def _usage(message: str) -> int:
    print(f"agui-pipes inspect: {message}", file=sys.stderr)
    return EXIT_USAGE


async def _read(
    path: str, input_format: str, max_events: int, max_bytes: int
) -> tuple[list[Any], str | None, Progress]:
    """The input's wire events, and what broke the framing (the events before it stay).

    Raises ``InputError`` as soon as the input passes ``max_events`` or ``max_bytes``
    (reading stops there: a file too large is refused without being held whole).
    """
    from ..codecs import CodecError

    progress = Progress(None)
    items: list[Any] = []
    broken: str | None = None
    size = 0
    try:
        async with aclosing(
            read_wire_events(path, input_format=input_format, progress=progress)
        ) as payloads:
            async for payload in payloads:
                size += len(payload) if isinstance(payload, str | bytes) else 0
                items.append(payload)
                if len(items) > max_events or size > max_bytes:
                    raise InputError(_too_large(path, len(items), size, max_events, max_bytes))
    except CodecError as error:
        broken = str(error)
    return items, broken, progress


def _too_large(path: str, count: int, size: int, max_events: int, max_bytes: int) -> str:
    name = input_name(path)
    if count > max_events:
        what = f"more than {max_events:,} events (--max-events)"
    else:
        what = f"more than {max_bytes // MIB:,} MiB of events (--max-mib)"
    return (
        f"{name} has {what}: the inspector holds every event in memory. Inspect a part of "
        "it (e.g. its first lines), or raise the cap if this machine has the memory for it"
    )


def load_run(args: argparse.Namespace) -> Any:
    """The inspected run of ``args.input`` (raises ``InputError``)."""
    import anyio

    from ..inspector import NOT_AN_EVENT, InspectedRun

    items, broken, progress = anyio.run(
        _read, args.input, args.input_format, args.max_events, args.max_mib * MIB
    )
    if not items:
        raise InputError(broken or no_events_message(input_name(args.input), progress))
    chain = None
    if args.config is not None:
        chain = load_or_report(args.config, allow_imports=args.allow_imports)
        if chain is None:
            raise _ConfigInvalid
    name = input_name(args.input)
    from ..inspector._request import RequestError, split_request

    try:
        # An export's first line may carry the request the run was started with.
        request, events = split_request(items)
    except RequestError as error:
        raise InputError(f"{name}: {error}") from None
    if not events:
        raise InputError(f"{name} holds a run's request but no events: nothing to inspect")
    run = InspectedRun.build(events, name, chain=chain, broken=broken)
    run.request = request
    if set(run.types_count()) == {NOT_AN_EVENT}:
        first = run.violations[0]["message"] if run.violations else "no event decoded"
        raise InputError(
            f"{name} is not an AG-UI event stream in any supported format "
            f"(NDJSON, SSE, JSON array, corpus case): {first}"
        )
    return run


class _ConfigInvalid(Exception):
    """The chain file was invalid (already reported on stderr)."""


def _inspect(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        return _usage(f"--port must be between 0 and 65535, got {args.port}")
    if args.max_events < 1 or args.max_mib < 1:
        return _usage(
            f"--max-events and --max-mib must be >= 1, got {args.max_events} and {args.max_mib}"
        )
    try:
        import uvicorn

        from ..inspector import inspector_app
    except ImportError as exc:
        return _usage(
            f"the inspector needs the server extras: pip install 'agui-pipes[server]' ({exc})"
        )
    target = None
    if args.target_header and args.target is None:
        return _usage("--target-header needs --target URL (the endpoint the header goes to)")
    if args.input is None and args.target is None:
        return _usage("give a FILE to inspect, or --target URL to send runs to (or both)")
    if args.target is not None:
        from ..inspector import SendTarget
        from ..inspector._target import TargetError, parse_header

        try:
            headers = dict(parse_header(text) for text in args.target_header)
            target = SendTarget(args.target, headers)
        except TargetError as error:
            return _usage(str(error))
    run: Any = None
    if args.input is not None:
        try:
            run = load_run(args)
        except InputError as error:
            return _usage(str(error))
        except _ConfigInvalid:
            return EXIT_CONFIG
    if run is None:
        from ..inspector import RecentRuns

        served: Any = RecentRuns()
    else:
        served = run
    config = uvicorn.Config(
        inspector_app(served, send_to=target),
        host=args.host,
        port=args.port,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    try:
        listener = config.bind_socket()
    except SystemExit:  # uvicorn has logged why (the port is taken, say)
        return 1
    send_at_once(listener)
    # Listening before the URL is printed: a browser (or script) that connects at
    # once waits in the backlog while uvicorn starts, instead of being refused.
    listener.listen(config.backlog)
    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    if run is None:
        print(f"inspector sending runs to {args.target} — {url}", flush=True)
    else:
        sends = f", sending runs to {args.target}" if target is not None else ""
        print(
            f"inspecting {run.label}: {len(run)} events, outcome {run.outcome}{sends} — {url}",
            flush=True,
        )
    if not args.no_open:
        import webbrowser

        webbrowser.open(url)
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:  # pragma: no cover - a second Ctrl-C during shutdown
        pass
    finally:
        listener.close()
    return 0
