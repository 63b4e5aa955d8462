"""CORS for browser apps on another origin: which origins, and what a streaming client needs.

A page on ``https://app.example`` calling an agent on ``https://agents.example``
(``@ag-ui/client``'s ``HttpAgent``, CopilotKit) first sends a preflight
``OPTIONS``; without an answer the browser never sends the POST. Starlette's
``CORSMiddleware`` answers it. What this module adds is the policy: origins
checked when the server is built (a typo fails at start-up, not as a silent
refusal in some user's browser), the request headers an AG-UI client sends —
``authorization``, ``content-type``, ``last-event-id`` (resume) and the W3C trace
context — allowed, and the response headers a streaming client reads exposed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from starlette.middleware import Middleware

__all__ = [
    "CORS_ALLOW_HEADERS",
    "CORS_EXPOSE_HEADERS",
    "CORS_MAX_AGE",
    "check_origins",
    "cors_middleware",
]

CORS_ALLOW_HEADERS: Final = (
    "authorization",
    "content-type",
    "last-event-id",
    "traceparent",
    "tracestate",
    "baggage",
)
CORS_EXPOSE_HEADERS: Final = ("content-type", "cache-control", "retry-after", "www-authenticate")
CORS_MAX_AGE: Final = 600
"""Seconds a browser may cache a preflight answer."""


def check_origins(origins: Iterable[str]) -> tuple[str, ...]:
    """The origins, each ``scheme://host[:port]`` exactly as a browser sends it, or ValueError.

    ``*`` (any origin) is accepted alone; credentials (the ``authorization``
    header, cookies) then still work, because the answer names the caller's
    origin rather than ``*`` — so use it only for an agent anyone may call.
    """
    checked: list[str] = []
    for origin in origins:
        if not isinstance(origin, str):
            raise TypeError(f"a CORS origin is a string, got {type(origin).__name__}")
        if origin == "*":
            checked.append(origin)
            continue
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("",)
            or parts.query
            or parts.fragment
            or parts.username is not None
        ):
            raise ValueError(
                f"CORS origin {origin!r} is not an origin: give scheme://host[:port] with "
                "no path, as the browser's Origin header has it (e.g. https://app.example "
                "or http://localhost:5173)"
            )
        checked.append(origin)
    if "*" in checked and len(checked) > 1:
        raise ValueError("CORS origin '*' allows every origin; give it alone, or list origins")
    return tuple(dict.fromkeys(checked))


def cors_middleware(origins: Iterable[str]) -> Middleware:
    """Starlette's CORS middleware for ``origins`` (checked), as a ``Middleware`` entry."""
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware

    allowed = check_origins(origins)
    return Middleware(
        CORSMiddleware,
        allow_origins=[] if allowed == ("*",) else list(allowed),
        allow_origin_regex=".*" if allowed == ("*",) else None,
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=list(CORS_ALLOW_HEADERS),
        expose_headers=list(CORS_EXPOSE_HEADERS),
        allow_credentials=True,
        max_age=CORS_MAX_AGE,
    )
