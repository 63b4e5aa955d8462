"""A producer that yields as fast as it can is awaited only as the client reads.

The producer never awaits between its events: only the endpoint's own waits can
hold it. With a client that reads nothing, what it yielded must stay within
what the send buffer (``send_buffer``) and the one write in flight
(``_BATCH_BYTES``, the writer's batch) hold, plus a few events in the chain —
and, on a real server, the sockets' buffers; the server's memory within
``send_buffer`` plus a constant. After ``send_timeout`` the producer's iterator
is closed where it was held (with a store, the run is detached instead and goes
on into the event log). Real uvicorn with a raw-socket client
(tests/_slow_clients.py), with and without a store, and the endpoint as an ASGI
app whose client never takes a write, on asyncio and trio.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from agui_pipes.codecs import encode_sse
from agui_pipes.server import AgentEndpoint, build_app
from agui_pipes.server._streaming import _BATCH_BYTES
from agui_pipes.server.auth import Principal
from tests._servers import serve
from tests._slow_clients import KIB, poll, stalled_client, wait_until_held
from tests.server.test_server_backpressure import traced

SEND_BUFFER = 64 * KIB
SEND_TIMEOUT = 2.0
DELTA = "x" * 10_000
SLACK = 1024 * KIB
"""What a stalled run holds beside ``send_buffer`` (as tests/server/test_server_backpressure.py
measures it): the transport's buffer, the write in flight, the tracing itself."""
IN_CHAIN = 8
"""Events the endpoint may hold between the producer and the queue: the one being
encoded, and what the chain's stages (chunk expansion, verification) hold at once."""


class Flood:
    """Yields ``n`` 10 KB deltas without ever awaiting; counts them, records how it ended."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.yielded = 0
        self.ended_by: str | None = None
        self.ended = threading.Event()

    async def __call__(
        self, run_input: RunAgentInput, principal: Principal
    ) -> AsyncIterator[BaseEvent]:
        ids = {"thread_id": run_input.thread_id, "run_id": run_input.run_id}
        delta = TextMessageContentEvent(message_id="m-1", delta=DELTA)
        try:
            yield RunStartedEvent(**ids)
            yield TextMessageStartEvent(message_id="m-1", role="assistant")
            for _ in range(self.n):
                self.yielded += 1
                yield delta
            yield TextMessageEndEvent(message_id="m-1")
            yield RunFinishedEvent(**ids)
        except BaseException as exc:
            self.ended_by = type(exc).__name__
            raise
        finally:
            self.ended.set()
        self.ended_by = "return"


FRAME = len(encode_sse(TextMessageContentEvent(message_id="m-1", delta=DELTA)))


def _endpoint(producer: Flood, **options: Any) -> AgentEndpoint:
    return AgentEndpoint(
        producer=producer,
        keepalive=None,
        send_buffer=SEND_BUFFER,
        send_timeout=SEND_TIMEOUT,
        **options,
    )


def _warm_up(**options: Any) -> None:
    """One run first, so what a first run imports or caches is not counted."""
    with serve(_endpoint(Flood(10), **options)) as server:
        body = {"threadId": "w", "runId": "w", "messages": []}
        response = httpx.post(server.url, json=body, timeout=30)
        assert response.status_code == 200 and "RUN_FINISHED" in response.text


def test_a_stalled_client_holds_the_producer_and_closes_it_after_the_send_timeout() -> None:
    _warm_up()
    producer = Flood(100_000)
    with serve(_endpoint(producer)) as server:
        with traced() as growth, stalled_client(server.port):
            poll(lambda: producer.yielded > 0, 10, "the producer started")
            held_since = wait_until_held(lambda: producer.yielded)
            held_at = producer.yielded
            # Held: what it yielded is what the buffers hold (the sockets' too), far
            # from the whole run.
            assert not producer.ended.is_set()
            assert held_at < 2_000, held_at
            assert growth() < SEND_BUFFER + SLACK, growth()
            # The send timeout gives the client up: the producer is closed where it was
            # held (at its yield), and yields nothing more.
            assert producer.ended.wait(SEND_TIMEOUT + 5), "the producer was not closed"
            assert time.monotonic() - held_since < SEND_TIMEOUT + 5
            assert producer.ended_by == "GeneratorExit"
            assert producer.yielded == held_at
        poll(lambda: server.open_tasks == 0, 5, "the run's task ended")


def test_with_a_store_a_stalled_client_holds_the_producer_until_it_is_detached(
    tmp_path: Path,
) -> None:
    """Recorded, the run outlives its client: held while the client holds it, then it
    goes on into the event log (paced by the store's writer, whose queue the recorder
    bounds: tests/store) for a resume to read."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    _warm_up(store=store)
    producer = Flood(1_500)
    app = build_app(
        producer=producer,
        store=store,
        keepalive=None,
        send_buffer=SEND_BUFFER,
        send_timeout=SEND_TIMEOUT,
    )
    with serve(app) as server:
        with stalled_client(server.port):
            poll(lambda: producer.yielded > 0, 10, "the producer started")
            wait_until_held(lambda: producer.yielded)
            assert not producer.ended.is_set()
            assert producer.yielded < producer.n
            # The send timeout detaches the client; the run goes on to its end.
            assert producer.ended.wait(SEND_TIMEOUT + 30), "the detached run did not end"
        assert producer.ended_by == "return" and producer.yielded == producer.n
        poll(lambda: server.open_tasks == 0, 10, "the run's task ended")
        replay = httpx.get(f"{server.url}/runs/r", timeout=60)
    assert replay.status_code == 200
    assert replay.text.count("TEXT_MESSAGE_CONTENT") == producer.n
    assert '"type":"RUN_FINISHED"' in replay.text


async def _stalled(app: AgentEndpoint) -> list[MutableMapping[str, Any]]:
    """POST to the ASGI app with a client that takes the response's start, then no write."""
    body = json.dumps({"threadId": "t", "runId": "r", "messages": []}).encode()
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            await anyio.sleep_forever()  # the client never takes a write

    await app({"type": "http", "method": "POST", "headers": []}, receive, send)
    return sent


@pytest.mark.anyio
async def test_in_process_the_producer_yields_no_more_than_the_buffers_hold() -> None:
    producer = Flood(100_000)
    app = _endpoint(producer)
    async with anyio.create_task_group() as group:
        group.start_soon(_stalled, app)
        await _until_held(producer)
        bound = (SEND_BUFFER + _BATCH_BYTES) // FRAME + IN_CHAIN
        assert producer.yielded <= bound, (producer.yielded, bound)
        assert not producer.ended.is_set()
        # The send timeout ends the run: the producer's iterator is closed.
        with anyio.fail_after(SEND_TIMEOUT + 5):
            while not producer.ended.is_set():  # noqa: ASYNC110 - set by the endpoint's task
                await anyio.sleep(0.01)
    assert producer.ended_by == "GeneratorExit"


async def _until_held(producer: Flood, quiet: float = 0.3) -> None:
    """Wait until the producer's count stops growing for ``quiet`` seconds."""
    with anyio.fail_after(20):
        while not producer.yielded:  # noqa: ASYNC110 - counted by the endpoint's task
            await anyio.sleep(0.01)
        last, since = producer.yielded, anyio.current_time()
        while anyio.current_time() - since < quiet:
            await anyio.sleep(0.02)
            if producer.yielded != last:
                last, since = producer.yielded, anyio.current_time()
