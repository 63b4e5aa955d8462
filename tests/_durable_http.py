"""Shared by the durable-run HTTP tests (endpoint, gateway): a gated agent, SSE frames with ids."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import httpx
from ag_ui.core import BaseEvent

from agui_pipes.driver import RunContext, RunOutcome
from tests._servers import EVENT

HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}
Frames = list[tuple[str | None, bytes]]


class Gated:
    """Streams ``before`` deltas, waits for its gate (set by the test), then ``after`` more.

    It sleeps ``pace`` seconds after every ``burst`` deltas: with ``burst`` > 1 a
    relay in front of it gets reads holding several frames.
    """

    def __init__(
        self, before: int = 12, after: int = 12, pace: float = 0.002, burst: int = 1
    ) -> None:
        self.before = before
        self.after = after
        self.pace = pace
        self.burst = burst
        self.gates: dict[str, threading.Event] = {}
        self.stopped: dict[str, float] = {}

    def gate(self, run_id: str) -> threading.Event:
        return self.gates.setdefault(run_id, threading.Event())

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        gate = self.gate(ctx.run_id)
        try:
            with ctx.message() as message:
                for n in range(self.before):
                    message.delta(f"a{n} ")
                    if n % self.burst == self.burst - 1:
                        await anyio.sleep(self.pace)
                while not gate.is_set():  # noqa: ASYNC110 - set from the test's thread
                    await anyio.sleep(0.005)
                for n in range(self.after):
                    message.delta(f"b{n} ")
                    if n % self.burst == self.burst - 1:
                        await anyio.sleep(self.pace)
        finally:
            self.stopped[ctx.run_id] = time.monotonic()
        return RunOutcome.success()


def take_frames(buffer: bytearray) -> Frames:
    """Complete SSE frames taken off ``buffer``: (id, data); comments skipped."""
    out: Frames = []
    while (end := buffer.find(b"\n\n")) >= 0:
        block = bytes(buffer[:end])
        del buffer[: end + 2]
        event_id: str | None = None
        data: bytes | None = None
        for line in block.split(b"\n"):
            if line.startswith(b"id: "):
                event_id = line[4:].decode()
            elif line.startswith(b"data: "):
                data = line[6:]
        if data is not None:
            out.append((event_id, data))
    return out


async def read_frames(
    response: httpx.Response, limit: int | None = None, arrived: anyio.Event | None = None
) -> Frames:
    """The response's frames, or its first ``limit`` (the client then cuts the connection).

    ``arrived`` is set once the first frame is in: the reader is following the run.
    """
    got: Frames = []
    buffer = bytearray()
    async for chunk in response.aiter_raw():
        buffer += chunk
        got.extend(take_frames(buffer))
        if got and arrived is not None:
            arrived.set()
        if limit is not None and len(got) >= limit:
            return got[:limit]
    return got


async def get_frames(
    client: httpx.AsyncClient,
    url: str,
    last_id: str | None = None,
    arrived: anyio.Event | None = None,
) -> tuple[int, Frames, bytes]:
    """GET ``url`` (resuming after ``last_id``): status, frames, and the body of an error."""
    headers = {} if last_id is None else {"last-event-id": last_id}
    async with client.stream("GET", url, headers=headers) as response:
        if response.status_code != 200:
            return response.status_code, [], await response.aread()
        return 200, await read_frames(response, arrived=arrived), b""


def seqs(frames: Frames) -> list[int]:
    return [int(str(event_id).rsplit(":", 1)[1]) for event_id, _ in frames]


def events(frames: Frames) -> list[BaseEvent]:
    return [EVENT.validate_json(data) for _, data in frames]
