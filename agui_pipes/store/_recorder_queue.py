"""The live side of ``RunRecorder``: numbering each event at once and queueing it, bounded.

Why apart from the background writer (``_recorder``): this is what the live
stream calls once per event — ``record``, ``frame``, ``frames_nowait`` — so it
must not await the store; it only numbers, queues and wakes the writer, and
waits for room (up to ``stall_timeout``) when the queue is full. Storing the
queue, ending the run and giving up on a failing store are the writer's job:
``_break`` is its hook.
"""

from __future__ import annotations

import abc
from collections.abc import Callable

import anyio
import anyio.abc

from .._foundation.framing import SSE_DATA, SSE_END
from ._base import DEFAULT_SCOPE, EventLog
from ._ids import format_event_id
from ._sse_tails import id_tail, id_tails

__all__ = ["RecorderQueue"]


class RecorderQueue(abc.ABC):
    """A run's numbering and bounded queue of wire JSON; ``RunRecorder`` stores it.

    See :class:`RunRecorder` for the settings.
    """

    def __init__(
        self,
        store: EventLog,
        thread_id: str,
        run_id: str,
        *,
        scope: str = DEFAULT_SCOPE,
        max_events: int = 10_000,
        max_bytes: int = 8 * 1024 * 1024,
        max_batch: int = 4096,
        stall_timeout: float = 5.0,
        close_timeout: float = 10.0,
        linger: float = 0.005,
    ) -> None:
        for name, value in (
            ("max_events", max_events),
            ("max_bytes", max_bytes),
            ("max_batch", max_batch),
        ):
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"RunRecorder {name} must be a positive int, got {value!r}")
        for name, seconds in (
            ("stall_timeout", stall_timeout),
            ("close_timeout", close_timeout),
            ("linger", linger),
        ):
            if not seconds >= 0:
                raise ValueError(f"RunRecorder {name} must be >= 0 seconds, got {seconds!r}")
        self.store = store
        self.thread_id = thread_id
        self.run_id = run_id
        self.scope = scope
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_batch = max_batch
        self.stall_timeout = stall_timeout
        self.close_timeout = close_timeout
        self.linger = linger
        self._lingering: anyio.CancelScope | None = None
        self.broken: str | None = None
        """Why the run stopped being recorded, or None while it is recorded."""
        self.next_seq = 1
        # A list, not a deque: a stored batch leaves it in one slice deletion.
        self._queue: list[bytes] = []
        self._queued_bytes = 0
        self._stored = 0  # last seq the store confirmed
        self._wake: anyio.Event | None = None  # the flusher waits for work
        self._room: anyio.Event | None = None  # record() waits for room
        self._flushed: anyio.Event | None = None  # end() waits for the queue to drain
        self._closing = False
        self._writer_gone = False  # the writer task ended: nothing stores the queue any more
        self._ended = False
        self._recording = False  # entered, neither broken nor ended: record() takes events
        self._tasks: anyio.abc.TaskGroup | None = None
        self._flush_scope = anyio.CancelScope(shield=True)
        self.generation = ""
        """The run's generation (``StoredRun.generation``), known once it is created."""
        self._id_prefix = b""  # b"id: <epoch>.<generation>:<runId>:", known once created
        self.rewrite_first: Callable[[bytes], bytes] | None = None
        """Applied once, to the first event framed (``frame``, ``frame_nowait``,
        ``frames_nowait``) before it is numbered: what it returns is both stored and
        sent. A server adds the run's new input messages to its RUN_STARTED this way.
        ``record`` does not apply it (its caller frames the bytes it has)."""

    def __repr__(self) -> str:
        state = f"broken={self.broken!r}" if self.broken else f"queued={len(self._queue)}"
        return f"RunRecorder(run_id={self.run_id!r}, next_seq={self.next_seq}, {state})"

    def event_id(self, seq: int) -> str:
        """The SSE id of entry ``seq`` of this run (``<epoch>.<generation>:<runId>:<seq>``)."""
        return format_event_id(self.store.epoch, self.run_id, seq, self.generation)

    async def frame(self, data: bytes) -> bytes:
        """Record ``data`` (one event's wire JSON) and return its SSE frame, id included.

        The frame has no ``id:`` line once the run is not recorded (broken):
        a browser then keeps the last id it had, which resuming refuses with
        :class:`RunBroken` rather than answering with a gap.
        """
        first = self.rewrite_first
        if first is not None:
            data = first(data)
        seq = await self.record(data)
        self.rewrite_first = None
        if seq is None:
            return SSE_DATA + data + SSE_END
        return b"".join((self._id_prefix, id_tail(seq), data, SSE_END))

    def frame_nowait(self, data: bytes) -> bytes | None:
        """``frame(data)`` when it can be done without waiting; None when the queue is full.

        For a caller that cannot await where the event is produced (a run's
        sink, in the agent's own task): on None it keeps the event and awaits
        ``frame`` for it later, before any later event, so the seqs stay in
        order.
        """
        if self._recording:
            first = self.rewrite_first
            if first is not None:
                data = first(data)
            queue = self._queue
            size = len(data)
            if queue and (
                len(queue) >= self.max_events or self._queued_bytes + size > self.max_bytes
            ):
                return None  # the caller calls frame() with the same event: rewritten there
            if first is not None:
                self.rewrite_first = None
            seq = self.next_seq
            self.next_seq = seq + 1
            queue.append(data)
            self._queued_bytes += size
            wake = self._wake
            if wake is not None:
                self._wake = None
                wake.set()
            return b"".join((self._id_prefix, id_tail(seq), data, SSE_END))
        if self._tasks is None and not self._ended and self.broken is None:
            raise RuntimeError(
                f"{self!r} is not started: use `async with RunRecorder(...) as recorder:`"
            )
        return SSE_DATA + data + SSE_END

    def frames_nowait(self, payloads: list[bytes]) -> bytes | None:
        """``frame`` of each payload, joined, when all fit without waiting; else None.

        For a source that produces events in batches (the gateway's relay
        reads several frames at once): one call per batch instead of one per
        event. All or nothing: on None nothing was taken, and the caller
        records the batch one ``frame`` at a time. An empty queue takes a
        whole batch even past ``max_events`` / ``max_bytes`` (as ``record``
        takes one oversized event), so the queue exceeds its bounds by at most
        one batch.
        """
        if self._recording:
            first = self.rewrite_first
            if first is not None and payloads:
                payloads = [first(payloads[0]), *payloads[1:]]
            queue = self._queue
            count = len(payloads)
            size = sum(map(len, payloads))
            if queue and (
                len(queue) + count > self.max_events or self._queued_bytes + size > self.max_bytes
            ):
                return None
            if first is not None:
                self.rewrite_first = None
            seq = self.next_seq
            self.next_seq = seq + count
            queue.extend(payloads)
            self._queued_bytes += size
            wake = self._wake
            if wake is not None:
                self._wake = None
                wake.set()
            # One join, the numbers sliced from a table: no bytecode and no
            # formatting per frame.
            parts = [self._id_prefix, None, None, SSE_END] * count
            parts[1::4] = id_tails(seq, count)
            parts[2::4] = payloads
            return b"".join(parts)  # type: ignore[arg-type]
        if self._tasks is None and not self._ended and self.broken is None:
            raise RuntimeError(
                f"{self!r} is not started: use `async with RunRecorder(...) as recorder:`"
            )
        return b"".join([SSE_DATA + data + SSE_END for data in payloads])

    async def frames(self, payloads: list[bytes]) -> bytes:
        """``frame`` of each payload, joined: at once when they fit, else one by one, in order."""
        framed = self.frames_nowait(payloads)
        if framed is not None:
            return framed
        return b"".join([await self.frame(data) for data in payloads])

    # -- recording -------------------------------------------------------------

    async def record(self, payload: bytes) -> int | None:
        """Queue one event's wire JSON; its seq, or None when the run is not recorded.

        Returns at once while the queue has room. When it is full, waits up
        to ``stall_timeout`` for the store to catch up, then gives up on
        recording the run (see the module docstring).
        """
        # The hot path, once per event on the live stream: no await, no call.
        queue = self._queue
        size = len(payload)
        if self._recording and (
            not queue
            or (len(queue) < self.max_events and self._queued_bytes + size <= self.max_bytes)
        ):
            seq = self.next_seq
            self.next_seq = seq + 1
            queue.append(payload)
            self._queued_bytes += size
            wake = self._wake
            if wake is not None:
                self._wake = None
                wake.set()
            return seq
        if not self._recording:
            if self._tasks is None and not self._ended and self.broken is None:
                raise RuntimeError(
                    f"{self!r} is not started: use `async with RunRecorder(...) as recorder:`"
                )
            return None
        return await self._record_when_room(payload, size)

    async def _record_when_room(self, payload: bytes, size: int) -> int | None:
        self._stop_lingering()
        with anyio.move_on_after(self.stall_timeout):
            while not self._fits(size) and self.broken is None and not self._writer_gone:
                room = self._room = anyio.Event()
                await room.wait()
        if self.broken is not None or self._ended:
            return None
        if not self._fits(size):
            await self._break(
                f"its writer was cancelled before the store took {len(self._queue)} events "
                "(the event loop is closing)"
                if self._writer_gone
                else f"the store fell behind: {len(self._queue)} events "
                f"({self._queued_bytes} bytes) waited more than {self.stall_timeout} s"
            )
            return None
        seq = self.next_seq
        self.next_seq = seq + 1
        self._queue.append(payload)
        self._queued_bytes += size
        self._poke()
        return seq

    def _fits(self, size: int) -> bool:
        if not self._queue:
            return True  # one event larger than the byte bound still goes
        return len(self._queue) < self.max_events and self._queued_bytes + size <= self.max_bytes

    def _stop_lingering(self) -> None:
        lingering = self._lingering
        if lingering is not None:
            lingering.cancel()

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    @abc.abstractmethod
    async def _break(self, reason: str, exc: BaseException | None = None) -> None:
        """Stop recording the run (the writer logs, marks it broken, drops the queue)."""
