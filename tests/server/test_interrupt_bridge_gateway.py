"""The interrupt bridge in a real gateway, in front of upstreams speaking a dialect.

* LangGraph: a scripted graph calling ``interrupt()`` (no model), served by
  ag-ui-langgraph 0.0.47's own FastAPI endpoint with its defaults — the legacy
  ``CUSTOM on_interrupt`` and ``forwardedProps.command.resume``.
* ADK: an upstream reproducing ag-ui-adk 0.11.0's default behaviour as its
  source has it (google-adk needs a model service, so ag-ui-adk itself is not
  run): a frontend tool call streamed START / ARGS / END and left without a
  result under a plain RUN_FINISHED; the next run reads the ``tool`` message.

The official TypeScript client drives both runs on one agent through its own
``pendingInterrupts`` and ``resume`` (tests/harness/interrupt_flow.mjs); the
gateway records the thread (SQLite), so the thread's interrupt contract is
checked on the canonical ids.
"""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from agui_pipes.config import load_chain
from agui_pipes.server import Gateway, build_app
from tests._interrupt_flow import interrupt_flow_in_thread as _in_thread
from tests._servers import serve

pytestmark = [pytest.mark.anyio, pytest.mark.node]

ag_ui_langgraph = pytest.importorskip(
    "ag_ui_langgraph", reason="the producers extra is not installed"
)

from langgraph.graph.message import add_messages  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402


class State(TypedDict):
    """The graph's state (module level: LangGraph resolves its annotations)."""

    messages: Annotated[list[Any], add_messages]


class TwoAsks(TypedDict):
    """Two branches that each interrupt, in parallel, and what each was answered."""

    messages: Annotated[list[Any], add_messages]
    answers: Annotated[list[str], operator.add]


_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


# -- the upstreams ------------------------------------------------------------


def _langgraph_app() -> Any:
    from fastapi import FastAPI
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def ask(state: State) -> dict[str, Any]:
        answer = interrupt(
            {"reason": "tool_approval", "message": "Transfer $5?", "responseSchema": _SCHEMA}
        )
        if isinstance(answer, dict) and answer.get("__agui_cancelled__"):
            text = "Cancelled."
        elif isinstance(answer, dict) and answer.get("approved") is True:
            text = "Transferred."
        else:
            text = f"Not transferred ({json.dumps(answer)})."
        return {"messages": [AIMessage(id="lg-answer", content=text)]}

    graph = StateGraph(State)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    agent = ag_ui_langgraph.LangGraphAgent(
        name="transfer", graph=graph.compile(checkpointer=InMemorySaver())
    )
    app = FastAPI()
    ag_ui_langgraph.add_langgraph_fastapi_endpoint(app, agent, "/")
    return app


def _parallel_app() -> Any:
    from fastapi import FastAPI
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def asking(name: str) -> Any:
        def ask(state: TwoAsks) -> dict[str, Any]:
            answer = interrupt({"reason": f"approve_{name}", "message": f"Book the {name}?"})
            return {"answers": [f"{name}={json.dumps(answer, sort_keys=True)}"]}

        return ask

    def summary(state: TwoAsks) -> dict[str, Any]:
        return {"messages": [AIMessage(id="lg-sum", content="; ".join(sorted(state["answers"])))]}

    graph = StateGraph(TwoAsks)
    graph.add_node("flight", asking("flight"))
    graph.add_node("hotel", asking("hotel"))
    graph.add_node("summary", summary)
    for branch in ("flight", "hotel"):
        graph.add_edge(START, branch)
        graph.add_edge(branch, "summary")
    graph.add_edge("summary", END)
    agent = ag_ui_langgraph.LangGraphAgent(
        name="trip", graph=graph.compile(checkpointer=InMemorySaver())
    )
    app = FastAPI()
    ag_ui_langgraph.add_langgraph_fastapi_endpoint(app, agent, "/")
    return app


