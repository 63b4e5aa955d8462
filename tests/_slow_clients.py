"""A flooding agent and a client that reads nothing, for the backpressure tests.

The client sends its POST over a raw socket with a small receive buffer and
then never reads, which is what a stalled browser tab or a hostile reader
looks like to the server: its writes stop completing.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel

from agui_pipes.driver import RunContext, RunOutcome

DELTA = "x" * 1000
KIB = 1024


class Flood:
    """Streams ``n`` deltas (1 KB each), awaiting after each; records how it ended (thread-safe)."""

    def __init__(self, n: int, delta: str = DELTA) -> None:
        self.n = n
        self.delta = delta
        self.emitted = 0
        self.ended_by: str | None = None
        self.ended = threading.Event()

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        try:
            with ctx.assistant_message() as message:
                for _ in range(self.n):
                    message.delta(self.delta)
                    self.emitted += 1
                    await anyio.lowlevel.checkpoint()
        except BaseException as exc:
            self.ended_by = type(exc).__name__
            raise
        finally:
            self.ended.set()
        self.ended_by = "return"
        return RunOutcome.success()


def poll(condition: Callable[[], bool], within: float, what: str) -> None:
    """Poll a condition set by the server's thread; fail naming ``what``."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within}s: {what}")
        time.sleep(0.01)


def wait_until_held(count: Callable[[], int], quiet: float = 0.5, within: float = 20) -> float:
    """Wait until ``count()`` stops growing for ``quiet`` seconds; return when it stopped."""
    deadline = time.monotonic() + within
    last, since = count(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return since
    raise AssertionError(f"the producer was never held: {count()} events and counting")


@contextmanager
def stalled_client(port: int, path: str = "/", run_id: str = "r") -> Iterator[socket.socket]:
    """A client that POSTs a run and then reads nothing (a small receive buffer)."""
    body = json.dumps({"threadId": "t", "runId": run_id, "messages": []}).encode()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    request = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(request + body)
    try:
        yield sock
    finally:
        sock.close()
