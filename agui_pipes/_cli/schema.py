"""``agui-pipes schema`` — the chain file JSON Schema on stdout, for editors.

Point a YAML language server at it, e.g. with a first line
``# yaml-language-server: $schema=chain.schema.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..config import chain_schema
from ._chainfile import plugin_warnings_on_stderr

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "schema",
        help="print the chain file JSON Schema",
        description="Print the JSON Schema of chain files (built-ins and installed plugins).",
    )
    parser.add_argument("--indent", type=int, default=2, help="indentation (default 2)")
    parser.set_defaults(handler=_schema)


def _schema(args: argparse.Namespace) -> int:
    with plugin_warnings_on_stderr():
        schema = chain_schema()
    json.dump(schema, sys.stdout, indent=args.indent or None)
    sys.stdout.write("\n")
    return 0
