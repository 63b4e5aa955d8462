"""One run streamed to an HTTP client as SSE: the part endpoint and gateway share.

Three tasks in one task group, because the three things happen on their own
schedules:

* the *producer* opens the event source (the agent run, or the upstream
  request), pushes it through the chain and encodes each event — or, for a
  source that already yields encoded frames (the gateway relaying a sync
  chain, one batch per upstream chunk), passes the batches on. An agent run
  whose chain (if any) runs inside the driver is opened with a ``FrameSink``
  instead: the agent's own task encodes each event as it emits it and queues
  the frame, so the producer only waits for the run to end — no hop through
  the driver's event stream and no wake-up of another task per event;
* the *writer* sends encoded frames to the client, batching whatever is
  ready into one ASGI message, and sends a keep-alive comment when nothing
  came for ``keepalive`` seconds (so proxies and clients do not time out an
  agent that is thinking). Woken by a frame after it ran dry, it first lets
  the tasks that are already runnable take their turns (scheduler passes, no
  timer, another only while the last one queued more, at most
  ``_GATHER_PASSES``), so an agent that awaits once per token has its next
  few tokens in the same write rather than one socket write per token, and a
  frame never waits for anything that is not already running;
* the *watcher* waits for ``http.disconnect``. A client that goes away trips
  ``on_disconnect`` (the run's cancel token) and cancels the task group, so
  the agent — or the upstream request — is cancelled at its next await,
  whatever it was doing, rather than at its next event.

Backpressure: producer and writer meet in a ``FrameQueue`` bounded in bytes
(``send_buffer``). The ASGI server's ``send`` waits while the socket's buffers
are full, so a client that reads slowly holds the writer, the queue fills,
and the producer waits — which holds the agent at its next await (the
driver's backpressure, or the ``FrameSink``'s) or stops the gateway reading
its upstream. A client
that reads *nothing* for ``send_timeout`` seconds (one write pending that
long) is treated as gone: the run is cancelled as on a disconnect, and the
response is abandoned, so the server closes the connection.

Errors after the response started cannot become an HTTP status any more:
they become a RUN_ERROR event, so the client always sees a well-formed end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import anyio.lowlevel
from ag_ui.core import BaseEvent, EventType

from .._pipeline.chain import TransformerChain
from ..codecs import SSE_CONTENT_TYPE, encode_sse, sse_comment
from ._failures import RunFailure, log_after_terminal, log_failure, run_error_for
from ._frames import DEFAULT_SEND_BUFFER, FrameQueue
from ._options import DEFAULT_KEEPALIVE, DEFAULT_SEND_TIMEOUT, check_send_limits
from ._stats import RunStats

__all__ = [
    "DEFAULT_SEND_BUFFER",
    "DEFAULT_SEND_TIMEOUT",
    "SSE_HEADERS",
    "FrameSink",
    "Message",
    "OpenFrames",
    "OpenRun",
    "OpenSource",
    "Receive",
    "RunFailure",
    "SSERun",
    "Scope",
    "Send",
    "run_error_for",
]

_log = logging.getLogger("agui_pipes.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
OpenSource = Callable[[], AbstractAsyncContextManager[AsyncIterator[BaseEvent]]]
"""Opens the run's event source for the duration of an ``async with``."""
OpenFrames = Callable[[], AbstractAsyncContextManager[AsyncIterable[bytes]]]
"""Opens a source of SSE bytes, already transformed and encoded, counted in the stats.

The opened source may carry a ``trailer`` (bytes or None), read once it is closed:
a last frame to send after everything it gave."""
OpenRun = Callable[["FrameSink"], AbstractAsyncContextManager[AsyncIterator[BaseEvent]]]
"""Opens an agent run that hands every event to the given sink (``Run(..., sink=)``)."""

SSE_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", SSE_CONTENT_TYPE.encode()),
    # Proxies and CDNs must pass each frame on as it comes, not buffer or
    # rewrite the body: no-transform keeps compressors away, X-Accel-Buffering
    # is nginx's per-response switch.
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

_KEEPALIVE = sse_comment("keep-alive")
_BATCH_BYTES = 64 * 1024
"""Most bytes of frames joined into one ASGI body message when the client is slower
than the run (a frame larger than this goes out alone). Kept small so the copy a
join makes, and what the server's transport buffers past its high-water mark, stay
a small constant beside ``send_buffer``."""


