"""Real servers for the serving tests: uvicorn on a free 127.0.0.1 port, in a thread.

The server runs its own asyncio loop in a background thread, so the test's
client can run on asyncio or trio and talks to it over real TCP — the same
path a browser or the TS client takes.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import uvicorn
from ag_ui.core import BaseEvent, Event
from pydantic import TypeAdapter

from agui_pipes.codecs import SSEDecoder

EVENT = TypeAdapter(Event)


class Running:
    """A started server: its base URL and uvicorn's view of open connections."""

    def __init__(self, server: uvicorn.Server, port: int) -> None:
        self.server = server
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    @property
    def open_connections(self) -> int:
        return len(self.server.server_state.connections)

    @property
    def open_tasks(self) -> int:
        return len(self.server.server_state.tasks)


@contextmanager
def serve(app: Any) -> Iterator[Running]:
    """Run ``app`` under uvicorn on 127.0.0.1:<free port> until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="auto",
        log_level="warning",
        loop="asyncio",
        http="h11",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield Running(server, port)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


async def wait_until(condition: Callable[[], bool], within: float, what: str) -> None:
    """Poll ``condition`` until true; fail naming ``what`` after ``within`` seconds.

    Polling, not an event: the condition is set by the server's thread.
    """
    with anyio.move_on_after(within):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.005)
        return
    raise AssertionError(f"not within {within}s: {what}")  # pragma: no cover


async def sse_events(response: httpx.Response) -> AsyncIterator[BaseEvent]:
    """The events of an SSE response, decoded as they arrive."""
    decoder = SSEDecoder()
    async for chunk in response.aiter_raw():
        for payload in decoder.feed(chunk):
            yield EVENT.validate_json(payload)
    decoder.close()


async def post_run(
    client: httpx.AsyncClient, url: str, body: dict[str, Any] | bytes
) -> tuple[httpx.Response, list[BaseEvent]]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with client.stream(
        "POST",
        url,
        content=content,
        headers={"content-type": "application/json", "accept": "text/event-stream"},
    ) as response:
        if response.status_code != 200:
            await response.aread()
            return response, []
        return response, [event async for event in sse_events(response)]


def run_input(run_id: str = "run-1", **extra: Any) -> dict[str, Any]:
    return {"threadId": "thread-1", "runId": run_id, "messages": [], **extra}


class RecordedUpstream:
    """An upstream answering every POST with one recorded SSE body (a raw ASGI app).

    An instance, so Starlette routes it as an ASGI app rather than a request handler.
    """

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body", False):
            pass
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await send({"type": "http.response.body", "body": self.body})
