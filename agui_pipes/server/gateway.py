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
``_chains.consumer_chain``; the client receives the same bytes).

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

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
from ag_ui.core import BaseEvent, RunAgentInput
from typing_extensions import Unpack

from .._foundation.limits_scope import resolve_limits
from .._foundation.principal import Principal, using_principal
from .._lazy import public_dir, publish
from .._pipeline.chain import ChainFactory, TransformerChain, apply_draining
from .._pipeline.request_hooks import request_rewriters, rewrite_request
from .._protocol.legacy import reads_legacy
from ..codecs import DEFAULT_MAX_FRAME_BYTES, DecodeWarning
from ._access import Access, principal_header, principal_value
from ._capabilities import capabilities_route
from ._chains import as_chain_factory, chain_repr, compat_down_picker, gateway_chain
from ._gateway_relay import FirstFrame, FirstFrames, relay_frames
from ._http import (
    BadRequest,
    accept_run_input,
    send_json_error,
)
from ._interrupt_gate import with_resume
from ._join import joins_thread
from ._options import (
    ServerOptions,
    ServerOptionValues,
    check_streaming,
    records,
    server_options,
    streaming,
)
from ._request_rewrite import rewrite_failure
from ._stats import RunStats
from ._streaming import Receive, Scope, Send, SSERun
from ._subpaths import Subpaths
from ._trust import request_trust
from ._upstream import DEFAULT_TIMEOUT, Upstream, UpstreamError, hop_headers, masked_url
from ._upstream_pool import DEFAULT_IDLE_CONNECTIONS
from ._withheld import ToldViolations, WithheldViolation

if TYPE_CHECKING:
    from ..store import RunRecorder
    from ..transformers import Verify
    from ._durable import DurableRuns

publish(__name__, UpstreamError, WithheldViolation)

__all__ = [
    "DEFAULT_TIMEOUT",
    "Gateway",
    "UpstreamError",
    "WithheldViolation",
    "gateway_route",
]
__dir__ = public_dir(__all__)

_log = logging.getLogger("agui_pipes.server")


