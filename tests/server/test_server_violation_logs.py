"""A producer that breaks the protocol is one WARNING line in the server log, not a traceback.

The upstream of a gateway sending an invalid stream, or an agent emitting one,
is the producer's fault: the operator gets one line naming the rule and the
event's position, at WARNING, without a stack trace (a traceback reads as a
bug of the server and is what log alerting pages on). Through the public
servers over real loopback HTTP, on each path a run can take: the gateway's
relay (sync chain) and apply (async chain) paths, with and without an event
log, and the agent endpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, EventType, TextMessageContentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from agui_pipes import AsyncStreamTransformer, TransformerChain
from agui_pipes.server import build_app
from tests._servers import Running, post_run, run_input, serve, wait_until

pytestmark = pytest.mark.anyio

# TEXT_MESSAGE_CONTENT for a message never started, as the upstream's event #2.
INVALID = b"".join(
    f"data: {json.dumps(event)}\n\n".encode()
    for event in (
        {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-unknown", "delta": "hi"},
        {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"},
    )
)


# A continuation chunk naming another tool than its start: chunk expansion, the
# gateway's first stage, refuses the upstream's event #2. What a stage before the end
# of the chain finds is withheld from the client, and logged in full.
CONFLICTING_CHUNKS = b"".join(
    f"data: {json.dumps(event)}\n\n".encode()
    for event in (
        {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "a", "delta": "{"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "b", "delta": "}"},
        {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"},
    )
)


def _answering(stream: bytes) -> Any:
    async def answer(request: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            yield stream

        return StreamingResponse(body(), media_type="text/event-stream")

    return answer


@pytest.fixture(scope="module")
def upstream() -> Iterator[Running]:
    routes = [
        Route("/", _answering(INVALID), methods=["POST"]),
        Route("/chunks", _answering(CONFLICTING_CHUNKS), methods=["POST"]),
    ]
    with serve(Starlette(routes=routes)) as running:
        yield running


class _Passing(AsyncStreamTransformer):
    """An async stage: the gateway then runs ``chain.apply`` instead of its relay."""

    async def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        return (event,)


async def _bad_agent(ctx: Any) -> None:
    await ctx.emit(TextMessageContentEvent(message_id="m-unknown", delta="hi"))


def _warnings(caplog: pytest.LogCaptureFixture, run_id: str) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name.startswith("agui_pipes")
        and record.levelno >= logging.WARNING
        and run_id in record.getMessage()
    ]


async def _run_and_read_log(
    app: Any, caplog: pytest.LogCaptureFixture
) -> tuple[BaseEvent, list[logging.LogRecord]]:
    caplog.set_level(logging.INFO, logger="agui_pipes")
    with serve(app) as server:
        async with httpx.AsyncClient(timeout=10) as client:
            response, events = await post_run(client, server.url + "/", run_input())
        assert response.status_code == 200
        # The per-run INFO line is written last: once it is there, every line is.
        await wait_until(
            lambda: any(
                r.levelno == logging.INFO and " run run-1 thread " in r.getMessage()
                for r in caplog.records
            ),
            5.0,
            "the per-run line",
        )
    return events[-1], _warnings(caplog, "run-1")


def _assert_one_warning(
    records: list[logging.LogRecord], position: str, rule: str = "rule `not-open`"
) -> None:
    assert len(records) == 1, [r.getMessage() for r in records]
    (record,) = records
    assert record.levelno == logging.WARNING
    assert record.exc_info is None, "a producer's violation is no traceback"
    message = record.getMessage()
    assert rule in message, message
    assert position in message, message


@pytest.mark.parametrize("store", [None, "memory:"])
@pytest.mark.parametrize("mode", ["relay", "apply"])
async def test_an_upstream_that_breaks_the_protocol_is_one_warning(
    upstream: Running, caplog: pytest.LogCaptureFixture, mode: str, store: str | None
) -> None:
    chain = None if mode == "relay" else (lambda: TransformerChain([_Passing()]))
    app = build_app(upstream=upstream.url + "/", chain=chain, store=store)
    last, records = await _run_and_read_log(app, caplog)
    assert last.type is EventType.RUN_ERROR
    assert last.code == "PROTOCOL_VIOLATION"  # type: ignore[attr-defined]
    _assert_one_warning(records, "event #2 (TEXT_MESSAGE_CONTENT)")


@pytest.mark.parametrize("store", [None, "memory:"])
@pytest.mark.parametrize("mode", ["relay", "apply"])
async def test_a_withheld_violation_is_one_warning_with_the_whole_message(
    upstream: Running, caplog: pytest.LogCaptureFixture, mode: str, store: str | None
) -> None:
    chain = None if mode == "relay" else (lambda: TransformerChain([_Passing()]))
    app = build_app(upstream=upstream.url + "/chunks", chain=chain, store=store)
    last, records = await _run_and_read_log(app, caplog)
    assert last.type is EventType.RUN_ERROR
    assert "message is withheld" in last.message  # type: ignore[attr-defined]
    # The log has what the client does not: the tools' names.
    _assert_one_warning(records, "event #2", rule="rule `chunk-conflict`")
    assert "'a'" in records[0].getMessage()


@pytest.mark.parametrize("store", [None, "memory:"])
async def test_an_agent_that_breaks_the_protocol_is_one_warning(
    caplog: pytest.LogCaptureFixture, store: str | None
) -> None:
    last, records = await _run_and_read_log(build_app(agent=_bad_agent, store=store), caplog)
    assert last.type is EventType.RUN_ERROR
    assert last.code == "PROTOCOL_VIOLATION"  # type: ignore[attr-defined]
    # RUN_STARTED is event #0: the refused content would have been #1.
    _assert_one_warning(records, "event #1 ")
