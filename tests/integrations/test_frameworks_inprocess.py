"""pydantic-ai and LangGraph served in-process, against the same agent behind the gateway.

For each framework and scenario, the same scripted agent is served twice: by
its framework's own AG-UI server with agui_pipes' gateway in front, and by
``build_app(producer=...)`` in-process, both with the same chain. The two
streams the client gets must be the same events (ids the frameworks mint and
timestamps normalised), and the official TypeScript client must accept the
in-process one. Then, in-process only: a run cut mid-stream resumes from its
last SSE id to the same result, and a stop cancels the framework's own run —
the scripted model sees the cancellation where it awaits.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agui_pipes import fold
from agui_pipes.server import Producer, build_app
from agui_pipes.transformers import FilterToolCalls, Redact
from tests._durable_http import events, get_frames, read_frames, seqs
from tests._servers import serve, wait_until
from tests.integrations._frameworks import (
    Observed,
    langgraph_graph,
    langgraph_server,
    normalised,
    payloads_of,
    pydantic_ai_agent,
    pydantic_ai_server,
)

pytestmark = pytest.mark.anyio

pytest.importorskip("pydantic_ai", reason="the producers extra is not installed")
pytest.importorskip("ag_ui_langgraph", reason="the producers extra is not installed")

HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}
USER = {"id": "u-1", "role": "user", "content": "Where should I go?"}
CONFIRM = {
    "name": "confirm",
    "description": "Ask the user to confirm.",
    "parameters": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}


def chain() -> Any:
    return FilterToolCalls.deny(["internal_*"]) | Redact(patterns=["Lisbon"], replacement="[city]")


def producer(framework: str, scenario: str, observed: Observed | None = None) -> Producer:
    if framework == "pydantic-ai":
        from agui_pipes.integrations.pydantic_ai import pydantic_ai_producer

        return pydantic_ai_producer(pydantic_ai_agent(scenario, observed))
    from agui_pipes.integrations.langgraph import langgraph_producer

    return langgraph_producer(langgraph_graph(scenario, observed))


def own_server(framework: str, scenario: str) -> Any:
    if framework == "pydantic-ai":
        return pydantic_ai_server(pydantic_ai_agent(scenario))
    return langgraph_server(langgraph_graph(scenario))


def body(scenario: str, run_id: str = "r-1") -> dict[str, Any]:
    tools = [CONFIRM] if scenario == "frontend" else []
    return {
        "threadId": "t-1",
        "runId": run_id,
        "state": {},
        "messages": [USER],
        "tools": tools,
        "context": [],
        "forwardedProps": {},
    }


async def posted(url: str, sent: dict[str, Any]) -> bytes:
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(url, json=sent, headers=HEADERS)
    assert response.status_code == 200, response.text
    return response.content


CASES = [
    ("pydantic-ai", "text"),
    ("pydantic-ai", "tools"),
    ("pydantic-ai", "frontend"),
    ("pydantic-ai", "error"),
    ("langgraph", "text"),
    ("langgraph", "tools"),
    ("langgraph", "error"),
]


@pytest.mark.parametrize(("framework", "scenario"), CASES)
async def test_in_process_stream_equals_the_gateway_in_front_of_the_frameworks_server(
    framework: str, scenario: str, ts_oracle: Any
) -> None:
    with serve(own_server(framework, scenario)) as own:
        gateway = build_app(upstream=f"{own.url}/", chain=chain, keepalive=None)
        in_process = build_app(producer=producer(framework, scenario), chain=chain, keepalive=None)
        with serve(gateway) as front, serve(in_process) as here:
            behind = payloads_of(await posted(f"{front.url}/", body(scenario)))
            inside = payloads_of(await posted(f"{here.url}/", body(scenario)))
    assert [p["type"] for p in inside][0] == "RUN_STARTED"
    assert normalised(inside) == normalised(behind)
    (judged,) = await anyio.to_thread.run_sync(ts_oracle, [{"stream": inside}])
    if scenario == "error":
        assert judged["outcome"] == "failed" or inside[-1]["type"] == "RUN_ERROR", judged
        assert inside[-1]["type"] == "RUN_ERROR"
        return
    assert judged["outcome"] == "completed", judged["error"]
    text = "".join(
        str(m.get("content") or "") for m in judged["messages"] if m["role"] == "assistant"
    )
    assert "Lisbon" not in text  # the chain's redaction applies in-process
    if scenario == "tools":
        called = [c["function"]["name"] for m in judged["messages"] for c in m.get("toolCalls", [])]
        assert "internal_lookup" not in called  # the chain's filter too


def _recorded(framework: str, observed: Observed, tmp_path: Path) -> Any:
    return build_app(
        producer=producer(framework, "text", observed),
        chain=chain,
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        keepalive=None,
    )


@pytest.mark.parametrize("framework", ["pydantic-ai", "langgraph"])
async def test_a_cut_run_resumes_from_its_last_id_to_the_same_result(
    framework: str, tmp_path: Path
) -> None:
    observed = Observed(gate=threading.Event())
    with serve(_recorded(framework, observed, tmp_path)) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            async with client.stream("POST", "/", json=body("text"), headers=HEADERS) as response:
                # Two frames: Redact holds the deltas back until it has seen 64 characters.
                head = await read_frames(response, limit=2)  # then the client drops
            await wait_until(observed.waiting.is_set, 20, "the model waits at its gate")
            observed.gate.set()  # type: ignore[union-attr]
            status, tail, _ = await get_frames(client, "/runs/r-1", last_id=head[-1][0])
            assert status == 200
            status, whole, _ = await get_frames(client, "/runs/r-1")
    assert seqs(head + tail) == seqs(whole) == list(range(1, len(whole) + 1))
    resumed, replayed = fold(events(head + tail)), fold(events(whole))
    said = [m["content"] for m in resumed.messages if m["role"] == "assistant"]
    assert said == ["A weekend in [city] is sunny."]
    assert resumed.messages == replayed.messages
    assert observed.ends == ["finished"]


@pytest.mark.parametrize("framework", ["pydantic-ai", "langgraph"])
async def test_a_stop_cancels_the_frameworks_run(framework: str, tmp_path: Path) -> None:
    observed = Observed(gate=threading.Event())
    with serve(_recorded(framework, observed, tmp_path)) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            got: list[bytes] = []

            async def post() -> None:
                async with client.stream("POST", "/", json=body("text"), headers=HEADERS) as r:
                    got.extend(data for _, data in await read_frames(r))

            async with anyio.create_task_group() as tg:
                tg.start_soon(post)
                await wait_until(observed.waiting.is_set, 20, "the model waits at its gate")
                stopped = await client.post("/runs/r-1/stop")
                assert stopped.status_code == 200, stopped.text
            await wait_until(lambda: bool(observed.ends), 10, "the model's stream ended")
    # The model was cancelled where it awaited (the gate never opened), not finished.
    assert observed.ends == ["CancelledError"]
    assert not observed.gate.is_set()  # type: ignore[union-attr]
    assert b'"type":"RUN_ERROR"' in got[-1] and b'"code":"CANCELLED"' in got[-1]


@pytest.mark.parametrize("framework", ["pydantic-ai", "langgraph"])
async def test_a_client_that_leaves_cancels_the_frameworks_run_without_a_store(
    framework: str,
) -> None:
    observed = Observed(gate=threading.Event())
    app = build_app(producer=producer(framework, "text", observed), keepalive=None)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            async with (
                client.stream("POST", "/", json=body("text"), headers=HEADERS) as response,
                anyio.create_task_group() as reading,
            ):
                reading.start_soon(read_frames, response)
                await wait_until(observed.waiting.is_set, 20, "the model waits at its gate")
                reading.cancel_scope.cancel()  # then the connection closes: the client left
            await wait_until(lambda: bool(observed.ends), 10, "the model's stream ended")
    assert observed.ends == ["CancelledError"]
