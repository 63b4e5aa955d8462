"""One run streamed to an HTTP client as SSE: the part endpoint and gateway share.

Three tasks in one task group, because the three things happen on their own
schedules:

* the *producer* opens the event source (the agent run, or the upstream
  request), pushes it through the chain and encodes each event — or, for a
  source that already yields encoded frames (the gateway relaying a sync
  chain, one batch per upstream chunk), passes the batches on;
* the *writer* sends encoded frames to the client, batching whatever is
  ready into one ASGI message, and sends a keep-alive comment when nothing
  came for ``keepalive`` seconds (so proxies and clients do not time out an
  agent that is thinking);
* the *watcher* waits for ``http.disconnect``. A client that goes away trips
  ``on_disconnect`` (the run's cancel token) and cancels the task group, so
  the agent — or the upstream request — is cancelled at its next await,
  whatever it was doing, rather than at its next event.

Errors after the response started cannot become an HTTP status any more:
they become a RUN_ERROR event, so the client always sees a well-formed end.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
from ag_ui.core import BaseEvent, EventType, RunErrorEvent
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._chain import TransformerChain
from .._errors import AguiPipesError, StageError, StreamRejected
from ..codecs import SSE_CONTENT_TYPE, encode_sse, sse_comment
from ..verify import ProtocolViolation
from ._stats import RunStats

__all__ = [
    "SSE_HEADERS",
    "Message",
    "OpenFrames",
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
OpenFrames = Callable[[], AbstractAsyncContextManager[AsyncIterator[bytes]]]
"""Opens a source of SSE bytes, already transformed and encoded, counted in the stats."""

SSE_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", SSE_CONTENT_TYPE.encode()),
    # Proxies and CDNs must pass each frame on as it comes, not buffer or
    # rewrite the body: no-transform keeps compressors away, X-Accel-Buffering
    # is nginx's per-response switch.
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

_KEEPALIVE = sse_comment("keep-alive")
_BATCH = 64
"""Most frames joined into one ASGI body message when the client is slower than the run."""


class RunFailure(AguiPipesError):
    """A failure the client should see as RUN_ERROR with this ``code``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def run_error_for(exc: BaseException) -> RunErrorEvent:
    """The RUN_ERROR that tells the client what went wrong (codes are stable)."""
    if isinstance(exc, RunFailure):
        return RunErrorEvent(code=exc.code, message=exc.message)
    if isinstance(exc, StreamRejected):
        code = "PROTOCOL_VIOLATION" if isinstance(exc, ProtocolViolation) else "REJECTED"
        return RunErrorEvent(code=code, message=str(exc))
    if isinstance(exc, StageError):
        return RunErrorEvent(code="STAGE_ERROR", message=str(exc))
    return RunErrorEvent(
        code="INTERNAL_ERROR", message=f"the server failed: {type(exc).__name__}: {exc}"
    )