class FrameSink:
    """A run's events encoded into the frame queue in the agent's own task (a ``RunSink``).

    What a producer task would do per event — count, encode, queue — done where
    the event is emitted, so the writer is the only other task a token wakes.
    A frame that cannot be encoded fails the run: the sink refuses everything
    after it (the driver then fails the run as disconnected), cancels
    ``scope`` so an agent blocked in an await stops too, and the producer
    sends the failure as RUN_ERROR.
    """

    __slots__ = ("_count_source", "_frames", "_stats", "failure", "scope")

    def __init__(self, frames: FrameQueue, stats: RunStats, *, count_source: bool) -> None:
        self._frames = frames
        self._stats = stats
        self._count_source = count_source
        self.failure: Exception | None = None
        self.scope: anyio.CancelScope | None = None

    def deliver(self, event: BaseEvent) -> None:
        if self.failure is not None:
            raise anyio.BrokenResourceError
        try:
            frame = encode_sse(event)
        except Exception as exc:
            raise self.fail(exc) from exc
        self.push_frame(event, frame)

    def fail(self, exc: Exception) -> anyio.BrokenResourceError:
        """Fail the run with ``exc`` (it becomes its RUN_ERROR); what ``deliver`` then raises."""
        self.failure = exc
        if self.scope is not None:
            self.scope.cancel()
        return anyio.BrokenResourceError()

    def push_frame(self, event: BaseEvent, frame: bytes) -> None:
        """Count ``event`` and queue its already encoded ``frame`` (a recording sink's way in)."""
        stats = self._stats
        if self._count_source:
            stats.counts[0] += 1
        if event.type in _WATCHED:
            stats.note_output(event)
        stats.written += 1
        self._frames.push(frame)

    def behind(self) -> bool:
        return self._frames.full()

    async def wait_for_room(self) -> None:
        await self._frames.wait_for_room()


