"""``python -m agui_pipes._fastpath show TYPE [--keys k1,k2]``: print generated source."""

from __future__ import annotations

import argparse
import sys

from .show import generated_source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agui_pipes._fastpath",
        description="Print the code the fast path generates for an event type.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="the builder and writer of an event type")
    show.add_argument("type", help="the wire type, e.g. TEXT_MESSAGE_CONTENT")
    show.add_argument(
        "--keys",
        help="the wire key set, comma-separated in wire order (default: the required keys)",
    )
    args = parser.parse_args(argv)
    keys = None if args.keys is None else [k.strip() for k in args.keys.split(",") if k.strip()]
    try:
        text = generated_source(args.type, keys)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
