"""Repair where a server meets it: ``agui-pipes serve --repair``, ``Gateway(repair=True)``
and ``AgentEndpoint(repair=True)``.

The end-to-end proof is pydantic-ai's recorded parallel tool calls (its AG-UI
adapter sends ``TOOL_CALL_ARGS`` for a call after that call's ``TOOL_CALL_END``):
served verbatim by a loopback upstream, through the gateway command with
``--repair``, the official TypeScript ``HttpAgent`` completes the run with each
call holding its own arguments; without ``--repair`` it rejects the run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    RunErrorEvent,
    RunFinishedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agui_pipes import Consumer, FunctionTransformer
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, Gateway, build_app
from tests._servers import Running, post_run, serve, wait_until

from tests.hostile._harness import serve_gateway  # isort: skip

DATA = Path(__file__).parents[1] / "data" / "producers"
PARALLEL = DATA / "pydantic-ai-parallel-tools.sse"
META = json.loads(PARALLEL.with_suffix(".json").read_text(encoding="utf-8"))
REQUEST: dict[str, Any] = META["request"]

INTENDED = {
    "call-internal-1": ("internal_lookup", '{"key": "SECRET-ARG-7f3a"}'),
    "call-weather-1": ("get_weather", '{"city": "Paris"}'),
}
"""Each call's name and arguments as pydantic-ai meant them (all of its deltas, in order)."""


def _recording_app() -> Starlette:
    """An upstream answering every POST with the recorded SSE body, byte for byte."""
    body = PARALLEL.read_bytes()

    async def answer(request: Request) -> Response:
        await request.body()
        return Response(body, media_type="text/event-stream")

    return Starlette(routes=[Route("/", answer, methods=["POST"])])


@pytest.fixture(scope="module")
def upstream() -> Iterator[Running]:
    with serve(_recording_app()) as running:
        yield running


