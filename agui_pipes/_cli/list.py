"""``agui-pipes list`` — every transformer a chain file can name, with its options.

Built-ins and installed plugins alike (a plugin that fails to load is reported
as a warning and left out), because "what can I write here?" is the question.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from ..config import default_registry
from ..config._describe import describe_options
from ._chainfile import plugin_warnings_on_stderr

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "list",
        help="list the available transformers and their options",
        description="List every registered transformer: name, summary, options.",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=_list)


def _list(args: argparse.Namespace) -> int:
    with plugin_warnings_on_stderr():
        specs = default_registry().specs()
    if args.json:
        payload = [
            {
                "name": spec.name,
                "summary": spec.summary,
                "origin": spec.origin,
                "options": [
                    {
                        "name": o.name,
                        "type": o.type,
                        "required": o.required,
                        "default": None if o.required else json.loads(o.default),
                        "description": o.description,
                    }
                    for o in describe_options(spec.options)
                ],
            }
            for spec in specs
        ]
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    out: list[str] = []
    for spec in specs:
        origin = "" if spec.origin == "built-in" else f"  [{spec.origin}]"
        out.append(f"{spec.name}{origin}")
        out.append(f"    {spec.summary}" if spec.summary else "    (no description)")
        for opt in describe_options(spec.options):
            default = "required" if opt.required else f"default {opt.default}"
            out.append(f"    - {opt.name}: {opt.type} ({default})")
            if opt.description:
                out.extend(
                    textwrap.wrap(
                        opt.description, 88, initial_indent=" " * 8, subsequent_indent=" " * 8
                    )
                )
        out.append("")
    sys.stdout.write("\n".join(out))
    return 0
