"""The gateway's upstream: one POST per run, its SSE read, and its failures named.

``Upstream`` holds the HTTP client (created on first use when none is given)
and sends each run to the upstream agent as it was received; everything that
can go wrong there becomes an ``UpstreamError`` whose ``code`` says what
happened (the table in ``agui_pipes.server.gateway``'s doc), with a message
that says after how many events and how long. ``UpstreamRun`` follows the
upstream's own RUN_* events, to tell a stream that ended mid-run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
from ag_ui.core import BaseEvent, EventType

from .._foundation.trace_context import TRACE_HEADERS
from ..codecs import (
    DecodeError,
    DecodeWarning,
    FrameTooLarge,
    SSEDecoder,
    TruncatedFrame,
    decode,
)
from ._failures import RunFailure
from ._upstream_pool import DEFAULT_IDLE_CONNECTIONS, use_stream_pool

__all__ = [
    "DEFAULT_TIMEOUT",
    "UPSTREAM_FAILURES",
    "Upstream",
    "UpstreamError",
    "UpstreamRun",
    "hop_headers",
    "masked_url",
]

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=60.0, write=10.0, pool=10.0)
"""``read`` is the longest silence tolerated between upstream bytes (keep-alive
comments count), not a limit on the whole run."""


class UpstreamError(RunFailure):
    """The upstream failed; ``code`` is one of the ``UPSTREAM_*`` codes."""


def hop_headers(headers: Iterable[tuple[bytes, bytes]], forward: frozenset[str]) -> dict[str, str]:
    # identity: an event stream is small frames that must not wait for a
    # compressor's buffer, and it saves decoding every chunk.
    out = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "accept-encoding": "identity",
    }
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in forward or name in TRACE_HEADERS:  # one trace across the hop
            out[name] = raw_value.decode("latin-1")
    return out


class Upstream:
    """The upstream agent at ``url``: its client, its requests, and what their failures mean."""

    def __init__(
        self,
        url: str,
        *,
        timeout: httpx.Timeout | float,
        max_frame_bytes: int,
        client: httpx.AsyncClient | None,
        idle: int = DEFAULT_IDLE_CONNECTIONS,
    ) -> None:
        if isinstance(idle, bool) or not isinstance(idle, int) or idle < 0:
            raise ValueError(
                f"upstream_idle must be a whole number of connections, 0 or more, got {idle!r}"
            )
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(
                f"upstream must be an http(s) URL such as http://127.0.0.1:8000/, got {url!r}"
            )
        self.url = str(parsed)
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.max_frame = max_frame_bytes
        self._client = client
        self._owns_client = client is None
        self.idle = idle

    def http(self) -> httpx.AsyncClient:
        """The client runs are sent with (created on first use unless one was given)."""
        if self._client is None:
            # No pool ceiling: every concurrent run holds one upstream
            # connection for its whole duration, so a cap would queue runs.
            self._client = httpx.AsyncClient(
                timeout=self.timeout,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=self.idle),
            )
            # A pool whose work per run does not grow with the runs open
            # (_upstream_pool); a client given by the caller is left as it is.
            use_stream_pool(self._client, self.idle)
        return self._client

    async def aclose(self) -> None:
        """Close the client if it was created here (one given is its owner's to close)."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()

    @asynccontextmanager
    async def request(
        self, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[httpx.Response]:
        client = self.http()
        request = client.build_request("POST", self.url, content=body, headers=headers)
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise UpstreamError("UPSTREAM_TIMEOUT", self._request_timeout(exc)) from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(
                "UPSTREAM_UNREACHABLE",
                f"cannot reach the upstream agent at {self.url}: "
                f"{type(exc).__name__}: {exc or 'connection failed'}",
            ) from exc
        try:
            await self._check_response(response)
            yield response
        finally:
            # Shielded: on a client disconnect we are being cancelled, and the
            # upstream connection must still be closed (that is what stops the
            # upstream agent).
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await response.aclose()

    async def _check_response(self, response: httpx.Response) -> None:
        if not response.is_success:
            snippet = b""
            try:
                async for chunk in response.aiter_bytes():
                    snippet += chunk
                    if len(snippet) >= 300:
                        break
            except httpx.HTTPError:
                pass
            text = snippet[:300].decode("utf-8", "replace").strip()
            raise UpstreamError(
                "UPSTREAM_HTTP_ERROR",
                f"the upstream agent answered {response.status_code} "
                f"{response.reason_phrase}" + (f": {text}" if text else ""),
            )
        content_type = response.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "text/event-stream":
            raise UpstreamError(
                "UPSTREAM_BAD_RESPONSE",
                f"the upstream agent answered {response.status_code} with content-type "
                f"{content_type or '(none)'!r}; an AG-UI agent must answer text/event-stream",
            )

    async def decode(
        self,
        response: httpx.Response,
        legacy: bool,
        on_warning: Callable[[DecodeWarning], None],
    ) -> AsyncIterator[BaseEvent]:
        """The upstream's events, decoded one by one (the path of an async chain)."""
        decoder = SSEDecoder(max_frame_bytes=self.max_frame)
        index = 0
        upstream = UpstreamRun()
        try:
            async for chunk in self.chunks(response):
                for payload in decoder.feed(chunk):
                    decoded = decode(payload, index=index, legacy=legacy)
                    index += 1
                    for warning in decoded.warnings:
                        on_warning(warning)
                    event = decoded.event
                    if event is None:
                        continue
                    upstream.see(event)
                    yield event
            decoder.close()
        except UPSTREAM_FAILURES as exc:
            raise self.failure(exc, index) from exc
        upstream.check_ended()

    def _request_timeout(self, exc: httpx.TimeoutException) -> str:
        """What timed out before the upstream's response began, and after how long.

        Only a connect (or pool) timeout is "connecting": an upstream that
        accepted the connection and then went silent timed out *answering*.
        """
        at = f"the upstream agent at {self.url}"
        if isinstance(exc, httpx.ConnectTimeout):
            return f"timed out connecting to {at} after {self.timeout.connect}s"
        if isinstance(exc, httpx.PoolTimeout):
            return (
                f"no connection to {at} became free within {self.timeout.pool}s "
                "(connection pool exhausted)"
            )
        if isinstance(exc, httpx.WriteTimeout):
            return f"timed out sending the run to {at} after {self.timeout.write}s"
        return (
            f"{at} accepted the connection but its response did not begin within "
            f"{self.timeout.read}s (no complete status line and headers; 0 events)"
        )

    def failure(self, exc: Exception, events: int) -> UpstreamError:
        """The ``UpstreamError`` for an exception reading the upstream after ``events`` events."""
        if isinstance(exc, httpx.TimeoutException):
            return UpstreamError(
                "UPSTREAM_TIMEOUT",
                f"the upstream agent sent nothing for {self.timeout.read}s mid-stream, "
                f"after {events} event{'s' if events != 1 else ''}: timed out waiting "
                "for the next event",
            )
        if isinstance(exc, httpx.HTTPError):
            return UpstreamError(
                "UPSTREAM_TRUNCATED",
                f"the upstream connection broke after {events} events: {type(exc).__name__}: {exc}",
            )
        if isinstance(exc, TruncatedFrame):
            return UpstreamError("UPSTREAM_TRUNCATED", f"after {events} events: {exc}")
        if isinstance(exc, FrameTooLarge):
            return UpstreamError("UPSTREAM_MALFORMED", f"after {events} events: {exc}")
        # A DecodeError: the event at its own index (the count so far) is the invalid one.
        index = exc.index if isinstance(exc, DecodeError) and exc.index is not None else events
        detail = exc.message if isinstance(exc, DecodeError) else str(exc)
        return UpstreamError(
            "UPSTREAM_MALFORMED",
            f"the upstream sent an invalid event #{index} (counted from 0): {detail}",
        )

    def chunks(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """The body's bytes as they came (decompressed only if the upstream compressed)."""
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        return response.aiter_raw() if encoding == "identity" else response.aiter_bytes()


UPSTREAM_FAILURES = (httpx.HTTPError, TruncatedFrame, FrameTooLarge, DecodeError)
"""What reading the upstream can raise that ``Upstream.failure`` turns into a RUN_ERROR."""


class UpstreamRun:
    """What the upstream's own events say: did any come, is a run still open."""

    __slots__ = ("open_run", "seen_any")

    def __init__(self) -> None:
        self.open_run: str | None = None
        self.seen_any = False

    def see(self, event: BaseEvent) -> None:
        self.seen_any = True
        kind = event.type
        if kind is EventType.RUN_STARTED:
            self.open_run = getattr(event, "run_id", "?")
        elif kind is EventType.RUN_FINISHED or kind is EventType.RUN_ERROR:
            self.open_run = None

    def check_ended(self) -> None:
        """Raise ``UPSTREAM_TRUNCATED`` unless the stream ended as a whole run does."""
        if not self.seen_any:
            raise UpstreamError(
                "UPSTREAM_TRUNCATED", "the upstream agent ended its stream without any event"
            )
        if self.open_run is not None:
            raise UpstreamError(
                "UPSTREAM_TRUNCATED",
                f"the upstream agent ended its stream while run {self.open_run} was still open "
                "(no RUN_FINISHED or RUN_ERROR)",
            )


def masked_url(url: str) -> str:
    """``url`` with its password and query values replaced by ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{host}"
    query = "&".join(f"{pair.partition('=')[0]}=***" for pair in parts.query.split("&") if pair)
    return urlunsplit(parts._replace(netloc=netloc, query=query))
