"""``Client.threads`` and the history's pages, against real servers — and lying ones.

A real endpoint with a store lists the caller's threads a page at a time and
serves a thread's history by pages of runs; ``SyncClient`` does the same from
sync code. A server whose ``GET threads`` answer is not the documented JSON
(not JSON, a wrong field, more threads than asked for, an endless body) gets
``BadResponse`` or the client's bound, never a made-up page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agui_pipes.client import BadResponse, Client, ServerError, SyncClient, ThreadInfo
from agui_pipes.driver import RunContext
from agui_pipes.server import build_app
from tests._servers import serve

pytestmark = pytest.mark.anyio


async def _reply(ctx: RunContext[Any]) -> None:
    ctx.say("ok")


def _input(thread_id: str, run_id: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": f"{run_id}-u", "role": "user", "content": text}],
    }


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_threads_and_history_pages_from_a_real_server(backend: str, tmp_path: Path) -> None:
    store = "memory:" if backend == "memory" else f"sqlite:///{tmp_path / 'runs.db'}"
    app = build_app(agent=_reply, path="/agent", keepalive=None, store=store)
    with serve(app) as server:
        url = f"{server.url}/agent"
        async with Client() as client:
            for n in range(3):
                async with client.run(url, _input(f"t-{n}", f"r-{n}", f"hello {n}")) as events:
                    [_ async for _ in events]
            for n in range(3, 6):  # more runs on t-2
                async with client.run(url, _input("t-2", f"r-{n}", f"again {n}")) as events:
                    [_ async for _ in events]
            first = await client.threads(url, limit=2)
            assert [t.thread_id for t in first.threads] == ["t-2", "t-1"]
            assert all(isinstance(t, ThreadInfo) and t.created > 0 for t in first.threads)
            assert first.next is not None
            rest = await client.threads(url, limit=2, before=first.next)
            assert [t.thread_id for t in rest.threads] == ["t-0"] and rest.next is None
            assert [t.thread_id for t in (await client.threads(url)).threads] == [
                "t-2",
                "t-1",
                "t-0",
            ]
            # The history of t-2 (4 runs) in pages of 3 runs, newest first.
            whole = await client.history(url, "t-2")
            newest = await client.history(url, "t-2", limit=3)
            assert newest.next == "r-3"
            older = await client.history(url, "t-2", limit=3, before=newest.next)
            assert older.next is None
            assert older.result.messages + newest.result.messages == whole.result.messages
            assert whole.result.messages[0]["content"] == "hello 2"
            with pytest.raises(ServerError) as refused:
                await client.history(url, "t-2", before="nope")
            assert refused.value.status == 400
            with pytest.raises(ValueError, match="limit must be a positive int"):
                await client.threads(url, limit=0)

        def listed() -> list[str]:
            with SyncClient() as sync:
                page = sync.threads(url, limit=1)
                history = sync.history(url, "t-2", limit=1)
            assert history.next == "r-5"
            return [t.thread_id for t in page.threads]

        assert await anyio.to_thread.run_sync(listed) == ["t-2"]


def _lying(answer: Any) -> Starlette:
    async def threads(request: Request) -> Response:
        if callable(answer):
            return answer()
        body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/agent/threads", threads)])


def _endless() -> Response:
    async def chunks() -> Any:
        while True:
            yield b" " * 65536
            await anyio.lowlevel.checkpoint()

    return StreamingResponse(chunks(), media_type="application/json")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (b"<html>", "not JSON"),
        ([], "list of threads"),
        ({"threads": [{"threadId": 5, "created": 1.0}], "next": None}, "threadId"),
        ({"threads": [{"threadId": "t", "created": "x"}], "next": None}, "created"),
        ({"threads": [{"threadId": "t", "created": 1.0}], "next": 7}, "next"),
        ({"threads": [{"threadId": f"t{n}", "created": 1.0} for n in range(3)]}, "at most 2"),
        (_endless, "larger than"),
    ],
)
async def test_a_threads_answer_that_is_not_the_documented_json(answer: Any, why: str) -> None:
    with serve(_lying(answer)) as server:
        async with Client(max_duration=20) as client:
            with anyio.fail_after(20), pytest.raises(BadResponse) as refused:
                await client.threads(f"{server.url}/agent", limit=2)
    assert why in str(refused.value)


async def test_a_threads_error_is_a_server_error() -> None:
    def gone() -> Response:
        return Response(b'{"error": "not_found", "message": "x"}', status_code=404)

    with serve(_lying(gone)) as server:
        async with Client(http=httpx.AsyncClient(timeout=10)) as client:
            with pytest.raises(ServerError) as refused:
                await client.threads(f"{server.url}/agent")
    assert refused.value.status == 404
