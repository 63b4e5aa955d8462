"""Durable runs over HTTP: recording a served run, detaching it, and the resume routes.

What the agent endpoint and the gateway add when they have an event log
(``store=``), kept apart from where the events come from:

* ``DurableRuns.recording`` — a served run's ``LiveRun``: its
  ``RunRecorder``, its cancel token and scope, and the *detach grace*: a
  client that goes away no longer cancels the run; the run goes on, and is
  cancelled only when nobody (neither the client nor a resume reader) has
  been attached for ``detach_grace`` seconds. Why: a page reload or a flaky
  network must not lose the answer being produced (the lesson of the
  Vercel AI SDK's resumable streams: disconnect is not stop).
* ``RecordingSink`` — the endpoint's ``FrameSink`` path with recording: each
  event is encoded once, numbered and queued for the store in the agent's
  own task, and its frame carries ``id: <epoch>:<runId>:<seq>``, the same
  bytes a replay from the log gives.
* ``recorded_frames`` / ``recorded_batches`` — a source of events (the
  endpoint's async chain, the gateway's apply path) or of byte batches of
  SSE frames (the gateway's relay) recorded, each frame given its id.
* the routes: ``GET runs/{runId}`` (resume with ``Last-Event-ID`` or
  ``?after=``), ``POST runs/{runId}/stop``, ``GET threads/{threadId}``.

Processes sharing the store see each other through its marks (see
docs/durable.md, "Several processes"): a resume reader on another process
refreshes ``touch_reader`` so the owner's grace check holds the run; a stop
sent to another process is a ``request_stop`` the owner polls for; and the
owner heartbeats its live runs so followers elsewhere learn when it died.
These are timers per run, never work per event.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import anyio
from ag_ui.core import BaseEvent, EventType, RunErrorEvent

from .._protocol.history import thread_history
from ..codecs import EncodeError, encode_json, encode_sse
from ..driver import CancelToken
from ..store import (
    EventLog,
    RunBroken,
    RunLost,
    RunRecorder,
    RunStatus,
    StoreError,
    UnknownRun,
    format_event_id,
    open_store,
    sse_frame,
)
from ._frames import DEFAULT_SEND_BUFFER
from ._http import BadRequest, send_json_error
from ._stats import RunStats
from ._streaming import (
    DEFAULT_SEND_TIMEOUT,
    FrameSink,
    Receive,
    RunFailure,
    Scope,
    Send,
    SSERun,
    run_error_for,
)

if TYPE_CHECKING:
    from starlette.routing import Route

__all__ = [
    "DEFAULT_DETACH_GRACE",
    "DEFAULT_STOP_POLL",
    "DurableRuns",
    "LiveRun",
    "RecordingSink",
]

_log = logging.getLogger("agui_pipes.server")

DEFAULT_DETACH_GRACE = 30.0
"""Seconds a run whose client left goes on waiting for a resume reader."""

DEFAULT_STOP_POLL = 1.0
"""Seconds between two checks, by the process running a run, for a stop sent elsewhere."""

_TERMINAL = (EventType.RUN_FINISHED, EventType.RUN_ERROR)


class LiveRun:
    """A run being served and recorded by this process: who is attached, how to stop it."""

    def __init__(self, recorder: RunRecorder, token: CancelToken, grace: float) -> None:
        self.recorder = recorder
        self.token = token
        self.grace = grace
        self.scope: anyio.CancelScope | None = None
        """The run's scope: cancelled by a stop, so an agent stuck in an await stops now."""
        self.client_attached = True
        self.readers = 0
        self.last_left = time.monotonic()
        self.terminal: BaseEvent | None = None
        self.stop_reason: str | None = None
        self.done = anyio.Event()
        self._changed = anyio.Event()
        self.remote_reader: Callable[[], Awaitable[float | None]] | None = None
        """When a reader on another process last said it follows the run (Unix time)."""

    @property
    def run_id(self) -> str:
        return self.recorder.run_id

    def _poke(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def detach(self) -> None:
        """The POSTing client went away: the grace starts (unless a reader is attached)."""
        if self.client_attached:
            self.client_attached = False
            self.last_left = time.monotonic()
            self._poke()

    @contextmanager
    def reader(self) -> Iterator[None]:
        """A resume reader follows the run: it holds the run past the grace while attached."""
        self.readers += 1
        self._poke()
        try:
            yield
        finally:
            self.readers -= 1
            self.last_left = time.monotonic()
            self._poke()

    def stop(self, reason: str) -> None:
        """Cancel the run now: it ends in RUN_ERROR code CANCELLED, recorded."""
        if self.stop_reason is None and self.terminal is None:
            self.stop_reason = reason
        self.token.cancel(self.stop_reason)
        if self.scope is not None:
            self.scope.cancel()

    async def watch_grace(self) -> None:
        """Stop the run once nobody was attached for ``grace`` seconds."""
        while True:
            changed = self._changed
            if self.client_attached or self.readers:
                await changed.wait()
                continue
            left = self.last_left + self.grace - time.monotonic()
            if left <= 0 and self.remote_reader is not None:
                # Nobody here: a reader on another process may hold the run.
                try:
                    seen = await self.remote_reader()
                except StoreError:
                    seen = None
                if seen is not None:
                    left = seen + self.grace - time.time()
            if left > 0:
                with anyio.move_on_after(left):
                    await changed.wait()
                continue
            self.stop(
                f"the client disconnected and no reader resumed the run within "
                f"{self.grace} s (detach grace)"
            )
            return

    def note(self, event: BaseEvent) -> None:
        if event.type in _TERMINAL:
            self.terminal = event


class RecordingSink:
    """A ``RunSink`` recording each event, then handing its frame (with id) to a ``FrameSink``.

    ``deliver`` cannot wait (it runs in the agent's task), so when the
    recorder's queue is full the event waits here, in order, and the agent is
    held at its next await (``behind``) until ``wait_for_room`` records it.
    """

    def __init__(self, inner: FrameSink, live: LiveRun) -> None:
        self._inner = inner
        self._live = live
        self._recorder = live.recorder
        self._pending: deque[tuple[BaseEvent, bytes]] = deque()

    def deliver(self, event: BaseEvent) -> None:
        inner = self._inner
        if inner.failure is not None:
            raise anyio.BrokenResourceError
        try:
            # The SSE encoder has the generated fast writers; the JSON is its middle.
            data = encode_sse(event)[6:-2]
        except Exception as exc:
            raise inner.fail(exc) from exc
        if self._pending:
            self._pending.append((event, data))
            return
        frame = self._recorder.frame_nowait(data)
        if frame is None:
            self._pending.append((event, data))
            return
        self._live.note(event)
        inner.push_frame(event, frame)

    def behind(self) -> bool:
        return bool(self._pending) or self._inner.behind()

    async def wait_for_room(self) -> None:
        await self.flush()
        await self._inner.wait_for_room()

    async def flush(self) -> None:
        """Record and queue the events that waited for room in the recorder."""
        pending = self._pending
        while pending:
            event, data = pending[0]
            frame = await self._recorder.frame(data)
            pending.popleft()
            self._live.note(event)
            self._inner.push_frame(event, frame)

    async def push(self, event: BaseEvent) -> None:
        """Record and queue one event made after the run (its RUN_ERROR)."""
        await self.flush()
        frame = await self._recorder.frame(encode_json(event))
        self._live.note(event)
        self._inner.push_frame(event, frame)


def _status_of(terminal: BaseEvent | None) -> RunStatus:
    if isinstance(terminal, RunErrorEvent):
        return RunStatus.CANCELLED if terminal.code == "CANCELLED" else RunStatus.ERROR
    if terminal is None:
        return RunStatus.CANCELLED
    return RunStatus.FINISHED


class DurableRuns:
    """An event log shared by a server's runs: recording, detach grace, resume routes.

    ``store`` is an ``EventLog`` (the caller opens and closes it; it is
    opened here if it is not yet) or a store URL (opened once, on first use
    or by ``lifespan``, and closed by ``aclose``).
    """

    def __init__(
        self,
        store: EventLog | str,
        *,
        detach_grace: float = DEFAULT_DETACH_GRACE,
        keepalive: float | None = 15.0,
        send_buffer: int = DEFAULT_SEND_BUFFER,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        stop_wait: float = 10.0,
        logger: logging.Logger | None = None,
        owner_timeout: float | None = None,
        stop_poll: float = DEFAULT_STOP_POLL,
    ) -> None:
        if not (isinstance(detach_grace, int | float) and detach_grace >= 0):
            raise ValueError(
                f"detach_grace must be a number of seconds >= 0, got {detach_grace!r}"
            )
        if owner_timeout is not None and not (
            isinstance(owner_timeout, int | float) and owner_timeout > 0
        ):
            raise ValueError(
                f"owner_timeout must be a positive number of seconds or None, "
                f"got {owner_timeout!r}"
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
        self.detach_grace = float(detach_grace)
        if owner_timeout is not None:
            self._store.owner_timeout = float(owner_timeout)
        self.stop_poll = float(stop_poll)
        self._keepalive = keepalive
        self._send_buffer = send_buffer
        self._send_timeout = send_timeout
        self._stop_wait = stop_wait
        self._log = logger or _log
        self._opened = False
        self._lock: anyio.Lock | None = None
        self.live: dict[str, LiveRun] = {}
        """The runs this process is serving now, by run id."""

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

    async def aclose(self) -> None:
        """Stop the runs still live here, then close the store if it was given as a URL.

        The runs first: each ends with a recorded RUN_ERROR code CANCELLED
        before the store goes away (uvicorn cancels the requests still running
        at shutdown but does not wait for them before the lifespan ends).
        """
        with anyio.CancelScope(shield=True):
            live = list(self.live.values())
            for run in live:
                run.stop("the server stopped the run (it is shutting down)")
            with anyio.move_on_after(self._stop_wait):
                for run in live:
                    await run.done.wait()
            if self._owned and self._opened:
                self._opened = False
                await self._store.aclose()

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Open the store at startup, close it at shutdown (a Starlette lifespan)."""
        await self.store()
        try:
            yield
        finally:
            await self.aclose()

    # -- recording a served run ---------------------------------------------------

    @asynccontextmanager
    async def recording(
        self,
        thread_id: str,
        run_id: str,
        token: CancelToken,
        gone: Callable[[], bool] = lambda: False,
    ) -> AsyncIterator[LiveRun]:
        """Record one run while it is served; the grace watcher runs alongside.

        Raises ``BadRequest`` (409) for a run id the store already holds: a
        run id names one run, and its log takes no second writer.
        """
        store = await self.store()
        if run_id in self.live or await store.run(run_id) is not None:
            raise BadRequest(
                409,
                "run_exists",
                f"run {run_id!r} was already started on this server's event log; "
                "a run id names one run: start a new run with a new runId, or resume this "
                f"one with GET runs/{run_id}",
            )
        recorder = RunRecorder(store, thread_id, run_id)
        live = LiveRun(recorder, token, self.detach_grace)
        try:
            async with recorder:
                self.live[run_id] = live
                if gone():  # the client left before the run was registered
                    live.detach()
                live.remote_reader = lambda: store.reader_seen(run_id)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(live.watch_grace, name=f"agui_pipes detach grace {run_id}")
                    tg.start_soon(
                        self._watch_store, store, live, name=f"agui_pipes run watch {run_id}"
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
                    _status_of(live.terminal),
                    live.stop_reason
                    if live.terminal is None or _status_of(live.terminal) is RunStatus.CANCELLED
                    else None,
                )
        finally:
            # Only once the recorder has stored everything and ended the run: a
            # stop (or a shutdown closing the store) waits for this.
            self.live.pop(run_id, None)
            live.done.set()

    def _heartbeat_interval(self, store: EventLog) -> float:
        """A fifth of the owner timeout (3 s at 15 s): four beats may be late or lost."""
        timeout = store.owner_timeout
        return 5.0 if timeout is None else max(0.05, timeout / 5)

    async def _watch_store(self, store: EventLog, live: LiveRun) -> None:
        """Heartbeat the run and poll for a stop sent to another process, while it lives.

        A failing store is logged and retried on the next tick: the run
        itself goes on (its recorder reports the store's failure).
        """
        beat_every = self._heartbeat_interval(store)
        next_beat = time.monotonic()
        failed = False
        while True:
            try:
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + beat_every
                    await store.heartbeat(live.run_id)
                reason = await store.stop_requested(live.run_id)
                failed = False
            except StoreError as exc:
                if not failed:
                    self._log.warning("run %s: the event log failed a heartbeat: %s",
                                      live.run_id, exc)
                failed = True
                reason = None
            if reason is not None:
                live.stop(reason)
                return
            await anyio.sleep(min(self.stop_poll, max(0.0, next_beat - time.monotonic())))

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
    ) -> AsyncIterator[AsyncIterator[BaseEvent]]:
        """``open_run`` with a ``RecordingSink`` over ``sink``; its end recorded, RUN_ERROR too.

        A failure the sink met (an event that does not encode) and a stop
        (no terminal event) become a RUN_ERROR recorded and sent here, so
        the live stream and the log end the same way.
        """
        async with self.recording(thread_id, run_id, token, gone) as live:
            recording = RecordingSink(sink, live)
            with anyio.CancelScope() as scope:
                live.scope = scope
                if live.stop_reason is not None:
                    scope.cancel()
                async with open_run(recording) as events:
                    yield events
            with anyio.CancelScope(shield=True):
                await recording.flush()
                failure, sink.failure = sink.failure, None
                error = self._error_after(live, failure)
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
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """SSE frames (with ids) of the events ``open_events`` gives, each recorded."""
        async with self.recording(thread_id, run_id, token, gone) as live, \
                _closing(self._frames(live, open_events, stats)) as frames:
            yield frames

    async def _frames(
        self,
        live: LiveRun,
        open_events: Callable[[], AbstractAsyncContextManager[AsyncIterator[BaseEvent]]],
        stats: RunStats,
    ) -> AsyncGenerator[bytes, None]:
        recorder = live.recorder
        failure: Exception | None = None
        with anyio.CancelScope() as scope:
            live.scope = scope
            try:
                async with open_events() as events:
                    async for event in events:
                        if event.type in _TERMINAL or event.type is EventType.RUN_STARTED:
                            stats.note_output(event)
                        stats.written += 1
                        frame = await recorder.frame(encode_sse(event)[6:-2])
                        live.note(event)
                        yield frame
            except Exception as exc:
                failure = exc
        error = self._error_after(live, failure)
        if error is not None:
            stats.note_output(error)
            stats.written += 1
            with anyio.CancelScope(shield=True):
                frame = await recorder.frame(encode_json(error))
            live.note(error)
            yield frame

    async def check_new_run(self, run_id: str) -> None:
        """Raise ``BadRequest`` 409 for a run id the store holds, 503 if the store fails.

        Called before a response starts, so a refused run is a JSON error,
        not a stream that opens and dies.
        """
        try:
            store = await self.store()
            exists = run_id in self.live or await store.run(run_id) is not None
        except Exception as exc:
            self._log.error("run %s: the event log failed: %s", run_id, exc, exc_info=exc)
            raise BadRequest(
                503, "store_unavailable", f"the event log is unavailable: {exc}"
            ) from exc
        if exists:
            raise BadRequest(
                409,
                "run_exists",
                f"run {run_id!r} is already in the event log: a run id names one run; "
                f"start a new run with a new runId, or resume this one with GET "
                f"runs/{run_id}",
            )

    @asynccontextmanager
    async def recorded_batches(
        self,
        thread_id: str,
        run_id: str,
        token: CancelToken,
        open_batches: Callable[
            [Callable[[BaseEvent], None], RunRecorder],
            AbstractAsyncContextManager[AsyncIterator[bytes]],
        ],
        stats: RunStats,
        gone: Callable[[], bool] = lambda: False,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Batches of SSE frames (the gateway's relay path), each frame recorded and given an id.

        ``open_batches(note, recorder)`` opens the source of batches, which
        records each event with ``recorder`` and frames it with its ``id:``
        line itself (the relay has the events apart before it joins them);
        it calls ``note`` with each RUN_STARTED / RUN_FINISHED / RUN_ERROR it
        puts in a batch (what tells how the run ended).
        """
        async with self.recording(thread_id, run_id, token, gone) as live, \
                _closing(self._batches(live, open_batches, stats)) as batches:
            yield batches

    async def _batches(
        self,
        live: LiveRun,
        open_batches: Callable[
            [Callable[[BaseEvent], None], RunRecorder],
            AbstractAsyncContextManager[AsyncIterator[bytes]],
        ],
        stats: RunStats,
    ) -> AsyncGenerator[bytes, None]:
        recorder = live.recorder
        seen: list[BaseEvent] = []
        failure: Exception | None = None
        with anyio.CancelScope() as scope:
            live.scope = scope
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
        error = self._error_after(live, failure)
        if error is not None:
            stats.note_output(error)
            stats.written += 1
            with anyio.CancelScope(shield=True):
                frame = await recorder.frame(encode_json(error))
            live.note(error)
            yield frame

    def _error_after(self, live: LiveRun, failure: Exception | None) -> RunErrorEvent | None:
        """The RUN_ERROR that ends a run which ended without a terminal event, if any."""
        if live.terminal is not None:
            if failure is not None:
                self._log.warning(
                    "run %s failed after its terminal event (not sent): %s", live.run_id, failure
                )
            return None
        if failure is not None:
            if isinstance(failure, EncodeError | RunFailure):
                self._log.warning("run %s failed: %s", live.run_id, failure)
            else:
                self._log.error("run %s failed: %s", live.run_id, failure, exc_info=failure)
            return run_error_for(failure)
        reason = live.stop_reason or "the run was cancelled"
        return RunErrorEvent(code="CANCELLED", message=reason)

    # -- the routes ---------------------------------------------------------------

    def routes(self, base: str) -> list[Route]:
        """Routes at ``{base}runs/{runId}``, ``.../stop`` and ``{base}threads/{threadId}``."""
        from starlette.routing import Route

        if not base.endswith("/"):
            base += "/"
        return [
            Route(f"{base}runs/{{run_id:path}}/stop", _Handler(self.stop), methods=["POST"]),
            Route(f"{base}runs/{{run_id:path}}", _Handler(self.resume), methods=["GET"]),
            Route(f"{base}threads/{{thread_id:path}}", _Handler(self.thread), methods=["GET"]),
        ]

    async def resume(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        """``GET runs/{runId}``: the run's events after the client's id, then its live tail."""
        last_event_id = _header(scope, b"last-event-id")
        if last_event_id is None:
            after = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after")
            if after:
                last_event_id = after[-1]
        try:
            store = await self.store()
            start = await store.resume_after(run_id, last_event_id)
            record = await store.run(run_id)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        thread_id = record.thread_id if record is not None else "-"
        epoch = store.epoch
        live = self.live.get(run_id)

        remote = live is None and record is not None and not record.status.ended

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, run_id if remote else None):
                    yield _followed(store, epoch, run_id, start)

        response = SSERun(
            open_frames=open_frames,
            stats=RunStats("resume", run_id, thread_id),
            keepalive=self._keepalive,
            send_buffer=self._send_buffer,
            send_timeout=self._send_timeout,
            logger=self._log,
        )
        await response(scope, receive, send)

    async def stop(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        """``POST runs/{runId}/stop``: cancel the run now; 200 once it ended (202 if slow)."""
        try:
            store = await self.store()
            record = await store.run(run_id)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        if record is None:
            await _send_store_error(send, UnknownRun(run_id))
            return
        live = self.live.get(run_id)
        if live is None:
            if record.status.ended:
                await send_json_error(send, BadRequest(
                    409, "run_ended",
                    f"run {run_id!r} already ended ({record.status.value}); nothing to stop",
                ))
            else:
                await self._stop_elsewhere(send, store, run_id)
            return
        live.stop("stopped by a client (POST runs/{runId}/stop)")
        with anyio.move_on_after(self._stop_wait):
            await live.done.wait()
        record = await store.run(run_id)
        status = record.status.value if record is not None else "cancelled"
        code = 200 if live.done.is_set() else 202
        await _send_json(send, code, {"runId": run_id, "status": status})

    async def _stop_elsewhere(self, send: Send, store: EventLog, run_id: str) -> None:
        """Stop a run another process serves: a request in the store, then wait for its end.

        The owner notices within ``stop_poll`` seconds. A run whose owner
        died is marked lost here (``check_owner``) rather than waited for.
        """
        try:
            await store.request_stop(run_id, "stopped by a client (POST runs/{runId}/stop)")
            record = await store.check_owner(run_id)
            with anyio.move_on_after(self._stop_wait):
                while record is not None and not record.status.ended:
                    await anyio.sleep(0.05)
                    record = await store.run(run_id)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        if record is None:
            await _send_store_error(send, UnknownRun(run_id))
            return
        code = 200 if record.status.ended else 202
        await _send_json(send, code, {"runId": run_id, "status": record.status.value})

    @asynccontextmanager
    async def _touching(self, store: EventLog, run_id: str | None) -> AsyncIterator[None]:
        """While a reader follows ``run_id`` (served elsewhere), say so in the store.

        Refreshed every third of the grace (at most 5 s), so the owner's
        check, made when its own grace runs out, always finds a fresh mark.
        """
        if run_id is None:
            yield
            return
        every = max(0.05, min(self.detach_grace / 3, 5.0))

        async def touch() -> None:
            while True:
                try:
                    await store.touch_reader(run_id)
                except StoreError as exc:
                    self._log.warning("run %s: cannot mark the reader: %s", run_id, exc)
                await anyio.sleep(every)

        failure: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(touch, name=f"agui_pipes reader mark {run_id}")
            try:
                yield
            except Exception as exc:
                # Raised again outside the task group, unwrapped: the stream's
                # RunFailure (RUN_LOST...) must reach SSERun as itself.
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def thread(self, scope: Scope, receive: Receive, send: Send, thread_id: str) -> None:
        """``GET threads/{threadId}``: the ended runs folded into one run, then a live run."""
        try:
            store = await self.store()
            runs = await store.thread_runs(thread_id)
            if not runs:
                raise UnknownRun(thread_id, f"no thread {thread_id!r} in the event log")
            wire: list[list[bytes]] = []
            for record in runs:
                if not record.status.ended or record.status in (RunStatus.BROKEN, RunStatus.LOST):
                    continue  # a lost run was cut anywhere: its events may not fold
                try:
                    wire.append([data for _, data in await store.read(record.run_id)])
                except (RunBroken, UnknownRun):
                    continue  # broken or pruned since listed: it has no history to give
            history = thread_history(thread_id, wire)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        except ValueError as exc:
            self._log.error("thread %s: history does not fold: %s", thread_id, exc)
            await send_json_error(send, BadRequest(
                500, "history_failed", f"the thread's stored runs do not fold: {exc}"
            ))
            return
        head = b"".join(encode_sse(event) for event in history)
        tail = next((r for r in reversed(runs) if r.status is RunStatus.LIVE), None)
        epoch = store.epoch
        live = None if tail is None else self.live.get(tail.run_id)

        remote = None if tail is None or live is not None else tail.run_id

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, remote):
                    yield _history_frames(
                        store, epoch, head, None if tail is None else tail.run_id
                    )

        response = SSERun(
            open_frames=open_frames,
            stats=RunStats("history", "-", thread_id),
            keepalive=self._keepalive,
            send_buffer=self._send_buffer,
            send_timeout=self._send_timeout,
            logger=self._log,
        )
        await response(scope, receive, send)


class _Handler:
    """An ASGI app calling ``handler(scope, receive, send, <the path parameter>)``."""

    def __init__(self, handler: Callable[[Scope, Receive, Send, str], Any]) -> None:
        self._handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = scope.get("path_params", {})
        value = next(iter(params.values()), "")
        await self._handler(scope, receive, send, str(value))


@contextmanager
def _nothing() -> Iterator[None]:
    yield


async def _followed(store: EventLog, epoch: str, run_id: str, after: int) -> AsyncIterator[bytes]:
    try:
        async for seq, data in store.follow(run_id, after):
            yield sse_frame(data, format_event_id(epoch, run_id, seq))
    except RunLost as exc:
        raise RunFailure("RUN_LOST", str(exc)) from exc
    except StoreError as exc:
        raise RunFailure("RUN_NOT_RESUMABLE", str(exc)) from exc


async def _history_frames(
    store: EventLog, epoch: str, head: bytes, live_run: str | None
) -> AsyncIterator[bytes]:
    yield head
    if live_run is not None:
        async for frame in _followed(store, epoch, live_run, 0):
            yield frame


@asynccontextmanager
async def _closing(
    frames: AsyncGenerator[bytes, None],
) -> AsyncIterator[AsyncGenerator[bytes, None]]:
    """``frames``, closed on the way out even when cancelled: its end records the run's end."""
    try:
        yield frames
    finally:
        with anyio.CancelScope(shield=True):
            await frames.aclose()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _send_store_error(send: Send, exc: StoreError) -> None:
    error = {
        400: "bad_event_id",
        404: "not_found",
        409: "wrong_run",
        410: "run_broken",
    }.get(exc.http_status, "store_error")
    await send_json_error(send, BadRequest(exc.http_status, error, str(exc)))


async def _send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    import json

    body = json.dumps(payload).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    })
    await send({"type": "http.response.body", "body": body, "more_body": False})
