"""The thread's interrupt contract, enforced by a server with a store.

An approval flow driven by the official TypeScript client (run → interrupt →
resume → result), and every way to break it refused before the agent runs,
with nothing written: a wrong id, a second answer, an expired interrupt, new
input while one is pending — on SQLite and Redis, and across two servers
sharing the store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, agent_routes
from tests._servers import serve
from tests._store_backends import redis_url, store_url_for

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

PAST = "2020-01-01T00:00:00Z"


class Approver:
    """Asks for approval (an interrupt) unless it is resuming; says what it was told."""

    def __init__(self, expires_at: str | None = None) -> None:
        self.expires_at = expires_at
        self.runs: list[str] = []

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        self.runs.append(ctx.run_id)
        answer = ctx.resume_for("approve-1")
        if answer is None:
            ctx.say("May I book the flight?")
            interrupt: dict[str, Any] = {
                "id": "approve-1",
                "reason": "tool_approval",
                "responseSchema": {
                    "type": "object",
                    "properties": {"approved": {"type": "boolean"}},
                    "required": ["approved"],
                },
            }
            if self.expires_at is not None:
                interrupt["expiresAt"] = self.expires_at
            return RunOutcome.interrupt([interrupt])
        approved = answer.status == "resolved" and (answer.payload or {}).get("approved")
        ctx.say("Booked." if approved else "Not booked.")
        return RunOutcome.success()


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def _app(agent: Any, store: str, **options: Any) -> Starlette:
    routes = agent_routes("/agent", agent, store=store, keepalive=None, **options)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    return Starlette(routes=routes, lifespan=endpoint.lifespan)


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


async def test_an_approval_flow_through_the_reference_client(
    store_url: str, ts_oracle: Any
) -> None:
    agent = Approver()
    with serve(_app(agent.run, store_url)) as server:
        url = f"{server.url}/agent"
        asked, resumed = await _oracle(
            ts_oracle,
            [
                {"url": url, "threadId": "t-1", "runId": "r-1"},
                {
                    "url": url,
                    "threadId": "t-1",
                    "runId": "r-2",
                    "resume": [
                        {
                            "interruptId": "approve-1",
                            "status": "resolved",
                            "payload": {"approved": True},
                        }
                    ],
                },
            ],
        )
    assert asked["outcome"] == "completed", asked["error"]
    finished = [e for e in asked["events"] if e["type"] == "RUN_FINISHED"][0]
    assert finished["outcome"]["interrupts"][0]["id"] == "approve-1"
    assert resumed["outcome"] == "completed", resumed["error"]
    assert resumed["messages"][-1]["content"] == "Booked."
    assert agent.runs == ["r-1", "r-2"]


async def _oracle(ts_oracle: Any, cases: list[dict[str, Any]]) -> list[Any]:
    import anyio

    return list(await anyio.to_thread.run_sync(ts_oracle, cases))


async def test_every_broken_answer_is_refused_before_the_agent_runs(store_url: str) -> None:
    agent = Approver()
    with serve(_app(agent.run, store_url)) as server:
        url = f"{server.url}/agent"
        async with httpx.AsyncClient(timeout=20) as client:
            assert (await _post(client, url, _body("r-1"))).status_code == 200
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
                assert response.json()["error"] == code, response.text
                assert response.status_code in (409, 422)
            # Nothing was written for a refused request, and the agent never ran.
            assert (await client.get(f"{url}/runs/r-2")).status_code == 404
            assert agent.runs == ["r-1"]
            answer = [{"interruptId": "approve-1", "status": "cancelled"}]
            assert (await _post(client, url, _body("r-2", answer))).status_code == 200
            again = await _post(client, url, _body("r-3", answer))
            assert (again.status_code, again.json()["error"]) == (409, "interrupt_answered")
            assert again.json()["details"] == [{"interruptId": "approve-1"}]
            # The retry of the run that answered is the same request: it rejoins, idempotent.
            assert (await _post(client, url, _body("r-2", answer))).status_code == 200
            assert agent.runs == ["r-1", "r-2"]


async def test_an_expired_interrupt_can_be_cancelled_but_not_resolved(store_url: str) -> None:
    agent = Approver(expires_at=PAST)
    with serve(_app(agent.run, store_url)) as server:
        url = f"{server.url}/agent"
        async with httpx.AsyncClient(timeout=20) as client:
            await _post(client, url, _body("r-1"))
            resolved = [
                {"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}
            ]
            late = await _post(client, url, _body("r-2", resolved))
            assert (late.status_code, late.json()["error"]) == (409, "interrupt_expired")
            cancelled = [{"interruptId": "approve-1", "status": "cancelled"}]
            assert (await _post(client, url, _body("r-2", cancelled))).status_code == 200


async def test_a_second_server_sharing_the_store_enforces_the_same(store_url: str) -> None:
    agent = Approver()
    with serve(_app(agent.run, store_url)) as one, serve(_app(agent.run, store_url)) as two:
        async with httpx.AsyncClient(timeout=20) as client:
            await _post(client, f"{one.url}/agent", _body("r-1"))
            refused = await _post(client, f"{two.url}/agent", _body("r-2"))
            assert refused.json()["error"] == "interrupt_pending"
            answer = [{"interruptId": "approve-1", "status": "cancelled"}]
            assert (
                await _post(client, f"{two.url}/agent", _body("r-2", answer))
            ).status_code == 200
            again = await _post(client, f"{one.url}/agent", _body("r-3", answer))
            assert again.json()["error"] == "interrupt_answered"


async def test_off_leaves_the_contract_to_the_agent(tmp_path: Path) -> None:
    agent = Approver()
    store = f"sqlite:///{tmp_path / 'x.db'}"
    with serve(_app(agent.run, store, interrupts="off")) as server:
        async with httpx.AsyncClient(timeout=20) as client:
            url = f"{server.url}/agent"
            await _post(client, url, _body("r-1"))
            assert (await _post(client, url, _body("r-2"))).status_code == 200
    assert agent.runs == ["r-1", "r-2"]
