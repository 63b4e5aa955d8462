"""The checks every framework integration passes (tests/integrations/test_<framework>.py).

Each framework test module supplies: a producer (the integration's, over a
scripted model), the framework's own FastAPI app serving an equal agent, and
the integration's chain. These helpers then check, over real HTTP:

* **same stream**: the in-process endpoint's stream, after the chain, equals
  the stream of an agui_pipes gateway in front of the framework's own server
  (ids and timestamps normalised);
* **TS client**: the official TypeScript client completes the run;
* **cut + resume**: a client cut after a few frames resumes from the store
  with Last-Event-ID and gets the rest, the run as the store recorded it;
* **stop**: ``POST runs/{runId}/stop`` cancels the framework's run — the
  scripted model observes it (its stream is closed before it could finish).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx

from agui_pipes import fold
from agui_pipes.server import Producer, build_app
from tests._durable_http import HEADERS, events, get_frames, read_frames
from tests._servers import serve, wait_until

USER = {"id": "u-1", "role": "user", "content": "What is the weather in Lisbon?"}
ANSWER = "A weekend in Lisbon is sunny."

_ID_KEYS = frozenset({"messageId", "toolCallId", "parentMessageId", "id"})


def body(run_id: str = "r-1", thread_id: str = "t-1") -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [USER],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def normalised(wire_events: list[dict[str, Any]]) -> list[Any]:
    """The events with timestamps dropped and ids renamed by order of first appearance."""
    names: dict[str, str] = {}

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items() if k != "timestamp"}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if key in _ID_KEYS and isinstance(value, str) and value != USER["id"]:
            return names.setdefault(value, f"id-{len(names)}")
        return value

    return [walk(event) for event in wire_events]


async def _post_events(url: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", url, json=payload, headers=HEADERS) as response,
    ):
        assert response.status_code == 200, await response.aread()
        frames = await read_frames(response)
    return [
        event.model_dump(mode="json", by_alias=True, exclude_none=True) for event in events(frames)
    ]


async def same_stream(
    producer: Producer, framework_app: Any, framework_path: str, chain: Callable[[], Any]
) -> list[dict[str, Any]]:
    """Check the in-process stream equals gateway-in-front-of-the-framework's; return it."""
    in_process = build_app(producer=producer, chain=chain, path="/agent", keepalive=None)
    with serve(framework_app) as framework:
        in_front = build_app(
            upstream=f"{framework.url}{framework_path}", chain=chain, path="/agent", keepalive=None
        )
        with serve(in_process) as ours, serve(in_front) as theirs:
            direct = await _post_events(f"{ours.url}/agent", body())
            relayed = await _post_events(f"{theirs.url}/agent", body())
    assert normalised(direct) == normalised(relayed)
    return direct


async def ts_client_completes(
    producer: Producer, chain: Callable[[], Any], ts_oracle: Any, tmp_path: Path
) -> dict[str, Any]:
    """The official TS client runs the producer's run to completion; its result."""
    app = build_app(
        producer=producer,
        chain=chain,
        store=f"sqlite:///{tmp_path / 'ts.db'}",
        path="/agent",
        keepalive=None,
    )
    with serve(app) as server:
        (result,) = await anyio.to_thread.run_sync(
            ts_oracle,
            [
                {
                    "url": f"{server.url}/agent",
                    "threadId": "t-1",
                    "runId": "r-1",
                    "initialMessages": [USER],
                }
            ],
        )
    assert result["outcome"] == "completed", result["error"]
    assert result["warnings"] == []
    return dict(result)


async def cut_and_resume(
    producer: Producer, chain: Callable[[], Any] | None, tmp_path: Path
) -> None:
    """A client cut after three frames resumes with Last-Event-ID and gets exactly the rest."""
    app = build_app(
        producer=producer,
        chain=chain,
        store=f"sqlite:///{tmp_path / 'runs.db'}",
        path="/agent",
        keepalive=None,
    )
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            async with client.stream("POST", "/agent", json=body(), headers=HEADERS) as response:
                assert response.status_code == 200
                first = await read_frames(response, limit=3)
            last_id = first[-1][0]
            assert last_id is not None
            status, rest, error = await get_frames(client, "/agent/runs/r-1", last_id=last_id)
            assert status == 200, error
            status, whole, error = await get_frames(client, "/agent/runs/r-1")
            assert status == 200, error
    assert [i for i, _ in first + rest] == [i for i, _ in whole]
    assert events(whole)[-1].type == "RUN_FINISHED"
    assert ANSWER in "".join(
        m.get("content") or "" for m in fold(events(whole)).messages if m["role"] == "assistant"
    )


class Hold:
    """What a holding scripted model shares with the test: a gate, and how its stream ended.

    The model streams a first piece, then waits for ``gate`` (never set by the
    stop test); ``ended`` gets ``"cancelled"`` when its stream is cancelled or
    closed while waiting, ``"finished"`` if it ever got past the gate.
    """

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.ended: list[str] = []


async def stop_cancels(producer: Producer, hold: Hold, tmp_path: Path) -> None:
    """``POST runs/r-1/stop`` ends the run and cancels the framework's run (the model sees it)."""
    app = build_app(
        producer=producer, store=f"sqlite:///{tmp_path / 'stop.db'}", path="/agent", keepalive=None
    )
    types: list[str] = []
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            seen = anyio.Event()

            async def post() -> None:
                async with client.stream("POST", "/agent", json=body(), headers=HEADERS) as reply:
                    async for line in reply.aiter_lines():
                        if line.startswith("data: "):
                            types.append(line.split('"type":"', 1)[1].split('"', 1)[0])
                            if "TEXT_MESSAGE_C" in line:  # CONTENT or CHUNK
                                seen.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(post)
                await seen.wait()
                stopped = await client.post("/agent/runs/r-1/stop")
                assert stopped.status_code == 200, stopped.text
            await wait_until(lambda: hold.ended != [], 15, "the scripted model saw the stop")
    assert hold.ended == ["cancelled"]
    assert types[-1] == "RUN_ERROR"
    assert not hold.gate.is_set()


SECRET = "db-7.internal:5432"
"""What a broken scripted model puts in its exception: it must reach the log only."""


async def failure_without_its_text(producer: Producer) -> dict[str, Any]:
    """A model that raises ends the run with RUN_ERROR, the exception's text not in the body."""
    app = build_app(producer=producer, path="/agent", keepalive=None)
    with serve(app) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            reply = await client.post(f"{server.url}/agent", json=body(), headers=HEADERS)
    assert reply.status_code == 200
    assert SECRET not in reply.text
    data = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    last = events([(None, data[-1].encode())])[-1]
    assert last.type == "RUN_ERROR"
    return last.model_dump(mode="json", by_alias=True, exclude_none=True)
