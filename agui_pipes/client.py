"""An AG-UI HTTP client that survives dropped connections and trusts nothing it is sent.

``Client.run`` POSTs a run and yields its events through the consumer pipeline
(decode, chunk expansion, consumer verification; the fold at the end). When the
server gives its frames SSE ids (an endpoint with a store, see docs/durable.md)
and the connection drops mid-run, the client resumes with
``GET {url}/runs/{runId}`` and ``Last-Event-ID`` — the id of the last frame it
*accepted*, so a frame cut half-way is asked for again. Every frame's id must
continue the one before it (``<epoch>.<generation>:<runId>:<seq+1>``): a gap, a duplicate
or another run's id is ``OutOfSequence`` (a ``ResumeFailed``), so the caller
sees one unbroken stream with no event twice and none missing, or an error.
A server without ids cannot be resumed, and the drop is then an error that
says so, never a silent short stream.

Everything a server can make the client spend is bounded — frame size, events
and bytes per run, time between events, the run's total time, reconnects,
redirects — each by a ``Client`` keyword with a default, each with its own
``ClientLimitExceeded`` error naming the keyword. Redirects to another origin
are never followed. ``Client.resume`` picks a run up by id (after the client
process restarted); ``SyncClient`` is the same for code without an event loop.

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
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import anyio
from ag_ui.core import BaseEvent, EventType, RunAgentInput

from ._client.bounds import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DURATION,
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_IDLE,
    DEFAULT_MAX_RECONNECTS,
    DEFAULT_MAX_REDIRECTS,
    Bounds,
    RunBudget,
)
from ._client.errors import (
    BadResponse,
    ByteLimitExceeded,
    ClientError,
    ClientLimitExceeded,
    ConnectionFailed,
    CrossOriginRedirect,
    DurationLimitExceeded,
    EventLimitExceeded,
    FrameLimitExceeded,
    IdleLimitExceeded,
    OutOfSequence,
    ReconnectLimitExceeded,
    RedirectLimitExceeded,
    ResumeFailed,
    ServerError,
    server_error,
    snippet,
)
from ._client.frames import FrameReader
from ._client.http import Request, close_iterator, read_body, within
from ._client.sequence import EventIds
from ._client.sync import SyncClient, SyncRunEvents
from ._consumer.consume import Consumer, RunResult, fold
from ._lazy import public_dir, publish
from .codecs import FrameTooLarge, TruncatedFrame, decode
from .store import BadEventId, EventId, parse_event_id

if TYPE_CHECKING:
    from .transformers.compat import Compat

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("agui_pipes.client needs httpx: pip install 'agui-pipes[http]'") from exc

__all__ = [
    "BadResponse",
    "ByteLimitExceeded",
    "Client",
    "ClientError",
    "ClientLimitExceeded",
    "ConnectionFailed",
    "CrossOriginRedirect",
    "DurationLimitExceeded",
    "EventLimitExceeded",
    "FrameLimitExceeded",
    "History",
    "IdleLimitExceeded",
    "OutOfSequence",
    "ReconnectLimitExceeded",
    "RedirectLimitExceeded",
    "RemoteRunEvents",
    "ResumeFailed",
    "ServerError",
    "SyncClient",
    "SyncRunEvents",
    "ThreadInfo",
    "ThreadPage",
    "history",
    "run_remote",
    "stop",
    "threads",
]
__dir__ = public_dir(__all__)

publish(
    __name__,
    BadResponse,
    ByteLimitExceeded,
    ClientError,
    ClientLimitExceeded,
    ConnectionFailed,
    CrossOriginRedirect,
    DurationLimitExceeded,
    EventLimitExceeded,
    FrameLimitExceeded,
    IdleLimitExceeded,
    OutOfSequence,
    ReconnectLimitExceeded,
    RedirectLimitExceeded,
    ResumeFailed,
    ServerError,
    SyncClient,
    SyncRunEvents,
)

_SSE_HEADERS = {"accept": "text/event-stream"}
_TERMINAL = (EventType.RUN_FINISHED, EventType.RUN_ERROR)


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


def _drop(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _run_of(event_id: str) -> str:
    """The run an SSE id names (``""`` for an id of another form: then it is not checked)."""
    try:
        return parse_event_id(event_id).run_id
    except BadEventId:
        return ""


async def _next_chunk(chunks: AsyncIterator[bytes]) -> bytes | None:
    try:
        return await chunks.__anext__()
    except StopAsyncIteration:
        return None


async def _check_stream(response: httpx.Response, method: str, url: str) -> None:
    """Refuse a 200 that is not an event stream (an HTML page, a JSON error with 200)."""
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media and media != "text/event-stream":
        body, _ = await read_body(response, 4096)
        raise BadResponse(
            method,
            url,
            response.status_code,
            None,
            f"a {media!r} answer where an event stream (text/event-stream) was due: "
            f"{snippet(body)}",
        )


@dataclass(frozen=True, slots=True)
class History:
    """A thread's history as the server streamed it: the events and their fold.

    ``next`` is the run id to pass as ``before=`` for the older page, None on
    the oldest (the server's ``agui_pipes.history_page`` event).
    """

    events: list[BaseEvent]
    result: RunResult
    next: str | None = None


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """One thread of a ``GET threads`` page: its id and when its first run was created."""

    thread_id: str
    created: float


@dataclass(frozen=True, slots=True)
class ThreadPage:
    """A page of the caller's threads, newest first; ``next`` is ``before=`` for the next page."""

    threads: list[ThreadInfo]
    next: str | None


class RemoteRunEvents:
    """The events of one run, as an async iterator; ``result()`` once it has ended.

    ``reconnects`` counts the resumes that were needed; ``last_event_id`` is the
    id of the last frame accepted (empty when the server sends no ids) — what
    ``Client.resume`` takes to pick the run up again after a restart.
    """

    def __init__(self, stream: AsyncIterator[BaseEvent], owner: _RunState) -> None:
        self._stream = stream
        self._state = owner

    def __aiter__(self) -> AsyncIterator[BaseEvent]:
        return self._stream

    @property
    def reconnects(self) -> int:
        return self._state.budget.reconnects

    @property
    def last_event_id(self) -> str:
        return self._state.ids.last_text

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
    def __init__(
        self,
        budget: RunBudget,
        ids: EventIds,
        verify: bool,
        allow_truncated: bool,
        compat: Compat | bool | None = None,
    ) -> None:
        self.budget = budget
        self.ids = ids
        self.consumer = Consumer(allow_truncated=allow_truncated, compat=compat) if verify else None
        self.events: list[BaseEvent] = []
        self.final: RunResult | None = None
        self.done = False
        self.index = 0
        # A resume by id that reads the run from its start: the frames through
        # this id are verified and folded, not yielded (the caller had them).
        self.skip: EventId | None = None
        self.by_id = False  # the run was asked for by id (resume), not POSTed

    def push(self, payload: bytes) -> list[BaseEvent]:
        if self.consumer is not None:
            return list(self.consumer.push(payload))
        decoded = decode(payload, index=self.index)
        self.index += 1
        if decoded.event is None:
            return []
        self.events.append(decoded.event)
        return [decoded.event]

    def hidden(self) -> bool:
        """Whether the frame just accepted is one the caller already had (resume by id)."""
        skip = self.skip
        if skip is None:
            return False
        last = self.ids.last
        if last is None:
            raise ResumeFailed(
                f"{self.budget.what}: the server sends no agui-pipes SSE ids, so the frame "
                f"with id {str(skip)!r} cannot be found in it"
            )
        if (last.epoch, last.generation) != (skip.epoch, skip.generation):
            raise ResumeFailed(
                f"{self.budget.what}: last_event_id {str(skip)!r} is of another store epoch "
                f"or run generation than the run's frames ({str(last)!r}): the server's "
                "store was reset or replaced, or the run was deleted and its id used again, "
                "so the position it names is gone"
            )
        if last.seq == skip.seq:
            self.skip = None
        return True


class Client:
    """An AG-UI client over one ``httpx.AsyncClient`` (its own, or the one given).

    The bounds (each documented with its default in docs/client.md):
    ``max_frame_bytes`` (one SSE frame), ``max_events`` and ``max_bytes`` (per
    run, over all its resumes), ``max_idle`` (seconds without an event;
    keep-alive comments do not count), ``max_duration`` (seconds for the whole
    run), ``max_reconnects`` (resumes per run, each counted even when the
    connection brought events first) and ``max_redirects`` (same-origin
    redirects per request, followed when ``follow_redirects``; another origin's
    never). ``backoff`` is the first wait before a resume, doubled while
    resumes bring nothing, up to ``max_backoff``, with jitter.
    """

    def __init__(
        self,
        http: httpx.AsyncClient | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = 60.0,
        max_reconnects: int = DEFAULT_MAX_RECONNECTS,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_events: int = DEFAULT_MAX_EVENTS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_idle: float = DEFAULT_MAX_IDLE,
        max_duration: float = DEFAULT_MAX_DURATION,
        follow_redirects: bool = True,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
    ) -> None:
        if backoff < 0 or max_backoff < 0:
            raise ValueError(f"backoff and max_backoff must be >= 0, got {backoff}, {max_backoff}")
        self.bounds = Bounds(
            max_frame_bytes=max_frame_bytes,
            max_events=max_events,
            max_bytes=max_bytes,
            max_idle=max_idle,
            max_duration=max_duration,
            max_reconnects=max_reconnects,
            max_redirects=max_redirects,
        )
        self._owns = http is None
        self.http = http if http is not None else httpx.AsyncClient(timeout=timeout)
        self.headers = dict(headers or {})
        self.max_reconnects = max_reconnects
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._request = Request(
            self.http, follow_redirects=follow_redirects, max_redirects=max_redirects
        )

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
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
        compat: bool | None = None,
        peer: str | None = None,
    ) -> AsyncIterator[RemoteRunEvents]:
        """POST ``run_input`` to the endpoint at ``url``; the block gets the run's events.

        ``verify=False`` only decodes (no chunk expansion, no verification;
        ``result()`` is then the plain fold).

        By default the events are read as the reference client reads them, with
        its always-on compatibility boundary: a retired ``THINKING_*`` event or a
        ``binary`` content part is translated into 1.0 with a warning (see
        ``Consumer``). ``compat=True`` talks to older agents as the reference
        client does (docs/compat.md): the request is what
        ``compat.request_for(peer, ...)`` builds, and the events go through
        ``Compat(peer=peer)`` before verification. ``peer`` is the agent's
        protocol version (None: a current agent); giving it implies ``compat``.
        ``compat=False`` is the strict 1.0 view: those shapes are dropped with
        warnings.
        """
        stage = _compat_stage(compat, peer)
        if stage is not False and stage is not None:
            from .transformers.compat import request_for

            run_input = request_for(peer, run_input)
        body, run_id = _body(run_input)
        state = _RunState(
            RunBudget(self.bounds, f"run {run_id!r} at {url}"),
            EventIds(run_id),
            verify,
            allow_truncated,
            stage,
        )
        stream = self._events(url, run_id, state, "POST", url, body)
        try:
            yield RemoteRunEvents(stream, state)
        finally:
            await stream.aclose()

    @asynccontextmanager
    async def resume(
        self,
        url: str,
        run_id: str,
        *,
        last_event_id: str | None = None,
        verify: bool = True,
        allow_truncated: bool = False,
        compat: bool | None = None,
        peer: str | None = None,
    ) -> AsyncIterator[RemoteRunEvents]:
        """Pick run ``run_id`` of the endpoint at ``url`` up by id: ``GET {url}/runs/{runId}``.

        For a run this process did not POST (the client restarted, another
        process started it): the block gets its events, followed to its end,
        with the same checks, bounds and resumes as ``run``. Without
        ``last_event_id`` it is the whole run from its first event.

        With ``last_event_id`` (a ``RemoteRunEvents.last_event_id`` kept from before)
        only the events after it are yielded. Verification needs the run from
        its start, so with ``verify=True`` the client reads the run from its
        first event and verifies and folds the frames up to that id without
        yielding them — ``result()`` is the whole run's fold; with
        ``verify=False`` it asks the server for what follows the id only
        (``Last-Event-ID``), and ``result()`` is the fold of those events.
        ``compat`` and ``peer`` are ``run``'s.
        """
        stage = _compat_stage(compat, peer)
        budget = RunBudget(self.bounds, f"run {run_id!r} at {url}")
        if last_event_id is not None and verify:
            # Checked before anything is sent; then the run is read from its start.
            skip = EventIds(run_id, after=last_event_id).last
            state = _RunState(budget, EventIds(run_id), verify, allow_truncated, stage)
            state.skip = skip
        else:
            ids = EventIds(run_id, after=last_event_id)
            state = _RunState(budget, ids, verify, allow_truncated, stage)
        state.by_id = True
        stream = self._events(url, run_id, state, "GET", _under(url, "runs", run_id), None)
        try:
            yield RemoteRunEvents(stream, state)
        finally:
            await stream.aclose()

    async def _events(
        self,
        url: str,
        run_id: str,
        state: _RunState,
        method: str,
        target: str,
        content: bytes | None,
    ) -> AsyncGenerator[BaseEvent, None]:
        """The run's events across connections: one attempt, then resumes until its end."""
        budget, ids = state.budget, state.ids
        failures = 0
        headers = {**self.headers, **_SSE_HEADERS}
        if content is not None:
            headers["content-type"] = "application/json"
        elif ids.last_text:
            headers["last-event-id"] = ids.last_text
        while True:
            attempt = _Attempt()
            try:
                async for event in self._attempt(
                    url, run_id, state, attempt, method, target, headers, content
                ):
                    yield event
                if self._finished(state, attempt):
                    return
                drop = "the server closed the stream before the run ended"
            except _Retry as retry:
                drop = str(retry)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if method == "POST":  # the run was never sent: nothing to resume
                    raise ConnectionFailed(f"POST {target}: {_drop(exc)}") from exc
                drop = _drop(exc)
            except httpx.TransportError as exc:
                # A frame cut half-way is dropped with the reader and asked for
                # again: the resume starts after the last *accepted* id.
                drop = _drop(exc)
            if ids.frames and not ids.resumable:
                raise ResumeFailed(
                    f"the connection to {url} dropped before run {run_id!r} ended ({drop}), "
                    f"and {ids.unusable} (an agui-pipes endpoint resumes runs when it is "
                    "given a store: `agui-pipes serve --store URL`)"
                )
            budget.reconnect(drop)
            failures = 0 if attempt.progressed else failures + 1
            delay = min(self.max_backoff, self.backoff * (2 ** max(failures - 1, 0)))
            await within(budget, anyio.sleep(delay * (0.5 + random.random() / 2)))
            method, target, content = "GET", _under(url, "runs", run_id), None
            headers = {**self.headers, **_SSE_HEADERS}
            if ids.last_text:  # else nothing came yet: the whole run from its start
                headers["last-event-id"] = ids.last_text

    async def _attempt(
        self,
        url: str,
        run_id: str,
        state: _RunState,
        attempt: _Attempt,
        method: str,
        target: str,
        headers: dict[str, str],
        content: bytes | None,
    ) -> AsyncGenerator[BaseEvent, None]:
        """One connection: the request, its answer checked, its frames read to the end."""
        budget, ids = state.budget, state.ids
        reader = FrameReader(self.bounds.max_frame_bytes)
        response = await self._request.send(budget, method, target, headers, content)
        chunks: AsyncIterator[bytes] | None = None
        try:
            if response.status_code != 200:
                await self._refused(url, run_id, state, method, target, response)
            await _check_stream(response, method, target)
            chunks = response.aiter_raw()
            while True:
                # Read to the stream's end even after the run's: frames past it are
                # checked like any (the consumer refuses what AG-UI does not allow
                # there), and an honest server has closed.
                chunk = await within(budget, _next_chunk(chunks))
                if chunk is None:
                    return
                budget.received(len(chunk))
                try:
                    frames = reader.feed(chunk)
                except FrameTooLarge as exc:
                    raise budget.frame_too_large() from exc
                for event_id, payload in frames:
                    budget.frame()
                    ids.accept(event_id)
                    attempt.progressed = True
                    hidden = state.hidden()
                    for event in state.push(payload):
                        if event.type in _TERMINAL:
                            state.done = True
                        if not hidden:
                            yield event
                if frames:
                    budget.delivered()
        finally:
            if chunks is not None:
                await close_iterator(chunks)
            await response.aclose()

    @staticmethod
    async def _refused(
        url: str,
        run_id: str,
        state: _RunState,
        method: str,
        target: str,
        response: httpx.Response,
    ) -> NoReturn:
        """A non-200 answer: retried (a resume's 5xx), or the error that ends the run."""
        body, cut = await within(state.budget, read_body(response))
        error = server_error(method, target, response.status_code, body, truncated=cut)
        if method == "GET" and response.status_code >= 500:
            raise _Retry(str(error)) from error
        if method == "GET" and not state.ids.frames and not state.by_id:
            raise ResumeFailed(
                f"the connection to {url} dropped before the first event of "
                f"run {run_id!r}, and asking for the run again got {error}: "
                "the server keeps no log of it (no store, or the run never "
                "started), so it cannot be resumed"
            ) from error
        raise error

    @staticmethod
    def _finished(state: _RunState, attempt: _Attempt) -> bool:
        """After a stream closed cleanly: whether the run is over (or resuming is pointless)."""
        budget, ids = state.budget, state.ids
        if state.done:
            if state.skip is not None:
                raise ResumeFailed(
                    f"{budget.what}: last_event_id {str(state.skip)!r} is past the "
                    f"end of the run (its last frame is {ids.last_text!r})"
                )
            return True
        if state.by_id and not attempt.progressed and not budget.reconnects and ids.last:
            # Nothing after the caller's id, and the server closed: a log that ends
            # there ended the run there (its terminal frame is the id the caller kept).
            state.done = True
            return True
        return False

    async def history(
        self,
        url: str,
        thread_id: str,
        *,
        verify: bool = True,
        before: str | None = None,
        limit: int | None = None,
    ) -> History:
        """``GET {url}/threads/{threadId}``: the thread's runs folded, then a live run's tail.

        A page of runs, newest first: ``limit`` runs (the server's default,
        100, when None; at most 1,000) before the run ``before`` (the previous
        page's ``History.next``). Waits while a run of the thread is live (the
        newest page follows it to its end). The stream is held to the same
        bounds as a run; it is not resumed.
        """
        target = _under(url, "threads", thread_id) + _query(limit=limit, before=before)
        budget = RunBudget(self.bounds, f"thread {thread_id!r} at {url}")
        state = _RunState(budget, EventIds(thread_id), verify, allow_truncated=False)
        events: list[BaseEvent] = []
        headers = {**self.headers, **_SSE_HEADERS}
        reader = FrameReader(self.bounds.max_frame_bytes)
        # The folded history has no ids; a live run after it has its own, checked
        # from its first frame on as a run's are.
        live: EventIds | None = None
        try:
            response = await self._request.send(budget, "GET", target, headers)
            chunks: AsyncIterator[bytes] | None = None
            try:
                if response.status_code != 200:
                    body, cut = await within(budget, read_body(response))
                    raise server_error("GET", target, response.status_code, body, truncated=cut)
                await _check_stream(response, "GET", target)
                chunks = response.aiter_raw()
                while (chunk := await within(budget, _next_chunk(chunks))) is not None:
                    budget.received(len(chunk))
                    try:
                        frames = reader.feed(chunk)
                    except FrameTooLarge as exc:
                        raise budget.frame_too_large() from exc
                    for event_id, payload in frames:
                        budget.frame()
                        if live is None and event_id:
                            live = EventIds(_run_of(event_id))
                        if live is not None:
                            live.accept(event_id)
                        events.extend(state.push(payload))
                    if frames:
                        budget.delivered()
                reader.close()
            finally:
                if chunks is not None:
                    await close_iterator(chunks)
                await response.aclose()
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"GET {target}: {_drop(exc)}") from exc
        except TruncatedFrame as exc:
            raise ConnectionFailed(f"GET {target}: {exc}") from exc
        older = _next_page(events, target)
        if state.consumer is not None:
            return History(events, state.consumer.finish(), older)
        return History(events, fold(events), older)

    async def threads(
        self, url: str, *, limit: int | None = None, before: str | None = None
    ) -> ThreadPage:
        """``GET {url}/threads``: the caller's threads, newest first, ``limit`` at a time.

        ``limit`` is the server's default (50) when None, at most 500;
        ``before`` the previous page's ``ThreadPage.next``. The answer is
        checked whole: anything but the documented JSON is ``BadResponse``.
        """
        target = _under(url, "threads") + _query(limit=limit, before=before)
        budget = RunBudget(self.bounds, f"threads at {url}")
        try:
            status, body = await self._request.answer(budget, "GET", target, self.headers)
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"GET {target}: {_drop(exc)}") from exc
        return _thread_page(status, body, target, limit)

    async def stop(self, url: str, run_id: str) -> dict[str, Any]:
        """``POST {url}/runs/{runId}/stop``: cancel the run; the server's JSON answer."""
        target = _under(url, "runs", run_id, "stop")
        budget = RunBudget(self.bounds, f"stop of run {run_id!r} at {url}")
        try:
            status, body = await self._request.answer(
                budget, "POST", target, self.headers, ok=(200, 202)
            )
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"POST {target}: {_drop(exc)}") from exc
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise BadResponse("POST", target, status, None, f"not a JSON object: {snippet(body)}")
        return answer


