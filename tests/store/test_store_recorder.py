"""RunRecorder: a run recorded in the background, bounded, and never silently incomplete."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from agui_pipes.store import (
    EventLog,
    MemoryEventLog,
    RunBroken,
    RunEnded,
    RunRecorder,
    RunStatus,
    StoredRun,
    format_event_id,
    open_store,
    parse_event_id,
    sse_frame,
)
from tests._store_backends import BACKENDS, redis_url, store_url_for

__all__ = ["redis_url"]

pytestmark = pytest.mark.anyio


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def events(count: int) -> list[bytes]:
    return [
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"%d"}' % n
        for n in range(1, count + 1)
    ]


async def test_a_run_is_recorded_whole_and_ended(store_url: str) -> None:
    async with open_store(store_url) as store:
        seqs = []
        async with RunRecorder(store, "t", "r", max_batch=7) as recorder:
            assert await store.run("r") is not None  # created before the first event
            for data in events(100):
                seqs.append(await recorder.record(data))
                if len(seqs) % 10 == 0:
                    await anyio.lowlevel.checkpoint()
            assert parse_event_id(recorder.event_id(5)) == (
                parse_event_id(f"{store.epoch}.{recorder.generation}:r:5")
            )
            await recorder.end(RunStatus.FINISHED)
        assert seqs == list(range(1, 101))
        assert await store.read("r") == list(enumerate(events(100), 1))
        record = await store.run("r")
        assert record is not None and record.status is RunStatus.FINISHED
        assert recorder.broken is None


async def test_leaving_the_block_ends_the_run_by_how_it_was_left(store_url: str) -> None:
    async with open_store(store_url) as store:
        async with RunRecorder(store, "t", "ok") as recorder:
            await recorder.record(b"{}")
        with pytest.raises(RuntimeError, match="agent failed"):
            async with RunRecorder(store, "t", "failed") as recorder:
                await recorder.record(b"{}")
                raise RuntimeError("agent failed")
        # Cancelled once its events are in (not after a time: opening the recorder on a
        # loaded machine may take longer than any fixed delay).
        with anyio.CancelScope() as scope:
            async with RunRecorder(store, "t", "cancelled") as recorder:
                for data in events(50):
                    await recorder.record(data)
                scope.cancel()
                await anyio.sleep_forever()
        statuses = {
            r.run_id: (r.status, r.reason, r.last_seq) for r in await store.thread_runs("t")
        }
        assert statuses == {
            "ok": (RunStatus.FINISHED, None, 1),
            "failed": (RunStatus.ERROR, "RuntimeError: agent failed", 1),
            # a cancelled run keeps every event it produced before the cancel
            "cancelled": (RunStatus.CANCELLED, statuses["cancelled"][1], 50),
        }


async def test_a_recorder_refuses_a_finished_run(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.append("t", "r", [])
        await store.end_run("r")
        with pytest.raises(RunEnded):
            async with RunRecorder(store, "t", "r"):
                pass


class _FailingLog(MemoryEventLog):
    """A store whose appends start failing after ``good`` successful ones."""

    def __init__(self, good: int) -> None:
        super().__init__()
        self.good = good

    async def append(
        self, thread_id: str, run_id: str, payloads: Sequence[bytes], *, scope: str = "default"
    ) -> list[int]:
        if payloads:
            if self.good == 0:
                raise OSError("disk full")
            self.good -= 1
        return await super().append(thread_id, run_id, payloads, scope=scope)


class _StuckLog(MemoryEventLog):
    """A store whose appends of events never return (a hung server)."""

    async def append(
        self, thread_id: str, run_id: str, payloads: Sequence[bytes], *, scope: str = "default"
    ) -> list[int]:
        if payloads:
            await anyio.sleep_forever()
        return await super().append(thread_id, run_id, payloads, scope=scope)


async def _record_all(store: EventLog, recorder_kwargs: dict[str, float]) -> list[int | None]:
    seqs: list[int | None] = []
    async with RunRecorder(store, "t", "r", max_batch=5, **recorder_kwargs) as recorder:  # type: ignore[arg-type]
        for data in events(40):
            seqs.append(await recorder.record(data))
            await anyio.lowlevel.checkpoint()
    return seqs


async def test_a_failing_store_breaks_the_run_once_and_the_stream_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="agui_pipes.store")
    async with _FailingLog(good=2) as store:
        with anyio.fail_after(10):
            seqs = await _record_all(store, {"linger": 0})
        assert seqs[0] == 1 and None in seqs
        recorded = [seq for seq in seqs if seq is not None]
        assert recorded == list(range(1, len(recorded) + 1))  # no seq skipped, none reused
        assert all(seq is None for seq in seqs[len(recorded) :])  # dropped from then on
        record = await store.run("r")
        assert record is not None and record.status is RunStatus.BROKEN
        assert "disk full" in (record.reason or "")
        with pytest.raises(RunBroken, match="disk full"):
            await store.read("r")
    logged = [r for r in caplog.records if r.name == "agui_pipes.store"]
    assert len(logged) == 1
    assert "cannot be resumed" in logged[0].getMessage()


async def test_a_stuck_store_fills_the_bounded_buffer_then_breaks_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="agui_pipes.store")
    async with _StuckLog() as store:
        with anyio.fail_after(10):
            seqs = await _record_all(
                store, {"max_events": 8, "stall_timeout": 0.2, "close_timeout": 0.2}
            )
        # 8 queued, then record() waited stall_timeout for room and gave up
        assert seqs[:8] == list(range(1, 9))
        assert seqs[8:] == [None] * 32
        record = await store.run("r")
        assert record is not None and record.status is RunStatus.BROKEN
        assert "fell behind" in (record.reason or "")
    assert len([r for r in caplog.records if r.name == "agui_pipes.store"]) == 1


async def test_the_byte_bound_counts_too() -> None:
    async with _StuckLog() as store:
        async with RunRecorder(
            store, "t", "r", max_bytes=100, stall_timeout=0.05, close_timeout=0.05
        ) as recorder:
            assert await recorder.record(b"x" * 500) == 1  # alone: larger than the bound, taken
            assert await recorder.record(b"y") is None  # no room, the store never drains
        assert recorder.broken is not None and "500 bytes" in recorder.broken


async def test_end_breaks_a_run_whose_last_events_cannot_be_stored() -> None:
    async with _StuckLog() as store:
        async with RunRecorder(store, "t", "r", close_timeout=0.1) as recorder:
            assert await recorder.record(b"{}") == 1
        assert recorder.broken is not None and "did not take" in recorder.broken
        record = await store.run("r")
        assert record is not None and record.status is RunStatus.BROKEN


class _StuckLogSaying(_StuckLog):
    """A hung store that says when an append of events has begun."""

    def __init__(self) -> None:
        super().__init__()
        self.appending = anyio.Event()

    async def append(
        self, thread_id: str, run_id: str, payloads: Sequence[bytes], *, scope: str = "default"
    ) -> list[int]:
        if payloads:
            self.appending.set()
        return await super().append(thread_id, run_id, payloads, scope=scope)


async def test_a_writer_cancelled_from_outside_breaks_the_run_at_once(
    anyio_backend: str,
) -> None:
    # An event loop that closes with the run still served (an ASGI server
    # without a lifespan giving up on a stalled run) cancels every task, the
    # writer too, whatever its anyio shield says. Nothing stores the queue after
    # that: end() breaks the run now, not after close_timeout, and says why.
    if anyio_backend != "asyncio":
        pytest.skip("only asyncio cancels a task from outside its cancel scopes")
    import asyncio

    hung = _StuckLogSaying()
    async with hung as store:
        # close_timeout: long beside the guard below, short enough that a failure ends.
        async with RunRecorder(store, "t", "r", close_timeout=30) as recorder:
            assert await recorder.record(b"{}") == 1
            writers = [
                task
                for task in asyncio.all_tasks()
                if task.get_name().endswith("RunRecorder._flush_loop")
            ]
            assert len(writers) == 1, writers
            await hung.appending.wait()  # the writer holds the event, in the store's call
            writers[0].cancel()
            with anyio.fail_after(10):  # a guard against waiting out close_timeout
                await recorder.end(RunStatus.CANCELLED)
        assert recorder.broken is not None and "writer was cancelled" in recorder.broken
        record = await store.run("r")
        assert record is not None and record.status is RunStatus.BROKEN


class _CountingLog(MemoryEventLog):
    """A store counting the batches it was given."""

    batches: list[int]

    async def append(
        self, thread_id: str, run_id: str, payloads: Sequence[bytes], *, scope: str = "default"
    ) -> list[int]:
        self.batches.append(len(payloads))
        return await super().append(thread_id, run_id, payloads, scope=scope)


async def test_linger_gathers_a_burst_into_few_appends() -> None:
    for linger, most in ((0.5, 1), (0, 40)):
        async with _CountingLog() as store:
            store.batches = []
            async with RunRecorder(store, "t", "r", linger=linger) as recorder:
                for data in events(40):
                    await recorder.record(data)
                    await anyio.lowlevel.checkpoint()  # the flusher may run after each event
            event_batches = [n for n in store.batches if n]
            assert sum(event_batches) == 40
            assert 1 <= len(event_batches) <= most
            if linger == 0:
                assert len(event_batches) > 1  # flushed as the events came
            assert await store.read("r") == list(enumerate(events(40), 1))


async def test_end_does_not_wait_out_the_linger() -> None:
    async with open_store("memory:") as store:
        with anyio.fail_after(5):
            async with RunRecorder(store, "t", "r", linger=60) as recorder:
                await recorder.record(b"{}")
                await anyio.wait_all_tasks_blocked()  # the flusher lingers for more
        assert await store.read("r") == [(1, b"{}")]


def test_bounds_are_checked() -> None:
    store = MemoryEventLog()
    with pytest.raises(ValueError, match="max_events must be a positive int, got 0"):
        RunRecorder(store, "t", "r", max_events=0)
    with pytest.raises(ValueError, match="stall_timeout must be >= 0"):
        RunRecorder(store, "t", "r", stall_timeout=-1)
    with pytest.raises(ValueError, match="linger must be >= 0"):
        RunRecorder(store, "t", "r", linger=-0.1)


async def test_frames_carry_the_ids_a_resume_accepts() -> None:
    async with open_store("memory:") as store:
        async with RunRecorder(store, "t", "r:1") as recorder:
            frames = [await recorder.frame(data) for data in events(3)]
        assert frames[1] == sse_frame(events(3)[1], f"{store.epoch}.{recorder.generation}:r:1:2")
        assert frames[1].startswith(
            f"id: {store.epoch}.{recorder.generation}:r:1:2\ndata: ".encode()
        )
        last_id = frames[0].split(b"\n")[0].removeprefix(b"id: ").decode()
        after = await store.resume_after("r:1", last_id)
        replay = [
            sse_frame(data, format_event_id(store.epoch, "r:1", seq, recorder.generation))
            async for seq, data in store.follow("r:1", after=after)
        ]
        assert replay == frames[1:]


async def test_a_batch_of_frames_is_numbered_and_stored_as_one_frame_each_would_be() -> None:
    async with open_store("memory:") as store:
        async with RunRecorder(store, "t", "r") as recorder:
            first = await recorder.frame(events(1)[0])
            batch = recorder.frames_nowait(events(4)[1:])
        assert batch is not None
        whole = [
            sse_frame(data, f"{store.epoch}.{recorder.generation}:r:{seq}")
            for seq, data in enumerate(events(4), 1)
        ]
        assert first + batch == b"".join(whole)
        assert [data for _, data in await store.read("r")] == events(4)


async def test_batches_of_changing_sizes_keep_a_percent_in_the_run_id_literal() -> None:
    # frames_nowait formats a whole batch at once: a "%" in the run id or a payload is
    # text, and a batch of another size than the last gets its own frames.
    run_id = "r%s%d%%1"
    sizes = (2, 3, 2, 1, 5)
    sent = [b'{"n":"%%s%d"}' % size for size in sizes for _ in range(size)]
    async with open_store("memory:") as store:
        got = b""
        async with RunRecorder(store, "t", run_id) as recorder:
            for size in sizes:
                batch = recorder.frames_nowait([b'{"n":"%%s%d"}' % size] * size)
                assert batch is not None
                got += batch
        whole = [
            sse_frame(data, f"{store.epoch}.{recorder.generation}:{run_id}:{seq}")
            for seq, data in enumerate(sent, 1)
        ]
        assert got == b"".join(whole)
        assert [data for _, data in await store.read(run_id)] == sent


async def test_ids_stay_exact_across_thousands_of_frames_in_odd_batches() -> None:
    # The numbers come from a shared table built in blocks: batches that straddle a
    # block's end, single frames and large seqs all get their own seq.
    sizes = [7, 1, 1000, 3, 1, 2048, 13, 1]
    sent = [b'{"i":%d}' % n for n in range(sum(sizes))]
    async with open_store("memory:") as store:
        got: list[bytes] = []
        async with RunRecorder(store, "t", "r", max_events=5000) as recorder:
            position = 0
            for size in sizes:
                part = sent[position : position + size]
                position += size
                framed = (
                    recorder.frame_nowait(part[0]) if size == 1 else recorder.frames_nowait(part)
                )
                assert framed is not None
                got.append(framed)
        whole = [
            sse_frame(data, f"{store.epoch}.{recorder.generation}:r:{seq}")
            for seq, data in enumerate(sent, 1)
        ]
        assert b"".join(got) == b"".join(whole)


async def test_a_batch_that_does_not_fit_is_not_taken() -> None:
    async with (
        _StuckLog() as store,
        RunRecorder(
            store, "t", "r", max_events=4, stall_timeout=0.05, close_timeout=0.05
        ) as recorder,
    ):
        assert recorder.frames_nowait(events(6)) is not None  # an empty queue takes it
        assert recorder.frames_nowait(events(1)) is None  # full: nothing taken
        assert recorder.next_seq == 7


async def test_a_broken_run_sends_frames_without_ids() -> None:
    async with _FailingLog(good=0) as store:
        async with RunRecorder(store, "t", "r", linger=0) as recorder:
            first = await recorder.frame(b"{}")
            for _ in range(500):  # the flusher's failed append breaks the run
                if recorder.broken is not None:
                    break
                await anyio.sleep(0.01)
            assert recorder.broken is not None
            assert await recorder.frame(b"{}") == b"data: {}\n\n"
        assert first.startswith(b"id: ")


async def test_a_run_id_sse_cannot_carry_is_refused_up_front() -> None:
    async with open_store("memory:") as store:
        with pytest.raises(ValueError, match="line break"):
            async with RunRecorder(store, "t", "r\nx"):
                pass
        assert await store.run("r\nx") is None


async def test_recording_before_entering_is_an_error() -> None:
    async with open_store("memory:") as store:
        recorder = RunRecorder(store, "t", "r")
        with pytest.raises(RuntimeError, match="not started"):
            await recorder.record(b"{}")
        async with recorder:
            assert await recorder.record(b"{}") == 1
        assert await recorder.record(b"{}") is None  # ended: no longer recorded


class _HungEndLog(MemoryEventLog):
    """A store whose end_run never returns."""

    async def end_run(
        self,
        run_id: str,
        status: RunStatus = RunStatus.FINISHED,
        reason: str | None = None,
        *,
        scope: str = "default",
    ) -> StoredRun:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_hung_end_run_does_not_hold_the_run_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="agui_pipes.store")
    async with _HungEndLog() as store:
        with anyio.fail_after(5):
            async with RunRecorder(store, "t", "r", close_timeout=0.1) as recorder:
                await recorder.record(b"{}")
        assert await store.read("r") == [(1, b"{}")]
    assert any("could not mark run 'r' ended" in r.getMessage() for r in caplog.records)
