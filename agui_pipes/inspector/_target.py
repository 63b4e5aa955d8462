"""``agui-pipes inspect --target URL``: the page's runs sent to an AG-UI endpoint over HTTP.

The inspector POSTs the composed ``RunAgentInput`` to the target (any AG-UI endpoint:
an ``agui-pipes serve``, or an agent elsewhere) with the configured headers, reads the
answer's event stream as it arrives and records it as a live run of the ring, so the
page follows it as it follows a run ``serve --inspect`` records. The answer of
``POST api/send`` comes when the stream has ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from ._app import RecentRuns

__all__ = ["SendTarget", "TargetError", "parse_header"]

CONNECT_TIMEOUT = 10.0
"""Seconds to reach the target; once it answers, a run may stream as long as it needs."""


class TargetError(ValueError):
    """A target URL or header that cannot be used (the message says how to fix it)."""


class SendTarget:
    """Where ``POST api/send`` sends: an AG-UI endpoint's URL and the headers to send it."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TargetError(
                f"--target must be an http:// or https:// URL of an AG-UI endpoint, got "
                f"{url[:200]!r} (e.g. http://127.0.0.1:8000/agent)"
            )
        self.url = url
        self.headers = dict(headers or {})

    def __repr__(self) -> str:
        return f"SendTarget({self.url!r})"  # never the headers: they may hold a token


def parse_header(text: str) -> tuple[str, str]:
    """``'Name: value'`` as (name, value), or ``TargetError``."""
    name, colon, value = text.partition(":")
    name = name.strip()
    if not colon or not name or any(c in name for c in " \t\r\n") or "\n" in value:
        raise TargetError(
            f"--target-header must be 'Name: value' (e.g. 'Authorization: Bearer TOKEN'), "
            f"got {text.split(':')[0][:60]!r}…"
        )
    return name, value.strip()


async def send_to_target(
    target: SendTarget,
    body: bytes,
    run_input: Any,
    request: dict[str, Any],
    runs: RecentRuns,
    scope: str,
) -> tuple[int, dict[str, Any]]:
    """POST ``body`` to the target and record its stream; (status, answer) for the page."""
    import httpx

    from ..codecs import CodecError, SSEDecoder

    headers = {
        **target.headers,
        "content-type": "application/json",
        "accept": "text/event-stream",
    }
    label = f"{run_input.thread_id} / {run_input.run_id}"
    timeout = httpx.Timeout(CONNECT_TIMEOUT, read=None)
    frames = 0
    try:
        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream("POST", target.url, content=body, headers=headers) as answer,
        ):
            if answer.status_code >= 400:
                text = (await answer.aread())[:500].decode("utf-8", "replace")
                return answer.status_code, {"error": f"the target refused the run: {text}"}
            kind = answer.headers.get("content-type", "").split(";")[0].strip()
            if kind != "text/event-stream":
                return 502, {
                    "error": f"the target answered {kind or 'no content type'}, not an event "
                    f"stream: is {target.url} an AG-UI endpoint (the URL clients POST runs to)?"
                }
            run = runs.start(label, scope)
            run.request = request
            decoder = SSEDecoder()
            try:
                async for chunk in answer.aiter_bytes():
                    for payload in decoder.feed_bytes(chunk):
                        frames += 1
                        if not run.evicted:
                            run.add(payload)
                for payload in decoder.close_bytes():
                    frames += 1
                    if not run.evicted:
                        run.add(payload)
                run.close()
            finally:
                # The stream broke off, or the page's request went away (cancelled):
                # marked disconnected, as it is. After a clean end it is closed.
                run.abandon()
    except httpx.HTTPError as error:
        if frames:
            return 502, {"error": f"the target's stream broke off after {frames} events: {error}"}
        return 502, {
            "error": f"cannot reach the target {target.url}: {error or type(error).__name__}; "
            "is it running, and is the URL right?"
        }
    except CodecError as error:
        return 502, {"error": f"the target's event stream is malformed: {error}"}
    return answer.status_code, {
        "status": answer.status_code,
        "threadId": run_input.thread_id,
        "runId": run_input.run_id,
        "events": frames,
    }
