"""Who is asking, per request: the ``authorize=`` hook run before a body is read, and ids checked.

Every route of a server — the run POST, ``runs/{id}``, its stop, ``threads``
and ``threads/{id}`` — asks ``Access.principal`` first, with nothing read but
the request line and headers. Its answers for a refused caller:

* no or bad credentials (``Unauthorized``): 401 ``unauthorized`` with the
  hook's ``WWW-Authenticate`` challenge;
* a known caller the hook refuses (``Forbidden``): 403 ``forbidden`` — except
  on reads of runs and threads, answered 404 with the body a run or thread that
  does not exist gets, so a refusal tells nothing about which ids exist;
* a hook that breaks (``AuthorizationFailed``): 500 ``authorization_failed``,
  logged once with its traceback; never a stream.

Run and thread ids are checked here too (``bad_id``): over 256 characters or
with a control character, a request is refused with 422 before the store or
the agent sees the id.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable

from .._foundation.principal import ANONYMOUS, Principal, id_problem
from ._http import BadRequest, send_json, send_json_error
from ._streaming import Scope, Send
from .auth import AuthError, AuthorizationFailed, Authorize, authenticate

__all__ = ["Access", "bad_id", "principal_header", "principal_value"]

NotFound = Callable[[], BadRequest]
"""The 404 a read answers for a run or thread that does not exist (also for a Forbidden)."""


def bad_id(what: str, value: str) -> BadRequest | None:
    """The 422 ``bad_id`` for a run or thread id no server accepts, or None."""
    problem = id_problem(value)
    if problem is None:
        return None
    shown = value[:40] + ("..." if len(value) > 40 else "")
    return BadRequest(422, "bad_id", f"the {what} {shown!r} {problem}")  # as _http's intake


class Access:
    """One server's ``authorize=`` hook (None: every caller is ``ANONYMOUS``)."""

    def __init__(self, authorize: Authorize | None, logger: logging.Logger) -> None:
        if authorize is not None and not callable(authorize):
            raise TypeError(
                f"authorize must be a callable taking the request, got {type(authorize).__name__}"
            )
        self.authorize = authorize
        self._log = logger

    async def principal(
        self, scope: Scope, send: Send, not_found: NotFound | None = None
    ) -> Principal | None:
        """The caller's principal, or None once the refusal has been answered.

        ``not_found`` (for reads) gives the 404 that answers a ``Forbidden``.
        """
        authorize = self.authorize
        if authorize is None:
            return ANONYMOUS
        from starlette.requests import Request

        try:
            return await authenticate(authorize, Request(scope))
        except AuthError as refused:
            if refused.status == 403 and not_found is not None:
                await send_json_error(send, not_found())
                return None
            headers = tuple(
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in refused.headers().items()
            )
            payload = {"error": refused.code, "message": refused.message}
            await send_json(send, refused.status, payload, headers)
            return None
        except AuthorizationFailed as failed:
            self._log.error(
                "%s %s: %s",
                scope.get("method", "?"),
                scope.get("path", "?"),
                failed,
                exc_info=failed.__cause__ or failed,
            )
            await send_json_error(
                send,
                BadRequest(
                    500,
                    "authorization_failed",
                    "the server could not authorize the request (its authorize hook failed)",
                ),
            )
            return None


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP header name (RFC 9110 ``token``)."""


def principal_header(name: str | None) -> str | None:
    """The gateway's ``forward_principal_header``, lower-cased; ValueError for a bad name."""
    if name is None:
        return None
    if not isinstance(name, str) or not _TOKEN.match(name):
        raise ValueError(f"forward_principal_header must be an HTTP header name, got {name!r}")
    return name.lower()


def principal_value(principal: Principal) -> str:
    """The principal as the forwarded header carries it: ASCII JSON of its scope and subject."""
    return json.dumps(
        {"scope": principal.scope, "subject": principal.subject},
        ensure_ascii=True,
        separators=(",", ":"),
    )
