"""One request of the client: sent within its deadline, redirects checked, bodies capped.

Redirects are followed here, never by httpx, so that each one is checked: a
redirect to another origin (scheme, host, port) would carry the run, the
caller's headers (credentials) and the resume position to a host the caller
never named, so it is refused with both origins named. Same-origin redirects
are followed up to ``max_redirects`` when ``follow_redirects`` is on, with
the method rules browsers and httpx apply (303, and 301/302 after a POST,
become a GET without a body; 307/308 repeat the request).

Bodies that are not the event stream (errors, the stop answer) are read up
to a cap: a server's error page cannot fill memory either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TypeVar

import anyio
import httpx

from .bounds import RunBudget
from .errors import BadResponse, CrossOriginRedirect, RedirectLimitExceeded, server_error

__all__ = ["MAX_BODY_BYTES", "Request", "close_iterator", "origin", "read_body", "within"]

MAX_BODY_BYTES = 1024 * 1024  # an error or JSON answer; the event stream is bounded apart

_T = TypeVar("_T")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: httpx.URL) -> str:
    """``scheme://host:port`` with the default port spelled out (origins compare equal)."""
    port = url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme)
    return f"{url.scheme}://{url.host}:{port}"


async def within(budget: RunBudget, awaitable: Awaitable[_T]) -> _T:
    """Await ``awaitable`` within the budget's deadline; its named error past it."""
    deadline, limit = budget.deadline()
    with anyio.CancelScope(deadline=deadline):
        return await awaitable
    raise budget.expired(limit)


async def read_body(response: httpx.Response, cap: int = MAX_BODY_BYTES) -> tuple[bytes, bool]:
    """Up to ``cap`` bytes of the body, and whether there was more."""
    body = bytearray()
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            body += chunk
            if len(body) > cap:
                return bytes(body[:cap]), True
    finally:
        await close_iterator(chunks)
    return bytes(body), False


async def close_iterator(iterator: AsyncIterator[bytes]) -> None:
    """Close an async generator left before its end (httpx's body iterators are ones)."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


class Request:
    """How the client sends: its httpx client, redirect policy and the run's budget."""

    def __init__(
        self, http: httpx.AsyncClient, *, follow_redirects: bool, max_redirects: int
    ) -> None:
        self.http = http
        self.follow_redirects = follow_redirects
        self.max_redirects = max_redirects

    async def send(
        self,
        budget: RunBudget,
        method: str,
        url: str,
        headers: Mapping[str, str],
        content: bytes | None = None,
    ) -> httpx.Response:
        """The first answer that is not a redirect, streaming (the caller closes it)."""
        start = httpx.URL(url)
        home = origin(start)
        target = start
        for _ in range(self.max_redirects + 1):
            request = self.http.build_request(method, target, headers=headers, content=content)
            response = await within(
                budget, self.http.send(request, stream=True, follow_redirects=False)
            )
            if not response.is_redirect:
                return response
            location = response.url.join(response.headers["location"])
            status = response.status_code
            if origin(location) != home:
                body, cut = await _closing_body(response)
                error = server_error(method, str(target), status, body, truncated=cut)
                raise CrossOriginRedirect(
                    method,
                    str(target),
                    status,
                    None,
                    f"a redirect to another origin, {origin(location)} (the request was for "
                    f"{home}), is never followed: it would send the request and its headers "
                    f"to a host not asked for; Location: {str(location)[:200]}; "
                    f"body: {error.message}",
                )
            if not self.follow_redirects:
                body, cut = await _closing_body(response)
                raise server_error(method, str(target), status, body, truncated=cut)
            await response.aclose()
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, content = "GET", None
            target = location
        raise RedirectLimitExceeded(
            f"{method} {url}: more than max_redirects={self.max_redirects} redirects; if the "
            "server is trusted and this is expected, raise it: Client(max_redirects=...)",
            "max_redirects",
            self.max_redirects,
        )

    async def answer(
        self,
        budget: RunBudget,
        method: str,
        url: str,
        headers: Mapping[str, str],
        ok: tuple[int, ...] = (200,),
    ) -> tuple[int, bytes]:
        """The status and whole body of a short answer (capped), or its ``ServerError``."""
        response = await self.send(budget, method, url, headers)
        body, cut = await within(budget, _closing_body(response))
        if response.status_code not in ok:
            raise server_error(method, url, response.status_code, body, truncated=cut)
        if cut:
            raise BadResponse(
                method,
                url,
                response.status_code,
                None,
                f"an answer larger than {MAX_BODY_BYTES} bytes, where a short JSON object was due",
            )
        return response.status_code, body


async def _closing_body(response: httpx.Response) -> tuple[bytes, bool]:
    try:
        return await read_body(response)
    finally:
        await response.aclose()
