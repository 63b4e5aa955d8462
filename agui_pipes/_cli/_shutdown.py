"""How ``agui-pipes serve`` shuts down on SIGINT / SIGTERM: stop the runs, drain, close.

uvicorn's own graceful shutdown first waits for the open connections, and
only then runs the app's lifespan end; a run's stream stays open until the
run ends, so a paced run held the shutdown until it finished, and uvicorn's
answer to a second Ctrl-C (cancel every request task, skip the lifespan)
printed their tracebacks and closed the event log under runs still writing.
``GracefulServer`` puts the steps in the order durable runs need, all within
``timeout`` seconds of the first signal:

1. stop accepting connections and close the idle ones;
2. stop the live runs (``stop_runs``, the stop route's path): each ends with
   a recorded RUN_ERROR code CANCELLED, sent to its client — they get up to
   ``RUNS_SHARE`` of the timeout;
3. let the connections finish their responses, up to ``DRAIN_SHARE`` of it,
   then close those still open (a client that reads nothing, a gateway run
   without a store) — quietly, as a client's own disconnect;
4. uvicorn's shutdown: the lifespan's end closes the event log.

A run that does not end in step 2 (its agent ignores cancellation), or a
request still running after step 3, is abandoned: the log names it, the
event log is left open (never closed under a writer) and the process exits
at once with ``EXIT_ABANDONED``. A second signal exits at once with 128 +
its number (130 for Ctrl-C), closing nothing. A watchdog thread exits with
``EXIT_ABANDONED`` if the whole shutdown has not finished within the timeout.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from types import FrameType

import uvicorn

__all__ = [
    "DRAIN_SHARE",
    "EXIT_ABANDONED",
    "RUNS_SHARE",
    "TASKS_SHARE",
    "GracefulServer",
    "StopRuns",
]

StopRuns = Callable[[float], Awaitable[list[str]]]
"""Stops the server's live runs, waiting at most the given seconds; the ids left running."""

EXIT_ABANDONED = 3
"""The exit status of a shutdown that abandoned a run or a request (it did not end in time)."""

RUNS_SHARE = 0.6
"""The part of the shutdown timeout the stopped runs get to record their end."""

DRAIN_SHARE = 0.8
"""The part of the shutdown timeout by which the open connections must have finished."""

TASKS_SHARE = 0.9
"""The part of it by which the requests of the closed connections must have ended."""

_POLL = 0.05
"""Seconds between two looks at the open connections while they drain."""

_log = logging.getLogger("agui_pipes._cli.serve")


class GracefulServer(uvicorn.Server):
    """A ``uvicorn.Server`` that stops the runs before it drains (module doc)."""

    def __init__(self, config: uvicorn.Config, stop_runs: StopRuns | None, timeout: float) -> None:
        super().__init__(config)
        self._stop_runs = stop_runs
        self._timeout = timeout
        self._deadline: float | None = None
        self._watchdog: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Not uvicorn's: its signal is not raised again after the shutdown (so SIGTERM,
        # too, ends with the documented status), and a second signal of either kind
        # exits now rather than cancelling every request task under the event log.
        name = signal.Signals(sig).name
        if self._deadline is not None:
            _exit_now(
                128 + sig,
                f"{name} during the shutdown: exiting at once; runs still live are left "
                "without an end "
                "(a follower finds them lost once their heartbeat is old)",
            )
        self._deadline = time.monotonic() + self._timeout
        self._watchdog = threading.Timer(self._timeout, self._overdue)
        self._watchdog.daemon = True
        self._watchdog.start()
        _log.info(
            "%s: stopping the live runs, then shutting down (within %g s; a second signal "
            "exits at once)",
            name,
            self._timeout,
        )
        self.should_exit = True

    def _overdue(self) -> None:
        _exit_now(EXIT_ABANDONED, f"the shutdown did not finish within {self._timeout:g} s")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        start = time.monotonic()
        deadline = self._deadline if self._deadline is not None else start + self._timeout
        for server in self.servers:  # no new connections: no new runs
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()  # idle ones close now, busy ones after their response
        abandoned: list[str] = []
        if self._stop_runs is not None:
            budget = deadline - self._timeout * (1 - RUNS_SHARE) - time.monotonic()
            abandoned = await self._stop_runs(max(0.0, budget))
        drain_by = deadline - self._timeout * (1 - DRAIN_SHARE)
        # uvicorn's own state, which has no event to wait on (its shutdown polls it too).
        while self.server_state.connections and time.monotonic() < drain_by:  # noqa: ASYNC110
            await asyncio.sleep(_POLL)
        cut = _close_connections(self.server_state.connections)
        if cut:
            _log.info("closed %d connection(s) still open after %.1f s", cut, drain_by - start)
        tasks_by = deadline - self._timeout * (1 - TASKS_SHARE)
        while self.server_state.tasks and time.monotonic() < tasks_by:  # noqa: ASYNC110
            await asyncio.sleep(_POLL)
        if abandoned or self.server_state.tasks:
            left = ", ".join(abandoned) or f"{len(self.server_state.tasks)} request(s)"
            _exit_now(
                EXIT_ABANDONED,
                f"abandoned at shutdown: {left} (did not end when cancelled); "
                "the event log is left open",
            )
        # Nothing is left to wait for; the watchdog bounds the lifespan's end.
        self.config.timeout_graceful_shutdown = max(1, math.ceil(deadline - time.monotonic()))
        await super().shutdown(sockets)

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            super().run(sockets)
        finally:  # the event loop and its tasks are gone: the watchdog's work is done
            if self._watchdog is not None:
                self._watchdog.cancel()


def _close_connections(connections: Iterable[object]) -> int:
    """Close the connections' transports, as a client going away would; how many."""
    closed = 0
    for connection in list(connections):
        transport = getattr(connection, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.close()
            closed += 1
    return closed


def _exit_now(status: int, message: str) -> None:
    """Log ``message`` and end the process at once: no cleanup runs (nothing is closed)."""
    _log.warning("%s (exit %d)", message, status)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(status)
