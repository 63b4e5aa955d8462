"""SSE frames as the load check compares them: raw bytes, keep-alive comments aside.

A durable agui-pipes server sends each event as ``id: <epoch>:<runId>:<seq>`` and
``data: <json>`` lines and a blank line; a replay of the stored log must be the
same bytes. Keep-alive comments (``: ...`` lines) are the one thing a live stream
may carry that a replay does not, so they are dropped before comparing; nothing
else is normalised.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

TERMINAL = (b'"type":"RUN_FINISHED"', b'"type":"RUN_ERROR"')


def complete_frames(raw: bytes) -> tuple[list[bytes], int]:
    """The complete frames in ``raw`` (comments dropped) and the bytes they span.

    A frame cut half-way (no blank line yet) is not complete: a resuming client
    asks for it again, so it is left out of the prefix it keeps.
    """
    frames: list[bytes] = []
    end = raw.rfind(b"\n\n")
    if end < 0:
        return frames, 0
    for block in raw[:end].split(b"\n\n"):
        lines = [line for line in block.split(b"\n") if line and not line.startswith(b":")]
        if lines:
            frames.append(b"\n".join(lines))
    return frames, end + 2


def frame_id(frame: bytes) -> str | None:
    for line in frame.split(b"\n"):
        if line.startswith(b"id:"):
            return line[3:].strip().decode("utf-8", "replace")
    return None


def frame_data(frame: bytes) -> bytes:
    return b"\n".join(
        line[5:].lstrip(b" ") for line in frame.split(b"\n") if line.startswith(b"data:")
    )


@dataclass(frozen=True)
class LogShape:
    """What is wrong with a sequence of frames as one run's log ('' when nothing)."""

    problem: str
    events: int

    @property
    def ok(self) -> bool:
        return not self.problem


def check_log(frames: list[bytes], run_id: str) -> LogShape:
    """Ids ``<epoch>:<run_id>:1..n`` without a gap, one epoch, a terminal event last."""
    if not frames:
        return LogShape("no frames", 0)
    epoch: str | None = None
    for n, frame in enumerate(frames, 1):
        event_id = frame_id(frame)
        if event_id is None:
            data = frame_data(frame)[:100].decode("utf-8", "replace")
            return LogShape(f"frame {n} has no id ({data})", len(frames))
        head, _, seq = event_id.rpartition(":")
        this_epoch, _, this_run = head.partition(":")
        if this_run != run_id:
            return LogShape(f"frame {n} is of run {this_run!r}", len(frames))
        if epoch is None:
            epoch = this_epoch
        elif this_epoch != epoch:
            return LogShape(f"frame {n} changes epoch {epoch} -> {this_epoch}", len(frames))
        if seq != str(n):
            return LogShape(f"frame {n} has seq {seq} (gap or duplicate)", len(frames))
    last = frame_data(frames[-1])
    if not any(marker in last for marker in TERMINAL):
        return LogShape(f"no terminal event (last is {last[:60]!r})", len(frames))
    if TERMINAL[1] in last:
        code = json.loads(last).get("code")
        return LogShape(f"ends in RUN_ERROR {code}", len(frames))
    return LogShape("", len(frames))


def ends_finished(frames: list[bytes]) -> bool:
    """Whether the last frame is RUN_FINISHED (a client that got its whole run)."""
    return bool(frames) and TERMINAL[0] in frame_data(frames[-1])


def first_difference(got: list[bytes], stored: list[bytes]) -> str:
    """Where two frame lists part, for a report line ('' when equal)."""
    for n, (mine, theirs) in enumerate(zip(got, stored, strict=False), 1):
        if mine != theirs:
            return f"frame {n} differs: got {mine[:80]!r}, stored {theirs[:80]!r}"
    if len(got) != len(stored):
        return f"got {len(got)} frames, the stored log has {len(stored)}"
    return ""