class SSERun:
    """ASGI response streaming one run; build one per request.

    ``open_source`` opens the events; ``chain`` (already instrumented, or
    None) is applied over them; ``count_source`` counts source events when no
    chain does it. Alternatively ``open_frames`` (and no ``open_source``)
    opens a source of encoded SSE batches, written as they are: whoever
    produces them keeps ``stats`` up to date. ``on_disconnect`` is called
    once if the client goes away.
    """

    def __init__(
        self,
        open_source: OpenSource | None = None,
        *,
        open_frames: OpenFrames | None = None,
        stats: RunStats,
        chain: TransformerChain | None = None,
        count_source: bool = False,
        keepalive: float | None = 15.0,
        on_disconnect: Callable[[], object] | None = None,
        logger: logging.Logger = _log,
    ) -> None:
        if (open_source is None) == (open_frames is None):
            raise TypeError("SSERun takes exactly one of open_source and open_frames")
        self._open = open_source
        self._open_frames = open_frames
        self._chain = chain
        self._count_source = count_source
        self._stats = stats
        self._keepalive = keepalive
        self._on_disconnect = on_disconnect
        self._log = logger
        self._disconnected = False
        self._last_write = 0.0

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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        frames_in, frames_out = anyio.create_memory_object_stream[bytes](_BATCH)
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            self._client_gone()
                            tg.cancel_scope.cancel()
                            return

                tg.start_soon(watch, name="agui_pipes disconnect watcher")
                keepalive_scope = anyio.CancelScope()
                if self._keepalive is not None:
                    tg.start_soon(
                        self._keep_alive,
                        frames_in.clone(),
                        keepalive_scope,
                        name="agui_pipes keep-alive",
                    )
                tg.start_soon(
                    self._produce, frames_in, keepalive_scope, name="agui_pipes run producer"
                )
                try:
                    await self._write(send, frames_out)
                except OSError:
                    # The transport failed writing: the client is gone too.
                    self._client_gone()
                tg.cancel_scope.cancel()
        finally:
            self._stats.log(self._log)

    # -- producing --------------------------------------------------------

    async def _events(self, source: AsyncIterator[BaseEvent]) -> AsyncIterator[BaseEvent]:
        stats = self._stats
        async for event in source:
            stats.count_source()
            yield event

    async def _produce(
        self, frames: MemoryObjectSendStream[bytes], keepalive_scope: anyio.CancelScope
    ) -> None:
        async with frames:
            try:
                await self._produce_events(frames)
            finally:
                # The keep-alive task holds the other sender: stop it, so the
                # writer sees the end of the stream.
                keepalive_scope.cancel()

    async def _produce_events(self, frames: MemoryObjectSendStream[bytes]) -> None:
        stats = self._stats
        try:
            if self._open_frames is not None:
                async with self._open_frames() as batches:
                    await self._forward_frames(batches, frames)
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
                self._log.warning(
                    "run %s failed after its terminal event (not sent): %s",
                    stats.run_id,
                    exc,
                )
                return
            error = run_error_for(exc)
            if not isinstance(exc, RunFailure):
                self._log.error("run %s failed: %s", stats.run_id, exc, exc_info=exc)
            else:
                self._log.warning("run %s failed: %s: %s", stats.run_id, exc.code, exc.message)
            stats.note_output(error)
            stats.written += 1
            try:
                await frames.send(encode_sse(error))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    async def _forward(
        self, events: AsyncIterator[BaseEvent], frames: MemoryObjectSendStream[bytes]
    ) -> None:
        stats = self._stats
        send_nowait = frames.send_nowait
        for_later = frames.send
        async for event in events:
            if event.type in _WATCHED:
                stats.note_output(event)
            stats.written += 1
            frame = encode_sse(event)
            try:
                # Hands the frame to a waiting writer, or queues it, without
                # a scheduler round; only a full queue (slow client) waits.
                send_nowait(frame)
            except anyio.WouldBlock:
                await for_later(frame)

    @staticmethod
    async def _forward_frames(
        batches: AsyncIterator[bytes], frames: MemoryObjectSendStream[bytes]
    ) -> None:
        send_nowait = frames.send_nowait
        async for batch in batches:
            try:
                send_nowait(batch)
            except anyio.WouldBlock:
                await frames.send(batch)

    # -- writing ----------------------------------------------------------

    async def _keep_alive(
        self, frames: MemoryObjectSendStream[bytes], scope: anyio.CancelScope
    ) -> None:
        """Queue a comment whenever nothing was written for ``keepalive`` seconds.

        A task of its own rather than a timeout around each receive: a cancel
        scope per event costs more than the event's encoding.
        """
        assert self._keepalive is not None
        interval = self._keepalive
        with scope, frames:
            while True:
                idle = anyio.current_time() - self._last_write
                if idle < interval:
                    await anyio.sleep(interval - idle)
                    continue
                try:
                    frames.send_nowait(_KEEPALIVE)
                except anyio.WouldBlock:
                    pass  # frames are queued: the connection is not idle
                self._last_write = anyio.current_time()

    async def _write(self, send: Send, frames: MemoryObjectReceiveStream[bytes]) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        self._last_write = anyio.current_time()
        receive_nowait = frames.receive_nowait
        async with frames:
            while True:
                try:
                    frame = receive_nowait()
                except anyio.WouldBlock:
                    try:
                        frame = await frames.receive()
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break
                batch = [frame]
                while len(batch) < _BATCH:
                    try:
                        batch.append(receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                body = batch[0] if len(batch) == 1 else b"".join(batch)
                await send({"type": "http.response.body", "body": body, "more_body": True})
                self._last_write = anyio.current_time()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


_WATCHED = frozenset({EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR})
