"""A gateway: forward each run to an upstream AG-UI agent and pipe its answer.

::

    from agui_pipes.server import Gateway

    gateway = Gateway("http://agent.internal:8000/", chain=load_chain("chain.yaml"))
    app = Starlette(routes=[Route("/", gateway, methods=["POST"])],
                    lifespan=gateway.lifespan)

Per request the POSTed body is validated as a RunAgentInput (422 otherwise —
nothing is forwarded) and sent upstream *as received*, so fields this version
does not know survive. The upstream's SSE is decoded incrementally, each
event by the consumer decoder, then runs through ``ExpandChunks | <your
chain> | Verify`` and is re-encoded to the client. Verification comes last
so that it checks what the client receives (a violation your chain removes,
such as a late argument delta of a filtered tool call, does not end the run)
and so that its message can only name what the client sees anyway; a
violation found earlier (chunk expansion, a Verify in your chain) reaches the
client as a ``WithheldViolation``: the rule and the position, not the text.
A chain that starts with ``ExpandChunks`` or ends with a ``Verify`` as strict
as the gateway's shares it with the gateway instead of running it twice (see
``_consumer_chain``; the client receives the same bytes).

When that chain is synchronous (every stage a ``StreamTransformer``, the
usual case) it runs through ``agui_pipes.relay.Relay``: each upstream
network chunk is decoded, transformed and encoded in one synchronous pass
and written as one batch of frames, with no async generator per event.
Chains with async stages or operators run through ``chain.apply``. The two
paths send the same bytes (tests compare them on generated streams).

Everything that can go wrong upstream reaches the client as a well-formed
RUN_ERROR whose ``code`` says what happened, and is logged:

==========================  =====================================================
``UPSTREAM_UNREACHABLE``    cannot connect (refused, DNS, TLS)
``UPSTREAM_TIMEOUT``        connecting, the response's start, or the next byte took too long
``UPSTREAM_HTTP_ERROR``     the upstream answered with a non-2xx status
``UPSTREAM_BAD_RESPONSE``   a 2xx that is not ``text/event-stream``
``UPSTREAM_MALFORMED``      a frame that is not a valid AG-UI event, or too large
``UPSTREAM_TRUNCATED``      the body or the run stopped before its end
``PROTOCOL_VIOLATION``      the events break the AG-UI ordering rules
==========================  =====================================================

A client that disconnects cancels the run, which closes the upstream request
(and so cancels the upstream agent, if it is one of ours). With an event log
(``store=``) each run is recorded and every frame carries an SSE id, a client
that disconnects only detaches (the upstream is read on for ``detach_grace``
seconds, for a resume), and the gateway serves the resume, stop and thread
routes (see ``routes`` and docs/durable.md).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
from ag_ui.core import BaseEvent, EventType, RunErrorEvent, RunFinishedEvent, RunStartedEvent

from .._foundation.limits import Limits
from .._foundation.limits_scope import resolve_limits, using_limits
from .._foundation.trace_context import TRACE_HEADERS, using_trace_headers
from .._lazy import publish
from .._pipeline.chain import ChainFactory, TransformerChain
from .._pipeline.transformer import Stage
from .._protocol.legacy import reads_legacy
from ..codecs import (
    DEFAULT_MAX_FRAME_BYTES,
    DecodeError,
    DecodeWarning,
    FrameTooLarge,
    SSEDecoder,
    TruncatedFrame,
    decode,
)
from ..relay import Relay
from ..transformers import ExpandChunks, Verify
from ._http import (
    DEFAULT_MAX_BODY_BYTES,
    BadRequest,
    accept_run_input,
    as_chain_factory,
    compat_down_picker,
    send_json_error,
)
from ._stats import RunStats, instrument
from ._streaming import (
    DEFAULT_SEND_BUFFER,
    DEFAULT_SEND_TIMEOUT,
    Receive,
    RunFailure,
    Scope,
    Send,
    SSERun,
    check_send_limits,
)
from ._withheld import ToldViolations as _ToldViolations
from ._withheld import WithheldViolation

if TYPE_CHECKING:
    from ..store import EventLog, RunRecorder
    from ._durable import DurableRuns

publish(__name__, WithheldViolation)

__all__ = [
    "DEFAULT_TIMEOUT",
    "Gateway",
    "UpstreamError",
    "WithheldViolation",
    "gateway_route",
]

_log = logging.getLogger("agui_pipes.server")

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=60.0, write=10.0, pool=10.0)
"""``read`` is the longest silence tolerated between upstream bytes (keep-alive
comments count), not a limit on the whole run."""


class UpstreamError(RunFailure):
    """The upstream failed; ``code`` is one of the ``UPSTREAM_*`` codes."""


def _hop_headers(
    headers: Iterable[tuple[bytes, bytes]], forward: frozenset[str]
) -> dict[str, str]:
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


class Gateway:
    """An ASGI app relaying runs to ``upstream`` through a chain (see module doc).

    ``chain`` is a chain factory (or a chain, ``fresh()``-ed per request);
    ``verify=False`` drops the consumer verification (chunks are still
    expanded). ``forward_headers`` names the request headers passed upstream
    (``authorization`` by default; ``traceparent``/``tracestate`` always go, so
    the upstream's trace joins the caller's). ``client`` lets you bring your own
    ``httpx.AsyncClient`` (then you close it); otherwise one is created on
    first use and closed by ``aclose()`` / the ``lifespan`` helper.

    The upstream is read only as fast as the client takes the events: at most
    ``send_buffer`` bytes of frames are queued for a slow client before the
    gateway stops reading the upstream (whose agent then waits in turn), and
    a client that reads nothing for ``send_timeout`` seconds is treated as
    disconnected, which closes the upstream request.

    ``limits`` is the default of the stages the chain factory builds
    (``StateDiff``, ``ToolResultToState``: the state they follow; None: the
    limits in effect, normally ``DEFAULT_LIMITS``).

    ``store`` (an ``EventLog`` or a store URL) records every run under the
    runId of its RunAgentInput, as the agent endpoint does: frames carry
    ``id: <epoch>:<runId>:<seq>``, a client that disconnects detaches (the
    upstream is read on until nobody has been attached for ``detach_grace``
    seconds, then its request is closed and the run recorded as cancelled),
    and ``routes(path)`` adds the resume, stop and thread routes.

    ``repair=True`` puts a fresh ``Repair`` (ids: the request's) right after chunk
    expansion, before your chain: a producer that breaks the ordering rules (late
    arguments of a parallel tool call, a second terminal event, ...) reaches the
    client repaired instead of as a ``PROTOCOL_VIOLATION``; the per-run log line
    gives the number of fixes (see docs/repair.md).

    ``compat_down=True`` serves clients of older protocol versions: each
    request's declared ``protocolVersion`` picks a ``compat`` stage of
    direction ``down`` run after verification (none for a 1.0 client; an
    undeclared version is served as ``compat_undeclared``). See docs/compat.md.
    """

    def __init__(
        self,
        upstream: str,
        *,
        chain: ChainFactory | TransformerChain | None = None,
        verify: bool = True,
        keepalive: float | None = 15.0,
        send_buffer: int = DEFAULT_SEND_BUFFER,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        forward_headers: Iterable[str] = ("authorization",),
        client: httpx.AsyncClient | None = None,
        logger: logging.Logger | None = None,
        limits: Limits | None = None,
        store: EventLog | str | None = None,
        detach_grace: float = 30.0,
        repair: bool = False,
        compat_down: bool = False,
        compat_undeclared: str = "0.0.57",
    ) -> None:
        url = httpx.URL(upstream)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(
                f"upstream must be an http(s) URL such as http://127.0.0.1:8000/, got "
                f"{upstream!r}"
            )
        if keepalive is not None and keepalive <= 0:
            raise ValueError(
                f"keepalive must be a positive number of seconds or None, got {keepalive!r}"
            )
        check_send_limits(send_buffer, send_timeout)
        self.upstream = str(url)
        self._chain_factory = as_chain_factory(chain)
        self._down = compat_down_picker(compat_down, compat_undeclared)
        self._verify = verify
        self._keepalive = keepalive
        self._send_buffer = send_buffer
        self._send_timeout = send_timeout
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._max_frame = max_frame_bytes
        self._max_body = max_body_bytes
        self._forward = frozenset(name.lower() for name in forward_headers)
        self._client = client
        self._owns_client = client is None
        self._log = logger or _log
        self._limits = resolve_limits(limits)
        self._first_frames = _FirstFrames()
        self._repair = repair
        self.durable: DurableRuns | None = None
        """The event log's side of the gateway (``store=``), or None."""
        if store is not None:
            from ._durable import DurableRuns  # the store's code loads only when used

            self.durable = DurableRuns(
                store,
                detach_grace=detach_grace,
                keepalive=keepalive,
                send_buffer=send_buffer,
                send_timeout=send_timeout,
                logger=self._log,
            )

    def __repr__(self) -> str:
        # What an operator needs to recognise the gateway in a log or a debugger;
        # never a secret: the URL's password and query values are masked, and of
        # the forwarded headers only the names are known here.
        return (
            f"Gateway({_masked_url(self.upstream)!r}, chain={_chain_repr(self._chain_factory)}, "
            f"verify={self._verify}, repair={self._repair}, "
            f"forward_headers={sorted(self._forward)}, limits={self._limits!r}, "
            f"keepalive={self._keepalive}, send_buffer={self._send_buffer}, "
            f"send_timeout={self._send_timeout}, max_body_bytes={self._max_body}, "
            f"max_frame_bytes={self._max_frame})"
        )

    # -- lifecycle --------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # No pool ceiling: every concurrent run holds one upstream
            # connection for its whole duration, so a cap would queue runs.
            self._client = httpx.AsyncClient(
                timeout=self._timeout,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            )
        return self._client

    def routes(self, path: str) -> list[Any]:
        """Starlette routes: ``POST path``, and with a store the resume, stop and thread routes.

        The durable routes hang under ``path`` as a folder (``/chat`` gives
        ``/chat/runs/{runId}``, ``/chat/runs/{runId}/stop`` and
        ``/chat/threads/{threadId}``), as on the agent endpoint.
        """
        from starlette.routing import Route

        routes: list[Any] = [Route(path, self, methods=["POST"])]
        if self.durable is not None:
            routes.extend(self.durable.routes(path))
        return routes

    async def aclose(self) -> None:
        """Stop the runs still recorded here and close the event log it opened; close the client.

        The runs first: each is recorded as cancelled while the upstream
        client can still be closed under it.
        """
        try:
            if self.durable is not None:
                await self.durable.aclose()
        finally:
            client, self._client = self._client, None
            if client is not None and self._owns_client:
                await client.aclose()

    @asynccontextmanager
    async def lifespan(self, app: object) -> AsyncIterator[None]:
        """A Starlette/FastAPI ``lifespan``: opens the event log (if any), closes at shutdown."""
        try:
            if self.durable is not None:
                await self.durable.store()
            yield
        finally:
            await self.aclose()

    # -- one request ------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        first = _FirstFrame(self._first_frames)
        try:
            await self._serve(scope, receive, send, first)
        finally:
            first.sent()

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, first: _FirstFrame
    ) -> None:
        accepted = await accept_run_input(
            scope, receive, send, app="Gateway", max_body=self._max_body, log=self._log,
            legacy=self._down is not None,
        )
        if accepted is None:
            return
        body, run_input = accepted

        stats = RunStats("gateway", run_input.run_id, run_input.thread_id)
        try:
            # Verification comes *after* your chain: it checks what the client
            # receives, and its messages can only name what the client sees.
            configured: list[Stage] = []
            if self._chain_factory is not None:
                # The request's traceparent parents the spans of a tracing stage.
                with using_limits(self._limits), using_trace_headers(scope.get("headers", ())):
                    configured.append(self._chain_factory())
            stages, final = _consumer_chain(TransformerChain(configured).stages, self._verify)
            if self._repair:
                stages.insert(1, _repair_stage(run_input.thread_id, run_input.run_id, stats))
            if self._down is not None:
                stages.extend(self._down(run_input))  # after Verify: it checks 1.0
            chain = TransformerChain(stages)
            if not chain.is_sync or self._log.isEnabledFor(logging.INFO):
                # The counters are for the INFO line only; on the relay path
                # they are a tenth of its work, so without that line the relay
                # counts only the source (``_relay``).
                chain = instrument(chain, stats)
        except Exception as exc:
            self._log.error(
                "cannot build the chain for run %s: %s", stats.run_id, exc, exc_info=exc
            )
            message = f"the gateway could not build its chain: {exc}"
            failure = BadRequest(500, "setup_failed", message)
            await send_json_error(send, failure)
            return
        headers = _hop_headers(scope.get("headers", ()), self._forward)

        told = _ToldViolations(final, stats, self._log, origin="upstream event", log="gateway log")
        if self.durable is not None:
            await self._serve_recorded(
                scope, receive, send, self.durable, run_input.thread_id, run_input.run_id,
                body, headers, chain, stats, told, first,
            )
            return
        if chain.is_sync:

            def open_relay() -> Any:
                return self._relayed(body, headers, chain, stats, told, first)

            response = SSERun(
                open_frames=open_relay,
                stats=stats,
                on_first_write=first.wrote,
                keepalive=self._keepalive,
                logger=self._log,
                send_buffer=self._send_buffer,
                send_timeout=self._send_timeout,
            )
        else:

            def open_upstream() -> Any:
                return self._applied(body, headers, chain, told, first)

            response = SSERun(
                open_upstream,
                stats=stats,
                keepalive=self._keepalive,
                logger=self._log,
                send_buffer=self._send_buffer,
                send_timeout=self._send_timeout,
            )
        await response(scope, receive, send)

    async def _serve_recorded(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        durable: DurableRuns,
        thread_id: str,
        run_id: str,
        body: bytes,
        headers: Mapping[str, str],
        chain: TransformerChain,
        stats: RunStats,
        told: _ToldViolations,
        first: _FirstFrame,
    ) -> None:
        """Serve the run recorded in the event log; a client that leaves only detaches it."""
        try:
            await durable.check_new_run(run_id)
        except BadRequest as error:
            await send_json_error(send, error)
            return
        from ..driver import CancelToken

        token = CancelToken()  # tripped by a stop or the grace; the upstream closes with the run
        live_runs = durable.live

        def on_disconnect() -> None:
            # The relay may wait for its first frame to be written: it never will be.
            first.wrote()
            live = live_runs.get(run_id)
            if live is not None:
                live.detach()

        def gone() -> bool:
            return response.disconnected

        if chain.is_sync:

            def open_relayed(note: Any, recorder: Any) -> Any:
                return self._relayed(body, headers, chain, stats, told, first, note, recorder)

            def open_frames() -> Any:
                return durable.recorded_batches(
                    thread_id, run_id, token, open_relayed, stats, gone
                )
        else:

            def open_applied() -> Any:
                return self._applied(body, headers, chain, told, first)

            def open_frames() -> Any:
                return durable.recorded_frames(
                    thread_id, run_id, token, open_applied, stats, gone
                )

        response = SSERun(
            open_frames=open_frames,
            stats=stats,
            on_first_write=first.wrote,
            keepalive=self._keepalive,
            logger=self._log,
            send_buffer=self._send_buffer,
            send_timeout=self._send_timeout,
            on_disconnect=on_disconnect,
            detach=True,
        )
        await response(scope, receive, send)

    @asynccontextmanager
    async def _applied(
        self,
        body: bytes,
        headers: Mapping[str, str],
        chain: TransformerChain,
        told: _ToldViolations,
        first: _FirstFrame,
    ) -> AsyncIterator[AsyncIterator[BaseEvent]]:
        async with self._upstream(body, headers) as response:
            # This path does not slice its work: it stops counting as a run
            # waiting for its first frame once the upstream answered.
            first.sent()
            async with chain.apply(self._decode(response, reads_legacy(chain.stages))) as output:
                yield told.guard(output)

    @asynccontextmanager
    async def _relayed(
        self,
        body: bytes,
        headers: Mapping[str, str],
        chain: TransformerChain,
        stats: RunStats,
        told: _ToldViolations,
        first: _FirstFrame,
        note: Callable[[BaseEvent], None] | None = None,
        recorder: RunRecorder | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        async with self._upstream(body, headers) as response:
            yield self._relay(response, chain, stats, told, first, note, recorder)

    @asynccontextmanager
    async def _upstream(
        self, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[httpx.Response]:
        client = self._http()
        request = client.build_request("POST", self.upstream, content=body, headers=headers)
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise UpstreamError("UPSTREAM_TIMEOUT", self._request_timeout(exc)) from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(
                "UPSTREAM_UNREACHABLE",
                f"cannot reach the upstream agent at {self.upstream}: "
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

    async def _decode(self, response: httpx.Response, legacy: bool) -> AsyncIterator[BaseEvent]:
        decoder = SSEDecoder(max_frame_bytes=self._max_frame)
        index = 0
        upstream = _UpstreamRun()
        try:
            async for chunk in self._chunks(response):
                for payload in decoder.feed(chunk):
                    decoded = decode(payload, index=index, legacy=legacy)
                    index += 1
                    for warning in decoded.warnings:
                        self._log_warning(warning)
                    event = decoded.event
                    if event is None:
                        continue
                    upstream.see(event)
                    yield event
            decoder.close()
        except _UPSTREAM_FAILURES as exc:
            raise self._failure(exc, index) from exc
        upstream.check_ended()

    def _request_timeout(self, exc: httpx.TimeoutException) -> str:
        """What timed out before the upstream's response began, and after how long.

        Only a connect (or pool) timeout is "connecting": an upstream that
        accepted the connection and then went silent timed out *answering*.
        """
        at = f"the upstream agent at {self.upstream}"
        if isinstance(exc, httpx.ConnectTimeout):
            return f"timed out connecting to {at} after {self._timeout.connect}s"
        if isinstance(exc, httpx.PoolTimeout):
            return (f"no connection to {at} became free within {self._timeout.pool}s "
                    "(connection pool exhausted)")
        if isinstance(exc, httpx.WriteTimeout):
            return f"timed out sending the run to {at} after {self._timeout.write}s"
        return (f"{at} accepted the connection but its response did not begin within "
                f"{self._timeout.read}s (no complete status line and headers; 0 events)")

    def _failure(self, exc: Exception, events: int) -> UpstreamError:
        """The ``UpstreamError`` for an exception reading the upstream after ``events`` events."""
        if isinstance(exc, httpx.TimeoutException):
            return UpstreamError(
                "UPSTREAM_TIMEOUT",
                f"the upstream agent sent nothing for {self._timeout.read}s mid-stream, "
                f"after {events} event{'s' if events != 1 else ''}: timed out waiting "
                "for the next event",
            )
        if isinstance(exc, httpx.HTTPError):
            return UpstreamError(
                "UPSTREAM_TRUNCATED",
                f"the upstream connection broke after {events} events: "
                f"{type(exc).__name__}: {exc}",
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

    def _chunks(self, response: httpx.Response) -> AsyncIterator[bytes]:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        return response.aiter_raw() if encoding == "identity" else response.aiter_bytes()

    def _log_warning(self, warning: DecodeWarning) -> None:
        self._log.debug("upstream event: %s", warning)

    async def _relay(
        self,
        response: httpx.Response,
        chain: TransformerChain,
        stats: RunStats,
        told: _ToldViolations,
        first: _FirstFrame,
        note: Callable[[BaseEvent], None] | None = None,
        recorder: RunRecorder | None = None,
    ) -> AsyncIterator[bytes]:
        """``_decode`` + ``chain.apply`` + encoding, one batch per upstream chunk.

        With ``recorder`` (a recorded run) every event is recorded and its
        frame carries its ``id:`` line: the relay hands the recorder each
        batch's events apart, so they are framed once, with their ids,
        rather than framed, split and framed again.

        Fails exactly as that path does: the same ``UpstreamError`` codes and
        messages, the chain's own exceptions as they are. When an event fails
        mid-chunk, the frames of the events before it are still yielded first.

        A chunk is one batch, except while runs wait for their first frame
        (``first``): this run's own first frame leaves after a slice of one
        event (then two, four, ...), not after the whole first read, and while
        another run waits, this one hands the loop back every
        ``_SHARED_SLICE`` events. Slicing changes only when bytes are
        written, never which: the relay's state carries over between slices.
        """
        decoder = SSEDecoder(max_frame_bytes=self._max_frame)
        upstream = _UpstreamRun()
        # The hooks watch only the run's own events, so the relay's bypass stays
        # on for the deltas that make up most of the stream.
        on_event = stats.note_output
        if note is not None:
            note_output = stats.note_output

            def on_event(event: BaseEvent) -> None:
                note_output(event)
                note(event)

        relay = Relay(
            chain,
            on_warning=self._log_warning,
            on_event=on_event,
            output_types=_RUN_CLASSES,
            on_input=upstream.see,
            input_types=_RUN_CLASSES,
        )
        try:
            async for chunk in self._chunks(response):
                payloads = decoder.feed_bytes(chunk)
                if not payloads:
                    continue
                total = len(payloads)
                start = 0
                while start < total:
                    if first.pending:
                        # Until its first frame is out a run takes slices that
                        # double from one event: that frame leaves after the
                        # work of a few events, not of a whole read (hundreds).
                        end = min(total, 2 * start or 1)
                    elif first.others():
                        end = min(total, start + _SHARED_SLICE)
                    else:
                        end = total
                    part = payloads if end - start == total else payloads[start:end]
                    start = end
                    try:
                        if recorder is None:
                            out = relay.feed(part)
                        else:
                            items = relay.feed_payloads(part)
                            framed = recorder.frames_nowait(items) if items else b""
                            # None: the recorder's queue is full: wait for room, in order.
                            out = await recorder.frames(items) if framed is None else framed
                    except Exception as exc:
                        # What the events before the failing one gave.
                        if recorder is None:
                            unsent = relay.take_unsent()
                        else:
                            unsent = await recorder.frames(relay.take_unsent_payloads())
                        stats.written = relay.events_out
                        if unsent:
                            first.sent()
                            yield unsent
                        told.check(exc)
                        raise
                    stats.written = relay.events_out
                    if out:
                        yield out
                        if first.pending:
                            # Let the writer send it before the rest of the read:
                            # the response tells when its first body went out
                            # (counting scheduler turns would depend on how the
                            # backend and the writer order theirs).
                            await first.written.wait()
                            first.sent()
                            continue
                    if start < total and first.others():
                        # Another run waits for its first frame: let it have
                        # the loop rather than wait behind this whole read.
                        await anyio.lowlevel.checkpoint()
            decoder.close()
        except _UPSTREAM_FAILURES as exc:
            if isinstance(exc, DecodeError) and exc.stage is not None:
                raise  # a stage's own refusal (the chain named it), not the upstream's bytes
            raise self._failure(exc, relay.events_in) from exc
        finally:
            # Forwarded events passed every stage (and so every counter) unseen.
            stats.forwarded = relay.events_forwarded
            if not stats.stage_names:  # no counters: what entered the chain
                stats.counts[0] = relay.events_in - relay.events_unknown - relay.events_forwarded
        upstream.seen_any = relay.events_in > relay.events_unknown
        upstream.check_ended()
        try:
            if recorder is None:
                out = relay.finish()
            else:
                items = relay.finish_payloads()
                out = await recorder.frames(items) if items else b""
        except Exception as exc:
            told.check(exc)
            raise
        stats.written = relay.events_out
        if out:
            first.sent()
            yield out


_SHARED_SLICE = 128
"""Events a run relays between two hand-backs of the loop while another run waits for its
first frame: ~1 ms of work, against ~5 ms for a whole 64 KiB read."""


class _FirstFrames:
    """How many of a gateway's runs have not sent their first frame yet."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = 0


class _FirstFrame:
    """One run, counted in its gateway's ``_FirstFrames`` until its first frame is out."""

    __slots__ = ("_all", "pending", "written")

    def __init__(self, waiting: _FirstFrames) -> None:
        self._all = waiting
        self.pending = True
        self.written = anyio.Event()
        waiting.waiting += 1

    def wrote(self) -> None:
        """The response handed its first body to the server (``SSERun(on_first_write=)``)."""
        self.written.set()

    def sent(self) -> None:
        """The first frame is out (or the run ended): stop counting this run."""
        if self.pending:
            self.pending = False
            self._all.waiting -= 1

    def others(self) -> bool:
        """Whether another run of the gateway waits for its first frame."""
        return self._all.waiting > self.pending


_RUN_CLASSES: frozenset[type[BaseEvent]] = frozenset(
    {RunStartedEvent, RunFinishedEvent, RunErrorEvent}
)
"""The events the relay's hooks watch: they say whether a run is open and how it ended."""

_UPSTREAM_FAILURES = (httpx.HTTPError, TruncatedFrame, FrameTooLarge, DecodeError)
"""What reading the upstream can raise that ``Gateway._failure`` turns into a RUN_ERROR."""


class _UpstreamRun:
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


def _consumer_chain(
    configured: Sequence[Stage], verify: bool
) -> tuple[list[Stage], Verify | None]:
    """``ExpandChunks | <configured> | Verify``, each of the gateway's stages run once.

    Returns the stages and the gateway's own final ``Verify`` (None when it
    has none). Each merge keeps the client's bytes and errors as they were:

    * A chain starting with a plain ``ExpandChunks`` loses it: behind the
      gateway's, it never sees a chunk (expansion leaves none), so it never
      opens a lane, and it passes every event as it is.
    * A chain ending with a plain ``Verify`` of the consumer profile that
      raises and refuses a truncated run (what the gateway's is) keeps it and
      the gateway adds none: the gateway's would see the same events after
      it, in the same verifier state, so it could never raise first. Its
      violations were the chain's, withheld from the client, and still are.
      Any other policy (``warn`` passes violations, ``run_error`` rewrites
      the stream, ``allow_truncated`` skips the end check), another profile,
      a subclass, or a ``Verify`` with a stage after it is not a substitute.
    """
    stages = list(configured)
    if stages and _plain(stages[0], ExpandChunks):
        del stages[0]
    last = stages[-1] if stages else None
    final: Verify | None = None
    if verify and not (
        isinstance(last, Verify)
        and _plain(last, Verify)
        and last.enabled
        and last.on_violation == "raise"
        and not last.allow_truncated
        and last.verifier.profile == "consumer"
    ):
        final = Verify(profile="consumer", on_violation="raise")
    return [ExpandChunks(), *stages, *([final] if final is not None else [])], final


def _repair_stage(thread_id: str, run_id: str, stats: RunStats) -> Stage:
    """A fresh ``Repair`` for one run, known to the run's stats (for the log line)."""
    from ..transformers.repair import Repair  # loads only for a repairing gateway

    repair = Repair(thread_id=thread_id, run_id=run_id)
    stats.repair = repair
    return repair


def _plain(stage: Stage, cls: type[Stage]) -> bool:
    """Whether ``stage`` is an instance of exactly ``cls``, none of its methods replaced."""
    if type(stage) is not cls:
        return False
    replaced = getattr(stage, "__dict__", {})
    return not any(name in replaced for name in ("transform", "finish", "route", "passes"))


def _chain_repr(factory: ChainFactory | None) -> str:
    """The stages of a chain given as a TransformerChain or LoadedChain, else the factory's name."""
    owner = getattr(factory, "__self__", None)  # a TransformerChain's bound fresh()
    if isinstance(owner, TransformerChain):
        return repr(owner)
    if factory is None or hasattr(factory, "names"):  # None, or a LoadedChain
        return repr(factory)
    return getattr(factory, "__qualname__", None) or repr(factory)


def _masked_url(url: str) -> str:
    """``url`` with its password and query values replaced by ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{host}"
    query = "&".join(
        f"{pair.partition('=')[0]}=***" for pair in parts.query.split("&") if pair
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def gateway_route(path: str, upstream: str, **options: Any) -> Any:
    """A Starlette ``Route`` (POST only) serving ``Gateway(upstream, **options)``.

    The gateway is the route's ``endpoint`` attribute; close it at shutdown
    (``route.endpoint.aclose()`` or its ``lifespan``). With ``store=`` a gateway
    serves more than one route: use ``Gateway(...).routes(path)`` or ``build_app``.
    """
    from starlette.routing import Route

    if options.get("store") is not None:
        raise TypeError(
            "gateway_route() returns the one POST route; with store=... the gateway also "
            "serves runs/{runId}, runs/{runId}/stop and threads/{threadId}: use "
            "Gateway(upstream, store=...).routes(path) (a list of routes) or "
            "build_app(upstream=..., store=...)"
        )

    return Route(path, Gateway(upstream, **options), methods=["POST"])