def _query(*, limit: int | None, before: str | None) -> str:
    """``?limit=..&before=..`` of a paged listing (empty when both are None)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    if before is not None and (not isinstance(before, str) or not before):
        raise ValueError(
            f"before must be a non-empty string (a page's next) or None, got {before!r}"
        )
    parts = []
    if limit is not None:
        parts.append(f"limit={limit}")
    if before is not None:
        parts.append(f"before={quote(before, safe='')}")
    return "?" + "&".join(parts) if parts else ""


def _next_page(events: list[BaseEvent], target: str) -> str | None:
    """The older page's cursor a history page names (its ``agui_pipes.history_page`` event)."""
    for event in events:
        if event.type is EventType.CUSTOM and getattr(event, "name", None) == _PAGE_EVENT:
            value = getattr(event, "value", None)
            cursor = value.get("next") if isinstance(value, dict) else None
            if not isinstance(cursor, str) or not cursor:
                raise BadResponse(
                    "GET",
                    target,
                    200,
                    None,
                    f"a history page whose next is {snippet(repr(value).encode())}",
                )
            return cursor
    return None


def _thread_page(status: int, body: bytes, target: str, limit: int | None) -> ThreadPage:
    """The ``GET threads`` answer, checked field by field (``BadResponse`` otherwise)."""

    def bad(why: str) -> NoReturn:
        raise BadResponse("GET", target, status, None, f"{why}: {snippet(body)}")

    try:
        answer = json.loads(body)
    except ValueError:
        bad("not JSON")
    if not isinstance(answer, dict) or not isinstance(answer.get("threads"), list):
        bad("not a JSON object with a list of threads")
    listed = answer["threads"]
    if limit is not None and len(listed) > limit:
        bad(f"{len(listed)} threads where at most {limit} were asked for")
    threads = []
    for item in listed:
        if not isinstance(item, dict):
            bad("a thread that is not an object")
        thread_id, created = item.get("threadId"), item.get("created")
        if not isinstance(thread_id, str) or not thread_id:
            bad("a thread without a threadId string")
        if isinstance(created, bool) or not isinstance(created, int | float):
            bad(f"thread {thread_id[:80]!r} without a numeric created time")
        threads.append(ThreadInfo(thread_id, float(created)))
    cursor = answer.get("next")
    if cursor is not None and (not isinstance(cursor, str) or not cursor):
        bad("a next that is neither null nor a string")
    return ThreadPage(threads, cursor)


