"""Agno through agui_pipes in-process, against Agno's own AGUI server behind a gateway.

A scripted Agno ``Model`` (no provider, no network) calls a tool and then
answers; the agent is served by ``build_app(producer=agno_producer(agent))`` and,
for comparison, by Agno's own ``AGUI`` router with an agui_pipes gateway in front
of it. Both streams, after the chain, are the same events; the in-process one
passes the TypeScript client, survives a cut (resumed from the store), and a
stop cancels the model's call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agui_pipes import fold
from agui_pipes.server import build_app
from agui_pipes.transformers import Redact
from tests._durable_http import Frames, get_frames, seqs, take_frames
from tests._durable_http import events as frame_events
from tests._servers import serve, wait_until
from tests.integrations._same_stream import normalised, post_events, types

pytestmark = pytest.mark.anyio

agno = pytest.importorskip("agno", reason="agno is not installed (the test extra has it)")
fastapi = pytest.importorskip("fastapi", reason="fastapi is not installed (the test extra has it)")

from agno.agent import Agent  # noqa: E402
from agno.models.base import Model  # noqa: E402
from agno.models.response import ModelResponse  # noqa: E402

from agui_pipes.integrations.agno import AGNO_RUNTIME_KEYS, AgnoRepair, agno_producer  # noqa: E402

ANSWER = ("A weekend", " in Lisbon", " is sunny.")


@dataclass
class ScriptedModel(Model):
    """Agno ``Model`` answering from a script: a tool call first, then text.

    ``gate``, when given, holds the answer after its first piece until set;
    ``observed`` records how each model call ended ("done", or the exception
    type that interrupted it: a stop cancels it).
    """

    id: str = "scripted"
    name: str = "scripted"
    provider: str = "scripted"
    gate: threading.Event | None = None
    observed: list[str] = field(default_factory=list)

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        raise NotImplementedError("the tests stream")

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        raise NotImplementedError("the tests stream")

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        raise NotImplementedError("the tests run async")

    async def ainvoke_stream(  # type: ignore[override]
        self, messages: list[Any], assistant_message: Any, **kwargs: Any
    ) -> AsyncIterator[ModelResponse]:
        try:
            if not any(m.role == "tool" for m in messages):
                call = {"name": "weather", "arguments": json.dumps({"city": "Lisbon"})}
                yield ModelResponse(
                    tool_calls=[{"id": "call-1", "type": "function", "function": call}]
                )
            else:
                for n, piece in enumerate(ANSWER):
                    yield ModelResponse(content=piece)
                    while n == 0 and self.gate is not None and not self.gate.is_set():  # noqa: ASYNC110
                        await anyio.sleep(0.005)
            self.observed.append("done")
        except BaseException as exc:
            self.observed.append(type(exc).__name__)
            raise

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


def weather(city: str) -> str:
    """The weather in a city."""
    return json.dumps({"city": city, "sky": "sunny"})


def _agent(model: ScriptedModel | None = None) -> Agent:
    return Agent(model=model or ScriptedModel(), tools=[weather])


def _agnos_own_server(agent: Agent) -> Any:
    from agno.os.interfaces.agui import AGUI

    app = fastapi.FastAPI()
    app.include_router(AGUI(agent=agent).get_router())
    return app


USER = {"id": "u-1", "role": "user", "content": "Where should I go?"}
BODY = {
    "threadId": "t-1",
    "runId": "r-1",
    "messages": [USER],
    "state": {"trip": "weekend"},
    "tools": [],
    "context": [],
    "forwardedProps": {},
}


def _redact() -> Redact:
    return Redact(patterns=["Lisbon"], replacement="[city]")


async def test_in_process_equals_the_gateway_in_front_of_agnos_own_server() -> None:
    with serve(_agnos_own_server(_agent())) as agno_server:
        raw = await post_events(f"{agno_server.url}/agui", BODY)
        fronted = build_app(
            upstream=f"{agno_server.url}/agui",
            chain=lambda: AgnoRepair() | _redact(),
            path="/agent",
            keepalive=None,
        )
        with serve(fronted) as gateway:
            via_gateway = await post_events(f"{gateway.url}/agent", BODY)
    in_process = build_app(
        producer=agno_producer(_agent()), chain=_redact, path="/agent", keepalive=None
    )
    with serve(in_process) as server:
        direct = await post_events(f"{server.url}/agent", BODY)

    assert normalised(direct) == normalised(via_gateway)
    # What the repair is for: Agno's own stream has RAW events and its keys in the state.
    assert "RAW" in types(raw)
    assert any(AGNO_RUNTIME_KEYS & set(e.get("snapshot", {})) for e in raw)
    assert "RAW" not in types(direct)
    states = [e for e in direct if e["type"] in ("STATE_SNAPSHOT", "STATE_DELTA")]
    assert [e["snapshot"] for e in states] == [BODY["state"], BODY["state"]]
    assert types(direct)[0] == "RUN_STARTED" and types(direct)[-1] == "RUN_FINISHED"
    result = [e for e in direct if e["type"] == "TOOL_CALL_RESULT"]
    assert [json.loads(e["content"]) for e in result] == [{"city": "[city]", "sky": "sunny"}]


async def test_the_ts_client_runs_it_and_the_store_replays_it(
    tmp_path: Path, ts_oracle: Any
) -> None:
    app = build_app(
        producer=agno_producer(_agent()),
        chain=_redact,
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        path="/agent",
        keepalive=None,
    )
    with serve(app) as server:
        case = {
            "url": f"{server.url}/agent",
            "threadId": "t-1",
            "runId": "r-1",
            "initialMessages": [USER],
            "initialState": BODY["state"],
        }
        (result,) = await anyio.to_thread.run_sync(ts_oracle, [case])
        assert result["outcome"] == "completed", result["error"]
        said = [m for m in result["messages"] if m["role"] == "assistant"][-1]["content"]
        assert said == "A weekend in [city] is sunny."
        assert result["state"] == BODY["state"]
        assert [m["role"] for m in result["messages"]] == ["user", "assistant", "tool", "assistant"]
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            status, frames, _ = await get_frames(client, "/agent/runs/r-1")
    assert status == 200
    replayed = fold(frame_events(frames))
    assert [m.get("content") for m in replayed.messages if m["role"] == "assistant"][-1] == said


async def _read_until(
    response: httpx.Response, got: Frames, marker: bytes, seen: anyio.Event | None = None
) -> None:
    """Append ``response``'s frames to ``got``; stop after the first frame holding ``marker``
    (``seen`` given: set it then and read on to the end)."""
    buffer = bytearray()
    async for chunk in response.aiter_raw():
        buffer += chunk
        got.extend(take_frames(buffer))
        if any(marker in data for _, data in got):
            if seen is None:
                return
            seen.set()


async def test_a_cut_stream_resumes_from_the_store(tmp_path: Path) -> None:
    gate = threading.Event()
    app = build_app(
        producer=agno_producer(_agent(ScriptedModel(gate=gate))),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        path="/agent",
        keepalive=None,
    )
    first: Frames = []
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            async with client.stream(
                "POST", "/agent", json=BODY, headers={"accept": "text/event-stream"}
            ) as response:
                await _read_until(response, first, b"TEXT_MESSAGE_CONTENT")  # then cut
            gate.set()
            status, rest, _ = await get_frames(client, "/agent/runs/r-1", last_id=first[-1][0])
    assert status == 200
    frames = first + rest
    assert seqs(frames) == list(range(seqs(frames)[0], seqs(frames)[0] + len(frames)))
    run = fold(frame_events(frames))
    assert [m.get("content") for m in run.messages if m["role"] == "assistant"][-1] == "".join(
        ANSWER
    )
    assert frame_events(frames)[-1].type == "RUN_FINISHED"


async def test_a_stop_cancels_the_models_call(tmp_path: Path) -> None:
    model = ScriptedModel(gate=threading.Event())  # never set: the answer waits
    app = build_app(
        producer=agno_producer(_agent(model)),
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        path="/agent",
        keepalive=None,
    )
    got: Frames = []
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            seen = anyio.Event()

            async def post() -> None:
                async with client.stream(
                    "POST", "/agent", json=BODY, headers={"accept": "text/event-stream"}
                ) as response:
                    await _read_until(response, got, b"TEXT_MESSAGE_CONTENT", seen)

            async with anyio.create_task_group() as tg:
                tg.start_soon(post)
                await seen.wait()
                stopped = await client.post("/agent/runs/r-1/stop")
                assert stopped.status_code == 200, stopped.text
            await wait_until(lambda: len(model.observed) == 2, 10, "the model's call ended")
    assert model.observed[0] == "done"  # the tool call's turn
    assert model.observed[1] in ("CancelledError", "GeneratorExit")
    assert frame_events(got)[-1].type == "RUN_ERROR"