def _tool_calls(messages: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {
        call["id"]: (call["function"]["name"], call["function"]["arguments"])
        for message in messages
        if message["role"] == "assistant"
        for call in message.get("toolCalls") or ()
    }


def _case(url: str) -> dict[str, Any]:
    return {
        "url": url,
        "threadId": REQUEST["threadId"],
        "runId": REQUEST["runId"],
        "initialMessages": REQUEST["messages"],
    }


def test_http_agent_completes_the_recorded_run_through_serve_repair(
    upstream: Running, ts_oracle: Callable[..., list[Any]]
) -> None:
    # The repairing gateway is the command itself; the plain one the same app in
    # process (the command would log the refused run's traceback, which the
    # harness rightly counts as a failure of the command).
    with (
        serve_gateway(upstream.url + "/", "--repair") as repairing,
        serve(build_app(upstream=upstream.url + "/")) as plain,
    ):
        repaired, rejected = ts_oracle([_case(repairing.url), _case(plain.url + "/")])
    assert repaired["outcome"] == "completed", repaired["error"]
    assert repaired["warnings"] == []
    assert _tool_calls(repaired["messages"]) == INTENDED
    tools = {m["toolCallId"]: m["content"] for m in repaired["messages"] if m["role"] == "tool"}
    assert tools == {"call-internal-1": "SECRET-RESULT-9b1c", "call-weather-1": "sunny in Paris"}
    assert repaired["messages"][-1]["content"] == "It is sunny in Paris."
    assert [e["type"] for e in repaired["events"]][-1] == "RUN_FINISHED"
    # Without --repair the gateway's verification ends the run at the late arguments,
    # and the client sees a failed run, not the producer's messages.
    run_error = [e for e in rejected["events"] if e["type"] == "RUN_ERROR"]
    assert rejected["outcome"] == "failed" or run_error, rejected
    assert _tool_calls(rejected["messages"]) != INTENDED


def test_the_direct_recording_is_rejected_by_the_http_agent(
    upstream: Running, ts_oracle: Callable[..., list[Any]]
) -> None:
    """The control: the upstream's own bytes are what the reference client refuses."""
    (direct,) = ts_oracle([_case(upstream.url + "/")])
    assert direct["outcome"] == "failed"


@pytest.mark.anyio
async def test_gateway_repair_logs_the_fix_count(
    upstream: Running, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = Gateway(
        upstream.url + "/", repair=True, chain=lambda: FunctionTransformer(lambda e: e)
    )
    app = Starlette(routes=[Route("/", gateway, methods=["POST"])], lifespan=gateway.lifespan)
    with serve(app) as running, caplog.at_level(logging.INFO, logger="agui_pipes.server"):
        async with httpx.AsyncClient(timeout=30) as client:
            response, events = await post_run(client, running.url + "/", REQUEST)
        await wait_until(lambda: bool(_run_lines(caplog, "gateway")), 10, "the run's log line")
    assert response.status_code == 200
    consumer = Consumer(messages=REQUEST["messages"])
    for event in events:
        consumer.push(event)
    result = consumer.finish()
    assert {c["id"]: (c["name"], c["arguments"]) for c in result.tool_calls} == INTENDED
    lines = _run_lines(caplog, "gateway")
    assert len(lines) == 1, lines
    assert f"gateway run {REQUEST['runId']} thread {REQUEST['threadId']}: finished" in lines[0]
    assert "; repaired " in lines[0]
    assert "; repaired 0" not in lines[0]
    assert "→ Repair " in lines[0] or "→ repair " in lines[0]


@pytest.mark.anyio
async def test_recording_gateway_repairs_what_it_records(upstream: Running) -> None:
    """With an event log the run goes through the same repaired chain, and the thread
    history the gateway serves afterwards holds the calls as the producer meant them."""
    app = build_app(upstream=upstream.url + "/", store="memory:", repair=True)
    with serve(app) as running:
        async with httpx.AsyncClient(timeout=30) as client:
            response, events = await post_run(client, running.url + "/", REQUEST)
            assert response.status_code == 200
            history = await client.get(f"{running.url}/threads/{REQUEST['threadId']}")
    assert isinstance(events[-1], RunFinishedEvent), events[-1]
    assert history.status_code == 200
    consumer = Consumer()
    for payload in _payloads(history.content):
        consumer.push(payload)
    calls = consumer.finish().tool_calls
    assert {c["id"]: (c["name"], c["arguments"]) for c in calls} == INTENDED


def test_gateway_repr_says_it_repairs() -> None:
    assert "verify=True, repair=True," in repr(Gateway("http://127.0.0.1:9/", repair=True))
    assert "repair=False" in repr(Gateway("http://127.0.0.1:9/"))


# -- the agent endpoint ------------------------------------------------------------


async def interleaving(ctx: RunContext[Any]) -> RunOutcome:
    """Two parallel calls, the first one's arguments finished after its END (as pydantic-ai)."""
    ctx.emit(ToolCallStartEvent(tool_call_id="a", tool_call_name="first"))
    ctx.emit(ToolCallArgsEvent(tool_call_id="a", delta='{"n": '))
    ctx.emit(ToolCallEndEvent(tool_call_id="a"))
    ctx.emit(ToolCallStartEvent(tool_call_id="b", tool_call_name="second"))
    ctx.emit(ToolCallArgsEvent(tool_call_id="b", delta='{"m": 2}'))
    ctx.emit(ToolCallArgsEvent(tool_call_id="a", delta="1}"))
    ctx.emit(ToolCallEndEvent(tool_call_id="b"))
    return RunOutcome.success()


@pytest.mark.anyio
@pytest.mark.parametrize("async_chain", [False, True])
async def test_endpoint_repairs_its_agent_before_the_driver_verifies(
    caplog: pytest.LogCaptureFixture, async_chain: bool
) -> None:
    from tests._cli_stages import AsyncPass

    chain = (lambda: AsyncPass()) if async_chain else None
    apps = Starlette(
        routes=[
            Route(
                "/repaired", AgentEndpoint(interleaving, repair=True, chain=chain), methods=["POST"]
            ),
            Route("/plain", AgentEndpoint(interleaving, chain=chain), methods=["POST"]),
        ]
    )

    def body(run_id: str) -> dict[str, Any]:
        return {"threadId": "thread-e", "runId": run_id, "messages": []}

    with serve(apps) as running, caplog.at_level(logging.INFO, logger="agui_pipes.server"):
        async with httpx.AsyncClient(timeout=30) as client:
            _, repaired = await post_run(client, running.url + "/repaired", body("run-r"))
            _, plain = await post_run(client, running.url + "/plain", body("run-p"))
        await wait_until(lambda: len(_run_lines(caplog, "agent")) == 2, 10, "the runs' log lines")
    assert isinstance(repaired[-1], RunFinishedEvent), repaired[-1]
    consumer = Consumer()
    for event in repaired:
        consumer.push(event)
    calls = consumer.finish().tool_calls
    assert {c["id"]: c["arguments"] for c in calls} == {"a": '{"n": 1}', "b": '{"m": 2}'}
    # The driver's own verification refuses the unrepaired agent.
    assert isinstance(plain[-1], RunErrorEvent), plain[-1]
    lines = {line.split()[2]: line for line in _run_lines(caplog, "agent")}
    repaired_line, plain_line = lines["run-r"], lines["run-p"]
    assert "; repaired " in repaired_line and "; repaired 0" not in repaired_line, repaired_line
    assert "; repaired" not in plain_line


def _run_lines(caplog: pytest.LogCaptureFixture, kind: str) -> list[str]:
    """The per-run INFO lines of the server (``gateway run ...`` / ``agent run ...``)."""
    return [
        record.getMessage()
        for record in list(caplog.records)
        if record.getMessage().startswith(f"{kind} run ")
    ]


def test_serve_demo_with_repair_logs_a_clean_run() -> None:
    """``serve --demo --repair``: the demo agent is valid, so Repair is the identity and
    the per-run line says it made no fix."""
    from tests.cli.test_cli_serve import start, stop

    served = start("--demo", "--repair")
    try:
        body = {"threadId": "cli-t", "runId": "cli-repair", "messages": []}
        response = httpx.post(f"{served.url}/", json=body, timeout=20)
        assert response.status_code == 200
    finally:
        code, err = stop(served)
    assert code == 0, err
    assert "serving the demo agent at " in err
    assert ", repairing each run first" in err
    (line,) = [line for line in err.splitlines() if "agent run cli-repair " in line]
    assert ": finished in " in line
    assert line.endswith("; repaired 0"), line
    events = [json.loads(p) for p in _payloads(response.content)]
    consumer = Consumer()
    for event in events:
        consumer.push(event)
    assert consumer.finish().outcome == "success"


def _payloads(body: bytes) -> list[bytes]:
    from agui_pipes.codecs import SSEDecoder

    decoder = SSEDecoder()
    return decoder.feed_bytes(body) + decoder.close_bytes()
