"""``agui-pipes check CHAIN.yaml`` — validate a chain file without running it.

Exit 0 when the file loads (every stage constructs), 2 with the pointed error
otherwise, so it can gate a deployment in CI.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._chainfile import EXIT_CONFIG, load_or_report

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help="validate a chain file (exit 0 valid, 2 invalid)",
        description="Validate a YAML/JSON chain file: syntax, names, options, construction.",
    )
    parser.add_argument("config", metavar="CHAIN.yaml", help="the chain file to check")
    parser.add_argument(
        "--allow-imports",
        action="store_true",
        help="permit `type: module:attr` references (imports code named by the file)",
    )
    parser.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> int:
    chain = load_or_report(args.config, allow_imports=args.allow_imports)
    if chain is None:
        return EXIT_CONFIG
    count = len(chain)
    stages = " | ".join(chain.names) if count else "(no stages: events pass unchanged)"
    print(f"{args.config}: ok, {count} transformer{'s' if count != 1 else ''}: {stages}")
    return 0
