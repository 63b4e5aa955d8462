"""A run recorded while this process serves it: who is attached, and how its events are kept.

* ``LiveRun`` — a served run's recorder, its cancel token and scope, and the
  *detach grace*: a client that goes away no longer cancels the run; the run
  goes on, and is cancelled only when nobody (neither the client nor a resume
  reader) has been attached for ``grace`` seconds. Why: a page reload or a
  flaky network must not lose the answer being produced (the lesson of the
  Vercel AI SDK's resumable streams: disconnect is not stop).
* ``RecordingSink`` — the endpoint's ``FrameSink`` path with recording: each
  event is encoded once, numbered and queued for the store in the agent's
  own task, and its frame carries ``id: <epoch>.<generation>:<runId>:<seq>``, the same
  bytes a replay from the log gives.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import anyio
from ag_ui.core import BaseEvent, EventType, RunErrorEvent

from ..codecs import encode_json
from ..driver import CancelToken
from ..store import RunRecorder, RunStatus, StoreError
from ._streaming import FrameSink

__all__ = ["TERMINAL", "LiveRun", "RecordingSink", "status_of"]

TERMINAL = (EventType.RUN_FINISHED, EventType.RUN_ERROR)


class LiveRun:
    """A run being served and recorded by this process: who is attached, how to stop it."""

    def __init__(self, recorder: RunRecorder, token: CancelToken, grace: float) -> None:
        self.recorder = recorder
        self.token = token
        self.grace = grace
        self._scope: anyio.CancelScope | None = None
        self._stopped = False
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

    @property
    def scope(self) -> anyio.CancelScope | None:
        """The run's scope: cancelled by a stop, so an agent stuck in an await stops now."""
        return self._scope

    @scope.setter
    def scope(self, scope: anyio.CancelScope | None) -> None:
        # A run stopped before its scope was opened (a shutdown as it starts) stops at once.
        self._scope = scope
        if scope is not None and self._stopped:
            scope.cancel()

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
        self._stopped = True
        self.token.cancel(self.stop_reason)
        if self._scope is not None:
            self._scope.cancel()

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
        if event.type in TERMINAL:
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
            data = encode_json(event)
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


def status_of(terminal: BaseEvent | None) -> RunStatus:
    if isinstance(terminal, RunErrorEvent):
        return RunStatus.CANCELLED if terminal.code == "CANCELLED" else RunStatus.ERROR
    if terminal is None:
        return RunStatus.CANCELLED
    return RunStatus.FINISHED
