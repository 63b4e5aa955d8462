"""``RunRecorder``: a server's writer of one run into the event log, off the live path.

Why a separate writer: the live stream must not wait for the store. Each
``record`` only numbers the event and queues its bytes (the seq is known at
once, so the live frame carries its SSE id before the event is stored); a
background task appends what is queued in one batch per store round trip.
It lingers ``linger`` seconds (5 ms) after the first queued event so a
burst becomes one batch, and a slow store gets bigger batches rather than
more round trips.

Bounded, never silent: the queue holds at most ``max_events`` events and
``max_bytes`` bytes. When it is full, ``record`` waits for room up to
``stall_timeout`` seconds (the store is slow; the live stream pauses as it
would for a slow client). If there is still no room, or any append fails,
the recorder logs once (logger ``agui_pipes.store``), marks the run broken
in the store, and drops every later event of the run: the live client
keeps its stream, and a client resuming the run gets :class:`RunBroken`,
never a stream with a hole.
"""

from __future__ import annotations

import logging
from types import TracebackType

import anyio

from .._foundation.framing import SSE_ID
from ._errors import StoreUnavailable, UnknownRun
from ._ids import format_event_id
from ._recorder_queue import RecorderQueue
from ._records import RunStatus

__all__ = ["RunRecorder"]

_log = logging.getLogger("agui_pipes.store")


