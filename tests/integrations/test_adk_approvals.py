"""Approvals through the real Google ADK adapter (ag-ui-adk), with the ``adk`` interrupt bridge.

ag-ui-adk stops on a call of a client's frontend tool and waits for its result;
the chain's ``interrupt_bridge`` (dialect ``adk``) turns the unanswered call
into the canonical interrupt outcome (its id: the call's). The scripted model
(tests/integrations/_approvers.py) asks ``approve_transfer`` and then says
what it received, so each test checks what reached the model, not only the
events:

* in-process (``build_app(producer=adk_producer(...))``) and the gateway in
  front of ag-ui-adk's own FastAPI endpoint: the official TypeScript client
  runs, reads ``pendingInterrupts``, resumes (resolved, and cancelled) and
  gets the result;
* two ``agui-pipes serve`` processes on SQLite and Redis sharing an ADK
  ``DatabaseSessionService`` (an SQLite file) — ADK keeps the pending call in
  its session state, so the process answering the interrupt resumes the
  session the other one paused — with the four refusals
  (tests/integrations/_approval_flows.py).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from agui_pipes.config import load_chain
from agui_pipes.server import build_app
from tests._servers import serve
from tests._store_backends import redis_url, store_url_for
from tests.integrations import _approvers
from tests.integrations._approval_flows import Flow, across_two_processes, two_servers

pytestmark = [pytest.mark.anyio, pytest.mark.node]

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

pytest.importorskip("ag_ui_adk", reason="ag-ui-adk (the test extra) is missing")
pytest.importorskip("ag_ui_langgraph", reason="the TS flow's helper module needs it")

from tests.server.test_interrupt_bridge_gateway import _in_thread  # noqa: E402

ANSWERS = {
    # the client's answer: (what the model received as the tool's response)
    "resolved": ({"status": "resolved", "payload": {"approved": True}}, {"approved": True}),
    "cancelled": ({"status": "cancelled"}, {"cancelled": True, "status": "cancelled"}),
}


def _chain(tmp_path: Path, extra: str = "") -> Any:
    path = tmp_path / "chain.yaml"
    path.write_text(_approvers.ADK_CHAIN + extra)
    return load_chain(path, allow_imports=bool(extra))


def _framework_app(model: Any) -> Any:
    from fastapi import FastAPI
    from google.adk.sessions import InMemorySessionService

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ag_ui_adk import ADKAgent, add_adk_fastapi_endpoint

        agent = ADKAgent(
            adk_agent=_approvers.adk_agent(model), session_service=InMemorySessionService()
        )
    app = FastAPI()
    add_adk_fastapi_endpoint(app, agent, path="/")
    return app


@pytest.mark.parametrize("where", ["in-process", "gateway"])
@pytest.mark.parametrize("answer", sorted(ANSWERS))
async def test_the_ts_client_approves_through_adk(tmp_path: Path, where: str, answer: str) -> None:
    given, received = ANSWERS[answer]
    model = _approvers.adk_model()
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    if where == "in-process":
        app = build_app(
            producer=_approvers.adk_bank(model=model),
            chain=_chain(tmp_path),
            store=store,
            keepalive=None,
        )
        with serve(app) as server:
            flow = await _in_thread(f"{server.url}/", tmp_path, given, tools=[_approvers.ADK_TOOL])
    else:
        with serve(_framework_app(model)) as upstream:
            gateway = build_app(
                upstream=f"{upstream.url}/", chain=_chain(tmp_path), store=store, keepalive=None
            )
            with serve(gateway) as server:
                flow = await _in_thread(
                    f"{server.url}/", tmp_path, given, tools=[_approvers.ADK_TOOL]
                )
    first, second = flow["first"], flow["second"]
    assert first["error"] is None, flow["console"]
    assert first["pendingInterrupts"] == [
        {
            "id": "call-1",
            "reason": "tool_approval",
            "toolCallId": "call-1",
            "responseSchema": _approvers.APPROVAL_SCHEMA,
        }
    ]
    assert second is not None and second["error"] is None, flow["console"]
    assert second["pendingInterrupts"] == []
    # The answer reached ADK as the tool's function response, and the model read it.
    assert model.seen[-1] == [received]
    assert second["messages"][-1]["content"] == f"got {json.dumps(received, sort_keys=True)}"


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


# The servers are processes of their own: the test's event loop only waits on them.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_adk_approval_across_two_serve_processes(
    store_url: str, tmp_path: Path, ts_oracle: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = Flow(
        agent="tests.integrations._approvers:served_adk",
        chain=_approvers.ADK_CHAIN + "  - type: tests.integrations._approvers:PastExpiry\n",
        env={"APPROVAL_ADK_SESSIONS": f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}"},
        approved='got {"approved": true}',
        cancelled='got {"cancelled": true, "status": "cancelled"}',
        tools=[_approvers.ADK_TOOL],
    )
    with two_servers(flow, store_url, tmp_path, monkeypatch) as (one, two):
        await across_two_processes(flow, one, two, ts_oracle)
