"""``RunRecorder.rewrite_first``: the run's first event rewritten once, stored and sent alike.

The server puts a run's new input messages on its RUN_STARTED this way; the
rewrite must reach both the frame the client gets and the log, on each of the
recorder's framing paths, and touch no later event.
"""

from __future__ import annotations

import pytest

from agui_pipes.store import MemoryEventLog, RunRecorder, RunStatus

pytestmark = pytest.mark.anyio


def _mark(data: bytes) -> bytes:
    return data.replace(b'"n":0', b'"n":0,"marked":true')


def _event(n: int) -> bytes:
    return b'{"type":"CUSTOM","name":"e","value":{"n":%d}}' % n


@pytest.mark.parametrize("path", ["frame", "frame_nowait", "frames_nowait"])
async def test_the_first_event_is_rewritten_once_in_the_frame_and_the_log(path: str) -> None:
    async with MemoryEventLog() as store:
        async with RunRecorder(store, "t", "r") as recorder:
            recorder.rewrite_first = _mark
            if path == "frame":
                frames = [await recorder.frame(_event(n)) for n in range(3)]
            elif path == "frame_nowait":
                framed = [recorder.frame_nowait(_event(n)) for n in range(3)]
                assert all(frame is not None for frame in framed)
                frames = [frame for frame in framed if frame is not None]
            else:
                joined = recorder.frames_nowait([_event(n) for n in range(3)])
                assert joined is not None
                frames = [frame + b"\n\n" for frame in joined.split(b"\n\n") if frame]
            assert recorder.rewrite_first is None
            # A zero again later is not the first event: left alone.
            later = await recorder.frame(_event(0))
            await recorder.end(RunStatus.FINISHED)
        stored = [data for _, data in await store.read("r")]
    assert stored[0] == _mark(_event(0)) != _event(0)
    assert stored[1:] == [_event(1), _event(2), _event(0)]
    assert frames[0].endswith(b"data: " + stored[0] + b"\n\n")
    assert frames[1].endswith(b"data: " + _event(1) + b"\n\n")
    assert later.endswith(b"data: " + _event(0) + b"\n\n")
