"""A request's W3C ``traceparent`` parents the run's spans, at the endpoint and the gateway.

Real loopback HTTP (tests/_servers.py): the client sends a traceparent, the
endpoint's (or gateway's) ``opentelemetry`` stage must put the run span under
it, and the gateway must pass the header upstream so the agent's own spans
join the same trace.
"""

from __future__ import annotations

import gc
from typing import Any

import anyio
import httpx
import pytest

from agui_pipes import TransformerChain
from agui_pipes.demo import DemoAgent
from agui_pipes.server import build_app
from tests._otel import Recorder
from tests._servers import run_input, serve, sse_events

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
HEADERS = {
    "content-type": "application/json",
    "accept": "text/event-stream",
    "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01",
    "tracestate": "vendor=opaque",
}


async def _post(url: str, headers: dict[str, str], run_id: str) -> list[str]:
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", url, json=run_input(run_id), headers=headers) as response,
    ):
        assert response.status_code == 200
        return [event.type.value async for event in sse_events(response)]


def _run_span_parent(recorder: Recorder, run_id: str) -> tuple[int, int, str | None]:
    (span,) = [
        s for s in recorder.finished() if dict(s.attributes or {}).get("agui.run.id") == run_id
    ]
    assert span.parent is not None, "the run span has no parent"
    return span.parent.trace_id, span.parent.span_id, span.parent.trace_state.get("vendor")


@pytest.mark.anyio
async def test_the_endpoint_parents_the_run_on_the_request_traceparent() -> None:
    recorder = Recorder()
    app = build_app(agent=DemoAgent(), chain=lambda: TransformerChain([recorder.stage()]))
    with serve(app) as running:
        types = await _post(running.url + "/", HEADERS, "r-endpoint")
        assert types[-1] == "RUN_FINISHED"
        # Without the header the run is a root span: nothing leaks between requests.
        await _post(running.url + "/", {"content-type": "application/json"}, "r-plain")
    assert _run_span_parent(recorder, "r-endpoint") == (
        int(TRACE_ID, 16),
        int(PARENT_ID, 16),
        "opaque",
    )
    (plain,) = [
        s for s in recorder.finished() if dict(s.attributes or {}).get("agui.run.id") == "r-plain"
    ]
    assert plain.parent is None
    spans = [
        s for s in recorder.finished() if s.context and s.context.trace_id == int(TRACE_ID, 16)
    ]
    assert {s.name for s in spans} >= {"invoke_agent", "invoke_agent weather"}


@pytest.mark.anyio
async def test_the_gateway_parents_its_run_and_forwards_the_traceparent_upstream() -> None:
    agent_side, gateway_side = Recorder(), Recorder()
    agent_app = build_app(agent=DemoAgent(), chain=lambda: TransformerChain([agent_side.stage()]))
    with serve(agent_app) as upstream:
        gateway_app = build_app(
            upstream=upstream.url + "/",
            chain=lambda: TransformerChain([gateway_side.stage(agent_name="gateway")]),
        )
        with serve(gateway_app) as gateway:
            types = await _post(gateway.url + "/", HEADERS, "r-gateway")
    assert types[-1] == "RUN_FINISHED"
    expected = (int(TRACE_ID, 16), int(PARENT_ID, 16), "opaque")
    assert _run_span_parent(gateway_side, "r-gateway") == expected
    # The upstream agent got the same header: its spans are in the caller's trace too.
    assert _run_span_parent(agent_side, "r-gateway") == expected
    assert gateway_side.outline() == [
        "invoke_agent gateway",
        "  step",
        "    execute_tool search_places",
        "    execute_tool internal_price_lookup",
        "  execute_tool ask_local_expert",
        "    invoke_agent local_expert",
        "      invoke_agent weather",
        "        execute_tool get_forecast",
    ]


@pytest.mark.anyio
async def test_concurrent_requests_keep_their_own_parents() -> None:
    """Each request's traceparent parents its own run, however the requests interleave."""
    recorder = Recorder()
    app = build_app(agent=DemoAgent(pace=0.001), chain=lambda: TransformerChain([recorder.stage()]))
    parents = {f"r-{i}": (f"{i + 1:032x}", f"{i + 1:016x}") for i in range(3)}
    with serve(app) as running:
        async with anyio.create_task_group() as group:
            for run_id, (trace_id, span_id) in parents.items():
                headers = {**HEADERS, "traceparent": f"00-{trace_id}-{span_id}-01"}
                group.start_soon(_post, running.url + "/", headers, run_id)
    for run_id, (trace_id, span_id) in parents.items():
        assert _run_span_parent(recorder, run_id)[:2] == (int(trace_id, 16), int(span_id, 16))
        mine = [
            s
            for s in recorder.finished()
            if s.context is not None and s.context.trace_id == int(trace_id, 16)
        ]
        assert sum(s.name == "invoke_agent" for s in mine) == 1  # no other run's spans
        assert sum(s.name == "invoke_agent weather" for s in mine) == 1


async def _cut_short(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An upstream that starts a run and a tool call, then ends its response."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    body = (
        b'data: {"type":"RUN_STARTED","threadId":"thread-1","runId":"r-cut"}\n\n'
        b'data: {"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"slow"}\n\n'
    )
    await send({"type": "http.response.body", "body": body})


@pytest.mark.anyio
async def test_a_run_the_gateway_ends_itself_is_closed_as_truncated() -> None:
    """The gateway drains the chain before its RUN_ERROR: the stage's finish() ends the run."""
    recorder = Recorder()
    with serve(_cut_short) as upstream:
        app = build_app(
            upstream=upstream.url + "/", chain=lambda: TransformerChain([recorder.stage()])
        )
        with serve(app) as gateway:
            async with (
                httpx.AsyncClient(timeout=30) as client,
                client.stream(
                    "POST", gateway.url + "/", json=run_input("r-cut"), headers=HEADERS
                ) as response,
            ):
                events = [event async for event in sse_events(response)]
            assert events[-1].type.value == "RUN_ERROR"
            assert str(events[-1].code).startswith("UPSTREAM_")  # type: ignore[attr-defined]
            await _collected(recorder)
    run_span = next(s for s in recorder.finished() if s.name == "invoke_agent")
    assert dict(run_span.attributes or {})["agui.run.outcome"] == "truncated"
    assert recorder.outline() == ["invoke_agent", "  execute_tool slow"]


async def _collected(recorder: Recorder) -> None:
    """Collect garbage until the server thread has dropped the run's chain."""
    for _ in range(100):
        gc.collect()
        if recorder.finished():
            return
        await anyio.sleep(0.05)
    raise AssertionError("the gateway's chain was never collected")
