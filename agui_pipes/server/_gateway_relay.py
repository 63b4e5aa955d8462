"""The gateway's relay loop: upstream bytes to client frames, one batch per network chunk.

``relay_frames`` feeds each upstream chunk's payloads to a ``Relay`` (decode,
the sync chain and encode in one pass) and yields what it wrote, so a chunk
becomes one write. With a recorder (a recorded run) the relay hands over each
batch's events apart and the recorder frames them with their ids.

Fairness between runs: a run waiting for its first frame takes slices that
double from one event (``FirstFrame``), so its first frame leaves after the
work of a few events rather than of a whole read, and while one waits, the
others hand the loop back every ``SHARED_SLICE`` events. Slicing changes only
when bytes are written, never which.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import httpx
from ag_ui.core import BaseEvent, RunErrorEvent, RunFinishedEvent, RunStartedEvent

from .._pipeline.chain import TransformerChain
from ..codecs import DecodeError, DecodeWarning, SSEDecoder
from ..relay import Relay
from ._stats import RunStats
from ._upstream import UPSTREAM_FAILURES, Upstream, UpstreamRun
from ._withheld import ToldViolations

if TYPE_CHECKING:
    from ..store import RunRecorder

__all__ = ["SHARED_SLICE", "FirstFrame", "FirstFrames", "relay_frames"]

SHARED_SLICE = 128
"""Events a run relays between two hand-backs of the loop while another run waits for its
first frame: ~1 ms of work, against ~5 ms for a whole 64 KiB read."""


class FirstFrames:
    """How many of a gateway's runs have not sent their first frame yet."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = 0


class FirstFrame:
    """One run, counted in its gateway's ``FirstFrames`` until its first frame is out."""

    __slots__ = ("_all", "pending", "written")

    def __init__(self, waiting: FirstFrames) -> None:
        self._all = waiting
        self.pending = True
        self.written = anyio.Event()
        waiting.waiting += 1

    def wrote(self) -> None:
        """The response handed its first body to the server (``SSERun(on_first_write=)``)."""
        self.written.set()

    def sent(self) -> None:
        """The first frame is out (or the run ended): stop counting this run."""
        if self.pending:
            self.pending = False
            self._all.waiting -= 1

    def others(self) -> bool:
        """Whether another run of the gateway waits for its first frame."""
        return self._all.waiting > self.pending

    async def after_slice(self, wrote: bool, *, more: bool) -> None:
        """Between two slices of a read: wait for the first frame to go out, or hand back.

        ``wrote``: the slice gave bytes; ``more``: the read has slices left.
        """
        if wrote and self.pending:
            # Let the writer send it before the rest of the read: the response
            # tells when its first body went out (counting scheduler turns would
            # depend on how the backend and the writer order theirs).
            await self.written.wait()
            self.sent()
        elif more and self.others():
            # Another run waits for its first frame: let it have the loop rather
            # than wait behind this whole read.
            await anyio.lowlevel.checkpoint()


RUN_CLASSES: frozenset[type[BaseEvent]] = frozenset(
    {RunStartedEvent, RunFinishedEvent, RunErrorEvent}
)
"""The events the relay's hooks watch: they say whether a run is open and how it ended."""


class _Frames:
    """The relay's frames as they go to the client: written by the relay itself."""

    __slots__ = ("_relay",)

    def __init__(self, relay: Relay) -> None:
        self._relay = relay

    async def feed(self, payloads: list[bytes]) -> bytes:
        return self._relay.feed(payloads)

    async def unsent(self) -> bytes:
        """What the events before a failing one gave."""
        return self._relay.take_unsent()

    async def finish(self) -> bytes:
        return self._relay.finish()

    async def drain(self) -> bytes:
        """What the stages still hold, before the server writes the run's terminal event."""
        return self._relay.drain()


class _RecordedFrames(_Frames):
    """The relay's events recorded, each framed by the recorder with its ``id:`` line."""

    __slots__ = ("_recorder",)

    def __init__(self, relay: Relay, recorder: RunRecorder) -> None:
        super().__init__(relay)
        self._recorder = recorder

    async def feed(self, payloads: list[bytes]) -> bytes:
        items = self._relay.feed_payloads(payloads)
        framed = self._recorder.frames_nowait(items) if items else b""
        # None: the recorder's queue is full: wait for room, in order.
        return await self._recorder.frames(items) if framed is None else framed

    async def unsent(self) -> bytes:
        return await self._recorder.frames(self._relay.take_unsent_payloads())

    async def finish(self) -> bytes:
        items = self._relay.finish_payloads()
        return await self._recorder.frames(items) if items else b""

    async def drain(self) -> bytes:
        items = self._relay.drain_payloads()
        return await self._recorder.frames(items) if items else b""


