"""The ``agui-pipes`` command line.

Each subcommand lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``handler`` — a function taking the
parsed arguments and returning the exit code. Adding a command is one module
and one line in ``_COMMANDS``.

Only the module of the command being run is imported: the others appear in
``--help`` through their one-line summary in ``_COMMANDS``, so ``--version``
and ``--help`` start without pydantic, ``ag_ui`` or any stage.

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

_COMMANDS: dict[str, str] = {
    "check": "validate a chain file (exit 0 valid, 2 invalid)",
    "list": "list the available transformers and their options",
    "schema": "print the chain file JSON Schema",
    "demo": "run a built-in demo agent through a chain and show the result",
    "run": "apply a chain file to a recorded or piped event stream",
    "serve": "serve a chain over HTTP in front of an upstream agent (or the demo agent)",
    "history": "print a thread's history from an event log (ndjson, sse or a transcript)",
    "verify": "check that a recorded or piped stream is valid AG-UI 1.0 (exit 0/1/2)",
    "repair": "repair a recorded or piped stream that breaks the ordering rules (exit 0/1/2)",
    "mock": "serve scripted, replayed or recorded runs as a fake AG-UI backend (with faults)",
    "inspect": "open a recorded stream in the browser inspector (timeline, events, pipeline, "
    "result)",
}
"""Modules under agui_pipes._cli that provide a subcommand, in help order, with the
summary ``--help`` lists (the same text the module's ``register`` gives)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the full options of ``command`` (the others by summary only)."""
    parser = argparse.ArgumentParser(
        prog="agui-pipes",
        description="Build, declare and test pipelines over AG-UI event streams.",
    )
    parser.add_argument("--version", action="version", version=f"agui-pipes {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in _COMMANDS.items():
        if name == command:
            importlib.import_module(f"{__name__}.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: its first positional (top-level options take no value)."""
    for position, arg in enumerate(argv):
        if arg == "--":
            return argv[position + 1] if position + 1 < len(argv) else None
        if not arg.startswith("-"):
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> int:
    # Not list(argv): importing the ``list`` command binds ``list`` in this namespace.
    arguments = sys.argv[1:] if argv is None else [*argv]
    parser = build_parser(_command_of(arguments))
    args = parser.parse_args(arguments)
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
