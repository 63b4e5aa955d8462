"""Durable runs over HTTP: what the agent endpoint and the gateway add with an event log.

With ``store=``, a server records every run it serves, a client that
disconnects only detaches its run, and the server serves the resume, stop and
thread routes. ``DurableRuns`` is that side of a server, kept apart from where
the events come from; it owns the event log's lifetime and the registry of the
runs live in this process, and hands the rest to one part per job:

* ``_live_run`` — ``LiveRun`` (one served run: recorder, cancel token and
  scope, detach grace) and ``RecordingSink`` (recording in the agent's task);
* ``_recording`` — ``RunRecordings``: a served run recorded, whatever
  produces its events (``durable.recordings``);
* ``_thread_histories`` — ``ThreadHistories``: each thread's history kept
  folded, extended by the runs that ended since and paged
  (``durable.histories``);
* ``_durable_routes`` — ``DurableRoutes``: ``GET runs/{runId}`` (resume with
  ``Last-Event-ID`` or ``?after=``), ``POST runs/{runId}/stop``,
  ``GET threads`` and ``GET threads/{threadId}`` (``durable.routes(path)``),
  each authorized by the server's ``authorize=`` and served in the
  principal's scope.

Processes sharing the store see each other through its marks (see
docs/durable.md, "Several processes"): a resume reader on another process
refreshes ``touch_reader`` so the owner's grace check holds the run; a stop
sent to another process is a ``request_stop`` the owner polls for; and the
owner heartbeats its live runs so followers elsewhere learn when it died.
These are timers per run, never work per event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from ..store import EventLog, open_store
from ._access import Access
from ._durable_routes import DurableRoutes
from ._live_run import LiveRun, RecordingSink
from ._options import DEFAULT_DETACH_GRACE, ServerOptions
from ._recording import RunRecordings
from ._run_claims import RunClaims
from ._thread_histories import ThreadHistories

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput
    from starlette.routing import Route

    from .._foundation.principal import Principal
    from ._streaming import Receive, Scope, Send

__all__ = [
    "DEFAULT_DETACH_GRACE",
    "DEFAULT_STOP_POLL",
    "DurableRuns",
    "LiveRun",
    "RecordingSink",
]

_log = logging.getLogger("agui_pipes.server")

DEFAULT_STOP_POLL = 1.0
"""Seconds between two checks, by the process running a run, for a stop sent elsewhere."""

DEFAULT_STOP_WAIT = 10.0
"""Seconds a stop waits for the run to end before it answers anyway."""

SHUTDOWN_REASON = "the server stopped the run (it is shutting down)"
"""The message of the RUN_ERROR CANCELLED recorded for a run stopped by a shutdown."""


class DurableRuns:
    """An event log shared by a server's runs: recording, detach grace, resume routes.

    ``store`` is an ``EventLog`` (the caller opens and closes it; it is
    opened here if it is not yet) or a store URL (opened once, on first use
    or by ``lifespan``, and closed by ``aclose``). ``options`` are the
    server's: its ``detach_grace`` and ``owner_timeout``, and the streaming
    options of the resume and thread responses.
    """

    def __init__(
        self,
        store: EventLog | str,
        options: ServerOptions,
        logger: logging.Logger | None = None,
        *,
        stop_wait: float = DEFAULT_STOP_WAIT,
        stop_poll: float = DEFAULT_STOP_POLL,
    ) -> None:
        detach_grace, owner_timeout = options.detach_grace, options.owner_timeout
        if not (isinstance(detach_grace, int | float) and detach_grace >= 0):
            raise ValueError(f"detach_grace must be a number of seconds >= 0, got {detach_grace!r}")
        if owner_timeout is not None and not (
            isinstance(owner_timeout, int | float) and owner_timeout > 0
        ):
            raise ValueError(
                f"owner_timeout must be a positive number of seconds or None, got {owner_timeout!r}"
            )
        shutdown_timeout = options.shutdown_timeout
        if not (isinstance(shutdown_timeout, int | float) and shutdown_timeout > 0):
            raise ValueError(
                f"shutdown_timeout must be a positive number of seconds, got {shutdown_timeout!r}"
            )
        if not (isinstance(stop_poll, int | float) and stop_poll > 0):
            raise ValueError(f"stop_poll must be a positive number of seconds, got {stop_poll!r}")
        if isinstance(store, str):
            self._store = open_store(store)  # a bad URL fails here, at configuration
            self._owned = True
        elif isinstance(store, EventLog):
            self._store = store
            self._owned = False
        else:
            raise TypeError(
                f"store must be an agui_pipes.store.EventLog or a store URL such as "
                f"'sqlite:///runs.db', got {type(store).__name__}"
            )
        self.options = options
        self.detach_grace = float(detach_grace)
        if owner_timeout is not None:
            self._store.owner_timeout = float(owner_timeout)
        self.stop_poll = float(stop_poll)
        self.stop_wait = stop_wait
        self.shutdown_timeout = float(shutdown_timeout)
        self.log = logger or _log
        self._opened = False
        self._lock: anyio.Lock | None = None
        self.live: dict[tuple[str, str], LiveRun] = {}
        """The runs this process is serving now, by (scope, run id)."""
        self.access = Access(options.authorize, self.log)
        """Who may read, stop and list the runs (the server's ``authorize=``)."""
        self.histories = ThreadHistories()
        """The threads' folded histories, extended as runs end (``GET threads/{threadId}``)."""
        self.recordings = RunRecordings(
            self.store,
            self.live,
            histories=self.histories,
            detach_grace=self.detach_grace,
            stop_poll=self.stop_poll,
            logger=self.log,
            claims=RunClaims(
                self.store,
                self.live,
                concurrency=options.concurrency,
                interrupts=options.interrupts,
                stop_wait=stop_wait,
                logger=self.log,
            ),
        )
        """Where a server's run is recorded while it is served."""

    # -- the store's lifetime -----------------------------------------------------

    async def store(self) -> EventLog:
        """The opened store (opened on the first call, once)."""
        if self._opened:
            return self._store
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if not self._opened:
                await self._store.open()
                self._opened = True
        return self._store

    async def stop_runs(self, within: float | None = None) -> list[str]:
        """Stop every run live here now and wait, at most ``within`` seconds, for their ends.

        Each run ends as ``POST runs/{runId}/stop`` ends it: a RUN_ERROR code
        CANCELLED recorded and sent to whoever follows it; a run registered
        from now on is stopped as it starts (until ``lifespan`` starts again).
        Returns the ids of the runs that did not end in time (an agent that
        ignores cancellation), each named in the log: those are abandoned,
        still writing to the store.
        """
        with anyio.CancelScope(shield=True):
            self.recordings.stopping = SHUTDOWN_REASON
            for run in list(self.live.values()):
                run.stop(SHUTDOWN_REASON)
            wait = self.shutdown_timeout if within is None else max(0.0, within)
            with anyio.move_on_after(wait):
                while pending := [run for run in self.live.values() if not run.done.is_set()]:
                    await pending[0].done.wait()
            abandoned = [run.run_id for run in self.live.values() if not run.done.is_set()]
        for run_id in abandoned:
            self.log.warning(
                "run %s did not end within %.1f s of being stopped for the shutdown (its agent "
                "does not respond to cancellation): abandoned, its log has no end",
                run_id,
                wait,
            )
        return abandoned

    async def aclose(self) -> None:
        """Stop the runs still live here, then close the store if it was given as a URL.

        The runs first (``stop_runs``, bounded by ``shutdown_timeout``): each
        ends with a recorded RUN_ERROR code CANCELLED before the store goes
        away. The store is not closed under a run that is still writing (one
        abandoned by ``stop_runs``): it is left to the process's exit.
        """
        abandoned = await self.stop_runs()
        with anyio.CancelScope(shield=True):
            if abandoned:
                self.log.warning(
                    "the event log is left open: %d abandoned run(s) may still write to it",
                    len(abandoned),
                )
            elif self._owned and self._opened:
                self._opened = False
                await self._store.aclose()

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Open the store at startup, close it at shutdown (a Starlette lifespan)."""
        self.recordings.stopping = None  # started again after a shutdown: runs may start
        await self.store()
        try:
            yield
        finally:
            await self.aclose()

    # -- recording a served run ---------------------------------------------------

    def routes(self, base: str) -> list[Route]:
        """Routes at ``{base}runs/{runId}``, ``.../stop`` and ``{base}threads/{threadId}``."""
        return DurableRoutes(self).routes(base)

    async def rejoin(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        run_input: RunAgentInput,
        principal: Principal,
    ) -> None:
        """Answer a retried run POST with the run's join stream (``GET runs/{id}?join=1``)."""
        await DurableRoutes(self).rejoin(
            scope, receive, send, run_input.run_id, principal, run_input
        )

    async def join_thread(
        self, scope: Scope, receive: Receive, send: Send, thread_id: str, principal: Principal
    ) -> None:
        """Answer a run POST that asks to join its thread (``GET threads/{id}?join=1``)."""
        await DurableRoutes(self).thread(scope, receive, send, thread_id, principal, join=True)
