"""An AG-UI HTTP client that survives dropped connections (the ``http`` extra: httpx).

``Client.run`` POSTs a run and yields its events through the consumer pipeline
(decode, chunk expansion, consumer verification; the fold at the end). When the
server gives its frames SSE ids (an endpoint with a store, see docs/durable.md)
and the connection drops mid-run, the client resumes with
``GET {url}/runs/{runId}`` and ``Last-Event-ID`` — the id of the last frame it
*dispatched*, so a frame cut half-way is asked for again and none is seen twice.
The caller sees one unbroken stream. A server without ids cannot be resumed, and
the drop is then an error that says so, never a silent short stream.

Works on asyncio and trio (httpx and anyio underneath)::

    async with Client() as client:
        async with client.run("http://localhost:8000/agent", run_input) as events:
            async for event in events:
                ...
            result = events.result()
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
from ag_ui.core import BaseEvent, EventType, RunAgentInput

from ._foundation.errors import AguiPipesError
from ._lazy import public_dir
from ._protocol.consume import Consumer, RunResult, fold
from .codecs import SSEDecoder, decode

if TYPE_CHECKING:
    from .transformers.compat import Compat

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agui_pipes.client needs httpx: pip install 'agui-pipes[http]'"
    ) from exc

__all__ = [
    "Client",
    "ClientError",
    "History",
    "RemoteRunEvents",
    "ResumeFailed",
    "ServerError",
    "history",
    "run_remote",
    "stop",
]
__dir__ = public_dir(__all__)

_SSE_HEADERS = {"accept": "text/event-stream"}
_TERMINAL = (EventType.RUN_FINISHED, EventType.RUN_ERROR)


class ClientError(AguiPipesError):
    """Something the client could not do: the base of this module's errors."""


class ServerError(ClientError):
    """The server answered with an HTTP error; ``code`` and ``message`` are from its JSON body.

    The endpoint's errors are ``{"error": code, "message": ...}``; a body that is
    not such JSON leaves ``code`` as ``None`` and ``message`` as the body's text.
    """

    def __init__(self, method: str, url: str, status: int, code: str | None, message: str) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.code = code
        self.message = message
        shown = f"{code}: {message}" if code else message
        super().__init__(f"{method} {url} answered {status} ({shown})")


class ResumeFailed(ClientError):
    """A dropped run could not be resumed: the server sends no ids, or every retry failed."""


def _server_error(method: str, url: str, status: int, body: bytes) -> ServerError:
    code: str | None = None
    message = body.decode("utf-8", "replace").strip() or "(empty body)"
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        if isinstance(parsed.get("error"), str):
            code = parsed["error"]
        if isinstance(parsed.get("message"), str):
            message = parsed["message"]
    return ServerError(method, url, status, code, message)


def _under(url: str, *parts: str) -> str:
    """``url``'s path as a folder, then ``parts`` (each percent-encoded whole)."""
    base = httpx.URL(url)
    path = base.raw_path.split(b"?", 1)[0].rstrip(b"/")
    for part in parts:
        path += b"/" + quote(part, safe="").encode()
    return str(base.copy_with(raw_path=path))


def _body(run_input: RunAgentInput | Mapping[str, Any]) -> tuple[bytes, str]:
    """The POST body and the run id the resume route needs."""
    if isinstance(run_input, RunAgentInput):
        wire = run_input.model_dump_json(by_alias=True, exclude_none=True)
        return wire.encode(), run_input.run_id
    run_id = run_input.get("runId")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(
            "run_input has no 'runId' string: the client needs it to resume a dropped "
            "stream; pass a RunAgentInput or a dict with camelCase keys ('threadId', 'runId', ...)"
        )
    return json.dumps(run_input).encode(), run_id


@dataclass(frozen=True, slots=True)
class History:
    """A thread's history as the server streamed it: the events and their fold."""

    events: list[BaseEvent]
    result: RunResult


class RemoteRunEvents:
    """The events of one run, as an async iterator; ``result()`` once it has ended.

    ``reconnects`` counts the resumes that were needed; ``last_event_id`` is the
    id of the last frame received (empty when the server sends no ids).
    """

    def __init__(self, stream: AsyncIterator[BaseEvent], owner: _RunState) -> None:
        self._stream = stream
        self._state = owner

    def __aiter__(self) -> AsyncIterator[BaseEvent]:
        return self._stream

    @property
    def reconnects(self) -> int:
        return self._state.reconnects

    @property
    def last_event_id(self) -> str:
        return self._state.last_id

    def result(self) -> RunResult:
        """The fold of the run; raises if the stream was not read to its end (or was rejected)."""
        if not self._state.done:
            raise ClientError(
                "result() is available once the events were read to the end of the run "
                "(iterate over them first)"
            )
        state = self._state
        if state.final is None:
            consumer = state.consumer
            state.final = consumer.finish() if consumer is not None else fold(state.events)
        return state.final


