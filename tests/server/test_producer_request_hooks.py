"""A chain's request half in front of an in-process producer, as in front of an upstream.

``AgentEndpoint(producer=...)`` hands the producer the request as the chain's
``rewrite_request`` hooks forward it — the bridge's ``resume[]`` in the
upstream's dialect — while the thread's contract and the recorded input are
the client's own request. A hook's refusal is the client's JSON error before
anything is claimed or the producer called; a hook that breaks is a logged
500 without its text. Real uvicorn (tests/_servers.py), a SQLite store.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import RunAgentInput

from agui_pipes import RequestRefused, StreamTransformer, TransformerChain
from agui_pipes.server import build_app
from agui_pipes.server.auth import Principal
from agui_pipes.transformers import InterruptBridge
from tests._servers import serve

pytestmark = pytest.mark.anyio

INTERRUPT = {"id": "approve-1", "reason": "tool_approval"}


class Asker:
    """Asks for approval until a run carries an answer (canonical or LangGraph's).

    Records each call's input.
    """

    def __init__(self) -> None:
        self.calls: list[RunAgentInput] = []

    async def __call__(
        self, run_input: RunAgentInput, principal: Principal
    ) -> AsyncIterator[dict[str, Any]]:
        self.calls.append(run_input)
        ids = {"threadId": run_input.thread_id, "runId": run_input.run_id}
        yield {"type": "RUN_STARTED", **ids}
        command = (run_input.forwarded_props or {}).get("command") or {}
        if run_input.resume or "resume" in command:
            yield {"type": "RUN_FINISHED", **ids}
            return
        yield {
            "type": "RUN_FINISHED",
            **ids,
            "outcome": {"type": "interrupt", "interrupts": [INTERRUPT]},
        }


class Tag(StreamTransformer):
    """Adds ``forwardedProps.tagged`` to the request; passes the stream unchanged."""

    def transform(self, event: Any) -> Any:
        return (event,)

    def rewrite_request(self, request: dict[str, Any]) -> dict[str, Any]:
        props = dict(request.get("forwardedProps") or {})
        props["tagged"] = True
        return {**request, "forwardedProps": props}


class Refuse(Tag):
    def rewrite_request(self, request: dict[str, Any]) -> dict[str, Any]:
        raise RequestRefused("no_dialect", "this upstream cannot take that request")


class Breaks(Tag):
    def rewrite_request(self, request: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("internal detail sk-123")


def _body(run_id: str, **extra: Any) -> dict[str, Any]:
    return {"threadId": "t-1", "runId": run_id, "messages": [], **extra}


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    response = await client.post(
        url, content=json.dumps(body), headers={"accept": "text/event-stream"}
    )
    await response.aread()
    return response


def _app(producer: Asker, stage: Any, tmp_path: Path, **options: Any) -> Any:
    return build_app(
        producer=producer,
        chain=lambda: TransformerChain([stage]),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        keepalive=None,
        **options,
    )


async def test_the_producer_gets_the_request_as_the_chain_forwards_it(tmp_path: Path) -> None:
    producer = Asker()
    with serve(_app(producer, Tag(), tmp_path)) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            response = await _post(client, server.url, _body("r-1"))
            replay = await client.get(f"{server.url}/runs/r-1")
    assert response.status_code == 200, response.text
    assert producer.calls[0].forwarded_props == {"tagged": True}
    assert "tagged" not in replay.text  # the log holds the client's request, not the rewrite


async def test_the_bridge_hands_the_producer_the_answer_in_its_dialect(tmp_path: Path) -> None:
    producer = Asker()
    answer = [{"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}]
    expected = InterruptBridge("langgraph").rewrite_request(_body("r-2", resume=answer))
    with serve(_app(producer, InterruptBridge("langgraph"), tmp_path)) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            first = await _post(client, server.url, _body("r-1"))
            assert '"type":"interrupt"' in first.text, first.text
            second = await _post(client, server.url, _body("r-2", resume=answer))
            answered_twice = await _post(client, server.url, _body("r-3", resume=answer))
    assert second.status_code == 200, second.text
    given = producer.calls[1]
    assert given.resume is None
    assert given.forwarded_props == expected["forwardedProps"]
    # The contract is still the client's canonical one: the id is answered now.
    assert answered_twice.status_code == 409, answered_twice.text
    assert answered_twice.json()["error"] == "interrupt_answered"
    assert len(producer.calls) == 2


async def test_cancel_mode_s_answers_reach_the_producer_through_the_request_half(
    tmp_path: Path,
) -> None:
    producer = Asker()
    app = _app(producer, InterruptBridge("langgraph"), tmp_path, interrupts="cancel")
    with serve(app) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            await _post(client, server.url, _body("r-1"))
            message = {"id": "u-1", "role": "user", "content": "never mind"}
            second = await _post(client, server.url, _body("r-2", messages=[message]))
    assert second.status_code == 200, second.text
    cancelled = [{"interruptId": "approve-1", "status": "cancelled"}]
    expected = InterruptBridge("langgraph").rewrite_request(_body("r-2", resume=cancelled))
    given = producer.calls[1]
    assert given.resume is None
    assert given.forwarded_props == expected["forwardedProps"]


async def test_a_refused_request_is_answered_before_anything_is_claimed(tmp_path: Path) -> None:
    producer = Asker()
    with serve(_app(producer, Refuse(), tmp_path)) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            refused = await _post(client, server.url, _body("r-1"))
            recorded = await client.get(f"{server.url}/runs/r-1")
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "no_dialect"
    assert producer.calls == []
    assert recorded.status_code == 404, recorded.text


async def test_a_hook_that_breaks_is_a_500_without_its_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    producer = Asker()
    with serve(_app(producer, Breaks(), tmp_path)) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            broken = await _post(client, server.url, _body("r-1"))
    assert broken.status_code == 500, broken.text
    assert broken.json()["error"] == "request_rewrite_failed"
    assert "sk-123" not in broken.text
    assert producer.calls == []
    assert any("rewrite_request failed" in record.getMessage() for record in caplog.records)
