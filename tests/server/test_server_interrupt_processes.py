"""Approval flows end to end across two server processes sharing one store.

For the run driver's approver and for pydantic-ai's deferred tool approval
(a ``FunctionModel``-scripted agent behind its own ``AGUIAdapter``, served as
an in-process producer): the official TypeScript client runs the first run on
one process (it ends with the interrupt), new input while it is pending and an
answer to a wrong id are refused, the client's resume is answered by the
*other* process (the approval completes: the tool ran), and a second answer
is refused — on SQLite and Redis. An expired interrupt (the driver's, with
``expiresAt`` in the past) is refused when resolved, and cancelling it moves
the thread on.

A LangGraph graph pausing in ``interrupt()`` (ag-ui-langgraph with
``emit_interrupt_outcome``) keeps its paused state in its checkpointer, which
here is the process's own ``InMemorySaver``: its flow runs on two servers of
one process sharing the store (a deployment of several processes shares a
LangGraph checkpointer too, e.g. a database one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests._approval_server import approval_server
from tests._servers import serve
from tests._store_backends import redis_url, store_url_for

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

FLOWS = {
    # flow: (the interrupt id, what the resumed run says once approved)
    "driver": ("approve-1", "Booked."),
    "pydantic-ai": ("int-call-1", "Result: booked Lisbon"),
}
USER = {"id": "u-1", "role": "user", "content": "Book me a flight to Lisbon."}


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    response = await client.post(
        url, content=json.dumps(body), headers={"accept": "text/event-stream"}
    )
    await response.aread()
    return response


def _refusal(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


@pytest.mark.parametrize("flow", sorted(FLOWS))
async def test_an_approval_flow_across_two_processes(
    flow: str, store_url: str, ts_oracle: Any
) -> None:
    if flow == "pydantic-ai":
        pytest.importorskip("pydantic_ai", reason="the producers extra is not installed")
    interrupt_id, said = FLOWS[flow]
    approve = [{"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": True}}]
    with approval_server(store_url, flow) as one, approval_server(store_url, flow) as two:
        (asked,) = await anyio.to_thread.run_sync(
            ts_oracle, [{"url": one, "threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}]
        )
        assert asked["outcome"] == "completed", asked["error"]
        finished = [e for e in asked["events"] if e["type"] == "RUN_FINISHED"][-1]
        assert [i["id"] for i in finished["outcome"]["interrupts"]] == [interrupt_id]
        history = asked["messages"]
        async with httpx.AsyncClient(timeout=30) as client:
            typed = {"id": "u-2", "role": "user", "content": "Never mind."}
            body = {"threadId": "t-1", "runId": "r-x", "messages": [*history, typed]}
            assert _refusal(await _post(client, two, body)) == (409, "interrupt_pending")
            wrong = {**body, "messages": history, "resume": [{**approve[0], "interruptId": "x"}]}
            assert _refusal(await _post(client, two, wrong)) == (422, "unknown_interrupt")
        # The other process answers the resume: the approval completes there.
        (resumed,) = await anyio.to_thread.run_sync(
            ts_oracle,
            [
                {
                    "url": two,
                    "threadId": "t-1",
                    "runId": "r-2",
                    "initialMessages": history,
                    "resume": approve,
                }
            ],
        )
        assert resumed["outcome"] == "completed", resumed["error"]
        assert resumed["messages"][-1]["content"] == said
        async with httpx.AsyncClient(timeout=30) as client:
            again = {"threadId": "t-1", "runId": "r-3", "messages": history, "resume": approve}
            refused = await _post(client, one, again)
            assert _refusal(refused) == (409, "interrupt_answered")
            assert "'r-2'" in refused.json()["message"]
            # Nothing was written for the refused requests.
            for run_id in ("r-x", "r-3"):
                assert (await client.get(f"{one}/runs/{run_id}")).status_code == 404


async def test_an_expired_interrupt_across_two_processes(store_url: str) -> None:
    resolved = [{"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}]
    cancelled = [{"interruptId": "approve-1", "status": "cancelled"}]
    with approval_server(store_url, "driver") as one, approval_server(store_url, "driver") as two:
        async with httpx.AsyncClient(timeout=30) as client:
            first = {"threadId": "expired-1", "runId": "r-1", "messages": [USER]}
            assert (await _post(client, one, first)).status_code == 200
            late = {**first, "runId": "r-2", "resume": resolved}
            assert _refusal(await _post(client, two, late)) == (409, "interrupt_expired")
            moved = await _post(client, two, {**late, "resume": cancelled})
            assert moved.status_code == 200 and "Not booked." in moved.text


def _langgraph_approver() -> Any:
    """A graph whose one node asks ``interrupt()`` for approval, then says what it got."""
    from ag_ui_langgraph import LangGraphAgent
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.types import interrupt

    def approve(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "Book the flight to Lisbon?"})
        approved = isinstance(answer, dict) and answer.get("approved") is True
        reply = "Booked." if approved else "Not booked."
        return {"messages": [AIMessage(id=f"ai-{len(state['messages'])}", content=reply)]}

    graph = StateGraph(MessagesState)
    graph.add_node("approve", approve)
    graph.add_edge(START, "approve")
    graph.add_edge("approve", END)
    return LangGraphAgent(
        name="approver",
        graph=graph.compile(checkpointer=InMemorySaver()),
        emit_interrupt_outcome=True,
        enable_legacy_on_interrupt_event=False,
    )


async def test_a_langgraph_interrupt_across_two_servers(store_url: str, ts_oracle: Any) -> None:
    pytest.importorskip("ag_ui_langgraph", reason="the producers extra is not installed")
    from agui_pipes.integrations.langgraph import langgraph_producer
    from agui_pipes.server import build_app

    producer = langgraph_producer(_langgraph_approver())

    def app() -> Any:
        return build_app(producer=producer, store=store_url, path="/agent", keepalive=None)

    with serve(app()) as one, serve(app()) as two:
        first, second = f"{one.url}/agent", f"{two.url}/agent"
        (asked,) = await anyio.to_thread.run_sync(
            ts_oracle,
            [{"url": first, "threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}],
        )
        assert asked["outcome"] == "completed", asked["error"]
        finished = [e for e in asked["events"] if e["type"] == "RUN_FINISHED"][-1]
        [interrupt] = finished["outcome"]["interrupts"]
        approve = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        history = asked["messages"]
        async with httpx.AsyncClient(timeout=30) as client:
            typed = {"id": "u-2", "role": "user", "content": "Never mind."}
            body = {"threadId": "t-1", "runId": "r-x", "messages": [*history, typed]}
            assert _refusal(await _post(client, second, body)) == (409, "interrupt_pending")
            wrong = {**body, "messages": history, "resume": [{**approve[0], "interruptId": "x"}]}
            assert _refusal(await _post(client, second, wrong)) == (422, "unknown_interrupt")
        (resumed,) = await anyio.to_thread.run_sync(
            ts_oracle,
            [
                {
                    "url": second,
                    "threadId": "t-1",
                    "runId": "r-2",
                    "initialMessages": history,
                    "resume": approve,
                }
            ],
        )
        assert resumed["outcome"] == "completed", resumed["error"]
        assert resumed["messages"][-1]["content"] == "Booked."
        async with httpx.AsyncClient(timeout=30) as client:
            again = {"threadId": "t-1", "runId": "r-3", "messages": history, "resume": approve}
            assert _refusal(await _post(client, first, again)) == (409, "interrupt_answered")
