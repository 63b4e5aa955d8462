"""The client's errors: one family under ``ClientError``, each naming what to do.

Why a family: a caller of the client routes on *who* failed — the server
answered with an error (``ServerError``), a dropped run could not be resumed
exactly (``ResumeFailed``), or one of the client's own bounds was crossed
(``ClientLimitExceeded``, one subclass per bound, each naming the option that
raises it). Nothing the server sends reaches the caller as another exception
type (a ``JSONDecodeError``, an ``httpx`` error, a codec error).
"""

from __future__ import annotations

import json
from typing import Any

from .._foundation.errors import AguiPipesError

__all__ = [
    "BadResponse",
    "ByteLimitExceeded",
    "ClientError",
    "ClientLimitExceeded",
    "ConnectionFailed",
    "CrossOriginRedirect",
    "DurationLimitExceeded",
    "EventLimitExceeded",
    "FrameLimitExceeded",
    "IdleLimitExceeded",
    "OutOfSequence",
    "ReconnectLimitExceeded",
    "RedirectLimitExceeded",
    "ResumeFailed",
    "ServerError",
    "server_error",
    "snippet",
]

# What of a body an error message shows: enough to recognise a proxy's HTML page.
_SNIPPET = 200


class ClientError(AguiPipesError):
    """Something the client could not do: the base of this module's errors."""


class ServerError(ClientError):
    """The server answered with an HTTP error; ``code`` and ``message`` are from its JSON body.

    The endpoint's errors are ``{"error": code, "message": ...}``; a body that is
    not such JSON leaves ``code`` as ``None`` and ``message`` as the start of the
    body's text.
    """

    def __init__(self, method: str, url: str, status: int, code: str | None, message: str) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.code = code
        self.message = message
        shown = f"{code}: {message}" if code else message
        super().__init__(f"{method} {url} answered {status} ({shown})")

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (a worker's error) keep the fields
        return type(self), (self.method, self.url, self.status, self.code, self.message)


class BadResponse(ServerError):
    """The answer is not what the protocol says: not JSON where JSON is due, not SSE."""


class CrossOriginRedirect(ServerError):
    """The server redirected to another origin (scheme, host, port): never followed.

    Following it would send the run, its headers (credentials) and the client's
    ``Last-Event-ID`` to a host the caller never named.
    """


class ConnectionFailed(ClientError):
    """The connection failed or dropped where the client cannot resume (history, stop)."""


class ResumeFailed(ClientError):
    """A dropped run could not be resumed exactly: no ids, ids out of order, or too many retries."""


class OutOfSequence(ResumeFailed):
    """A frame's SSE id does not continue the last one: a gap, a duplicate or another run's id.

    ``expected`` is the id that was due, ``got`` the one the frame carried (``""``
    for a frame without an id).
    """

    def __init__(self, message: str, expected: str, got: str) -> None:
        self.expected = expected
        self.got = got
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.expected, self.got)


class ClientLimitExceeded(ClientError):
    """One of the client's bounds was crossed; ``limit`` names the option, ``value`` its setting."""

    def __init__(self, message: str, limit: str, value: float) -> None:
        self.limit = limit
        self.value = value
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.limit, self.value)


class FrameLimitExceeded(ClientLimitExceeded):
    """One SSE frame is larger than ``max_frame_bytes`` (refused before it is all buffered)."""


class EventLimitExceeded(ClientLimitExceeded):
    """A run sent more frames than ``max_events``."""


class ByteLimitExceeded(ClientLimitExceeded):
    """A run's streams carried more bytes than ``max_bytes``."""


class IdleLimitExceeded(ClientLimitExceeded):
    """No event for ``max_idle`` seconds (keep-alive comments do not count as events)."""


class DurationLimitExceeded(ClientLimitExceeded):
    """A run did not end within ``max_duration`` seconds."""


class ReconnectLimitExceeded(ResumeFailed, ClientLimitExceeded):
    """A run needed more than ``max_reconnects`` resumes (each one counts, events or not)."""


class RedirectLimitExceeded(ClientLimitExceeded):
    """More than ``max_redirects`` redirects in a row for one request."""


def snippet(body: bytes) -> str:
    """The start of ``body`` as text for a message (``(empty body)`` if there is none)."""
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return "(empty body)"
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "..."


def server_error(
    method: str, url: str, status: int, body: bytes, *, truncated: bool = False
) -> ServerError:
    """The ``ServerError`` of an error answer: the JSON code and message, else the body's start.

    ``truncated`` says the client stopped reading the body at its cap: it is then
    not parsed (a cut JSON text is no JSON), only shown.
    """
    code: str | None = None
    message = snippet(body)
    try:
        parsed = None if truncated else json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        if isinstance(parsed.get("error"), str):
            code = parsed["error"]
        if isinstance(parsed.get("message"), str):
            message = parsed["message"]
    return ServerError(method, url, status, code, message)
