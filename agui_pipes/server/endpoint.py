"""Serve an agent over HTTP: POST a RunAgentInput, get the run as SSE.

::

    from agui_pipes.server import AgentEndpoint, agent_route

    app = Starlette(routes=[agent_route("/agent", my_agent, chain=load_chain("chain.yaml"))])
    # FastAPI: app.routes.append(Route("/agent", AgentEndpoint(my_agent), methods=["POST"]))

Per request: the body is validated *before* the response starts (a bad body
is a 422 JSON error, never a stream that opens and dies), a fresh chain is
built from the chain factory, and the agent runs under the run driver with
its own cancel token. The token is tripped when the client disconnects, and
the agent task is cancelled too, so an agent blocked in an await stops
without waiting for its next emit.

A chain of synchronous stages runs inside the driver (so the driver's
producer verification sees the chain's output and its end-of-run guarantees
hold); a chain with async stages or operators runs over the driver's output.

Given a ``producer`` instead (``producer(run_input, principal)`` returning the
run's events: a framework's AG-UI adapter, docs/integrations.md), its own
events are the run: they go through ``ExpandChunks | chain | Verify`` as a
gateway's upstream's do (``_chains.gateway_chain``), straight from the
producer's iterator (``_producer.produced_events``), with no driver, no
encoding and decoding in between and no second server.

Without an async chain, the driver hands each event to a ``FrameSink`` in the
agent's own task — encoded and queued for the writer as it is emitted — rather
than through its event stream: for an agent that awaits once per token, a
hop through the stream and a wake-up of a producer task per token were most
of what serving it cost.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ag_ui.core import BaseEvent, RunAgentInput
from typing_extensions import Unpack

from .._foundation.limits_scope import resolve_limits, using_limits
from .._foundation.principal import Principal, using_principal
from .._foundation.trace_context import using_trace_headers
from .._lazy import public_dir
from .._pipeline.chain import ChainFactory, TransformerChain, apply_draining
from .._pipeline.request_hooks import request_rewriters
from .._pipeline.transformer import Stage
from .._protocol.legacy import reads_legacy
from ..driver import AgentLike, CancelToken, Run, run
from ._access import Access
from ._capabilities import capabilities_route
from ._chains import as_chain_factory, compat_down_picker, gateway_chain, repair_stage
from ._http import (
    BadRequest,
    accept_run_input,
    send_json_error,
)
from ._join import joins_thread
from ._options import (
    ServerOptions,
    ServerOptionValues,
    check_streaming,
    server_options,
    streaming,
)
from ._producer import (
    DEFAULT_PRODUCER_TIMEOUT,
    Producer,
    check_producer,
    check_producer_timeout,
    produced_events,
)
from ._request_rewrite import rewrite_failure, rewritten_input
from ._stats import RunStats, instrument
from ._streaming import FrameSink, Receive, Scope, Send, SSERun
from ._subpaths import Subpaths
from ._trust import request_trust
from ._withheld import ToldViolations

if TYPE_CHECKING:
    from ._durable import DurableRuns, RecordingSink

__all__ = ["AgentEndpoint", "AgentFactory"]
__dir__ = public_dir(__all__)

_log = logging.getLogger("agui_pipes.server")

_DRIVER_BACKLOG = 16
"""Events the driver holds for the response before the agent waits: the response
takes them as fast as its byte-bounded queue has room, so a few suffice, and the
bytes a slow client makes the server hold stay those of ``send_buffer``."""

AgentFactory = Callable[[RunAgentInput], AgentLike]
"""Builds the agent for one request (it sees the validated input)."""


class AgentEndpoint:
    """An ASGI app that runs an agent per POSTed RunAgentInput and streams SSE.

    Give one of ``agent`` (one agent object or async function, shared by all
    requests — it must keep per-run state in its ``ctx`` only),
    ``agent_factory`` (called with the input, per request) or ``producer``
    (``producer(run_input, principal)`` returning the run's events, models or
    dicts: a framework's AG-UI adapter; see the module doc and
    docs/integrations.md). ``producer_timeout`` (seconds, None: no limit;
    default ``DEFAULT_PRODUCER_TIMEOUT``, 60) ends a producer's run with
    RUN_ERROR ``AGENT_TIMEOUT`` when one wait for its next event lasts that
    long. ``chain`` is a
    chain factory (``load_chain(...)`` returns one, so does ``lambda:
    a | b``); a plain ``TransformerChain`` is accepted and ``fresh()``-ed per
    request. ``echo_input=True`` has the run echo its input (see ``run()``);
    a recorded run needs no echo for its history to hold the user's turns: its
    RUN_STARTED carries the input messages the thread did not hold yet.

    The other options are ``ServerOptions``' (defaults there), given as
    ``options=`` or one by one as keywords of the same names (a keyword
    overrides ``options``). ``keepalive`` is the idle time (seconds) before a
    keep-alive comment; ``None`` disables them.

    A slow client holds the agent: ``send_buffer`` bytes of encoded frames
    are queued for it, then the agent is held at its next ``await`` until the
    client reads (the driver's backpressure). A client that reads nothing
    for ``send_timeout`` seconds is treated as disconnected (``None``: wait
    forever).
    ``limits`` bounds the state each run publishes (see ``run(..., limits=)``) and
    is the default of the stages the chain factory builds (None: the limits in
    effect, normally ``DEFAULT_LIMITS``).

    ``repair=True`` runs a fresh ``Repair`` (ids: the request's) on the agent's
    events before the chain, inside the driver, so its verification sees the
    repaired stream; the per-run log line gives the number of fixes (see
    docs/repair.md).

    ``compat_down=True`` serves clients of older protocol versions: each
    request's declared ``protocolVersion`` picks a ``compat`` stage of
    direction ``down`` put at the end of its chain (none for a 1.0 client; an
    undeclared version is served as ``compat_undeclared``). See docs/compat.md.

    ``store=`` records every run in that event log (docs/durable.md).

    ``authorize=`` runs before the body of every request is read (the run
    POST and the durable routes) and names its principal: the agent sees it
    as ``ctx.principal``, the chain factory as ``current_principal()``, and
    the event log keys the run by its scope (docs/security.md).
    """

    def __init__(
        self,
        agent: AgentLike | None = None,
        *,
        agent_factory: AgentFactory | None = None,
        producer: Producer | None = None,
        producer_timeout: float | None = DEFAULT_PRODUCER_TIMEOUT,
        chain: ChainFactory | TransformerChain | None = None,
        echo_input: bool = False,
        options: ServerOptions | None = None,
        **given: Unpack[ServerOptionValues],
    ) -> None:
        if sum(source is not None for source in (agent, agent_factory, producer)) != 1:
            raise TypeError(
                "AgentEndpoint needs exactly one of agent=... (shared by every request), "
                "agent_factory=... (called with the RunAgentInput of each request) or "
                "producer=... (producer(run_input, principal) returning the run's events)"
            )
        if agent_factory is not None and not callable(agent_factory):
            raise TypeError(f"agent_factory must be callable, got {type(agent_factory).__name__}")
        if producer is not None:
            check_producer(producer)
            if echo_input:
                raise TypeError(
                    "echo_input applies to driver agents; a producer makes its own events"
                )
        check_producer_timeout(producer_timeout)
        self.options = opts = server_options(options, given, "AgentEndpoint")
        """What the endpoint does besides running the agent (``ServerOptions``)."""
        check_streaming(opts)
        self._agent = agent
        self._agent_factory = agent_factory
        self._producer = producer
        self._producer_timeout = producer_timeout
        self._chain_factory = as_chain_factory(chain)
        self._down = compat_down_picker(opts.compat_down, opts.compat_undeclared)
        # No need to echo for history="server": a recorded run's RUN_STARTED carries its
        # new input messages anyway (_recorded_input), so the history holds the user's turns.
        self._echo_input = echo_input
        self._log = opts.logger or _log
        self._streaming = streaming(opts, self._log)
        self._limits = resolve_limits(opts.limits)
        self._access = Access(opts.authorize, self._log)
        self.durable: DurableRuns | None = None
        """The event log's side of the endpoint (``store=``), or None."""
        if opts.store is not None:
            from ._durable import DurableRuns  # the store's code loads only when used

            self.durable = DurableRuns(opts.store, opts, self._log)
        self._subpaths = None if self.durable is None else Subpaths(self.durable, self.lifespan)
        self._trust = request_trust(opts, self.durable)
        self._unrecorded: set[CancelToken] = set()
        """The cancel tokens of the runs served now without a store (for ``stop_runs``)."""

    def routes(self, path: str) -> list[Any]:
        """Starlette routes: ``POST path``, and with a store the resume, stop and thread routes.

        The durable routes hang under ``path`` as a folder (``/agent`` gives
        ``/agent/runs/{runId}``, ``/agent/runs/{runId}/stop`` and
        ``/agent/threads/{threadId}``).
        """
        from starlette.routing import Route

        routes: list[Any] = [Route(path, self, methods=["POST"])]
        if self.durable is not None:
            routes.extend(self.durable.routes(path))
        routes.append(capabilities_route(path, self.durable is not None))
        return routes

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Open the event log at startup and close it at shutdown (no-op without a store)."""
        if self.durable is None:
            yield
            return
        async with self.durable.lifespan(app):
            yield

    async def aclose(self) -> None:
        """Close the event log if the endpoint opened it from a URL."""
        if self.durable is not None:
            await self.durable.aclose()

    async def stop_runs(self, within: float | None = None) -> list[str]:
        """Stop the runs served now (a shutdown): each ends with RUN_ERROR code CANCELLED.

        With a store, recorded and bounded by ``within`` (default the
        ``shutdown_timeout`` option): returns the ids of the runs that did
        not end in time (see ``DurableRuns.stop_runs``). Runs without a store
        are cancelled and not waited for.
        """
        from ._durable import SHUTDOWN_REASON

        for token in list(self._unrecorded):
            token.cancel(SHUTDOWN_REASON)
        if self.durable is None:
            return []
        return await self.durable.stop_runs(within)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._subpaths is not None and self._subpaths.claims(scope):
            await self._subpaths(scope, receive, send)  # served alone or mounted (_subpaths)
            return
        principal = await self._access.principal(scope, send)  # before the body is read
        if principal is None:
            return
        accepted = await accept_run_input(
            scope,
            receive,
            send,
            app="AgentEndpoint",
            max_body=self.options.max_body_bytes,
            log=self._log,
            legacy=self._down is not None,
        )
        if accepted is None:
            return
        try:  # tools, tool results and history the server takes (nothing written if not)
            _, run_input = await self._trust.checked(*accepted, principal.scope)
        except BadRequest as error:
            self._log.info("rejected request: %s %s", error.status, error.message)
            await send_json_error(send, error)
            return
        if self._producer is not None:
            await self._serve_produced(scope, receive, send, self._producer, run_input, principal)
            return

        stats = RunStats("agent", run_input.run_id, run_input.thread_id, producer_verdicts=True)
        try:
            with using_principal(principal):  # for the agent factory and the chain factory
                agent, chain = self._set_up(scope, run_input, stats)
        except Exception as exc:
            self._log.error("cannot set up run %s: %s", run_input.run_id, exc, exc_info=exc)
            await send_json_error(
                send,
                BadRequest(500, "setup_failed", f"the server could not set up the run: {exc}"),
            )
            return

        inner, outer = _split(chain, stats)
        token = CancelToken()
        run_options: dict[str, Any] = {
            "verify": self.options.verify,
            "echo_input": self._echo_input,
            "cancel_token": token,
            "backpressure": _DRIVER_BACKLOG,
            "limits": self._limits,
            "principal": principal,
        }
        if inner is not None:
            run_options["transformers"] = inner

        told = ToldViolations(None, origin="event", log="server log")

        def open_applied() -> Any:
            assert outer is not None
            return _applied(run(agent, run_input, **run_options), outer, told)

        def open_sunk(sink: FrameSink) -> Run:
            return Run(agent, run_input, sink=sink, **run_options)

        applied = open_applied if outer is not None else None
        if self.durable is not None:
            await self._serve_recorded(
                scope,
                receive,
                send,
                self.durable,
                run_input,
                stats,
                token,
                chain is None,
                applied,
                open_sunk,
                principal,
            )
            return
        response = SSERun(
            applied,
            open_run=open_sunk if outer is None else None,
            stats=stats,
            count_source=chain is None,
            on_disconnect=token.cancel,
            **self._streaming,
        )
        self._unrecorded.add(token)
        try:
            await response(scope, receive, send)
        finally:
            self._unrecorded.discard(token)

    async def _serve_produced(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        producer: Producer,
        run_input: RunAgentInput,
        principal: Principal,
    ) -> None:
        """Serve the producer's own run: its events through the gateway's chain, encoded."""
        stats = RunStats("producer", run_input.run_id, run_input.thread_id)
        opts = self.options
        try:
            with using_principal(principal):  # for the chain factory
                chain, final = gateway_chain(
                    scope,
                    run_input,
                    stats,
                    factory=self._chain_factory,
                    limits=self._limits,
                    verify=opts.verify,
                    repair=opts.repair,
                    down=self._down,
                    log=self._log,
                )
        except Exception as exc:
            self._log.error("cannot set up run %s: %s", run_input.run_id, exc, exc_info=exc)
            await send_json_error(
                send,
                BadRequest(500, "setup_failed", f"the server could not set up the run: {exc}"),
            )
            return
        # The chain's request half (interrupt_bridge) rewrites what the producer is
        # given, as a gateway's rewrites what goes upstream: checked here, so a
        # refusal is answered before anything is claimed.
        hooks = request_rewriters(chain.stages)
        asked = run_input.resume
        try:
            forwarded = rewritten_input(hooks, run_input)
        except Exception as exc:
            message = "the server could not prepare the request for its agent"
            await send_json_error(send, rewrite_failure(self._log, exc, run_input.run_id, message))
            return
        told = ToldViolations(final, origin="agent event", log="server log")
        legacy = reads_legacy(chain.stages)
        token = CancelToken()
        timeout = self._producer_timeout
        log = self._log

        def given() -> RunAgentInput:
            if run_input.resume is asked:
                return forwarded
            # interrupts="cancel" answered the pending ones at the claim: the
            # producer hears it too, through the request half again (a failure
            # now is the run's RUN_ERROR: the response has started).
            return rewritten_input(hooks, run_input)

        def opener(watch: CancelToken | None) -> Callable[[], Any]:
            # Without a store the token is the only stop (stop_runs); with one the
            # recorder cancels the run's scope itself and records why.
            @asynccontextmanager
            async def opened() -> AsyncIterator[AsyncIterator[BaseEvent]]:
                async with (
                    produced_events(
                        producer,
                        given(),
                        principal,
                        idle_timeout=timeout,
                        legacy=legacy,
                        token=watch,
                        logger=log,
                    ) as events,
                    apply_draining(chain, events) as output,
                ):
                    yield told.guard(output)

            return opened

        if self.durable is not None:
            await self._serve_recorded(
                scope,
                receive,
                send,
                self.durable,
                run_input,
                stats,
                token,
                False,
                opener(None),
                None,
                principal,
            )
            return
        response = SSERun(opener(token), stats=stats, on_disconnect=token.cancel, **self._streaming)
        self._unrecorded.add(token)
        try:
            await response(scope, receive, send)
        finally:
            self._unrecorded.discard(token)

    def _set_up(
        self, scope: Scope, run_input: RunAgentInput, stats: RunStats
    ) -> tuple[AgentLike, Stage | None]:
        """The request's agent and its whole chain: yours, with Repair and compat as asked."""
        if self._agent_factory is not None:
            agent = self._agent_factory(run_input)
        else:
            assert self._agent is not None  # __init__ takes exactly one of the two
            agent = self._agent
        # The request's traceparent parents the spans of a tracing stage.
        with using_limits(self._limits), using_trace_headers(scope.get("headers", ())):
            chain: Stage | None = None if self._chain_factory is None else self._chain_factory()
        if self.options.repair:  # Repair | chain
            repair = repair_stage(run_input, stats)
            chain = TransformerChain([repair] if chain is None else [repair, chain])
        down = [] if self._down is None else self._down(run_input)
        if down:
            chain = TransformerChain([*([chain] if chain is not None else []), *down])
        return agent, chain

    async def _serve_recorded(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        durable: DurableRuns,
        run_input: RunAgentInput,
        stats: RunStats,
        token: CancelToken,
        count_source: bool,
        open_applied: Callable[[], Any] | None,
        open_sunk: Callable[[Any], Run] | None,
        principal: Principal,
    ) -> None:
        """Serve the run recorded in the event log; a client that leaves only detaches it."""
        thread_id, run_id = run_input.thread_id, run_input.run_id
        tenant = principal.scope
        recordings = durable.recordings
        if joins_thread(run_input):  # a reloaded page reconnecting: no new run
            await durable.join_thread(scope, receive, send, thread_id, principal)
            return
        try:
            rejoin = await recordings.claims.claim(run_input, tenant)
        except BadRequest as error:
            await send_json_error(send, error)
            return
        if rejoin:  # a retry of a run already started: its join stream, not a second run
            await durable.rejoin(scope, receive, send, run_input, principal)
            return
        live_runs = durable.live

        def on_disconnect() -> None:
            live = live_runs.get((tenant, run_id))
            if live is not None:
                live.detach()

        def open_recorded_sink(sink: FrameSink) -> Any:
            def opened(recording: RecordingSink) -> Run:
                assert open_sunk is not None  # given whenever open_applied is not
                return open_sunk(recording)

            return recordings.sunk_run(
                sink, thread_id, run_id, token, opened, lambda: response.disconnected, tenant
            )

        def open_recorded_frames() -> Any:
            assert open_applied is not None
            return recordings.recorded_frames(
                thread_id,
                run_id,
                token,
                open_applied,
                stats,
                lambda: response.disconnected,
                tenant,
            )

        response = SSERun(
            open_frames=open_recorded_frames if open_applied is not None else None,
            open_run=open_recorded_sink if open_applied is None else None,
            stats=stats,
            count_source=count_source,
            on_disconnect=on_disconnect,
            detach=True,
            **self._streaming,
        )
        try:
            await response(scope, receive, send)
        finally:
            await recordings.claims.unclaimed(tenant, run_id)


def _split(
    chain: Stage | None, stats: RunStats
) -> tuple[TransformerChain | None, TransformerChain | None]:
    """The instrumented chain as the part run inside the driver and the part run over it.

    A sync chain runs inside (the driver's verification sees its output); an
    async one over the driver's events, except a Repair at its head (with its
    counters), which stays inside, before the verification.
    """
    if chain is None:
        return None, None
    if not isinstance(chain, TransformerChain):
        chain = TransformerChain([chain])  # a factory returning one stage
    chain = instrument(chain, stats)
    if chain.is_sync:
        return chain, None
    if stats.repair is not None:
        return TransformerChain(chain.stages[:3]), TransformerChain(chain.stages[3:])
    return None, chain


@asynccontextmanager
async def _applied(
    events: Run,
    chain: TransformerChain,
    told: ToldViolations,
) -> AsyncIterator[AsyncIterator[BaseEvent]]:
    """An async chain over the driver's events; a violation a stage raises is withheld.

    The driver verifies what the agent produces, not what this chain makes of
    it, and a ``verify`` stage early in the chain may word its message from
    entities a later stage hides: the client gets the rule and position only.
    """
    # Draining: a stage that raises lets the stages after it release what they hold.
    async with events as source, apply_draining(chain, source) as output:
        yield told.guard(output)
