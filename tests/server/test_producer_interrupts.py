"""The interrupt contract in front of a producer: a refused request never calls it.

A producer asks for approval (RUN_FINISHED with an interrupt) and answers a
resume; served with a SQLite store on real uvicorn (tests/_servers.py). With
``interrupts="enforce"`` every request breaking the thread's contract is
refused before the producer is called (its calls are counted) and nothing is
written; ``"cancel"`` hands the producer new input with the open interrupt
answered ``cancelled``; ``"off"`` passes the request through.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import RunAgentInput

from agui_pipes.server import build_app
from agui_pipes.server.auth import Principal
from tests._servers import serve

pytestmark = pytest.mark.anyio

INTERRUPT = {
    "id": "approve-1",
    "reason": "tool_approval",
    "responseSchema": {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}},
        "required": ["approved"],
    },
}


class Approver:
    """A producer asking for approval unless the run answers it; records each call's input."""

    def __init__(self) -> None:
        self.calls: list[RunAgentInput] = []

    async def __call__(
        self, run_input: RunAgentInput, principal: Principal
    ) -> AsyncIterator[dict[str, Any]]:
        self.calls.append(run_input)
        ids = {"threadId": run_input.thread_id, "runId": run_input.run_id}
        yield {"type": "RUN_STARTED", **ids}
        if not run_input.resume:
            yield {
                "type": "RUN_FINISHED",
                **ids,
                "outcome": {"type": "interrupt", "interrupts": [INTERRUPT]},
            }
            return
        yield {"type": "RUN_FINISHED", **ids}

    @property
    def run_ids(self) -> list[str]:
        return [call.run_id for call in self.calls]


def _body(run_id: str, resume: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"threadId": "t-1", "runId": run_id, "messages": [], **extra}
    if resume is not None:
        body["resume"] = resume
    return body


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    response = await client.post(
        url, content=json.dumps(body), headers={"accept": "text/event-stream"}
    )
    await response.aread()
    return response


def _app(producer: Approver, tmp_path: Path, **options: Any) -> Any:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    return build_app(producer=producer, store=store, path="/agent", keepalive=None, **options)


async def test_a_refused_request_never_calls_the_producer(tmp_path: Path) -> None:
    producer = Approver()
    with serve(_app(producer, tmp_path)) as server:
        url = f"{server.url}/agent"
        async with httpx.AsyncClient(timeout=20) as client:
            asked = await _post(client, url, _body("r-1"))
            assert asked.status_code == 200 and '"interrupt"' in asked.text
            cases = {
                "interrupt_pending": _body("r-2"),
                "unknown_interrupt": _body("r-2", [{"interruptId": "nope", "status": "resolved"}]),
                "duplicate_answer": _body(
                    "r-2",
                    [
                        {"interruptId": "approve-1", "status": "cancelled"},
                        {"interruptId": "approve-1", "status": "cancelled"},
                    ],
                ),
                "invalid_payload": _body(
                    "r-2",
                    [{"interruptId": "approve-1", "status": "resolved", "payload": {"ok": 1}}],
                ),
            }
            for code, body in cases.items():
                response = await _post(client, url, body)
                assert response.status_code in (409, 422), response.text
                assert response.json()["error"] == code, response.text
            assert producer.run_ids == ["r-1"]  # never called for a refused request
            assert (await client.get(f"{url}/runs/r-2")).status_code == 404  # nothing written
            answer = [
                {"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}
            ]
            resumed = await _post(client, url, _body("r-2", answer))
            assert resumed.status_code == 200 and '"RUN_FINISHED"' in resumed.text
            again = await _post(client, url, _body("r-3", answer))
            assert (again.status_code, again.json()["error"]) == (409, "interrupt_answered")
    assert producer.run_ids == ["r-1", "r-2"]
    assert [entry.interrupt_id for entry in producer.calls[1].resume or []] == ["approve-1"]


async def test_cancel_mode_hands_the_producer_the_open_interrupt_cancelled(
    tmp_path: Path,
) -> None:
    producer = Approver()
    with serve(_app(producer, tmp_path, interrupts="cancel")) as server:
        url = f"{server.url}/agent"
        async with httpx.AsyncClient(timeout=20) as client:
            await _post(client, url, _body("r-1"))
            user = {"id": "u-2", "role": "user", "content": "never mind, book a train"}
            response = await _post(client, url, _body("r-2", messages=[user]))
            assert response.status_code == 200, response.text
    assert producer.run_ids == ["r-1", "r-2"]
    resume = producer.calls[1].resume or []
    assert [(entry.interrupt_id, entry.status) for entry in resume] == [("approve-1", "cancelled")]


async def test_off_passes_the_request_through_to_the_producer(tmp_path: Path) -> None:
    producer = Approver()
    with serve(_app(producer, tmp_path, interrupts="off")) as server:
        url = f"{server.url}/agent"
        async with httpx.AsyncClient(timeout=20) as client:
            await _post(client, url, _body("r-1"))
            pending = await _post(client, url, _body("r-2"))
            assert pending.status_code == 200, pending.text
            unknown = [{"interruptId": "nope", "status": "resolved"}]
            assert (await _post(client, url, _body("r-3", unknown))).status_code == 200
    assert producer.run_ids == ["r-1", "r-2", "r-3"]
