"""A producer's run traced as a driver agent's: the same spans, the same attributes.

The ``opentelemetry`` stage in the chain, real uvicorn (tests/_servers.py), the
SDK's in-memory exporters (tests/_otel.py). A producer yielding the events a
driver agent emits (the demo agent: steps, tools, subagents) gives the same
span tree with the same attributes; its run span carries the producer's run
id and is parented on the request's ``traceparent``; a producer that raises
ends its span as an error with the run's code, as a failing driver agent does.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import BaseEvent, RunAgentInput

from agui_pipes import TransformerChain
from agui_pipes.demo import DemoAgent
from agui_pipes.driver import RunContext
from agui_pipes.server import build_app
from agui_pipes.server.auth import Principal
from agui_pipes.testing import collect
from tests._otel import Recorder
from tests._servers import run_input, serve, sse_events

pytestmark = pytest.mark.anyio

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


async def failing(ctx: RunContext[Any]) -> None:
    ctx.say("Let me look")
    raise RuntimeError("the key sk-123 expired")


def replaying(events: list[BaseEvent]) -> Any:
    """A producer yielding ``events`` (a driver run's), with the request's ids."""

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        for event in events:
            if hasattr(event, "run_id"):
                event = event.model_copy(
                    update={"run_id": run_input.run_id, "thread_id": run_input.thread_id}
                )
            yield event

    return produce


async def _traced(run_id: str, headers: dict[str, str] | None = None, **source: Any) -> Recorder:
    """One run of ``source`` (agent= or producer=) served with a tracing stage: its spans."""
    recorder = Recorder()
    app = build_app(chain=lambda: TransformerChain([recorder.stage()]), keepalive=None, **source)
    with serve(app) as server:
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream("POST", server.url, json=run_input(run_id), headers=headers) as response,
        ):
            assert response.status_code == 200
            [event async for event in sse_events(response)]
        for _ in range(100):  # the run's chain is dropped by the server's thread
            gc.collect()
            if recorder.finished():
                break
            await anyio.sleep(0.05)
    return recorder


def _spans(recorder: Recorder) -> list[tuple[str, dict[str, Any], str]]:
    """Each span: its name, its attributes and its status, in start order."""
    return [
        (span.name, dict(span.attributes or {}), span.status.status_code.name)
        for span in recorder.finished()
    ]


async def test_a_producer_run_has_the_spans_of_the_driver_run_it_replays() -> None:
    emitted = await collect(DemoAgent(), run_input("r-1"))
    driven = await _traced("r-1", agent=DemoAgent())
    produced = await _traced("r-1", producer=replaying(emitted))
    assert produced.outline() == driven.outline()
    assert "      invoke_agent weather" in produced.outline()  # the demo's subagents, tools
    assert _spans(produced) == _spans(driven)
    run_span = produced.named("invoke_agent")
    assert dict(run_span.attributes or {})["agui.run.id"] == "r-1"
    assert dict(run_span.attributes or {})["agui.run.outcome"] == "success"


async def test_the_producer_s_run_span_is_parented_on_the_request_traceparent() -> None:
    emitted = await collect(DemoAgent(), run_input("r-1"))
    headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    produced = await _traced("r-2", headers, producer=replaying(emitted))
    run_span = produced.named("invoke_agent")
    assert dict(run_span.attributes or {})["agui.run.id"] == "r-2"
    assert run_span.parent is not None
    assert (run_span.parent.trace_id, run_span.parent.span_id) == (
        int(TRACE_ID, 16),
        int(PARENT_ID, 16),
    )


async def test_a_producer_that_raises_ends_its_span_as_the_driver_s_failing_agent() -> None:
    # Regression: the failure was raised past the chain, whose tracing stage closed
    # the span as "truncated"; it is now the stream's RUN_ERROR, through the chain.
    async def raises(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[Any]:
        ids = {"threadId": run_input.thread_id, "runId": run_input.run_id}
        yield {"type": "RUN_STARTED", **ids}
        yield {"type": "TEXT_MESSAGE_START", "messageId": "m-1", "role": "assistant"}
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-1", "delta": "Let me look"}
        yield {"type": "TEXT_MESSAGE_END", "messageId": "m-1"}
        raise RuntimeError("the key sk-123 expired")

    driven = await _traced("r-1", agent=failing)
    produced = await _traced("r-1", producer=raises)
    for recorder in (driven, produced):
        run_span = recorder.named("invoke_agent")
        attributes = dict(run_span.attributes or {})
        assert attributes["agui.run.outcome"] == "error", attributes
        assert attributes["error.type"] == "AGENT_ERROR"
        assert run_span.status.status_code.name == "ERROR"
        assert "sk-123" not in str(run_span.status.description)


async def test_a_malformed_item_ends_the_span_with_its_code() -> None:
    async def malformed(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[Any]:
        yield {"type": "RUN_STARTED", "threadId": run_input.thread_id, "runId": run_input.run_id}
        yield 42

    produced = await _traced("r-1", producer=malformed)
    attributes = dict(produced.named("invoke_agent").attributes or {})
    assert (attributes["agui.run.outcome"], attributes["error.type"]) == (
        "error",
        "AGENT_MALFORMED",
    )


@pytest.mark.xfail(
    strict=True,
    reason="AGENT_TIMEOUT cancels the run's scope, the chain's with it: the tracing stage "
    "never sees the RUN_ERROR and the span ends 'abandoned' (a cancel scope per wait "
    "would cost ~40% of the producer path's time per event)",
)
async def test_a_producer_that_times_out_ends_its_span_as_an_error() -> None:
    async def silent(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[Any]:
        yield {"type": "RUN_STARTED", "threadId": run_input.thread_id, "runId": run_input.run_id}
        await anyio.sleep_forever()
        yield {}  # pragma: no cover

    produced = await _traced("r-1", producer=silent, producer_timeout=0.2)
    attributes = dict(produced.named("invoke_agent").attributes or {})
    assert attributes.get("error.type") == "AGENT_TIMEOUT", attributes