class SSERun:
    """ASGI response streaming one run; build one per request.

    ``open_source`` opens the events; ``chain`` (already instrumented, or
    None) is applied over them; ``count_source`` counts source events when no
    chain does it. Alternatively ``open_frames`` opens a source of encoded SSE
    batches, written as they are: whoever produces them keeps ``stats`` up to
    date. Or ``open_run`` opens an agent run given a ``FrameSink`` (no
    ``chain`` then: a sync chain runs inside the driver). ``on_disconnect`` is
    called once if the client goes away; ``on_first_write`` once, when the first
    body bytes have been handed to the server (what a producer that holds back
    the rest of its work until its first frame is out waits for).

    ``detach=True`` (a run recorded in an event log): a client that goes away
    or stalls does not cancel the run; only the writing stops, the frames are
    dropped as they come, and the run goes on until it ends or
    ``on_disconnect``'s owner cancels it (a resume may pick it up meanwhile).
    """

    def __init__(
        self,
        open_source: OpenSource | None = None,
        *,
        open_frames: OpenFrames | None = None,
        open_run: OpenRun | None = None,
        stats: RunStats,
        chain: TransformerChain | None = None,
        count_source: bool = False,
        keepalive: float | None = DEFAULT_KEEPALIVE,
        send_buffer: int = DEFAULT_SEND_BUFFER,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        on_disconnect: Callable[[], object] | None = None,
        on_first_write: Callable[[], object] | None = None,
        detach: bool = False,
        logger: logging.Logger = _log,
    ) -> None:
        if sum(opener is not None for opener in (open_source, open_frames, open_run)) != 1:
            raise TypeError("SSERun takes exactly one of open_source, open_frames and open_run")
        if open_run is not None and chain is not None:
            raise TypeError("SSERun runs no chain over open_run: give it to the run instead")
        check_send_limits(send_buffer, send_timeout)
        self._open = open_source
        self._open_frames = open_frames
        self._open_run = open_run
        self._chain = chain
        self._count_source = count_source
        self._stats = stats
        self._keepalive = keepalive
        self._on_disconnect = on_disconnect
        self._on_first_write = on_first_write
        self._detach = detach
        self._write_scope: anyio.CancelScope | None = None
        self._log = logger
        self._send_buffer = send_buffer
        self._send_timeout = send_timeout
        self._disconnected = False
        self._last_write = 0.0
        self._send_started: float | None = None
        """When the pending write began (None between writes), for the send timeout."""

    @property
    def disconnected(self) -> bool:
        """Whether the client went away before the run ended."""
        return self._disconnected

    def _client_gone(self) -> None:
        if self._disconnected:
            return
        self._disconnected = True
        if self._stats.outcome == "incomplete":
            self._stats.outcome = "client disconnected"
        if self._on_disconnect is not None:
            self._on_disconnect()

    def _client_stalled(self) -> None:
        self._log.warning(
            "run %s: the client read nothing for %ss (send timeout); closing its connection",
            self._stats.run_id,
            self._send_timeout,
        )
        if self._stats.outcome == "incomplete":
            self._stats.outcome = "client stalled"
        self._client_gone()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        frames = FrameQueue(self._send_buffer)
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            self._client_gone()
                            self._stop(tg.cancel_scope)
                            return

                tg.start_soon(watch, name="agui_pipes disconnect watcher")
                if self._keepalive is not None:
                    tg.start_soon(self._keep_alive, frames, name="agui_pipes keep-alive")
                if self._send_timeout is not None:
                    tg.start_soon(
                        self._watch_writes, tg.cancel_scope, name="agui_pipes send timeout"
                    )
                tg.start_soon(self._produce, frames, name="agui_pipes run producer")
                with anyio.CancelScope() as self._write_scope:
                    try:
                        await self._write(send, frames)
                    except OSError:
                        # The transport failed writing: the client is gone too.
                        self._client_gone()
                if self._detach and self._disconnected:
                    await _drop(frames)  # the run goes on without its client
                tg.cancel_scope.cancel()
        finally:
            self._stats.log(self._log)

    def _stop(self, run_scope: anyio.CancelScope) -> None:
        """The client is gone: cancel the run, or only the writing when the run detaches."""
        if self._detach:
            if self._write_scope is not None:
                self._write_scope.cancel()
        else:
            run_scope.cancel()

    # -- producing --------------------------------------------------------

    async def _events(self, source: AsyncIterator[BaseEvent]) -> AsyncIterator[BaseEvent]:
        stats = self._stats
        async for event in source:
            stats.count_source()
            yield event

    async def _produce(self, frames: FrameQueue) -> None:
        try:
            await self._produce_events(frames)
        finally:
            frames.close()

    async def _produce_events(self, frames: FrameQueue) -> None:
        stats = self._stats
        try:
            if self._open_frames is not None:
                async with self._open_frames() as batches:
                    await self._forward_frames(batches, frames)
                # A recorded run that a stop ended hands its RUN_ERROR over only
                # once its reader has unwound (_recording.RecordedFrames).
                trailer: bytes | None = getattr(batches, "trailer", None)
                if trailer is not None:
                    await frames.put(trailer)
                return
            if self._open_run is not None:
                await self._run_into(frames)
                return
            assert self._open is not None
            async with self._open() as events:
                source: AsyncIterator[BaseEvent] = events
                if self._count_source:
                    source = self._events(source)
                if self._chain is None:
                    await self._forward(source, frames)
                else:
                    async with self._chain.apply(source) as output:
                        await self._forward(output, frames)
        except Exception as exc:
            if stats.outcome in ("finished", "error", "interrupt", "cancelled"):
                log_after_terminal(self._log, stats.run_id, exc)
                return
            log_failure(self._log, stats.run_id, exc)
            error = run_error_for(exc)
            stats.note_failure(error)
            stats.written += 1
            await frames.put(encode_sse(error))

    async def _run_into(self, frames: FrameQueue) -> None:
        """Open the run with a ``FrameSink`` and wait for it to end; raise what the sink refused."""
        assert self._open_run is not None
        sink = FrameSink(frames, self._stats, count_source=self._count_source)
        with anyio.CancelScope() as scope:
            sink.scope = scope
            async with self._open_run(sink) as events:
                # The sink takes every event: the stream only ends. Anything it
                # did carry would still be sent, in order, after what the sink took.
                await self._forward(events, frames)
        if sink.failure is not None:
            raise sink.failure

    async def _forward(self, events: AsyncIterator[BaseEvent], frames: FrameQueue) -> None:
        stats = self._stats
        offer = frames.offer
        put = frames.put
        async for event in events:
            if event.type in _WATCHED:
                stats.note_output(event)
            stats.written += 1
            frame = encode_sse(event)
            # Hands the frame to a waiting writer, or queues it, without a
            # scheduler round; only a full queue (slow client) waits — and
            # while it waits, the source is not read.
            if not offer(frame):
                await put(frame)

    @staticmethod
    async def _forward_frames(batches: AsyncIterable[bytes], frames: FrameQueue) -> None:
        offer = frames.offer
        async for batch in batches:
            if not offer(batch):
                await frames.put(batch)

    # -- writing ----------------------------------------------------------

    async def _keep_alive(self, frames: FrameQueue) -> None:
        """Queue a comment whenever nothing was written for ``keepalive`` seconds.

        A task of its own rather than a timeout around each receive: a cancel
        scope per event costs more than the event's encoding.
        """
        assert self._keepalive is not None
        interval = self._keepalive
        while not frames.closed:
            idle = time.monotonic() - self._last_write
            if idle < interval:
                await anyio.sleep(interval - idle)
                continue
            if not frames.size:  # frames are queued: the connection is not idle
                frames.offer(_KEEPALIVE)
            self._last_write = time.monotonic()

    async def _watch_writes(self, run_scope: anyio.CancelScope) -> None:
        """Cancel the run when one write stays pending for ``send_timeout`` seconds.

        A task of its own for the same reason as the keep-alive: the writer
        only notes when each write began, which costs nothing per event.
        """
        assert self._send_timeout is not None
        timeout = self._send_timeout
        while True:
            started = self._send_started
            if started is None:
                await anyio.sleep(timeout / 2)
                continue
            late = time.monotonic() - (started + timeout)
            if late < 0:
                await anyio.sleep(-late)
                continue
            self._client_stalled()
            self._stop(run_scope)
            return

    async def _write(self, send: Send, frames: FrameQueue) -> None:
        # time.monotonic, not anyio.current_time: the clocks only measure
        # durations here (the watchers sleep the difference), and anyio's looks
        # up the backend per call, twice per write.
        clock = time.monotonic
        self._send_started = clock()
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        self._send_started = None
        self._last_write = last_write = clock()
        take = frames.take
        waited = False
        while True:
            body = take(_BATCH_BYTES)
            if body is None:
                if frames.closed:
                    break
                await frames.wait_readable()
                await _gather(frames)
                waited = True
                continue
            # A write that follows the last one at once began when that one
            # ended; after waiting for frames, ask the clock.
            self._send_started = clock() if waited else last_write
            waited = False
            await send({"type": "http.response.body", "body": body, "more_body": True})
            self._send_started = None
            self._last_write = last_write = clock()
            if self._on_first_write is not None:
                self._on_first_write()
                self._on_first_write = None
        self._send_started = clock() if waited else last_write
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        self._send_started = None


async def _gather(frames: FrameQueue) -> None:
    """Let the tasks already runnable queue their frames before the writer takes them.

    One scheduler pass (no timer) at a time, and another only while the last one
    queued more: an agent that awaits once per token queues its next tokens
    meanwhile, so a write carries what is ready rather than a token or two, and a
    frame waits only while a task that is running adds more — at most
    ``_GATHER_PASSES`` passes, never for a task that waits on anything else.
    """
    size = frames.size
    for _ in range(_GATHER_PASSES):
        await anyio.lowlevel.checkpoint()
        grown = frames.size
        if grown == size or grown >= _BATCH_BYTES or frames.closed:
            return
        size = grown


async def _drop(frames: FrameQueue) -> None:
    """Take and discard frames until the producer closes the queue (a detached run)."""
    while not frames.closed or frames.size:
        if frames.take(_BATCH_BYTES) is None:
            await frames.wait_readable()


_GATHER_PASSES = 4
"""Most scheduler passes the writer gives runnable producers before it writes what they
queued: each pass costs a loop turn, and one send saved costs more than several."""

_WATCHED = frozenset({EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR})