class _RunState:
    def __init__(self, verify: bool, allow_truncated: bool, compat: Compat | None = None) -> None:
        self.consumer = (
            Consumer(allow_truncated=allow_truncated, compat=compat) if verify else None
        )
        self.events: list[BaseEvent] = []
        self.final: RunResult | None = None
        self.last_id = ""
        self.reconnects = 0
        self.frames = 0
        self.done = False
        self.index = 0

    def push(self, payload: bytes) -> list[BaseEvent]:
        if self.consumer is not None:
            return list(self.consumer.push(payload))
        decoded = decode(payload, index=self.index)
        self.index += 1
        if decoded.event is None:
            return []
        self.events.append(decoded.event)
        return [decoded.event]


class Client:
    """An AG-UI client over one ``httpx.AsyncClient`` (its own, or the one given).

    ``max_reconnects`` bounds the resumes in a row without progress (a resume that
    brings new events resets the count); ``backoff`` is the first wait before a
    resume, doubled each time up to ``max_backoff``, with jitter.
    """

    def __init__(
        self,
        http: httpx.AsyncClient | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = 60.0,
        max_reconnects: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
    ) -> None:
        if max_reconnects < 0:
            raise ValueError(f"max_reconnects must be >= 0, got {max_reconnects}")
        if backoff < 0 or max_backoff < 0:
            raise ValueError(f"backoff and max_backoff must be >= 0, got {backoff}, {max_backoff}")
        self._owns = http is None
        self.http = http if http is not None else httpx.AsyncClient(timeout=timeout)
        self.headers = dict(headers or {})
        self.max_reconnects = max_reconnects
        self.backoff = backoff
        self.max_backoff = max_backoff

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the httpx client if this object made it."""
        if self._owns:
            await self.http.aclose()

    @asynccontextmanager
    async def run(
        self,
        url: str,
        run_input: RunAgentInput | Mapping[str, Any],
        *,
        verify: bool = True,
        allow_truncated: bool = False,
        compat: bool = False,
        peer: str | None = None,
    ) -> AsyncIterator[RemoteRunEvents]:
        """POST ``run_input`` to the endpoint at ``url``; the block gets the run's events.

        ``verify=False`` only decodes (no chunk expansion, no verification;
        ``result()`` is then the plain fold).

        ``compat=True`` talks to older agents as the reference client does
        (docs/compat.md): the request is what ``compat.request_for(peer, ...)``
        builds, and the events go through ``Compat(peer=peer)`` before
        verification, so pre-1.0 shapes are translated instead of dropped.
        ``peer`` is the agent's protocol version (None: a current agent); giving
        it implies ``compat``.
        """
        stage: Compat | None = None
        if compat or peer is not None:
            from .transformers.compat import Compat, request_for

            stage = Compat(peer=peer)
            run_input = request_for(peer, run_input)
        body, run_id = _body(run_input)
        state = _RunState(verify, allow_truncated, stage)
        stream = self._events(url, body, run_id, state)
        try:
            yield RemoteRunEvents(stream, state)
        finally:
            await stream.aclose()

    async def _events(
        self, url: str, body: bytes, run_id: str, state: _RunState
    ) -> AsyncGenerator[BaseEvent, None]:
        failures = 0
        method, target = "POST", url
        headers = {**self.headers, **_SSE_HEADERS, "content-type": "application/json"}
        content: bytes | None = body
        while True:
            decoder = SSEDecoder()
            progressed = False
            drop: str
            try:
                async with self.http.stream(
                    method, target, content=content, headers=headers
                ) as response:
                    if response.status_code != 200:
                        error = _server_error(
                            method, target, response.status_code, await response.aread()
                        )
                        if method == "GET" and response.status_code >= 500:
                            raise _Retry(str(error)) from error
                        if method == "GET" and not state.frames:
                            raise ResumeFailed(
                                f"the connection to {url} dropped before the first event of "
                                f"run {run_id!r}, and asking for the run again got {error}: "
                                "the server keeps no log of it (no store, or the run never "
                                "started), so it cannot be resumed"
                            ) from error
                        raise error
                    async for chunk in response.aiter_raw():
                        for payload in decoder.feed_bytes(chunk):
                            state.frames += 1
                            state.last_id = decoder.dispatched_event_id
                            for event in state.push(payload):
                                progressed = True
                                yield event
                                if event.type in _TERMINAL:
                                    state.done = True
                    if state.done:
                        return
                    drop = "the server closed the stream before the run ended"
            except _Retry as retry:
                drop = str(retry)
            except httpx.TransportError as exc:
                # A frame cut half-way is dropped with the decoder and asked for
                # again: the resume starts after the last *dispatched* id.
                drop = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if state.done:
                return
            if state.frames and not state.last_id:
                raise ResumeFailed(
                    f"the connection to {url} dropped before run {run_id!r} ended ({drop}), "
                    "and the server sent no SSE ids, so it does not support resuming (an "
                    "agui-pipes endpoint resumes runs when it is given a store: "
                    "`agui-pipes serve --store URL`)"
                )
            failures = 0 if progressed else failures + 1
            if failures > self.max_reconnects:
                raise ResumeFailed(
                    f"run {run_id!r} at {url}: {failures} resumes in a row brought nothing "
                    f"(last: {drop}); giving up after max_reconnects={self.max_reconnects}"
                )
            delay = min(self.max_backoff, self.backoff * (2 ** max(failures - 1, 0)))
            await anyio.sleep(delay * (0.5 + random.random() / 2))
            state.reconnects += 1
            method, target, content = "GET", _under(url, "runs", run_id), None
            headers = {**self.headers, **_SSE_HEADERS}
            if state.last_id:  # else nothing came yet: the whole run from its start
                headers["last-event-id"] = state.last_id

    async def history(self, url: str, thread_id: str, *, verify: bool = True) -> History:
        """``GET {url}/threads/{threadId}``: the thread's runs folded, then a live run's tail.

        Waits while a run of the thread is live (the stream follows it to its end).
        """
        target = _under(url, "threads", thread_id)
        state = _RunState(verify, allow_truncated=False)
        events: list[BaseEvent] = []
        headers = {**self.headers, **_SSE_HEADERS}
        async with self.http.stream("GET", target, headers=headers) as response:
            if response.status_code != 200:
                raise _server_error("GET", target, response.status_code, await response.aread())
            decoder = SSEDecoder()
            async for chunk in response.aiter_raw():
                for payload in decoder.feed_bytes(chunk):
                    events.extend(state.push(payload))
            decoder.close()
        if state.consumer is not None:
            return History(events, state.consumer.finish())
        return History(events, fold(events))

    async def stop(self, url: str, run_id: str) -> dict[str, Any]:
        """``POST {url}/runs/{runId}/stop``: cancel the run; the server's JSON answer."""
        target = _under(url, "runs", run_id, "stop")
        response = await self.http.post(target, headers=self.headers)
        if response.status_code not in (200, 202):
            raise _server_error("POST", target, response.status_code, response.content)
        answer = response.json()
        if not isinstance(answer, dict):
            raise ClientError(f"POST {target} answered {answer!r}, not a JSON object")
        return answer


class _Retry(Exception):
    """A resume answered 5xx: worth another try."""


@asynccontextmanager
async def run_remote(
    url: str,
    run_input: RunAgentInput | Mapping[str, Any],
    *,
    verify: bool = True,
    allow_truncated: bool = False,
    compat: bool = False,
    peer: str | None = None,
    **client_options: Any,
) -> AsyncIterator[RemoteRunEvents]:
    """``Client(**client_options).run(...)`` with a client of its own, closed at the end."""
    async with Client(**client_options) as client, client.run(
        url, run_input, verify=verify, allow_truncated=allow_truncated, compat=compat, peer=peer
    ) as events:
        yield events


async def history(
    url: str, thread_id: str, *, verify: bool = True, **client_options: Any
) -> History:
    """``Client.history`` with a client of its own."""
    async with Client(**client_options) as client:
        return await client.history(url, thread_id, verify=verify)


async def stop(url: str, run_id: str, **client_options: Any) -> dict[str, Any]:
    """``Client.stop`` with a client of its own."""
    async with Client(**client_options) as client:
        return await client.stop(url, run_id)
