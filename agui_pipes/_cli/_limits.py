"""``--max-state-nodes`` / ``--max-state-bytes``: state limits for ``verify``, ``run``, ``serve``.

One definition for the three commands, so the flags read and fail the same
way everywhere. Unset flags keep the defaults (``agui_pipes.Limits()``).
"""

from __future__ import annotations

import argparse
from typing import Any

from .._foundation.limits import DEFAULT_LIMITS, Limits

__all__ = ["add_limit_options", "limits_of"]


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return value


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    """Add the two flags to a command's parser."""
    parser.add_argument(
        "--max-state-nodes",
        type=_positive,
        metavar="N",
        help=f"most values in the state or an activity's content (default "
        f"{DEFAULT_LIMITS.max_nodes:,}); a snapshot or delta crossing it is skipped "
        f"with a warning (producer profile: rejected)",
    )
    parser.add_argument(
        "--max-state-bytes",
        type=_positive,
        metavar="N",
        help=f"largest state or activity content, as compact JSON (default "
        f"{DEFAULT_LIMITS.max_bytes:,})",
    )


def limits_of(args: Any) -> Limits | None:
    """The limits the flags ask for, or None when neither is given (the defaults apply)."""
    nodes = getattr(args, "max_state_nodes", None)
    size = getattr(args, "max_state_bytes", None)
    if nodes is None and size is None:
        return None
    return Limits(
        max_depth=DEFAULT_LIMITS.max_depth,
        max_nodes=DEFAULT_LIMITS.max_nodes if nodes is None else nodes,
        max_bytes=DEFAULT_LIMITS.max_bytes if size is None else size,
    )
