"""The stage ``serve --inspect`` appends to every run's chain: a tap that copies, passing all.

It sees exactly what the client is sent (the chain's output), starts a live run in
the ``RecentRuns`` ring at the first event and seals it at the end of the stream.
A stream the client abandoned never reaches ``finish()``: the server cancels it and
drops its chain, and the tap's finalizer then marks the run ``disconnected``. A run
the ring dropped to make room is let go of, and the rest of its stream not recorded.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ag_ui.core import BaseEvent, EventType

from .. import StreamTransformer
from .._foundation.principal import DEFAULT_SCOPE, current_principal

if TYPE_CHECKING:
    from ._app import RecentRuns
    from ._model import InspectedRun

__all__ = ["SENT_REQUEST", "InspectorTap"]

SENT_REQUEST: ContextVar[dict[str, Any] | None] = ContextVar(
    "agui_pipes_inspector_request", default=None
)
"""The ``RunAgentInput`` the inspector is sending (``POST api/send`` sets it around the
in-process request): the run its tap records is given it as its ``request``."""


class InspectorTap(StreamTransformer):
    """Pass-through; each fresh copy records one stream into ``runs``."""

    def __init__(
        self,
        runs: RecentRuns,
        scope: str = DEFAULT_SCOPE,
        request: dict[str, Any] | None = None,
    ) -> None:
        self._runs = runs
        self._scope = scope
        self._request = request
        self._run: InspectedRun | None = None
        self._started = False
        self._abandoned: weakref.finalize[[], InspectorTap] | None = None

    @property
    def name(self) -> str:
        return "inspect"

    def fresh(self) -> InspectorTap:
        # Built by the server's chain factory for one request, under its principal:
        # the run is recorded as that principal's, and shown to its scope only.
        # A run sent from the inspector's page also carries the request it was sent with.
        return InspectorTap(self._runs, current_principal().scope, SENT_REQUEST.get())

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        run = self._run
        if run is None:
            if self._started:
                return (event,)  # the ring dropped this run: the stream goes on unrecorded
            self._started = True
            run = self._run = self._runs.start(_label(event), self._scope)
            run.request = self._request
            # Called when this tap is collected without finish(): the stream was cancelled.
            self._abandoned = weakref.finalize(self, run.abandon)
        if run.evicted:
            self._let_go()
            return (event,)
        run.add(event)
        return (event,)

    def finish(self) -> Iterable[BaseEvent]:
        run = self._run
        self._let_go()
        if run is not None:
            run.close()
        return ()

    def _let_go(self) -> None:
        if self._abandoned is not None:
            self._abandoned.detach()
            self._abandoned = None
        self._run = None


def _label(event: BaseEvent) -> str:
    if event.type is EventType.RUN_STARTED:
        thread: Any = getattr(event, "thread_id", "?")
        return f"{thread} / {getattr(event, 'run_id', '?')}"
    return f"run starting with {event.type.value}"
