"""Who a request comes from — ``Principal`` and its scope — and which principal is current.

Why down here, below the store and the driver: the scope keys the event log
(``agui_pipes.store``), the agent reads ``ctx.principal`` (``agui_pipes.driver``)
and a chain factory reads :func:`current_principal` while the server builds the
chain for a request, as the trace context is read (``trace_context``). The
``authorize=`` hook and the built-in authenticators are the server's
(``agui_pipes.server.auth``); what they produce is defined once, here.

Run and thread ids are checked here too (:func:`id_problem`): they are part
of every store key and of SSE ids, so a server refuses an over-long one or one
with control characters before the store or the agent sees it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

from .limits import MAX_ID_LENGTH

__all__ = [
    "ANONYMOUS",
    "DEFAULT_SCOPE",
    "MAX_ID_LENGTH",
    "MAX_SCOPE_LENGTH",
    "Principal",
    "current_principal",
    "id_problem",
    "scope_problem",
    "using_principal",
]

DEFAULT_SCOPE: Final = "default"
"""The scope of every caller of a server without ``authorize=``, and of 0.1 event logs."""

MAX_SCOPE_LENGTH: Final = 256
"""A scope is part of every store key: longer ones (or control characters) are refused."""

_DOT_SEGMENTS: Final = frozenset((".", ".."))


def _has_control(text: str) -> bool:
    return any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in text)


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(char) < 0xE000 for char in text)


def scope_problem(scope: object) -> str | None:
    """Why a value cannot be a scope, or None."""
    if not isinstance(scope, str):
        return f"a scope is a string, got {type(scope).__name__}"
    if not scope:
        return "a scope is a non-empty string"
    if len(scope) > MAX_SCOPE_LENGTH:
        return f"a scope is at most {MAX_SCOPE_LENGTH} characters, got {len(scope)}"
    if _has_control(scope):
        return "a scope has no control characters"
    return None


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a run or thread id a server accepts, or None.

    Each refusal is an id that could be recorded but never resumed or read
    back: over :data:`MAX_ID_LENGTH` characters; empty (an SSE id
    ``<epoch>.<generation>::<seq>`` does not parse); a control character (a line break
    ends an SSE ``id:`` line, a NUL makes a browser drop the id, the rest
    are refused alike); a lone surrogate (no UTF-8 for an SSE line, a header
    or a store key); or a path segment ``.`` / ``..`` (HTTP clients collapse
    it, so ``runs/{id}`` would name another resource).
    """
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long; at most {MAX_ID_LENGTH} are accepted"
    if not value:
        return "is empty; give a non-empty id"
    if _has_control(value):
        return "contains a control character (a line break, NUL, DEL...); remove it"
    if not value.isascii() and _has_surrogate(value):
        return "contains a lone surrogate, which UTF-8 cannot encode; send valid Unicode"
    if "." in value and not _DOT_SEGMENTS.isdisjoint(value.split("/")):
        return (
            "has a '.' or '..' path segment, which HTTP clients collapse in "
            "runs/{runId} and threads/{threadId}; rename it"
        )
    return None


@dataclass(frozen=True)
class Principal:
    """Who a request comes from, as the ``authorize=`` hook said.

    ``scope`` keys the caller's runs and threads; ``subject`` names the caller for
    logs (a JWT's ``sub``, a token's line); ``claims`` carries whatever else the hook
    wants the agent or a chain factory to see (``ctx.principal.claims``).
    """

    scope: str
    subject: str | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = scope_problem(self.scope)
        if problem is not None:
            raise ValueError(f"Principal scope {str(self.scope)[:40]!r}: {problem}")


ANONYMOUS: Final = Principal(DEFAULT_SCOPE)
"""The principal of every request to a server without ``authorize=``."""

_CURRENT: ContextVar[Principal] = ContextVar("agui_pipes_principal", default=ANONYMOUS)


def current_principal() -> Principal:
    """The principal of the request being served here (:data:`ANONYMOUS` outside one).

    A chain factory calls it while the server builds the request's chain, to
    build stages for this caller (a per-tenant allow-list, say).
    """
    return _CURRENT.get()


@contextmanager
def using_principal(principal: Principal) -> Iterator[Principal]:
    """Make ``principal`` current inside the block."""
    token = _CURRENT.set(principal)
    try:
        yield principal
    finally:
        _CURRENT.reset(token)
