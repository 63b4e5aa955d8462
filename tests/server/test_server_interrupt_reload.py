"""A reloaded thread shows its pending interrupt, and answering it resumes (docs/interrupts.md).

A UI that reloads reads the thread's history (``GET threads/{id}``), joins it
(``GET threads/{id}?join=1``, or the stock client's join POST) or joins the
run (``GET runs/{runId}?join=1``): each ends with the interrupted run's
interrupt outcome while it is pending, and the reference client, fed that
stream, holds it as pending; its answer then resumes the thread. Once
answered, the history no longer ends with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agui_pipes.server._join import JOIN_PROPS_KEY
from tests._servers import serve
from tests._store_backends import redis_url, store_url_for
from tests.server.test_server_interrupts import Approver, _app, _body, _post

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

APPROVED = [{"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}]


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


def _last(text: str) -> dict[str, Any]:
    data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert data, text
    last: dict[str, Any] = json.loads(data[-1])
    return last


def _pending(last: dict[str, Any]) -> list[str]:
    assert last["type"] == "RUN_FINISHED", last
    outcome = last.get("outcome") or {}
    return (
        [i["id"] for i in outcome.get("interrupts", [])]
        if outcome.get("type") == "interrupt"
        else []
    )


async def test_history_and_joins_show_the_pending_interrupt_and_answering_resumes(
    store_url: str, ts_oracle: Any
) -> None:
    agent = Approver()
    with serve(_app(agent.run, store_url)) as server:
        url = f"{server.url}/agent"
        async with httpx.AsyncClient(timeout=20) as client:
            assert (await _post(client, url, _body("r-1"))).status_code == 200
            for path in ("threads/t-1", "threads/t-1?join=1", "runs/r-1?join=1"):
                response = await client.get(f"{url}/{path}")
                assert response.status_code == 200, (path, response.text)
                assert _pending(_last(response.text)) == ["approve-1"], path
        # The stock client reloading: the join POST, then its answer, as a UI sends them.
        join = {"aguiPipes": {"join": "thread"}}
        assert JOIN_PROPS_KEY in join
        reloaded, answered = await anyio.to_thread.run_sync(
            ts_oracle,
            [
                {"url": url, "threadId": "t-1", "runId": "reload", "forwardedProps": join},
                {"url": url, "threadId": "t-1", "runId": "r-2", "resume": APPROVED},
            ],
        )
        assert reloaded["outcome"] == "completed", reloaded["error"]
        finished = [e for e in reloaded["events"] if e["type"] == "RUN_FINISHED"]
        assert finished[-1]["outcome"]["interrupts"][0]["id"] == "approve-1"
        assert any(m.get("content") == "May I book the flight?" for m in reloaded["messages"])
        assert answered["outcome"] == "completed", answered["error"]
        assert answered["messages"][-1]["content"] == "Booked."
        async with httpx.AsyncClient(timeout=20) as client:
            history = await client.get(f"{url}/threads/t-1")
            assert _pending(_last(history.text)) == []
            # The reload was no run: the thread holds r-1 and the run that answered.
            again = await _post(client, url, _body("r-3", APPROVED))
            assert again.json()["error"] == "interrupt_answered"
    assert agent.runs == ["r-1", "r-2"]
