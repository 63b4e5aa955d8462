"""The ``agui-pipes`` command line.

Each subcommand lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``handler`` — a function taking the
parsed arguments and returning the exit code. Adding a command is one module
and one line in ``_COMMANDS``.

Exit codes are shared by every command: 0 success, 1 the stream was rejected,
2 usage, I/O or configuration error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .._version import __version__

__all__ = ["main"]

_COMMANDS: tuple[str, ...] = (
    "check",
    "list",
    "schema",
    "demo",
    "run",
    "serve",
    "verify",
)
"""Modules under agui_pipes._cli that provide a subcommand, in help order."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agui-pipes",
        description="Build, declare and test pipelines over AG-UI event streams.",
    )
    parser.add_argument(
        "--version", action="version", version=f"agui-pipes {__version__}"
    )
    if _COMMANDS:
        subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
        for name in _COMMANDS:
            module = importlib.import_module(f"{__name__}.{name}")
            module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`); not an error of ours.
        return 0
    return code
