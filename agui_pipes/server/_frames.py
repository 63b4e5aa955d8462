"""The encoded frames waiting for one client, bounded in bytes.

Between the run (producing frames as fast as the agent or upstream goes) and
the writer (sending them as fast as the client reads) sits this queue. It is
bounded by the *bytes* it holds, not a count of frames — a count lets a run
of large events buffer without limit — and when it is full the producer
waits, which is what stops the agent (through the driver's backpressure) or
the reading of the upstream (the gateway reads its next chunk only after the
last one was queued). A frame larger than the whole bound is still accepted
when the queue is empty, so one big event cannot wedge a run.

A producer that cannot wait — the agent's own task, handing over each frame
as it emits (``push``) — queues past the bound instead, and is held at its
next await while the queue is ``full`` until the writer has taken it down to
half (``wait_for_room``): the bound is then ``limit`` plus what the agent
emits between two awaits, as the run driver's own backpressure is.
"""

from __future__ import annotations

from collections import deque

import anyio

from ._options import DEFAULT_SEND_BUFFER

__all__ = ["DEFAULT_SEND_BUFFER", "FrameQueue"]


class FrameQueue:
    """Frames for one writer, from producers of which only one waits for room.

    ``offer`` queues without waiting (False when full), ``put`` waits for
    room, ``push`` queues whatever the size (its caller waits for room
    later, with ``wait_for_room``); ``take`` joins what is queued, up to a
    byte budget, into one write.
    ``close`` ends the stream once the queued frames are taken.
    """

    __slots__ = ("_frames", "_readable", "_room", "closed", "limit", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.closed = False
        self._frames: deque[bytes] = deque()
        self._readable: anyio.Event | None = None
        self._room: anyio.Event | None = None

    def offer(self, frame: bytes) -> bool:
        """Queue ``frame`` if it fits (always when the queue is empty); False if full."""
        size = self.size
        new_size = size + len(frame)
        if new_size > self.limit and size:
            return False
        self._frames.append(frame)
        self.size = new_size
        readable = self._readable
        if readable is not None:
            self._readable = None
            readable.set()
        return True

    def push(self, frame: bytes) -> None:
        """Queue ``frame`` even past the bound: for a producer that cannot wait here."""
        self._frames.append(frame)
        self.size += len(frame)
        readable = self._readable
        if readable is not None:
            self._readable = None
            readable.set()

    def full(self) -> bool:
        """Whether a producer should wait for room before it queues more."""
        return self.size >= self.limit and not self.closed

    async def wait_for_room(self) -> None:
        """Return once the writer has taken the queue down to half its bound (or it closed).

        Half, not just below the bound: a producer held until then and a
        writer taking a batch at a time do not wake each other per frame.
        """
        low = self.limit // 2
        while self.size > low and not self.closed:
            room = self._room = anyio.Event()
            await room.wait()

    async def put(self, frame: bytes) -> None:
        """Queue ``frame``, waiting while the queue is full."""
        while not self.offer(frame):
            room = self._room = anyio.Event()
            await room.wait()

    def take(self, budget: int) -> bytes | None:
        """Up to ``budget`` bytes of queued frames (at least one frame) as one write, or None."""
        frames = self._frames
        if not frames:
            return None
        first = frames.popleft()
        taken = len(first)
        if not frames or taken + len(frames[0]) > budget:
            body = first
        else:
            batch = [first]
            while frames and taken + len(frames[0]) <= budget:
                frame = frames.popleft()
                taken += len(frame)
                batch.append(frame)
            body = b"".join(batch)
        self.size -= taken
        room = self._room
        if room is not None:
            self._room = None
            room.set()
        return body

    async def wait_readable(self) -> None:
        """Return once a frame is queued or the queue is closed."""
        while not self._frames and not self.closed:
            readable = self._readable = anyio.Event()
            await readable.wait()

    def close(self) -> None:
        """No more frames: the writer ends after taking those queued."""
        self.closed = True
        readable = self._readable
        if readable is not None:
            self._readable = None
            readable.set()
