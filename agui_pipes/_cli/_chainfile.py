"""Shared plumbing of the chain-file subcommands (``check``, ``run``, ``list``, ...).

A config error is the user's to fix, so it is printed as the pointed message
alone (no traceback) and maps to exit status 2, like every usage error. Plugin
warnings are shown as one readable line each instead of Python's
``file:line: Category: message`` source dump.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..config import ConfigError, LoadedChain, PluginWarning, load_chain

__all__ = ["EXIT_CONFIG", "load_or_report", "plugin_warnings_on_stderr"]

EXIT_CONFIG = 2


@contextmanager
def plugin_warnings_on_stderr() -> Iterator[None]:
    """Show the ``PluginWarning``s raised inside the block as ``agui-pipes: warning: ...``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginWarning)
        yield
    for item in caught:
        if issubclass(item.category, PluginWarning):
            print(f"agui-pipes: warning: {item.message}", file=sys.stderr)
        else:
            warnings.showwarning(item.message, item.category, item.filename, item.lineno)


def load_or_report(path: str, *, allow_imports: bool = False) -> LoadedChain | None:
    """The chain declared in ``path``, or ``None`` after printing why it is invalid."""
    with plugin_warnings_on_stderr():
        try:
            return load_chain(Path(path), allow_imports=allow_imports)
        except ConfigError as exc:
            print(f"agui-pipes: invalid chain: {exc}", file=sys.stderr)
            return None
