"""Recording a served run in the event log, whatever produces its events.

``RunRecordings`` is what the agent endpoint and the gateway call to serve a
run recorded (``store=``):

* ``claims`` — the run claimed before the response starts (``_run_claims``:
  a retry rejoins, one run per thread, 409 / 404 / 503 as JSON); the
  messages it was POSTed with that the thread does not hold yet, and the
  answers it was sent (its ``resume``, cancellations included), go on its
  RUN_STARTED's ``input`` (``_recorded_input``), so its log holds the user's
  turns and decisions;
* ``recording`` — the run's ``LiveRun`` registered while it is served, with
  its detach-grace watcher and, for processes sharing the store, a heartbeat
  and a poll for a stop sent to another process (timers per run, never work
  per event); the log always ends with a terminal event;
* ``sunk_run`` — an agent run whose events a ``RecordingSink`` records in the
  agent's own task;
* ``recorded_frames`` / ``recorded_batches`` — a source of events (the
  endpoint's async chain, the gateway's apply path) or of byte batches of SSE
  frames (the gateway's relay) recorded, each frame given its id.

A run that ends without a terminal event (it failed, or was stopped) gets its
RUN_ERROR recorded and sent here, so the live stream and the log end alike.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from ag_ui.core import BaseEvent, EventType, RunErrorEvent

from .._foundation.principal import DEFAULT_SCOPE
from ..codecs import encode_json
from ..driver import CancelToken
from ..store import EventLog, RunRecorder, RunStatus, StoreError
from ._failures import log_after_terminal, log_failure, run_error_for
from ._http import BadRequest
from ._live_run import TERMINAL, LiveRun, RecordingSink, status_of
from ._recorded_input import input_recorder, new_messages, resume_wire
from ._run_claims import RunClaims
from ._stats import RunStats
from ._streaming import FrameSink
from ._thread_histories import ThreadHistories

__all__ = ["RecordedFrames", "RunRecordings"]

OpenBatches = Callable[
    [Callable[[BaseEvent], None], RunRecorder],
    AbstractAsyncContextManager[AsyncIterator[bytes]],
]
"""Opens the gateway relay's batches, given what to call with each watched event and the
recorder that frames each event with its id."""


class RunRecordings:
    """The runs a server records in its event log, and the registry of those still live.

    ``store`` gives the opened event log; ``live`` is the registry of this
    process's live runs, by (scope, run id), shared with the routes that
    follow and stop them. Every run is recorded in its principal's scope.
    """

    def __init__(
        self,
        store: Callable[[], Awaitable[EventLog]],
        live: dict[tuple[str, str], LiveRun],
        *,
        detach_grace: float,
        stop_poll: float,
        logger: logging.Logger,
        claims: RunClaims | None = None,
        histories: ThreadHistories | None = None,
    ) -> None:
        self._store = store
        self._histories = histories or ThreadHistories()
        self._live = live
        self.claims = claims or RunClaims(
            store, live, concurrency="reject", stop_wait=10.0, logger=logger
        )
        """The runs claimed before they are served (one per thread, retries rejoin)."""
        self._detach_grace = detach_grace
        self._stop_poll = stop_poll
        self._log = logger
        self.stopping: str | None = None
        """Set by a shutdown: the reason a run registered from then on is stopped at once."""

    @asynccontextmanager
    async def recording(
        self,
        thread_id: str,
        run_id: str,
        token: CancelToken,
        gone: Callable[[], bool] = lambda: False,
        scope: str = DEFAULT_SCOPE,
    ) -> AsyncIterator[LiveRun]:
        """Record one run while it is served; the grace watcher runs alongside.

        Raises ``BadRequest`` (409) for a run id the scope already holds: a
        run id names one run, and its log takes no second writer.
        """
        store = await self._store()
        key = (scope, run_id)
        claimed = self.claims.take(scope, run_id)  # created by the claim, its thread leased
        if not claimed and (key in self._live or await store.run(run_id, scope=scope) is not None):
            raise BadRequest(
                409,
                "run_exists",
                f"run {run_id!r} was already started on this server's event log; "
                "a run id names one run: start a new run with a new runId, or resume this "
                f"one with GET runs/{run_id}",
            )
        recorder = RunRecorder(store, thread_id, run_id, scope=scope)
        recorder.rewrite_first = await self._input_recorder(store, thread_id, run_id, scope)
        live = LiveRun(recorder, token, self._detach_grace)
        try:
            # A thread another scope took since the claim: the store's append
            # refuses it atomically (ThreadTaken), before anything is written.
            async with recorder:
                self._live[key] = live
                if self.stopping is not None:
                    live.stop(self.stopping)
                if gone():  # the client left before the run was registered
                    live.detach()
                live.remote_reader = lambda: store.reader_seen(run_id, scope=scope)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(live.watch_grace, name=f"agui_pipes detach grace {run_id}")
                    tg.start_soon(
                        self._watch_store,
                        store,
                        live,
                        claimed,
                        name=f"agui_pipes run watch {run_id}",
                    )
                    try:
                        yield live
                    finally:
                        tg.cancel_scope.cancel()
                        if live.terminal is None:
                            # Cancelled from outside (the server shutting down): the log
                            # still ends with a terminal event, as the live stream would.
                            with anyio.CancelScope(shield=True):
                                await self._record_end(live)
                await recorder.end(
                    status_of(live.terminal),
                    live.stop_reason
                    if live.terminal is None or status_of(live.terminal) is RunStatus.CANCELLED
                    else None,
                )
        finally:
            # Only once the recorder has stored everything and ended the run: a
            # stop (or a shutdown closing the store) waits for this.
            self._live.pop(key, None)
            if claimed:
                await self._release(store, thread_id, run_id, scope)
            live.done.set()

    async def _input_recorder(
        self, store: EventLog, thread_id: str, run_id: str, scope: str
    ) -> Callable[[bytes], bytes] | None:
        """What puts the run's new input messages and its answers on its RUN_STARTED
        (``_recorded_input``).

        New: an id the thread's history does not hold. When the history
        cannot be read, every input message is recorded (both folds skip an
        id they hold, so the history stays right, only larger). The answers
        are the run's ``resume`` as it was sent on: the client's, with the
        cancellations ``interrupts="cancel"`` added.
        """
        messages, answers = self.claims.claimed_input(scope, run_id)
        fresh: list[dict[str, Any]] = []
        if messages:
            try:
                held = await self._histories.message_ids(store, scope, thread_id)
            except (StoreError, ValueError) as exc:
                self._log.warning(
                    "run %s: cannot tell the new input messages (%s); recording them all",
                    run_id,
                    exc,
                )
                held = set()
            fresh = new_messages(messages, held)
        return input_recorder(thread_id, run_id, fresh, resume_wire(answers))

    async def _release(self, store: EventLog, thread_id: str, run_id: str, scope: str) -> None:
        """Free the thread for its next run (a failing store: the lease expires by itself)."""
        with anyio.CancelScope(shield=True):
            try:
                await store.release_thread(thread_id, run_id, scope=scope)
            except StoreError as exc:
                self._log.warning("run %s: cannot release its thread: %s", run_id, exc)

    def _heartbeat_interval(self, store: EventLog) -> float:
        """A fifth of the owner timeout (3 s at 15 s): four beats may be late or lost.

        At most a third of the thread lease's TTL, which is renewed with the beat.
        """
        timeout = store.owner_timeout
        beat = 5.0 if timeout is None else max(0.05, timeout / 5)
        return min(beat, max(0.05, store.lease_ttl / 3))

    async def _watch_store(self, store: EventLog, live: LiveRun, leased: bool) -> None:
        """Heartbeat the run and poll for a stop sent to another process, while it lives.

        A failing store is logged and retried on the next tick: the run
        itself goes on (its recorder reports the store's failure).
        """
        beat_every = self._heartbeat_interval(store)
        next_beat = time.monotonic()
        failed = False
        scope = live.recorder.scope
        thread_id = live.recorder.thread_id
        while True:
            try:
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + beat_every
                    await store.heartbeat(live.run_id, scope=scope)
                    if leased:
                        await store.renew_thread(thread_id, live.run_id, scope=scope)
                reason = await store.stop_requested(live.run_id, scope=scope)
                failed = False
            except StoreError as exc:
                if not failed:
                    self._log.warning(
                        "run %s: the event log failed a heartbeat: %s", live.run_id, exc
                    )
                failed = True
                reason = None
            if reason is not None:
                live.stop(reason)
                return
            await anyio.sleep(min(self._stop_poll, max(0.0, next_beat - time.monotonic())))

    async def _record_end(self, live: LiveRun) -> None:
        error = RunErrorEvent(
            code="CANCELLED",
            message=live.stop_reason or "the server stopped the run (it is shutting down)",
        )
        await live.recorder.frame(encode_json(error))
        live.note(error)

    @asynccontextmanager
    async def sunk_run(
        self,
        sink: FrameSink,
        thread_id: str,
        run_id: str,
        token: CancelToken,
        open_run: Callable[[RecordingSink], AbstractAsyncContextManager[AsyncIterator[BaseEvent]]],
        gone: Callable[[], bool] = lambda: False,
        scope: str = DEFAULT_SCOPE,
    ) -> AsyncIterator[AsyncIterator[BaseEvent]]:
        """``open_run`` with a ``RecordingSink`` over ``sink``; its end recorded, RUN_ERROR too.

        A failure the sink met (an event that does not encode) and a stop
        (no terminal event) become a RUN_ERROR recorded and sent here, so
        the live stream and the log end the same way.
        """
        async with self.recording(thread_id, run_id, token, gone, scope) as live:
            recording = RecordingSink(sink, live)
            with anyio.CancelScope() as cancel_scope:
                live.scope = cancel_scope
                if live.stop_reason is not None:
                    cancel_scope.cancel()
                async with open_run(recording) as events:
                    yield events
            with anyio.CancelScope(shield=True):
                await recording.flush()
                failure, sink.failure = sink.failure, None
                error = error_after(self._log, live, failure)
                if error is not None:
                    await recording.push(error)

    @asynccontextmanager
    async def recorded_frames(
        self,
        thread_id: str,
        run_id: str,
        token: CancelToken,
        open_events: Callable[[], AbstractAsyncContextManager[AsyncIterator[BaseEvent]]],
        stats: RunStats,
        gone: Callable[[], bool] = lambda: False,
        scope: str = DEFAULT_SCOPE,
    ) -> AsyncIterator[RecordedFrames]:
        """SSE frames (with ids) of the events ``open_events`` gives, each recorded."""
        async with (
            self.recording(thread_id, run_id, token, gone, scope) as live,
            self._stoppable(live, self._frames(live, open_events, stats), stats) as frames,
        ):
            yield frames

    async def _frames(
        self,
        live: LiveRun,
        open_events: Callable[[], AbstractAsyncContextManager[AsyncIterator[BaseEvent]]],
        stats: RunStats,
    ) -> AsyncGenerator[bytes, None]:
        recorder = live.recorder
        failure: Exception | None = None
        try:
            async with open_events() as events:
                async for event in events:
                    if event.type in TERMINAL or event.type is EventType.RUN_STARTED:
                        stats.note_output(event)
                    stats.written += 1
                    frame = await recorder.frame(encode_json(event))
                    live.note(event)
                    yield frame
        except Exception as exc:
            failure = exc
        end = await end_frame(self._log, live, failure, stats)
        if end is not None:
            yield end

    @asynccontextmanager
    async def recorded_batches(
        self,
        thread_id: str,
        run_id: str,
        token: CancelToken,
        open_batches: OpenBatches,
        stats: RunStats,
        gone: Callable[[], bool] = lambda: False,
        scope: str = DEFAULT_SCOPE,
    ) -> AsyncIterator[RecordedFrames]:
        """Batches of SSE frames (the gateway's relay path), each frame recorded and given an id.

        ``open_batches(note, recorder)`` opens the source of batches, which
        records each event with ``recorder`` and frames it with its ``id:``
        line itself (the relay has the events apart before it joins them);
        it calls ``note`` with each RUN_STARTED / RUN_FINISHED / RUN_ERROR it
        puts in a batch (what tells how the run ended).
        """
        async with (
            self.recording(thread_id, run_id, token, gone, scope) as live,
            self._stoppable(live, self._batches(live, open_batches, stats), stats) as batches,
        ):
            yield batches

    async def _batches(
        self,
        live: LiveRun,
        open_batches: OpenBatches,
        stats: RunStats,
    ) -> AsyncGenerator[bytes, None]:
        recorder = live.recorder
        seen: list[BaseEvent] = []
        failure: Exception | None = None
        try:
            async with open_batches(seen.append, recorder) as batches:
                async for batch in batches:
                    # Noted once recorded: a run is only "ended" by a stored terminal.
                    if seen:
                        for event in seen:
                            live.note(event)
                        seen.clear()
                    yield batch
        except Exception as exc:
            failure = exc
        end = await end_frame(self._log, live, failure, stats)
        if end is not None:
            yield end

    @asynccontextmanager
    async def _stoppable(
        self, live: LiveRun, frames: AsyncGenerator[bytes, None], stats: RunStats
    ) -> AsyncIterator[RecordedFrames]:
        """``frames`` read under the run's scope, which a stop cancels; its end as a trailer.

        The scope encloses whoever reads the frames, not only the generator:
        a stop lands wherever the reader waits — on the source inside the
        generator, or on a full frame queue outside it (a stalled client) —
        and unwinds through this scope in order. The RUN_ERROR that ends a
        stopped run is recorded here and handed to the reader as the
        frames' ``trailer``, to send after the last frame.
        """
        recorded = RecordedFrames(frames)
        with anyio.CancelScope() as run_scope:
            live.scope = run_scope
            async with _closing(frames):
                yield recorded
        if run_scope.cancelled_caught:
            recorded.trailer = await end_frame(self._log, live, None, stats)


class RecordedFrames:
    """A recorded run's frames, and the frame to send after them when a stop ended the run.

    Iterating gives the frames' generator itself (no wrapper per frame).
    """

    __slots__ = ("_frames", "trailer")

    def __init__(self, frames: AsyncGenerator[bytes, None]) -> None:
        self._frames = frames
        self.trailer: bytes | None = None
        """The stopped run's recorded RUN_ERROR frame, once the frames' reader was unwound."""

    def __aiter__(self) -> AsyncGenerator[bytes, None]:
        return self._frames


def error_after(
    log: logging.Logger, live: LiveRun, failure: Exception | None
) -> RunErrorEvent | None:
    """The RUN_ERROR that ends a run which ended without a terminal event, if any."""
    if live.terminal is not None:
        if failure is not None:
            log_after_terminal(log, live.run_id, failure)
        return None
    if failure is not None:
        log_failure(log, live.run_id, failure)
        return run_error_for(failure)
    reason = live.stop_reason or "the run was cancelled"
    return RunErrorEvent(code="CANCELLED", message=reason)


async def end_frame(
    log: logging.Logger, live: LiveRun, failure: Exception | None, stats: RunStats
) -> bytes | None:
    """The recorded frame of the RUN_ERROR that ends a run of frames or batches, if any."""
    error = error_after(log, live, failure)
    if error is None:
        return None
    stats.note_failure(error)
    stats.written += 1
    with anyio.CancelScope(shield=True):
        frame = await live.recorder.frame(encode_json(error))
    live.note(error)
    return frame


@asynccontextmanager
async def _closing(
    frames: AsyncGenerator[bytes, None],
) -> AsyncIterator[AsyncGenerator[bytes, None]]:
    """``frames``, closed on the way out, cancelled or not.

    The generator's source enters cancel scopes and task groups that span its
    yields (the producer's run scope, the chain's). A cancellation that
    reaches the reader outside the generator (waiting on a full frame queue)
    is thrown into it at its ``yield``, so those unwind as from any
    cancellation — a task group would wrap ``aclose()``'s ``GeneratorExit``
    in a group — and no scope is entered here: theirs must exit on top of the
    task's stack. What must finish while cancelled shields itself.
    """
    try:
        yield frames
    except anyio.get_cancelled_exc_class() as exc:
        await frames.athrow(exc)  # raises it again, once the generator unwound
        await frames.aclose()  # it had ended, or it yielded once more: done with it
        raise
    finally:
        await frames.aclose()
