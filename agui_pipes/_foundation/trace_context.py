"""The W3C trace context of the request being served, for stages built while serving it.

The ``opentelemetry`` stage parents a run's spans on the caller's span when
the request carried a ``traceparent`` header. The stage is built by a chain
factory that knows nothing of HTTP, so, as with the limits in effect
(``_limits_scope``), the endpoint and the gateway build their chain inside
``using_trace_headers(...)`` and the stage reads ``current_trace_headers()``
when it is constructed. A ``ContextVar`` keeps concurrent requests apart on
asyncio and trio alike. Nothing here imports OpenTelemetry: a server whose
chain has no tracing stage pays one context-variable set per request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["TRACE_HEADERS", "current_trace_headers", "trace_headers_of", "using_trace_headers"]

TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
"""The W3C Trace Context headers (lower case, as ASGI spells header names)."""

_NONE: Mapping[str, str] = {}
_CURRENT: ContextVar[Mapping[str, str]] = ContextVar("agui_pipes_trace_headers", default=_NONE)


def trace_headers_of(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The trace-context headers among ASGI ``(name, value)`` byte pairs."""
    found: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in TRACE_HEADERS:
            found[name] = raw_value.decode("latin-1")
    return found


def current_trace_headers() -> Mapping[str, str]:
    """The trace-context headers of the request being served here (empty outside one)."""
    return _CURRENT.get()


@contextmanager
def using_trace_headers(headers: Iterable[tuple[bytes, bytes]]) -> Iterator[Mapping[str, str]]:
    """Make the trace-context headers among ``headers`` current inside the block."""
    found = trace_headers_of(headers)
    token = _CURRENT.set(found)
    try:
        yield found
    finally:
        _CURRENT.reset(token)
