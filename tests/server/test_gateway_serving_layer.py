"""The gateway's serving layer around its relay: when frames leave, what it counts.

A relay batch is one upstream read (up to 64 KiB, hundreds of events). The
first-frame tests watch the ASGI messages the gateway sends against what its
chain has processed when each is sent: no timings, only order.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from agui_pipes import StreamTransformer, TransformerChain
from agui_pipes.codecs import encode_sse
from agui_pipes.server import Gateway

pytestmark = pytest.mark.anyio


def wire(run_id: str, deltas: int) -> bytes:
    """One whole run, SSE-encoded."""
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id="t", run_id=run_id),
        TextMessageStartEvent(message_id="m", role="assistant"),
        *(TextMessageContentEvent(message_id="m", delta=f"d{i} ") for i in range(deltas)),
        TextMessageEndEvent(message_id="m"),
        RunFinishedEvent(thread_id="t", run_id=run_id),
    ]
    return b"".join(encode_sse(e) for e in events)


class Seen(StreamTransformer):
    """Counts the events the chain processed (per run id), passing them on."""

    def __init__(
        self, counts: dict[str, int], run_id: str, on_event: Callable[[BaseEvent], None]
    ) -> None:
        self.counts = counts
        self.run_id = run_id
        self.on_event = on_event

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        self.counts[self.run_id] = self.counts.get(self.run_id, 0) + 1
        self.on_event(event)
        return (event,)


class Served:
    """A gateway over an httpx mock upstream whose chain counts the events of each run.

    ``firsts[run_id]`` is a copy of ``counts`` (events processed per run) taken
    when that run's first body message was sent.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        logger: logging.Logger | None = None,
        on_event: Callable[[BaseEvent], None] = lambda event: None,
    ) -> None:
        self.counts: dict[str, int] = {}
        self.firsts: dict[str, dict[str, int]] = {}
        self.runs: list[str] = []  # run ids in request order, for the chain factory
        self.on_event = on_event
        self.gateway = Gateway(
            "http://upstream.test/",
            chain=self.chain,
            client=client,
            keepalive=None,
            send_timeout=None,
            logger=logger,
        )

    def chain(self) -> TransformerChain:
        return TransformerChain([Seen(self.counts, self.runs.pop(0), self.on_event)])

    async def run(self, run_id: str) -> bytes:
        """POST one run to the gateway as ASGI; returns the body it sent."""
        return await serve_one(self, run_id)


async def serve_one(served: Served, run_id: str) -> bytes:
    counts, firsts, gw = served.counts, served.firsts, served.gateway
    body = (
        f'{{"threadId":"t","runId":"{run_id}","state":{{}},"messages":[],"tools":[],'
        '"context":[],"forwardedProps":{}}'
    ).encode()
    served.runs.append(run_id)
    requested = False
    sent: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            if not sent:
                firsts[run_id] = dict(counts)
            sent.append(message["body"])

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(b"content-type", b"application/json")],
    }
    await gw(scope, receive, send)
    return b"".join(sent)


def sse(stream: AsyncIterator[bytes]) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream)


async def test_first_frame_leaves_before_the_rest_of_a_large_first_read() -> None:
    payload = wire("run-1", 500)  # one upstream chunk of 504 events

    async def chunks() -> AsyncIterator[bytes]:
        yield payload

    async with httpx.AsyncClient(
        transport=httpx.MockTransport(lambda request: sse(chunks()))
    ) as client:
        served = Served(client)
        out = await served.run("run-1")
    assert out == payload  # the same bytes, whatever the slicing
    assert served.counts["run-1"] == 504
    # The first frame (RUN_STARTED) went out after the chain had seen a few
    # events of the read, not all 504 of them.
    assert served.firsts["run-1"]["run-1"] < 8


async def test_a_run_waiting_for_its_first_frame_is_not_kept_behind_another_runs_read() -> None:
    big = wire("run-a", 5000)  # run A: one upstream chunk of 5,004 events
    arrived = anyio.Event()  # B's request reached its upstream: A's sends the rest

    async def chunks_a() -> AsyncIterator[bytes]:
        yield big[: big.index(b"\n\n") + 2]  # RUN_STARTED alone: A's first frame
        await arrived.wait()
        yield big[big.index(b"\n\n") + 2 :]

    async def chunks_b() -> AsyncIterator[bytes]:
        yield wire("run-b", 3)

    async def handler(request: httpx.Request) -> httpx.Response:
        if b"run-a" in request.content:
            return sse(chunks_a())
        arrived.set()
        return sse(chunks_b())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        served = Served(client)
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.run, "run-a")
            # B arrives once A has sent its first frame; A's big read comes
            # while B waits for its upstream's answer.
            while "run-a" not in served.firsts:
                await anyio.lowlevel.checkpoint()
            tg.start_soon(served.run, "run-b")
    assert served.counts == {"run-a": 5004, "run-b": 7}
    # B's first frame left while A was still in the middle of its read.
    assert served.firsts["run-b"]["run-b"] >= 1
    assert served.firsts["run-b"]["run-a"] < 5004


async def test_a_run_started_without_the_info_line_still_logs_true_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without INFO the relay path does not count per stage (the counters are for
    that line only); if INFO is switched on mid-run the line still tells the truth:
    the source and output counts, without the per-stage ones."""
    payload = wire("run-1", 500)

    async def chunks() -> AsyncIterator[bytes]:
        yield payload[:1000]
        yield payload[1000:]

    logger = logging.getLogger("agui_pipes.tests.serving_layer")
    logger.setLevel(logging.WARNING)

    def switch_on(event: BaseEvent) -> None:
        if event.type == "RUN_FINISHED":
            logger.setLevel(logging.INFO)

    caplog.set_level(logging.INFO, logger=logger.name)
    logger.setLevel(logging.WARNING)
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(lambda request: sse(chunks()))
    ) as client:
        served = Served(client, logger, switch_on)
        out = await served.run("run-1")
    assert out == payload
    lines = [r.getMessage() for r in caplog.records if "gateway run run-1 " in r.getMessage()]
    assert len(lines) == 1
    # 504 events went in and came out; the deltas mostly took the relay's bypass,
    # which the source count includes (nothing is counted twice or lost).
    assert "finished" in lines[0]
    assert lines[0].endswith("events source 504 → out 504")


async def test_with_the_info_line_each_stage_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = wire("run-1", 50)

    async def chunks() -> AsyncIterator[bytes]:
        yield payload

    logger = logging.getLogger("agui_pipes.tests.serving_layer_info")
    caplog.set_level(logging.INFO, logger=logger.name)
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(lambda request: sse(chunks()))
    ) as client:
        served = Served(client, logger)
        assert await served.run("run-1") == payload
    lines = [r.getMessage() for r in caplog.records if "gateway run run-1 " in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].endswith("events source 54 → ExpandChunks 54 → Seen 54 → Verify 54 → out 54")