class RunRecorder(RecorderQueue):
    """Writes one run's events into an :class:`EventLog` in batches, in the background.

    ::

        async with RunRecorder(store, thread_id, run_id) as recorder:
            for data in frames:                      # each event's wire JSON
                seq = await recorder.record(data)    # None once the run is broken
                ...send `id: {recorder.event_id(seq)}` with the frame...
            await recorder.end(RunStatus.FINISHED)

    Leaving the block without ``end`` ends the run as ``cancelled`` when
    the block was cancelled, ``error`` when it raised, ``finished``
    otherwise. Ending waits up to ``close_timeout`` seconds for the queued
    events to be stored (shielded from cancellation, so a cancelled run is
    still recorded whole); if they cannot be, the run is marked broken.
    """

    # -- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> RunRecorder:
        """Create the run in the store (so a resume right away finds it), start flushing.

        Errors creating the run (the store is down, the run id was used)
        propagate: the server decides whether to serve the run unrecorded.
        """
        format_event_id(self.store.epoch, self.run_id, 0)  # refuses ids SSE cannot carry
        await self.store.append(self.thread_id, self.run_id, [], scope=self.scope)
        record = await self.store.run(self.run_id, scope=self.scope)
        if record is None:
            raise UnknownRun(self.run_id, f"run {self.run_id!r} was deleted as it was created")
        self._stored = record.last_seq
        self.next_seq = record.last_seq + 1
        self.generation = record.generation
        self._id_prefix = SSE_ID + self.event_id(0)[:-1].encode()  # the id up to its seq
        tasks = anyio.create_task_group()
        await tasks.__aenter__()
        self._tasks = tasks
        tasks.start_soon(self._flush_loop)
        self._recording = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if not self._ended:
            if exc_type is None:
                status = RunStatus.FINISHED
            elif issubclass(exc_type, anyio.get_cancelled_exc_class()):
                status = RunStatus.CANCELLED
            else:
                status = RunStatus.ERROR
            await self.end(status, None if exc is None else f"{type(exc).__name__}: {exc}")
        tasks, self._tasks = self._tasks, None
        if tasks is not None:
            # The block is done: a flush stuck in a hung store must not hold it open.
            self._flush_scope.cancel()
            # The block's own exception is not handed to the task group: it
            # propagates as itself, not wrapped in an ExceptionGroup.
            await tasks.__aexit__(None, None, None)
        return None

    async def end(self, status: RunStatus = RunStatus.FINISHED, reason: str | None = None) -> None:
        """Store what is queued, then mark the run ended with ``status``. Once only."""
        if self._ended:
            return
        self._ended = True
        self._recording = False
        self._stop_lingering()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(self.close_timeout) as scope:
                while self._queue and self.broken is None and not self._writer_gone:
                    flushed = self._flushed = anyio.Event()
                    self._poke()
                    await flushed.wait()
            if self._queue and self.broken is None and self._writer_gone:
                await self._break(
                    f"its writer was cancelled before the store took the run's last "
                    f"{len(self._queue)} events (the event loop is closing)"
                )
            elif scope.cancelled_caught and self.broken is None:
                await self._break(
                    f"the store did not take the run's last {len(self._queue)} events "
                    f"within {self.close_timeout} s"
                )
            self._closing = True
            self._poke()
            if self.broken is None:
                try:
                    with anyio.fail_after(self.close_timeout):
                        await self.store.end_run(self.run_id, status, reason, scope=self.scope)
                except Exception as exc:
                    _log.error(
                        "event log: could not mark run %r ended: %s",
                        self.run_id,
                        exc,
                        exc_info=_traceback(exc),
                    )

    async def _flush_loop(self) -> None:
        # Shielded: when the run is cancelled, its queued events must still
        # be stored (end() waits for them); __aexit__ cancels this scope
        # itself once end() is done, so a hung store cannot hold the run open.
        try:
            with self._flush_scope:
                await self._flush()
        finally:
            # The shield holds against anyio's cancellation only: an event loop
            # that closes with the run still served (an ASGI server without a
            # lifespan) cancels every task, this one too. Nothing stores the
            # queue after that, so end() and record() must not wait for it.
            self._writer_gone = True
            for waiter in (self._flushed, self._room):
                if waiter is not None:
                    waiter.set()

    async def _flush(self) -> None:
        while True:
            while not self._queue:
                flushed = self._flushed
                if flushed is not None:
                    self._flushed = None
                    flushed.set()
                if self._closing or self.broken is not None:
                    return
                wake = self._wake = anyio.Event()
                await wake.wait()
            queue = self._queue
            if self.linger and len(queue) < self.max_batch and not self._ended:
                # Let a burst gather into one batch: one store round trip
                # for many events. end() and a full queue cut it short.
                with anyio.CancelScope() as self._lingering:
                    await anyio.sleep(self.linger)
                self._lingering = None
            count = min(len(queue), self.max_batch)
            batch = queue[:count]
            first = self._stored + 1
            try:
                seqs = await self.store.append(self.thread_id, self.run_id, batch, scope=self.scope)
            except Exception as exc:
                await self._break(f"an append failed: {type(exc).__name__}: {exc}", exc)
                return
            if not seqs or seqs[0] != first or seqs[-1] != first + count - 1:
                await self._break(
                    f"the store numbered events {seqs[:1]}..{seqs[-1:]}, expected "
                    f"{first}..{first + count - 1} (another writer on the same run?)"
                )
                return
            self._stored = seqs[-1]
            self._queued_bytes -= sum(map(len, batch))
            del queue[:count]
            room = self._room
            if room is not None:
                self._room = None
                room.set()

    async def _break(self, reason: str, exc: BaseException | None = None) -> None:
        """Stop recording the run: log once, mark it broken, drop what is queued."""
        if self.broken is not None:
            return
        self.broken = reason
        self._recording = False
        self._queue.clear()
        self._queued_bytes = 0
        for waiter in (self._room, self._flushed, self._wake):
            if waiter is not None:
                waiter.set()
        _log.error(
            "event log: run %r is no longer recorded and cannot be resumed: %s; "
            "its live stream goes on",
            self.run_id,
            reason,
            exc_info=_traceback(exc),
        )
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.close_timeout):
            try:
                await self.store.mark_broken(self.run_id, reason, scope=self.scope)
            except Exception as mark_exc:
                _log.error(
                    "event log: could not mark run %r broken either (%s); a resume may find "
                    "its record live and wait",
                    self.run_id,
                    mark_exc,
                )


def _traceback(exc: BaseException | None) -> BaseException | None:
    """The traceback worth logging: none for a store that is unavailable (an operational
    fault the store logged, with its reason in the message), the error's otherwise."""
    return None if isinstance(exc, StoreUnavailable) else exc
