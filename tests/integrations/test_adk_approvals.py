"""Approvals through the real Google ADK adapter (ag-ui-adk), two ways.

* A **frontend tool**: ag-ui-adk stops on a call of a client's tool and waits
  for its result; the chain's ``interrupt_bridge`` (dialect ``adk``) turns the
  unanswered call into the canonical interrupt outcome (its id: the call's).
* ADK's **tool confirmation** (``FunctionTool(require_confirmation=True)``):
  ag-ui-adk with ``emit_interrupt_outcome=True`` reports the pause as the
  canonical outcome itself (its id: ADK's ``adk_request_confirmation`` call);
  no bridge.

The scripted model (tests/integrations/_approvers.py) calls the tool and then
says what it received, so each test checks what reached the model, not only
the events:

* in-process (``build_app(producer=adk_producer(...))``) and the gateway in
  front of ag-ui-adk's own FastAPI endpoint: the official TypeScript client
  runs, reads ``pendingInterrupts``, resumes (resolved, cancelled; the
  confirmation also denied) and gets the result;
* new input while the interrupt is pending, under ``interrupts="cancel"``;
* two ``agui-pipes serve`` processes on SQLite and Redis sharing an ADK
  ``DatabaseSessionService`` (an SQLite file) — ADK keeps the pending call in
  its session state, so the process answering the interrupt resumes the
  session the other one paused — with the four refusals
  (tests/integrations/_approval_flows.py); and, without a shared session
  service, what the other process does instead.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from agui_pipes.config import load_chain
from agui_pipes.server import build_app
from tests._interrupt_flow import interrupt_flow_in_thread
from tests._servers import serve
from tests._store_backends import redis_url, store_url_for
from tests.integrations import _approvers
from tests.integrations._approval_flows import (
    LATER,
    Flow,
    across_two_processes,
    answered_elsewhere,
    two_servers,
    typed_instead_of_answering,
)

pytestmark = [pytest.mark.anyio, pytest.mark.node]

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

pytest.importorskip("ag_ui_adk", reason="ag-ui-adk (the test extra) is missing")

ANSWERS = {
    # the client's answer: (what the model received as the tool's response)
    "resolved": ({"status": "resolved", "payload": {"approved": True}}, {"approved": True}),
    "cancelled": ({"status": "cancelled"}, {"cancelled": True, "status": "cancelled"}),
}


def _chain(tmp_path: Path) -> Any:
    """The bridge as a chain file declares it (tests/integrations/_approvers.py)."""
    path = tmp_path / "chain.yaml"
    path.write_text(_approvers.ADK_CHAIN)
    return load_chain(path)


def _framework_app(model: Any, *, confirm: bool = False) -> Any:
    from fastapi import FastAPI
    from google.adk.sessions import InMemorySessionService

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ag_ui_adk import ADKAgent, add_adk_fastapi_endpoint

        agent = ADKAgent(
            adk_agent=_approvers.adk_agent(model, confirm=confirm),
            session_service=InMemorySessionService(),
            emit_interrupt_outcome=confirm,
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
            flow = await interrupt_flow_in_thread(
                f"{server.url}/", tmp_path, given, tools=[_approvers.ADK_TOOL]
            )
    else:
        with serve(_framework_app(model)) as upstream:
            gateway = build_app(
                upstream=f"{upstream.url}/", chain=_chain(tmp_path), store=store, keepalive=None
            )
            with serve(gateway) as server:
                flow = await interrupt_flow_in_thread(
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


async def test_new_input_under_cancel_mode_reaches_adk_with_the_cancellation(
    tmp_path: Path, ts_oracle: Any
) -> None:
    """interrupts="cancel": ADK gets the cancelled result and the new message in one turn."""
    model = _approvers.adk_model()
    app = build_app(
        producer=_approvers.adk_bank(model=model),
        chain=_chain(tmp_path),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        keepalive=None,
        interrupts="cancel",
    )
    with serve(app) as server:
        said = await typed_instead_of_answering(
            f"{server.url}/", ts_oracle, tools=[_approvers.ADK_TOOL]
        )
    cancelled = {"cancelled": True, "status": "cancelled"}
    assert model.seen[-1] == [cancelled]
    assert model.texts[-1][-1] == LATER["content"]  # the same model call
    assert said == f"got {json.dumps(cancelled, sort_keys=True)}"


SENT = {"result": "sent $5"}
REJECTED = {"error": "This tool call is rejected."}
CONFIRMATIONS = {
    # the client's answer: (what the model received as transfer's response)
    "approved": ({"status": "resolved", "payload": {"approved": True}}, SENT),
    "denied": ({"status": "resolved", "payload": {"approved": False}}, REJECTED),
    "cancelled": ({"status": "cancelled"}, REJECTED),
}


@pytest.mark.parametrize("where", ["in-process", "gateway"])
@pytest.mark.parametrize("answer", sorted(CONFIRMATIONS))
async def test_the_ts_client_answers_an_adk_tool_confirmation(
    tmp_path: Path, where: str, answer: str
) -> None:
    given, received = CONFIRMATIONS[answer]
    model = _approvers.adk_model("transfer")
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    if where == "in-process":
        producer = _approvers.adk_bank(model=model, confirm=True)
        with serve(build_app(producer=producer, store=store, keepalive=None)) as server:
            flow = await interrupt_flow_in_thread(f"{server.url}/", tmp_path, given)
    else:
        with serve(_framework_app(model, confirm=True)) as upstream:
            gateway = build_app(upstream=f"{upstream.url}/", store=store, keepalive=None)
            with serve(gateway) as server:
                flow = await interrupt_flow_in_thread(f"{server.url}/", tmp_path, given)
    first, second = flow["first"], flow["second"]
    assert first["error"] is None, flow["console"]
    [pending] = first["pendingInterrupts"]
    # ADK's own confirmation call is the interrupt; the call it holds back is transfer's.
    assert pending["reason"] == "confirmation"
    assert pending["toolCallId"] == pending["id"] != "call-1"
    assert pending["metadata"]["adk"]["originalFunctionCall"]["name"] == "transfer"
    assert second is not None and second["error"] is None, flow["console"]
    assert second["pendingInterrupts"] == []
    assert model.seen[-1] == [received]  # transfer ran, or ADK told the model it was rejected
    assert second["messages"][-1]["content"] == f"got {json.dumps(received, sort_keys=True)}"


async def test_without_a_shared_session_service_another_process_starts_over(
    tmp_path: Path,
) -> None:
    """Why the processes share ADK's session service: the paused run is in the session.

    Two servers with in-memory session services of their own (two processes'
    memory) on one store: the approval of a tool confirmation through the
    second is admitted by the thread check, but ag-ui-adk there has no session
    holding the pause. It seeds a new one from the client's history, its model
    is asked the user's turn afresh, the tool does not run, and the run ends
    asking for a new confirmation.
    """
    models = [_approvers.adk_model("transfer"), _approvers.adk_model("transfer")]
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    apps = [
        build_app(producer=_approvers.adk_bank(model=m, confirm=True), store=store) for m in models
    ]
    with serve(apps[0]) as one, serve(apps[1]) as two:
        answered = await answered_elsewhere(f"{one.url}/", f"{two.url}/")
    assert models[1].seen == [[]]  # asked afresh, with no function response
    finished = answered.events[-1]
    assert finished["type"] == "RUN_FINISHED"
    [asked_again] = finished["outcome"]["interrupts"]
    assert asked_again["reason"] == "confirmation"
    assert asked_again["id"] != answered.interrupt_id


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


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_adk_tool_confirmation_across_two_serve_processes(
    store_url: str, tmp_path: Path, ts_oracle: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = Flow(
        agent="tests.integrations._approvers:served_adk_confirming",
        chain="transformers:\n  - type: tests.integrations._approvers:PastExpiry\n",
        env={"APPROVAL_ADK_SESSIONS": f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}"},
        approved=f"got {json.dumps(SENT)}",
        cancelled=f"got {json.dumps(REJECTED)}",
    )
    with two_servers(flow, store_url, tmp_path, monkeypatch) as (one, two):
        await across_two_processes(flow, one, two, ts_oracle)