def _slice_end(first: FirstFrame, start: int, total: int) -> int:
    """Where the slice of a chunk's ``total`` payloads that begins at ``start`` ends."""
    if first.pending:
        # Until its first frame is out a run takes slices that double from one
        # event: that frame leaves after the work of a few events, not of a
        # whole read (hundreds).
        return min(total, 2 * start or 1)
    if first.others():
        return min(total, start + SHARED_SLICE)
    return total


def _watching(
    stats: RunStats, note: Callable[[BaseEvent], None] | None
) -> Callable[[BaseEvent], None]:
    """What the relay calls with each RUN_* event it writes: the stats, and ``note``."""
    if note is None:
        return stats.note_output
    note_output = stats.note_output

    def on_event(event: BaseEvent) -> None:
        note_output(event)
        note(event)

    return on_event


def _count(stats: RunStats, relay: Relay) -> None:
    """Put what the relay counted into ``stats``, once the upstream is read."""
    # Forwarded events passed every stage (and so every counter) unseen.
    stats.forwarded = relay.events_forwarded
    if not stats.stage_names:  # no counters: what entered the chain
        stats.counts[0] = relay.events_in - relay.events_unknown - relay.events_forwarded


async def relay_frames(
    upstream: Upstream,
    response: httpx.Response,
    chain: TransformerChain,
    stats: RunStats,
    told: ToldViolations,
    first: FirstFrame,
    on_warning: Callable[[DecodeWarning], None],
    note: Callable[[BaseEvent], None] | None = None,
    recorder: RunRecorder | None = None,
) -> AsyncIterator[bytes]:
    """Decode + ``chain.apply`` + encoding of ``response``, one batch per upstream chunk.

    With ``recorder`` (a recorded run) every event is recorded and its
    frame carries its ``id:`` line: the relay hands the recorder each
    batch's events apart, so they are framed once, with their ids,
    rather than framed, split and framed again.

    Fails exactly as that path does: the same ``UpstreamError`` codes and
    messages, the chain's own exceptions as they are. When an event fails
    mid-chunk, the frames of the events before it are still yielded first.
    Before any failure is raised (the upstream cut off, broken, silent or
    malformed, a stage raising) what the stages still hold is yielded too
    (``Relay.drain``), so the server's RUN_ERROR comes after it.
    """
    decoder = SSEDecoder(max_frame_bytes=upstream.max_frame)
    run = UpstreamRun()
    # The hooks watch only the run's own events, so the relay's bypass stays
    # on for the deltas that make up most of the stream.
    relay = Relay(
        chain,
        on_warning=on_warning,
        on_event=_watching(stats, note),
        output_types=RUN_CLASSES,
        on_input=run.see,
        input_types=RUN_CLASSES,
    )
    frames = _Frames(relay) if recorder is None else _RecordedFrames(relay, recorder)
    try:
        async for chunk in upstream.chunks(response):
            payloads = decoder.feed_bytes(chunk)
            total = len(payloads)
            start = 0
            while start < total:
                end = _slice_end(first, start, total)
                part = payloads if end - start == total else payloads[start:end]
                start = end
                try:
                    out = await frames.feed(part)
                except Exception as exc:
                    unsent = await frames.unsent() + await frames.drain()
                    stats.written = relay.events_out
                    if unsent:
                        first.sent()
                        yield unsent
                    told.check(exc)
                    raise
                stats.written = relay.events_out
                if out:
                    yield out
                await first.after_slice(bool(out), more=start < total)
        decoder.close()
    except UPSTREAM_FAILURES as exc:
        if isinstance(exc, DecodeError) and exc.stage is not None:
            raise  # a stage's own refusal (the chain named it), not the upstream's bytes
        # Cut off, broken or silent between two events: release what the stages hold.
        held = await frames.drain()  # nothing when a failing feed drained already
        if held:
            stats.written = relay.events_out
            first.sent()
            yield held
        raise upstream.failure(exc, relay.events_in) from exc
    finally:
        _count(stats, relay)
    run.seen_any = relay.events_in > relay.events_unknown
    try:
        run.check_ended()
        out = await frames.finish()
    except Exception as exc:
        out = await frames.drain()  # ended mid-run, or a stage's finish raised
        stats.written = relay.events_out
        if out:
            first.sent()
            yield out
        told.check(exc)
        raise
    stats.written = relay.events_out
    if out:
        first.sent()
        yield out