class Gateway:
    """An ASGI app relaying runs to ``upstream`` through a chain (see module doc).

    ``chain`` is a chain factory (or a chain, ``fresh()``-ed per request).
    ``timeout`` bounds the upstream's connect, write and silences (an
    ``httpx.Timeout`` or seconds); ``max_frame_bytes`` the size of one of its
    frames. ``forward_headers`` names the request headers passed upstream
    (``authorization`` by default; ``traceparent``/``tracestate`` always go, so
    the upstream's trace joins the caller's). ``client`` lets you bring your own
    ``httpx.AsyncClient`` (then you close it); otherwise one is created on
    first use and closed by ``aclose()`` / the ``lifespan`` helper.
    ``upstream_idle`` (default 4,096) is how many idle upstream connections
    that client keeps for the next runs: every concurrent run holds one for its
    whole stream, and a wave of runs that ends leaves them for the next wave
    rather than closing them (past it, a released connection is closed).

    The other options are ``ServerOptions``' (defaults there), given as
    ``options=`` or one by one as keywords of the same names (a keyword
    overrides ``options``); ``verify=False`` drops the consumer verification
    (chunks are still expanded).

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
    ``id: <epoch>.<generation>:<runId>:<seq>``, a client that disconnects detaches (the
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

    ``authorize=`` runs before the body of every request is read — the run
    POST and the durable routes alike, which are served from the store and so
    never reach the upstream's own checks — and the run is recorded in its
    principal's scope. ``forward_principal_header`` (say ``"x-agui-principal"``;
    None, the default, sends nothing) passes the principal upstream as that
    header: ``{"scope": ..., "subject": ...}`` as ASCII JSON, replacing any
    header of that name the client sent (docs/security.md).
    """

    def __init__(
        self,
        upstream: str,
        *,
        chain: ChainFactory | TransformerChain | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        forward_headers: Iterable[str] = ("authorization",),
        forward_principal_header: str | None = None,
        client: httpx.AsyncClient | None = None,
        upstream_idle: int = DEFAULT_IDLE_CONNECTIONS,
        options: ServerOptions | None = None,
        **given: Unpack[ServerOptionValues],
    ) -> None:
        self.options = opts = server_options(options, given, "Gateway")
        """What the gateway does besides relaying (``ServerOptions``)."""
        self._upstream = Upstream(
            upstream,
            timeout=timeout,
            max_frame_bytes=max_frame_bytes,
            client=client,
            idle=upstream_idle,
        )
        check_streaming(opts)
        self.upstream = self._upstream.url
        self._chain_factory = as_chain_factory(chain)
        self._down = compat_down_picker(opts.compat_down, opts.compat_undeclared)
        self._forward = frozenset(name.lower() for name in forward_headers)
        self._principal_header = principal_header(forward_principal_header)
        self._log = opts.logger or _log
        self._access = Access(opts.authorize, self._log)
        self._streaming = streaming(opts, self._log)
        self._limits = resolve_limits(opts.limits)
        self._first_frames = FirstFrames()
        self.durable: DurableRuns | None = None
        """The event log's side of the gateway (``store=``), or None."""
        if opts.store is not None:
            from ._durable import DurableRuns  # the store's code loads only when used

            self.durable = DurableRuns(opts.store, opts, self._log)
        self._subpaths = None if self.durable is None else Subpaths(self.durable, self.lifespan)
        self._trust = request_trust(opts, self.durable)

    def __repr__(self) -> str:
        # What an operator needs to recognise the gateway in a log or a debugger;
        # never a secret: the URL's password and query values are masked, and of
        # the forwarded headers only the names are known here.
        opts = self.options
        return (
            f"Gateway({masked_url(self.upstream)!r}, chain={chain_repr(self._chain_factory)}, "
            f"verify={opts.verify}, repair={opts.repair}, "
            f"forward_headers={sorted(self._forward)}, limits={self._limits!r}, "
            f"keepalive={opts.keepalive}, send_buffer={opts.send_buffer}, "
            f"send_timeout={opts.send_timeout}, max_body_bytes={opts.max_body_bytes}, "
            f"max_frame_bytes={self._upstream.max_frame})"
        )

    # -- lifecycle --------------------------------------------------------

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
        routes.append(capabilities_route(path, self.durable is not None))
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
            await self._upstream.aclose()

    async def stop_runs(self, within: float | None = None) -> list[str]:
        """Stop the recorded runs relayed now (a shutdown); see ``AgentEndpoint.stop_runs``.

        Each ends with a recorded RUN_ERROR code CANCELLED (its upstream
        request closed); returns the ids of those that did not end within
        ``within`` seconds. Without a store there is nothing to stop here.
        """
        if self.durable is None:
            return []
        return await self.durable.stop_runs(within)

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
        if self._subpaths is not None and self._subpaths.claims(scope):
            await self._subpaths(scope, receive, send)  # served alone or mounted (_subpaths)
            return
        first = FirstFrame(self._first_frames)
        try:
            await self._serve(scope, receive, send, first)
        finally:
            first.sent()

    async def _serve(self, scope: Scope, receive: Receive, send: Send, first: FirstFrame) -> None:
        principal = await self._access.principal(scope, send)  # before the body is read
        if principal is None:
            return
        accepted = await accept_run_input(
            scope,
            receive,
            send,
            app="Gateway",
            max_body=self.options.max_body_bytes,
            log=self._log,
            legacy=self._down is not None,
        )
        if accepted is None:
            return
        try:  # checked before anything goes upstream (and nothing written if refused)
            body, run_input = await self._trust.checked(*accepted, principal.scope)
        except BadRequest as error:
            self._log.info("rejected request: %s %s", error.status, error.message)
            await send_json_error(send, error)
            return

        stats = RunStats("gateway", run_input.run_id, run_input.thread_id)
        try:
            with using_principal(principal):  # for the chain factory
                chain, final = gateway_chain(
                    scope,
                    run_input,
                    stats,
                    factory=self._chain_factory,
                    limits=self._limits,
                    verify=self.options.verify,
                    repair=self.options.repair,
                    down=self._down,
                    log=self._log,
                )
        except Exception as exc:
            self._log.error(
                "cannot build the chain for run %s: %s", stats.run_id, exc, exc_info=exc
            )
            message = f"the gateway could not build its chain: {exc}"
            failure = BadRequest(500, "setup_failed", message)
            await send_json_error(send, failure)
            return
        hooks = request_rewriters(chain.stages)
        client_body = body  # what the client sent, before a stage's request half
        if hooks:  # a stage's request half (say interrupt_bridge) rewrites what goes up
            try:
                body = _rewritten(body, hooks)
            except Exception as exc:
                await send_json_error(send, self._rewrite_failure(exc, stats.run_id))
                return
        headers = hop_headers(scope.get("headers", ()), self._forward)
        if self._principal_header is not None:
            headers[self._principal_header] = principal_value(principal)
        run = _GatewayRun(
            self._upstream, self._log_warning, body, headers, chain, stats, first, final
        )
        run.client_body, run.hooks = client_body, hooks
        if self.durable is not None:
            await self._serve_recorded(
                scope, receive, send, self.durable, run_input, run, principal
            )
            return
        if chain.is_sync:
            response = SSERun(
                open_frames=run.relayed,
                stats=stats,
                on_first_write=first.wrote,
                **self._streaming,
            )
        else:
            response = SSERun(run.applied, stats=stats, **self._streaming)
        await response(scope, receive, send)

    async def _serve_recorded(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        durable: DurableRuns,
        run_input: RunAgentInput,
        run: _GatewayRun,
        principal: Principal,
    ) -> None:
        """Serve the run recorded in the event log; a client that leaves only detaches it."""
        thread_id, run_id = run_input.thread_id, run_input.run_id
        tenant = principal.scope
        recordings = durable.recordings
        if joins_thread(run_input):  # a reloaded page reconnecting: no new run
            await durable.join_thread(scope, receive, send, thread_id, principal)
            return
        asked = run_input.resume
        try:
            rejoin = await recordings.claims.claim(run_input, tenant)
        except BadRequest as error:
            await send_json_error(send, error)
            return
        if rejoin:  # a retry of a run already started: its join stream, not a second run
            await durable.rejoin(scope, receive, send, run_input, principal)
            return
        if run_input.resume is not asked and run_input.resume is not None:
            # interrupts="cancel" answered the pending ones: the upstream hears it too,
            # in its own dialect — the answers are added to what the client sent and
            # the chain's request half (interrupt_bridge) rewrites that again.
            try:
                run.body = _rewritten(with_resume(run.client_body, run_input.resume), run.hooks)
            except Exception as exc:
                await recordings.claims.unclaimed(tenant, run_id)
                await send_json_error(send, self._rewrite_failure(exc, run_id))
                return
        from ..driver import CancelToken

        token = CancelToken()  # tripped by a stop or the grace; the upstream closes with the run
        live_runs = durable.live
        first = run.first

        def on_disconnect() -> None:
            # The relay may wait for its first frame to be written: it never will be.
            first.wrote()
            live = live_runs.get((tenant, run_id))
            if live is not None:
                live.detach()

        def gone() -> bool:
            return response.disconnected

        def open_frames() -> Any:
            if run.chain.is_sync:
                return recordings.recorded_batches(
                    thread_id, run_id, token, run.relayed, run.stats, gone, tenant
                )
            return recordings.recorded_frames(
                thread_id, run_id, token, run.applied, run.stats, gone, tenant
            )

        response = SSERun(
            open_frames=open_frames,
            stats=run.stats,
            on_first_write=first.wrote,
            on_disconnect=on_disconnect,
            detach=True,
            **self._streaming,
        )
        try:
            await response(scope, receive, send)
        finally:
            await recordings.claims.unclaimed(tenant, run_id)

    def _rewrite_failure(self, exc: Exception, run_id: str) -> BadRequest:
        """The answer to a stage's request half that failed (``rewrite_failure``)."""
        return rewrite_failure(
            self._log, exc, run_id, "the gateway could not prepare the request for its upstream"
        )

    def _log_warning(self, warning: DecodeWarning) -> None:
        self._log.debug("upstream event: %s", warning)


