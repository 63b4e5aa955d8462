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
import anyio.abc

from .._framing import SSE_DATA, SSE_END, SSE_ID
from ._base import EventLog, RunStatus
from ._ids import format_event_id

__all__ = ["RunRecorder"]

_log = logging.getLogger("agui_pipes.store")

_BLOCK = 1024
_MAX_BLOCKS = 64
_tail_blocks: dict[int, list[bytes]] = {}


def _tails(seq: int, count: int) -> list[bytes]:
    """``b"<n>\ndata: "`` for ``n`` in ``seq .. seq + count - 1``: what follows an id prefix.

    Why a table: formatting a number per frame is most of what numbering
    costs on the gateway's relay path; a seq is formatted once per process
    (in blocks of 1024, the most recent 64 blocks kept: a few MB at most)
    and every run's frames slice the same lists. Runs are mostly short, so
    the first blocks serve nearly all of them.
    """
    block, offset = divmod(seq, _BLOCK)
    tails = _tail_blocks.get(block)
    if tails is None:
        tails = _tail_block(block)
    end = offset + count
    if end <= _BLOCK:
        return tails[offset:end]
    out = tails[offset:]
    while len(out) < count:
        block += 1
        more = _tail_blocks.get(block)
        if more is None:
            more = _tail_block(block)
        out += more[: count - len(out)]
    return out


def _tail(seq: int) -> bytes:
    block, offset = divmod(seq, _BLOCK)
    tails = _tail_blocks.get(block)
    if tails is None:
        tails = _tail_block(block)
    return tails[offset]


def _tail_block(block: int) -> list[bytes]:
    start = block * _BLOCK
    tails = list(map((b"%d\n" + SSE_DATA).__mod__, range(start, start + _BLOCK)))
    if len(_tail_blocks) >= _MAX_BLOCKS:
        # Keep the first blocks (every run starts there); drop the oldest of the rest.
        for key in list(_tail_blocks):
            if key >= 4:
                _tail_blocks.pop(key, None)
                break
    _tail_blocks[block] = tails
    return tails


class RunRecorder:
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

    def __init__(
        self,
        store: EventLog,
        thread_id: str,
        run_id: str,
        *,
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
        self._ended = False
        self._recording = False  # entered, neither broken nor ended: record() takes events
        self._tasks: anyio.abc.TaskGroup | None = None
        self._flush_scope = anyio.CancelScope(shield=True)
        self._id_prefix = b""  # b"id: <epoch>:<runId>:", known once the store is open

    def __repr__(self) -> str:
        state = f"broken={self.broken!r}" if self.broken else f"queued={len(self._queue)}"
        return f"RunRecorder(run_id={self.run_id!r}, next_seq={self.next_seq}, {state})"

    def event_id(self, seq: int) -> str:
        """The SSE id of entry ``seq`` of this run (``<epoch>:<runId>:<seq>``)."""
        return format_event_id(self.store.epoch, self.run_id, seq)

    async def frame(self, data: bytes) -> bytes:
        """Record ``data`` (one event's wire JSON) and return its SSE frame, id included.

        The frame has no ``id:`` line once the run is not recorded (broken):
        a browser then keeps the last id it had, which resuming refuses with
        :class:`RunBroken` rather than answering with a gap.
        """
        seq = await self.record(data)
        if seq is None:
            return SSE_DATA + data + SSE_END
        return b"".join((self._id_prefix, _tail(seq), data, SSE_END))

    def frame_nowait(self, data: bytes) -> bytes | None:
        """``frame(data)`` when it can be done without waiting; None when the queue is full.

        For a caller that cannot await where the event is produced (a run's
        sink, in the agent's own task): on None it keeps the event and awaits
        ``frame`` for it later, before any later event, so the seqs stay in
        order.
        """
        if self._recording:
            queue = self._queue
            size = len(data)
            if queue and (
                len(queue) >= self.max_events or self._queued_bytes + size > self.max_bytes
            ):
                return None
            seq = self.next_seq
            self.next_seq = seq + 1
            queue.append(data)
            self._queued_bytes += size
            wake = self._wake
            if wake is not None:
                self._wake = None
                wake.set()
            return b"".join((self._id_prefix, _tail(seq), data, SSE_END))
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
            queue = self._queue
            count = len(payloads)
            size = sum(map(len, payloads))
            if queue and (
                len(queue) + count > self.max_events or self._queued_bytes + size > self.max_bytes
            ):
                return None
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
            parts[1::4] = _tails(seq, count)
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

    # -- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> RunRecorder:
        """Create the run in the store (so a resume right away finds it), start flushing.

        Errors creating the run (the store is down, the run id was used)
        propagate: the server decides whether to serve the run unrecorded.
        """
        format_event_id(self.store.epoch, self.run_id, 0)  # refuses ids SSE cannot carry
        self._id_prefix = SSE_ID + f"{self.store.epoch}:{self.run_id}:".encode()
        await self.store.append(self.thread_id, self.run_id, [])
        record = await self.store.run(self.run_id)
        if record is not None:
            self._stored = record.last_seq
            self.next_seq = record.last_seq + 1
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
                while self._queue and self.broken is None:
                    flushed = self._flushed = anyio.Event()
                    self._poke()
                    await flushed.wait()
            if scope.cancelled_caught and self.broken is None:
                await self._break(
                    f"the store did not take the run's last {len(self._queue)} events "
                    f"within {self.close_timeout} s"
                )
            self._closing = True
            self._poke()
            if self.broken is None:
                try:
                    with anyio.fail_after(self.close_timeout):
                        await self.store.end_run(self.run_id, status, reason)
                except Exception as exc:
                    _log.error(
                        "event log: could not mark run %r ended: %s", self.run_id, exc,
                        exc_info=exc,
                    )

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
            while not self._fits(size) and self.broken is None:
                room = self._room = anyio.Event()
                await room.wait()
        if self.broken is not None or self._ended:
            return None
        if not self._fits(size):
            await self._break(
                f"the store fell behind: {len(self._queue)} events "
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

    async def _flush_loop(self) -> None:
        # Shielded: when the run is cancelled, its queued events must still
        # be stored (end() waits for them); __aexit__ cancels this scope
        # itself once end() is done, so a hung store cannot hold the run open.
        with self._flush_scope:
            await self._flush()

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
                seqs = await self.store.append(self.thread_id, self.run_id, batch)
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
            exc_info=exc,
        )
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.close_timeout):
            try:
                await self.store.mark_broken(self.run_id, reason)
            except Exception as mark_exc:
                _log.error(
                    "event log: could not mark run %r broken either (%s); a resume may find "
                    "its record live and wait",
                    self.run_id,
                    mark_exc,
                )