class AdkLikeUpstream:
    """ag-ui-adk 0.11.0's default wire behaviour for a frontend tool (module doc)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/", self._run, methods=["POST"])])

    async def _run(self, request: Request) -> StreamingResponse:
        body = await request.json()
        self.requests.append(body)
        thread, run = body["threadId"], body["runId"]
        results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
        events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": thread, "runId": run}]
        if results:  # the client answered the pending call: the agent goes on
            answer = json.loads(results[-1]["content"] or "null")
            done = isinstance(answer, dict) and answer.get("approved") is True
            events += _text(f"msg-{run}", "Transferred." if done else "Not transferred.")
        else:  # the model calls the frontend tool, and the run stops on it
            call = f"call-{run}"
            events += _text(f"msg-{run}", "I need your approval.")
            events += [
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": call,
                    "toolCallName": "approve_transfer",
                    "parentMessageId": f"msg-{run}",
                },
                {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": '{"amount": 5}'},
                {"type": "TOOL_CALL_END", "toolCallId": call},
            ]
        events.append({"type": "RUN_FINISHED", "threadId": thread, "runId": run})

        async def frames() -> Any:
            for event in events:
                yield f"data: {json.dumps(event)}\n\n".encode()

        return StreamingResponse(frames(), media_type="text/event-stream")


def _text(message_id: str, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


# -- the gateway and the client ------------------------------------------------


def _gateway(upstream: str, tmp_path: Path, chain_yaml: str) -> Starlette:
    path = tmp_path / "chain.yaml"
    path.write_text(chain_yaml)
    return build_app(
        upstream=upstream,
        chain=load_chain(path),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        keepalive=None,
    )


_LANGGRAPH_CHAIN = "transformers:\n  - type: interrupt_bridge\n    dialect: langgraph\n"
_ADK_CHAIN = (
    "transformers:\n"
    "  - type: interrupt_bridge\n"
    "    dialect: adk\n"
    "    tools: [approve_transfer]\n"
    "    reason: tool_approval\n"
    f"    response_schema: {json.dumps(_SCHEMA)}\n"
)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"status": "resolved", "payload": {"approved": True}}, "Transferred."),
        ({"status": "cancelled"}, "Cancelled."),
    ],
)
async def test_a_langgraph_interrupt_completes_through_the_ts_client(
    tmp_path: Path, answer: dict[str, Any], said: str
) -> None:
    with (
        serve(_langgraph_app()) as upstream,
        serve(_gateway(f"{upstream.url}/", tmp_path, _LANGGRAPH_CHAIN)) as gateway,
    ):
        flow = await _in_thread(f"{gateway.url}/", tmp_path, answer)
    first, second = flow["first"], flow["second"]
    assert first["error"] is None, flow["console"]
    (pending,) = first["pendingInterrupts"]
    assert pending["reason"] == "tool_approval"
    assert pending["message"] == "Transfer $5?"
    assert pending["responseSchema"] == _SCHEMA
    # The id is LangGraph's own interrupt id, as the adapter's legacy event carried it.
    legacy = [e for e in first["events"] if e["type"] == "CUSTOM"]
    assert [e["name"] for e in legacy] == ["on_interrupt"]
    assert pending["id"] == legacy[0]["rawEvent"]["id"]
    assert second is not None and second["error"] is None, flow["console"]
    assert second["pendingInterrupts"] == []
    assert second["messages"][-1]["content"] == said


async def test_parallel_langgraph_interrupts_each_get_their_own_answer(tmp_path: Path) -> None:
    # Several answers go upstream as LangGraph's own {interrupt id: value} map.
    answer = {"status": "resolved", "payload": {"approved": True}}
    by_reason = {"approve_hotel": {"status": "cancelled"}}
    with (
        serve(_parallel_app()) as upstream,
        serve(_gateway(f"{upstream.url}/", tmp_path, _LANGGRAPH_CHAIN)) as gateway,
    ):
        flow = await _in_thread(f"{gateway.url}/", tmp_path, answer, byReason=by_reason)
    first, second = flow["first"], flow["second"]
    assert first["error"] is None, flow["console"]
    reasons = sorted(i["reason"] for i in first["pendingInterrupts"])
    assert reasons == ["approve_flight", "approve_hotel"]
    assert second is not None and second["error"] is None, flow["console"]
    said = second["messages"][-1]["content"]
    hotel = next(i["id"] for i in first["pendingInterrupts"] if i["reason"] == "approve_hotel")
    cancelled = json.dumps({"__agui_cancelled__": True, "interrupt_id": hotel}, sort_keys=True)
    assert said == f'flight={{"approved": true}}; hotel={cancelled}'


async def test_an_adk_pending_tool_call_completes_through_the_ts_client(tmp_path: Path) -> None:
    adk = AdkLikeUpstream()
    answer = {"status": "resolved", "payload": {"approved": True}}
    with (
        serve(adk.app()) as upstream,
        serve(_gateway(f"{upstream.url}/", tmp_path, _ADK_CHAIN)) as gateway,
    ):
        flow = await _in_thread(
            f"{gateway.url}/",
            tmp_path,
            answer,
            tools=[{"name": "approve_transfer", "description": "ask", "parameters": {}}],
        )
    first, second = flow["first"], flow["second"]
    assert first["error"] is None, flow["console"]
    assert first["pendingInterrupts"] == [
        {
            "id": "call-run-ask",
            "reason": "tool_approval",
            "toolCallId": "call-run-ask",
            "responseSchema": _SCHEMA,
        }
    ]
    assert second is not None and second["error"] is None, flow["console"]
    assert second["messages"][-1]["content"] == "Transferred."
    # What the upstream read: no resume, exactly one tool result, after the issuing message.
    answered = adk.requests[-1]
    assert "resume" not in answered
    results = [m for m in answered["messages"] if m["role"] == "tool"]
    assert results == [
        {
            "id": "resume-call-run-ask",
            "role": "tool",
            "toolCallId": "call-run-ask",
            "content": '{"approved": true}',
        }
    ]
    roles = [m["role"] for m in answered["messages"]]
    assert roles[-2:] == ["assistant", "tool"]


async def test_the_contract_is_checked_on_the_canonical_ids(tmp_path: Path) -> None:
    """Behind the bridge the gateway refuses broken answers before the upstream sees them."""
    adk = AdkLikeUpstream()
    with (
        serve(adk.app()) as upstream,
        serve(_gateway(f"{upstream.url}/", tmp_path, _ADK_CHAIN)) as gateway,
    ):
        async with httpx.AsyncClient(timeout=30) as client:
            url = f"{gateway.url}/"
            user = {"id": "u-1", "role": "user", "content": "Send Bob $5"}
            first = await client.post(
                url, json={"threadId": "t-2", "runId": "r-1", "messages": [user]}
            )
            assert first.status_code == 200
            assert '"outcome":{"type":"interrupt"' in first.text
            seen = len(adk.requests)

            def answer(run_id: str, interrupt_id: str, payload: Any) -> dict[str, Any]:
                resume = {"interruptId": interrupt_id, "status": "resolved", "payload": payload}
                return {
                    "threadId": "t-2",
                    "runId": run_id,
                    "messages": [user],
                    "resume": [resume],
                }

            wrong = await client.post(url, json=answer("r-2", "call-nope", {"approved": True}))
            assert (wrong.status_code, wrong.json()["error"]) == (422, "unknown_interrupt")
            off_schema = await client.post(url, json=answer("r-2", "call-r-1", {"ok": 1}))
            assert (off_schema.status_code, off_schema.json()["error"]) == (
                422,
                "invalid_payload",
            )
            pending = await client.post(
                url, json={"threadId": "t-2", "runId": "r-2", "messages": [user]}
            )
            assert (pending.status_code, pending.json()["error"]) == (409, "interrupt_pending")
            assert len(adk.requests) == seen  # none of them reached the upstream
            good = await client.post(url, json=answer("r-3", "call-r-1", {"approved": True}))
            assert good.status_code == 200 and "Transferred." in good.text
            again = await client.post(url, json=answer("r-4", "call-r-1", {"approved": True}))
            assert (again.status_code, again.json()["error"]) == (409, "interrupt_answered")


async def test_a_request_the_dialect_cannot_carry_is_refused_before_the_upstream(
    tmp_path: Path,
) -> None:
    with (
        serve(_langgraph_app()) as upstream,
        serve(_gateway(f"{upstream.url}/", tmp_path, _LANGGRAPH_CHAIN)) as gateway,
    ):
        async with httpx.AsyncClient(timeout=60) as client:
            url = f"{gateway.url}/"
            user = {"id": "u-1", "role": "user", "content": "Send Bob $5"}
            asked = await client.post(
                url, json={"threadId": "t-3", "runId": "r-1", "messages": [user]}
            )
            (finished,) = [
                json.loads(line[len("data: ") :])
                for line in asked.text.splitlines()
                if line.startswith("data: ") and '"RUN_FINISHED"' in line
            ]
            interrupt_id = finished["outcome"]["interrupts"][0]["id"]
            empty = {"interruptId": interrupt_id, "status": "resolved"}
            refused = await client.post(
                url,
                json={"threadId": "t-3", "runId": "r-2", "messages": [user], "resume": [empty]},
            )
    # The bridge decides before the contract check: nothing is claimed or forwarded.
    assert (refused.status_code, refused.json()["error"]) == (422, "resume_not_translatable")
    assert "give a payload" in refused.json()["message"]


class _Hooked:
    """A stage whose request half is given (the stream passes unchanged)."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook

    def __call__(self) -> Any:
        from agui_pipes import StreamTransformer

        hook = self.hook

        class Hooked(StreamTransformer):
            def rewrite_request(self, request: dict[str, Any]) -> Any:
                return hook(request)

        return Hooked()