def _rewritten(body: bytes, hooks: list[Any]) -> bytes:
    """The request body as the chain's request hooks forward it (unchanged: the same bytes)."""
    if not hooks:
        return body
    request = json.loads(body)
    forwarded = rewrite_request(hooks, request)
    if forwarded is request:
        return body
    return json.dumps(forwarded, ensure_ascii=False, separators=(",", ":")).encode()


class _GatewayRun:
    """One request relayed: the body and headers it goes upstream with, and its chain."""

    __slots__ = (
        "_on_warning",
        "_upstream",
        "body",
        "chain",
        "client_body",
        "first",
        "headers",
        "hooks",
        "stats",
        "told",
    )

    def __init__(
        self,
        upstream: Upstream,
        on_warning: Callable[[DecodeWarning], None],
        body: bytes,
        headers: Mapping[str, str],
        chain: TransformerChain,
        stats: RunStats,
        first: FirstFrame,
        final: Verify | None,
    ) -> None:
        self._upstream = upstream
        self._on_warning = on_warning
        self.body = body
        self.client_body = body  # before the chain's request hooks (the gateway sets both)
        self.hooks: list[Any] = []
        self.headers = headers
        self.chain = chain
        self.stats = stats
        self.first = first
        self.told = ToldViolations(final, origin="upstream event", log="gateway log")

    @asynccontextmanager
    async def applied(self) -> AsyncIterator[AsyncIterator[BaseEvent]]:
        """The upstream's events through ``chain.apply`` (a chain with async stages)."""
        upstream = self._upstream
        async with upstream.request(self.body, self.headers) as response:
            # This path does not slice its work: it stops counting as a run
            # waiting for its first frame once the upstream answered.
            self.first.sent()
            legacy = reads_legacy(self.chain.stages)
            events = upstream.decode(response, legacy, self._on_warning)
            # Draining: what the stages hold goes out before the upstream's failure.
            async with apply_draining(self.chain, events) as output:
                yield self.told.guard(output)

    @asynccontextmanager
    async def relayed(
        self,
        note: Callable[[BaseEvent], None] | None = None,
        recorder: RunRecorder | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """The upstream's bytes relayed as frames, one batch per chunk (a sync chain)."""
        upstream = self._upstream
        async with upstream.request(self.body, self.headers) as response:
            yield relay_frames(
                upstream,
                response,
                self.chain,
                self.stats,
                self.told,
                self.first,
                self._on_warning,
                note,
                recorder,
            )


def gateway_route(path: str, upstream: str, **options: Any) -> Any:
    """A Starlette ``Route`` (POST only) serving ``Gateway(upstream, **options)``.

    The gateway is the route's ``endpoint`` attribute; close it at shutdown
    (``route.endpoint.aclose()`` or its ``lifespan``). With ``store=`` a gateway
    serves more than one route: use ``Gateway(...).routes(path)`` or ``build_app``.
    """
    from starlette.routing import Route

    if records(options):
        raise TypeError(
            "gateway_route() returns the one POST route; with store=... the gateway also "
            "serves runs/{runId}, runs/{runId}/stop and threads/{threadId}: use "
            "Gateway(upstream, store=...).routes(path) (a list of routes) or "
            "build_app(upstream=..., store=...)"
        )

    return Route(path, Gateway(upstream, **options), methods=["POST"])
