"""Approvals through the real AWS Strands adapter (ag-ui-strands): no bridge needed.

ag-ui-strands speaks the canonical contract itself: a server tool whose
``ToolBehavior`` has ``interrupt_on_call=True`` is interrupted by the
adapter's approval hook before it runs (``RUN_FINISHED`` with an interrupt
outcome whose id is Strands' own and whose ``responseSchema`` is
``{"approved": boolean}``), and the next run's ``resume[]`` answers it: the
tool runs only for ``{"approved": true}``; ``false`` or ``cancelled`` skips it
and the model is told the user denied it. The scripted model
(tests/integrations/_approvers.py) then says the tool result it received, so
each test checks what reached the model, not only the events:

* in-process (``build_app(producer=strands_producer(...))``) and the gateway
  in front of ag-ui-strands' own FastAPI endpoint: the official TypeScript
  client runs, reads ``pendingInterrupts``, resumes (approved, denied,
  cancelled) and gets the result;
* two ``agui-pipes serve`` processes on SQLite and Redis whose Strands agents
  keep their sessions in one ``FileSessionManager`` directory — Strands keeps
  the paused interrupt in the agent (its cache is per process) and persists
  it in its session, so the process answering rebuilds the paused agent from
  it — with the four refusals (tests/integrations/_approval_flows.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agui_pipes.server import build_app
from tests._servers import serve
from tests._store_backends import redis_url, store_url_for
from tests.integrations import _approvers
from tests.integrations._approval_flows import Flow, across_two_processes, two_servers

pytestmark = [pytest.mark.anyio, pytest.mark.node]

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

pytest.importorskip("ag_ui_strands", reason="ag-ui-strands (the test extra) is missing")
pytest.importorskip("ag_ui_langgraph", reason="the TS flow's helper module needs it")

from agui_pipes.integrations.strands import strands_producer  # noqa: E402
from tests.server.test_interrupt_bridge_gateway import _in_thread  # noqa: E402

SENT = [{"text": "sent $5"}]
DENIED = [{"text": "User denied approval for 'transfer'."}]
ANSWERS = {
    # the client's answer: (the tool result's status and content the model received)
    "approved": ({"status": "resolved", "payload": {"approved": True}}, "success", SENT),
    "denied": ({"status": "resolved", "payload": {"approved": False}}, "error", DENIED),
    "cancelled": ({"status": "cancelled"}, "error", DENIED),
}


def _framework_app(model: Any) -> Any:
    from ag_ui_strands import add_strands_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    add_strands_fastapi_endpoint(app, _approvers.strands_bank(model=model), "/")
    return app


@pytest.mark.parametrize("where", ["in-process", "gateway"])
@pytest.mark.parametrize("answer", sorted(ANSWERS))
async def test_the_ts_client_approves_through_strands(
    tmp_path: Path, where: str, answer: str
) -> None:
    given, status, content = ANSWERS[answer]
    model = _approvers.strands_model()
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    if where == "in-process":
        producer = strands_producer(_approvers.strands_bank(model=model))
        with serve(build_app(producer=producer, store=store, keepalive=None)) as server:
            flow = await _in_thread(f"{server.url}/", tmp_path, given)
    else:
        with serve(_framework_app(model)) as upstream:
            gateway = build_app(upstream=f"{upstream.url}/", store=store, keepalive=None)
            with serve(gateway) as server:
                flow = await _in_thread(f"{server.url}/", tmp_path, given)
    first, second = flow["first"], flow["second"]
    assert first["error"] is None, flow["console"]
    [pending] = first["pendingInterrupts"]
    assert pending["reason"] == "tool_call"
    assert pending["toolCallId"] == "call-1"
    assert pending["responseSchema"] == _approvers.APPROVAL_SCHEMA
    assert second is not None and second["error"] is None, flow["console"]
    assert second["pendingInterrupts"] == []
    # What Strands handed the model: the tool's result, or the denial instead of running it.
    [result] = model.seen[-1]
    assert (result["toolUseId"], result["status"], result["content"]) == ("call-1", status, content)
    assert second["messages"][-1]["content"] == f"got {json.dumps(content, sort_keys=True)}"


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


# The servers are processes of their own: the test's event loop only waits on them.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_strands_approval_across_two_serve_processes(
    store_url: str, tmp_path: Path, ts_oracle: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = Flow(
        agent="tests.integrations._approvers:served_strands",
        chain="transformers:\n  - type: tests.integrations._approvers:PastExpiry\n",
        env={"APPROVAL_STRANDS_SESSIONS": str(tmp_path / "strands-sessions")},
        approved=f"got {json.dumps(SENT)}",
        cancelled=f"got {json.dumps(DENIED)}",
    )
    with two_servers(flow, store_url, tmp_path, monkeypatch) as (one, two):
        await across_two_processes(flow, one, two, ts_oracle)
