"""``agui-pipes mock`` — a fake AG-UI backend for testing a frontend, no LLM needed.

Serves the runs of a scenario file (``agui_pipes.testing.load_scenarios``),
replays recorded runs (``--replay``, at their recorded pace scaled by
``--speed``), or proxies a real agent and records each run (``--record DIR
--upstream URL``). Faults are planted per scenario (``fault:``) or per
request (the ``x-agui-mock-fault`` header). See docs/testing.md,
"Testing a frontend".

Exit status: 0 after a clean shutdown, 1 if the server could not start (the
port is taken, say), 2 for a bad scenario file, recording or option.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

_EXIT_USAGE = 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mock",
        help="serve scripted, replayed or recorded runs as a fake AG-UI backend (with faults)",
        description=(
            "A fake AG-UI backend for frontend tests: answer each POSTed run from a "
            "scenario file, replay recorded runs, or proxy a real agent and record its "
            "runs. Faults per scenario (`fault:`) or per request (header "
            "`x-agui-mock-fault`)."
        ),
    )
    parser.add_argument("scenarios", nargs="?", metavar="SCENARIOS.yaml", help="the scenario file")
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any)")
    parser.add_argument("--path", default="/", help="the run endpoint's path (default /)")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the interrupt ids and the pace jitter (default: the file's `seed`, else 0)",
    )
    parser.add_argument(
        "--replay",
        nargs="+",
        default=[],
        metavar="FILE",
        help="recorded runs (NDJSON or SSE files, or --record directories) answering the "
        "requests no scenario matches",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="replay pace: 1 as recorded (default), 10 ten times faster, inf at once",
    )
    parser.add_argument(
        "--record", metavar="DIR", help="proxy --upstream and save each run under DIR"
    )
    parser.add_argument("--upstream", metavar="URL", help="the real agent --record relays to")
    parser.add_argument(
        "--keepalive",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="keep-alive comment after this much silence (default 15; 0: none)",
    )
    parser.add_argument(
        "--durable",
        action="store_true",
        help="give frames SSE ids and serve GET {path}runs/{runId} (resume with "
        "Last-Event-ID, or join), from an in-memory log",
    )
    parser.add_argument(
        "--log-level", default="info", choices=("critical", "error", "warning", "info", "debug")
    )
    parser.set_defaults(handler=_main)


def _usage(message: str) -> int:
    print(f"agui-pipes mock: {message}", file=sys.stderr)
    return _EXIT_USAGE


def _main(args: argparse.Namespace) -> int:
    if (args.record is None) != (args.upstream is None):
        return _usage("--record DIR and --upstream URL go together")
    if args.record is not None and (args.scenarios or args.replay):
        return _usage("--record proxies the upstream: it takes no scenarios or --replay")
    if args.record is None and not args.scenarios and not args.replay:
        return _usage("give a scenario file, --replay FILE... or --record DIR --upstream URL")
    if not args.speed > 0 or math.isnan(args.speed):
        return _usage(f"--speed must be > 0 (inf: as fast as possible), got {args.speed}")
    if not 0 <= args.port <= 65535:
        return _usage(f"--port must be 0 to 65535, got {args.port}")
    if not args.keepalive >= 0:
        return _usage(f"--keepalive must be >= 0 seconds, got {args.keepalive}")
    try:
        import uvicorn

        from ..testing._mock.server import mock_app, quiet_planted_drops
    except ImportError as exc:
        return _usage(f"the mock needs the server extra: pip install 'agui-pipes[server]' ({exc})")
    from ..config import ConfigError
    from ..testing._mock.replay import ReplayError

    try:
        app, mock = mock_app(
            Path(args.scenarios) if args.scenarios else None,
            replay=args.replay,
            speed=args.speed,
            seed=args.seed,
            record=args.record,
            upstream=args.upstream,
            path=args.path,
            keepalive=args.keepalive or None,
            durable=args.durable,
        )
    except ConfigError as exc:
        return _usage(f"invalid scenario file: {exc}")
    except (ReplayError, ValueError, OSError) as exc:
        return _usage(str(exc))
    quiet_planted_drops()
    scenarios, recordings = len(mock.scenarios.scenarios), len(mock.book.recordings)
    what = (
        f"recording {args.upstream} into {args.record}"
        if args.record
        else f"{scenarios} scenario(s), {recordings} recording(s)"
    )
    print(f"agui-pipes mock: {what}", file=sys.stderr)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level=args.log_level, lifespan="on"
    )
    server = uvicorn.Server(config)
    try:
        server.run()
    except KeyboardInterrupt:  # pragma: no cover - a second Ctrl-C during shutdown
        pass
    return 0 if server.started else 1