async def test_a_request_hook_rewrites_refuses_or_fails_before_the_upstream(
    tmp_path: Path,
) -> None:
    from agui_pipes import RequestRefused

    def tag(request: dict[str, Any]) -> dict[str, Any]:
        return {**request, "forwardedProps": {"tagged": True}}

    def refuse(request: dict[str, Any]) -> dict[str, Any]:
        raise RequestRefused("not_here", "this gateway takes no such request; send X", 409)

    def broken(request: dict[str, Any]) -> Any:
        return ["not", "a", "dict"]

    adk = AdkLikeUpstream()
    body = {"threadId": "t-9", "runId": "r-1", "messages": []}
    with serve(adk.app()) as upstream:
        url = f"{upstream.url}/"
        outcomes = []
        for hook in (tag, refuse, broken):
            with serve(build_app(upstream=url, chain=_Hooked(hook), keepalive=None)) as gateway:
                async with httpx.AsyncClient(timeout=30) as client:
                    outcomes.append(await client.post(f"{gateway.url}/", json=body))
    tagged, refused, failed = outcomes
    assert tagged.status_code == 200
    assert [r["forwardedProps"] for r in adk.requests] == [{"tagged": True}]  # only the first
    assert (refused.status_code, refused.json()["error"]) == (409, "not_here")
    assert refused.json()["message"] == "this gateway takes no such request; send X"
    assert (failed.status_code, failed.json()["error"]) == (500, "request_rewrite_failed")
    assert "list" not in failed.text and "Hooked" not in failed.text  # no internals shown