_PAGE_EVENT = "agui_pipes.history_page"


@dataclass
class _Attempt:
    """What one connection of a run achieved (the retry loop's backoff reads it)."""

    progressed: bool = False


def _compat_stage(compat: bool | None, peer: str | None) -> Compat | bool | None:
    """What the run's ``Consumer`` gets as ``compat``: a stage for ``compat=True`` or a
    ``peer``, ``False`` for the strict view, None for the reference client's boundary."""
    if compat is False:
        if peer is not None:
            raise ValueError(
                f"peer={peer!r} names the agent's version for the compat translation, and "
                "compat=False turns it off: give one of them"
            )
        return False
    if compat or peer is not None:
        from .transformers.compat import Compat

        return Compat(peer=peer)
    return None


class _Retry(Exception):
    """A resume answered 5xx: worth another try."""


@asynccontextmanager
async def run_remote(
    url: str,
    run_input: RunAgentInput | Mapping[str, Any],
    *,
    verify: bool = True,
    allow_truncated: bool = False,
    compat: bool | None = None,
    peer: str | None = None,
    **client_options: Any,
) -> AsyncIterator[RemoteRunEvents]:
    """``Client(**client_options).run(...)`` with a client of its own, closed at the end."""
    async with (
        Client(**client_options) as client,
        client.run(
            url, run_input, verify=verify, allow_truncated=allow_truncated, compat=compat, peer=peer
        ) as events,
    ):
        yield events


async def history(
    url: str,
    thread_id: str,
    *,
    verify: bool = True,
    before: str | None = None,
    limit: int | None = None,
    **client_options: Any,
) -> History:
    """``Client.history`` with a client of its own."""
    async with Client(**client_options) as client:
        return await client.history(url, thread_id, verify=verify, before=before, limit=limit)


async def threads(
    url: str, *, limit: int | None = None, before: str | None = None, **client_options: Any
) -> ThreadPage:
    """``Client.threads`` with a client of its own."""
    async with Client(**client_options) as client:
        return await client.threads(url, limit=limit, before=before)


async def stop(url: str, run_id: str, **client_options: Any) -> dict[str, Any]:
    """``Client.stop`` with a client of its own."""
    async with Client(**client_options) as client:
        return await client.stop(url, run_id)
