"""The limits in effect: what ``limits=None`` means wherever :class:`Limits` is a parameter.

A server is configured once (``Gateway(..., limits=...)``, ``agui-pipes serve
--max-state-nodes``), but the stages that apply state patches are built by a
chain factory the server merely calls, often from a YAML file that knows
nothing of the server. So rather than thread a value through every factory,
the server builds its chain (and runs its fold or driver) inside
``using_limits(limits)``, and every component constructed with ``limits=None``
picks up :func:`current_limits` at construction — the server's, or
``DEFAULT_LIMITS`` outside any server. An explicit ``limits=`` always wins.

A ``ContextVar`` (not a global) keeps concurrent servers with different
limits in one process from seeing each other's, under asyncio and trio alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .limits import DEFAULT_LIMITS, Limits

__all__ = ["current_limits", "resolve_limits", "using_limits"]

_CURRENT: ContextVar[Limits] = ContextVar("agui_pipes_limits", default=DEFAULT_LIMITS)


def current_limits() -> Limits:
    """The limits in effect here: the innermost ``using_limits``, else ``DEFAULT_LIMITS``."""
    return _CURRENT.get()


def resolve_limits(limits: Limits | None) -> Limits:
    """``limits`` itself, or the limits in effect when it is None (type-checked)."""
    if limits is None:
        return _CURRENT.get()
    if not isinstance(limits, Limits):
        raise TypeError(
            f"limits must be an agui_pipes.Limits (e.g. Limits(max_nodes=100_000)) or None, "
            f"got {type(limits).__name__}"
        )
    return limits


@contextmanager
def using_limits(limits: Limits | None) -> Iterator[Limits]:
    """Make ``limits`` (None: leave as is) the limits in effect inside the block."""
    resolved = resolve_limits(limits)
    token = _CURRENT.set(resolved)
    try:
        yield resolved
    finally:
        _CURRENT.reset(token)