def test_agui_pipes_serve_runs_the_bridge_from_its_chain_file(tmp_path: Path) -> None:
    """``agui-pipes serve --upstream URL --config chain.yaml``: both halves, one process."""
    from tests.cli.test_cli_serve import start, stop

    chain = tmp_path / "chain.yaml"
    chain.write_text(_ADK_CHAIN)
    adk = AdkLikeUpstream()
    user = {"id": "u-1", "role": "user", "content": "Send Bob $5"}
    with serve(adk.app()) as upstream:
        store = f"sqlite:///{tmp_path / 'runs.db'}"
        served = start("--upstream", f"{upstream.url}/", "--config", str(chain), "--store", store)
        try:
            asked = httpx.post(
                f"{served.url}/",
                json={"threadId": "t-c", "runId": "r-1", "messages": [user]},
                timeout=30,
            )
            resume = [
                {"interruptId": "call-r-1", "status": "resolved", "payload": {"approved": True}}
            ]
            answered = httpx.post(
                f"{served.url}/",
                json={"threadId": "t-c", "runId": "r-2", "messages": [user], "resume": resume},
                timeout=30,
            )
        finally:
            code, err = stop(served)
    assert code == 0, err
    assert '"outcome":{"type":"interrupt","interrupts":[{"id":"call-r-1"' in asked.text
    assert answered.status_code == 200 and "Transferred." in answered.text
    assert [m["role"] for m in adk.requests[-1]["messages"]] == ["user", "tool"]


async def test_cancel_mode_sends_the_cancellations_in_the_upstream_s_dialect(
    tmp_path: Path,
) -> None:
    """interrupts="cancel" behind the bridge: the upstream hears a tool result, not resume[].

    Regression: the cancellations were added to the body the bridge had already
    rewritten, so an ADK-style upstream got a ``resume`` it does not read and
    no tool message for its pending call.
    """
    adk = AdkLikeUpstream()
    path = tmp_path / "chain.yaml"
    path.write_text(_ADK_CHAIN)
    with serve(adk.app()) as upstream:
        gateway = Gateway(
            f"{upstream.url}/",
            chain=load_chain(path),
            store=f"sqlite:///{tmp_path / 'runs.db'}",
            keepalive=None,
            interrupts="cancel",
        )
        served = Starlette(routes=gateway.routes("/"), lifespan=gateway.lifespan)
        with serve(served) as server:
            async with httpx.AsyncClient(timeout=30) as client:
                user = {"id": "u-1", "role": "user", "content": "Send Bob $5"}
                first = await client.post(
                    f"{server.url}/", json={"threadId": "t-c", "runId": "r-1", "messages": [user]}
                )
                assert '"outcome":{"type":"interrupt"' in first.text
                later = {"id": "u-2", "role": "user", "content": "Never mind"}
                moved_on = await client.post(
                    f"{server.url}/",
                    json={"threadId": "t-c", "runId": "r-2", "messages": [user, later]},
                )
                assert moved_on.status_code == 200, moved_on.text
    answered = adk.requests[-1]
    assert "resume" not in answered
    results = [m for m in answered["messages"] if m["role"] == "tool"]
    assert [(m["toolCallId"], json.loads(m["content"])) for m in results] == [
        ("call-r-1", {"status": "cancelled", "cancelled": True})
    ]
