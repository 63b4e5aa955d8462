"""``interrupts="cancel"``: new input while interrupts are pending goes ahead, cancelling them.

The check is the same as under ``"enforce"`` (a wrong id, a second answer, an
expired ``resolved`` answer are still refused); only a run that leaves open
interrupts unanswered is admitted, with them answered ``cancelled`` in its
``resume`` — what the agent (endpoint) or the upstream (gateway) reads and what
the thread records, so the next run has nothing pending.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import Gateway, agent_route
from tests._servers import serve
from tests._store_backends import redis_url, store_url_for
from tests.server.test_server_interrupts import Approver, _app, _body, _post

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

USER = {"id": "u-2", "role": "user", "content": "Actually, book a train instead."}


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


class Recorder(Approver):
    """The approver, noting each run's ``resume`` as the agent received it."""

    def __init__(self) -> None:
        super().__init__()
        self.resumes: dict[str, list[dict[str, Any]]] = {}

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        self.resumes[ctx.run_id] = [
            entry.model_dump(by_alias=True, exclude_none=True) for entry in ctx.resume
        ]
        return await super().run(ctx)


async def test_new_input_cancels_the_pending_interrupt_for_the_agent(store_url: str) -> None:
    agent = Recorder()
    with serve(_app(agent.run, store_url, interrupts="cancel")) as server:
        url = f"{server.url}/agent"
        async with httpx.AsyncClient(timeout=20) as client:
            assert (await _post(client, url, _body("r-1"))).status_code == 200
            typed = await _post(client, url, _body("r-2", messages=[USER]))
            assert typed.status_code == 200, typed.text
            # The agent read the cancellation, so it did not book.
            assert agent.resumes["r-2"] == [{"interruptId": "approve-1", "status": "cancelled"}]
            assert "Not booked." in typed.text
            # Recorded: the id counts as answered, by r-2, for a late answer.
            late = [
                {"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}
            ]
            again = await _post(client, url, _body("r-3", late))
            assert (again.status_code, again.json()["error"]) == (409, "interrupt_answered")
            assert "'r-2'" in again.json()["message"]
            # A retry of the run that cancelled is the same POST: it rejoins, no second run.
            retry = await _post(client, url, _body("r-2", messages=[USER]))
            assert retry.status_code == 200
    assert agent.runs == ["r-1", "r-2"]


async def test_cancel_still_refuses_what_enforce_refuses(store_url: str) -> None:
    agent = Recorder()
    with serve(_app(agent.run, store_url, interrupts="cancel")) as server:
        url = f"{server.url}/agent"
        async with httpx.AsyncClient(timeout=20) as client:
            await _post(client, url, _body("r-1"))
            wrong = await _post(
                client, url, _body("r-2", [{"interruptId": "x", "status": "resolved"}])
            )
            assert (wrong.status_code, wrong.json()["error"]) == (422, "unknown_interrupt")
            bad = [{"interruptId": "approve-1", "status": "resolved", "payload": {"approved": 1}}]
            invalid = await _post(client, url, _body("r-2", bad))
            assert (invalid.status_code, invalid.json()["error"]) == (422, "invalid_payload")
            # A full answer is taken as it is: nothing added.
            good = [
                {"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}
            ]
            assert (await _post(client, url, _body("r-2", good))).status_code == 200
            assert agent.resumes["r-2"] == good
    assert agent.runs == ["r-1", "r-2"]


async def test_the_gateway_sends_the_cancellation_upstream(store_url: str) -> None:
    agent = Recorder()
    upstream_app = Starlette(routes=[agent_route("/agent", agent.run, keepalive=None)])
    with serve(upstream_app) as upstream:
        gateway = Gateway(
            f"{upstream.url}/agent", store=store_url, keepalive=None, interrupts="cancel"
        )
        app = Starlette(routes=gateway.routes("/chat"), lifespan=gateway.lifespan)
        with serve(app) as server:
            url = f"{server.url}/chat"
            async with httpx.AsyncClient(timeout=20) as client:
                await _post(client, url, _body("r-1"))
                body = _body("r-2", messages=[USER], forwardedProps={"keep": "me"})
                typed = await _post(client, url, body)
                assert typed.status_code == 200, typed.text
    assert agent.resumes["r-2"] == [{"interruptId": "approve-1", "status": "cancelled"}]
    assert "Not booked." in typed.text


def test_serve_takes_interrupts_cancel() -> None:
    from agui_pipes._cli import build_parser

    parser = build_parser("serve")
    assert parser.parse_args(["serve", "--demo", "--interrupts", "cancel"]).interrupts == "cancel"
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--demo", "--interrupts", "maybe"])


def test_an_unknown_mode_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="'enforce', 'cancel', 'off'"):
        _app(Approver().run, "memory:", interrupts="maybe")
