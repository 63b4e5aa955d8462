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
  cancelled) and gets the result; a payload off the interrupt's schema is
  refused before Strands sees it; new input under ``interrupts="cancel"``;
* two ``agui-pipes serve`` processes on SQLite and Redis whose Strands agents
  keep their sessions in one ``FileSessionManager`` directory — Strands keeps
  the paused interrupt in the agent (its cache is per process) and persists
  it in its session, so the process answering rebuilds the paused agent from
  it — with the four refusals (tests/integrations/_approval_flows.py); and,
  without shared sessions, what the other process does instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
    refusal,
    two_servers,
    typed_instead_of_answering,
)

pytestmark = [pytest.mark.anyio, pytest.mark.node]

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

pytest.importorskip("ag_ui_strands", reason="ag-ui-strands (the test extra) is missing")

from agui_pipes.integrations.strands import strands_producer  # noqa: E402

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
            flow = await interrupt_flow_in_thread(f"{server.url}/", tmp_path, given)
    else:
        with serve(_framework_app(model)) as upstream:
            gateway = build_app(upstream=f"{upstream.url}/", store=store, keepalive=None)
            with serve(gateway) as server:
                flow = await interrupt_flow_in_thread(f"{server.url}/", tmp_path, given)
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


async def test_new_input_under_cancel_mode_resumes_strands_without_the_new_message(
    tmp_path: Path, ts_oracle: Any
) -> None:
    """interrupts="cancel": Strands resumes its parked tool batch, denied, and that is all.

    ag-ui-strands answers the parked batch on a resume and does not hand the
    run's new user message to the model in that run (docs/interrupts.md).
    """
    model = _approvers.strands_model()
    app = build_app(
        producer=strands_producer(_approvers.strands_bank(model=model)),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        keepalive=None,
        interrupts="cancel",
    )
    with serve(app) as server:
        said = await typed_instead_of_answering(f"{server.url}/", ts_oracle)
    [result] = model.seen[-1]
    assert (result["status"], result["content"]) == ("error", DENIED)
    assert LATER["content"] not in model.texts[-1]
    assert said == f"got {json.dumps(DENIED)}"


async def test_a_payload_strands_schema_refuses_never_reaches_strands(tmp_path: Path) -> None:
    """Strands' interrupt carries its responseSchema: the thread check holds it to it."""
    model = _approvers.strands_model()
    producer = strands_producer(_approvers.strands_bank(model=model))
    app = build_app(producer=producer, store=f"sqlite:///{tmp_path / 'runs.db'}")
    with serve(app) as server:
        url = f"{server.url}/"
        asked = await answered_elsewhere(url, url, payload={"approved": "yes"}, admitted=False)
    assert asked.status == (422, "invalid_payload")
    assert "approved" in asked.message  # names the path
    assert len(model.seen) == 1  # the model was asked once, for the first run only


async def test_without_shared_sessions_another_process_cannot_resume(tmp_path: Path) -> None:
    """Why the processes share Strands' sessions: the paused agent is the process's own.

    Two servers with agents of their own (two processes' caches) on one store:
    the answer through the second is admitted by the thread check, and
    ag-ui-strands, with no paused agent there, ends the run UNKNOWN_INTERRUPT_ID
    without calling the model — after which the thread holds the interrupt
    answered (by that failed run).
    """
    models = [_approvers.strands_model(), _approvers.strands_model()]
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    apps = [
        build_app(producer=strands_producer(_approvers.strands_bank(model=m)), store=store)
        for m in models
    ]
    with serve(apps[0]) as one, serve(apps[1]) as two:
        answered = await answered_elsewhere(f"{one.url}/", f"{two.url}/")
        again = {**answered.answer, "runId": "s-3"}
        refused = await refusal(f"{one.url}/", again)
    assert (answered.events[-1]["type"], answered.events[-1]["code"]) == (
        "RUN_ERROR",
        "UNKNOWN_INTERRUPT_ID",
    )
    assert models[1].seen == []  # the second process's model was never asked
    assert refused == (409, "interrupt_answered")


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
