"""Durable mock runs: SSE ids, resume and join, from an in-memory event log.

With ``durable=True`` the mock serves its runs the way a durable endpoint
does (docs/durable.md), so a frontend's reconnect logic can be tested
against it: each run is produced in the background into a
``MemoryEventLog``, every frame carries ``id: <epoch>.<generation>:<runId>:<seq>``
(``store.format_event_id``), and ``GET {path}runs/{runId}`` with
``Last-Event-ID`` (or ``?after=``) serves the rest of the run — stored
events, then the live tail. A connection the mock cuts (``drop-after``) or
the client drops does not stop the run; a POST naming a ``runId`` the mock
already runs joins it from its first event.

The event-level faults (duplicate, reorder, break) are part of the run, so
a resumed stream shows them too; the frame- and HTTP-level ones belong to
the request that asked for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio
from ag_ui.core import BaseEvent, EventType, RunAgentInput
from anyio.abc import TaskGroup

from ...codecs import encode_json
from ...store import MemoryEventLog, RunStatus, format_event_id, sse_frame

__all__ = ["EventSource", "FrameSource", "MockRuns"]

EventSource = Callable[[], AbstractAsyncContextManager[AsyncIterator[BaseEvent]]]
"""Opens a run's events for the duration of an ``async with``."""
FrameSource = Callable[[], AbstractAsyncContextManager[AsyncIterator[bytes]]]
"""Opens a run's SSE frames (one event each) for the duration of an ``async with``."""


class MockRuns:
    """The mock's runs, produced in the background into an in-memory event log."""

    def __init__(self) -> None:
        self.log = MemoryEventLog()
        self._group: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The app's lifetime: the log open, and a task group for the runs."""
        async with self.log, anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def start(self, request: RunAgentInput, events: EventSource) -> None:
        """Start producing the run of ``request`` unless it exists (a POST joins it then)."""
        if self._group is None:
            raise RuntimeError(
                "durable mock runs need the app's lifespan (serve mock_app(...)'s app, "
                "whose lifespan starts them)"
            )
        run_id = request.run_id
        if await self.log.run(run_id) is not None:
            return
        await self.log.append(request.thread_id, run_id, [])  # followers find it at once
        self._group.start_soon(self._produce, request.thread_id, run_id, events)

    async def _produce(self, thread_id: str, run_id: str, events: EventSource) -> None:
        status = RunStatus.CANCELLED
        try:
            async with events() as stream:
                async for event in stream:
                    await self.log.append(thread_id, run_id, [encode_json(event)])
                    if event.type == EventType.RUN_FINISHED:
                        status = RunStatus.FINISHED
                    elif event.type == EventType.RUN_ERROR:
                        status = RunStatus.ERROR
        finally:
            with anyio.CancelScope(shield=True):
                await self.log.end_run(run_id, status)

    async def resume_after(self, run_id: str, last_event_id: str | None) -> int:
        """Where a client resuming from ``last_event_id`` continues (raises ``StoreError``)."""
        return await self.log.resume_after(run_id, last_event_id)

    def frames(self, run_id: str, after: int = 0) -> FrameSource:
        """The run's frames after entry ``after``, each with its SSE id, to its end."""

        @asynccontextmanager
        async def opened() -> AsyncIterator[AsyncIterator[bytes]]:
            yield self._followed(run_id, after)

        return opened

    async def _followed(self, run_id: str, after: int) -> AsyncIterator[bytes]:
        epoch = self.log.epoch
        record = await self.log.run(run_id)
        generation = "" if record is None else record.generation
        async for seq, payload in self.log.follow(run_id, after):
            yield sse_frame(payload, format_event_id(epoch, run_id, seq, generation))
