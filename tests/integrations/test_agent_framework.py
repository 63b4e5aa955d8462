"""Microsoft Agent Framework through agui_pipes in-process, against MAF's own server.

agent-framework-ag-ui pins the 0.1 protocol package, which the test venv cannot
hold beside agui_pipes' 1.x, so the framework runs in a venv of its own
(tests/_framework_venv.py, built once and cached) and both servers are
subprocesses of it (tests/integrations/_maf_app.py): MAF's own endpoint, with an
agui_pipes gateway (here, in the test venv) in front of it, and
``build_app(producer=agent_framework_producer(agent))``. A scripted chat client
calls a tool and answers; both streams after the chain are the same events; the
in-process one passes the TypeScript client, resumes after a cut, and a stop
cancels the model's call. Two frontend tools in one turn show MAF's replayed
tool call starts and ends, which the integration drops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agui_pipes import fold
from agui_pipes.integrations.agent_framework import AgentFrameworkRepair
from agui_pipes.server import build_app
from agui_pipes.transformers import Redact
from tests._durable_http import Frames, get_frames, seqs, take_frames
from tests._durable_http import events as frame_events
from tests._framework_venv import framework_python, framework_server
from tests._servers import serve, wait_until
from tests.integrations._maf_pins import EXTRAS, NO_DEPS, REQUIREMENTS
from tests.integrations._same_stream import normalised, post_events, types

pytestmark = pytest.mark.anyio

APP = "tests.integrations._maf_app"
ANSWER = "A weekend in Lisbon is sunny."
USER = {"id": "u-1", "role": "user", "content": "Where should I go?"}
BODY: dict[str, Any] = {
    "threadId": "t-1",
    "runId": "r-1",
    "messages": [USER],
    "state": {},
    "tools": [],
    "context": [],
    "forwardedProps": {},
}
FRONTEND_TOOLS = [
    {"name": name, "description": name, "parameters": {"type": "object", "properties": {}}}
    for name in ("pick_date", "pick_hotel")
]


@pytest.fixture(scope="module")
def maf_python() -> Path:
    return framework_python("agent-framework", REQUIREMENTS, NO_DEPS, EXTRAS)


@contextlib.contextmanager
def _in_process(maf_python: Path, files: Path, *extra: str) -> Iterator[tuple[str, Path]]:
    """MAF in-process behind agui_pipes with a SQLite store: its url, its files."""
    args = ["--store", f"sqlite:///{files / 'runs.db'}", *extra]
    args += ["--gate", str(files / "gate"), "--observed", str(files / "observed")]
    with framework_server(maf_python, APP, "in-process", *args) as served:
        yield f"{served.url}/agent", files


@pytest.fixture
def in_process(maf_python: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    # No chain: a redact stage holds text back until it can rule a match out, and the
    # cut and stop tests act on the first piece of the answer as it arrives.
    with _in_process(maf_python, tmp_path) as served:
        yield served


@pytest.fixture
def in_process_redacted(maf_python: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with _in_process(maf_python, tmp_path, "--redact") as served:
        yield served


def _redact() -> Redact:
    return Redact(patterns=["Lisbon"], replacement="[city]")


def _started_tool_calls(events: list[dict[str, Any]]) -> list[str]:
    return [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]


@pytest.mark.parametrize("tools", [[], FRONTEND_TOOLS], ids=["backend-tool", "frontend-tools"])
async def test_in_process_equals_the_gateway_in_front_of_mafs_own_server(
    maf_python: Path, tools: list[dict[str, Any]], tmp_path: Path
) -> None:
    body = {**BODY, "tools": tools}
    (tmp_path / "gate").touch()
    with framework_server(maf_python, APP, "own") as own:
        raw = await post_events(f"{own.url}/agui", body)
        fronted = build_app(
            upstream=f"{own.url}/agui",
            chain=lambda: AgentFrameworkRepair() | _redact(),
            path="/agent",
            keepalive=None,
        )
        with serve(fronted) as gateway:
            via_gateway = await post_events(f"{gateway.url}/agent", body)
    args = ["--redact", "--gate", str(tmp_path / "gate")]
    with framework_server(maf_python, APP, "in-process", *args) as served:
        direct = await post_events(f"{served.url}/agent", body)

    assert normalised(direct) == normalised(via_gateway)
    assert types(direct)[0] == "RUN_STARTED" and types(direct)[-1] == "RUN_FINISHED"
    if tools:
        # MAF replays both calls' starts (and ends); the integration keeps one of each.
        assert _started_tool_calls(raw) == ["fc-1", "fc-2", "fc-1", "fc-2"]
        assert _started_tool_calls(direct) == ["fc-1", "fc-2"]
        ended = [e["toolCallId"] for e in direct if e["type"] == "TOOL_CALL_END"]
        assert ended == ["fc-1", "fc-2"]
    else:
        assert _started_tool_calls(direct) == ["call-1"]
        said = "".join(e["delta"] for e in direct if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert said == ANSWER.replace("Lisbon", "[city]")


async def test_the_ts_client_runs_it_and_the_store_replays_it(
    in_process_redacted: tuple[str, Path], ts_oracle: Any
) -> None:
    url, files = in_process_redacted
    (files / "gate").touch()
    case = {"url": url, "threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}
    (result,) = await anyio.to_thread.run_sync(ts_oracle, [case])
    assert result["outcome"] == "completed", result["error"]
    said = [m for m in result["messages"] if m["role"] == "assistant"][-1]["content"]
    assert said == ANSWER.replace("Lisbon", "[city]")
    assert [m["role"] for m in result["messages"]][:3] == ["user", "assistant", "tool"]
    async with httpx.AsyncClient(timeout=20) as client:
        status, frames, _ = await get_frames(client, f"{url}/runs/r-1")
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


async def test_a_cut_stream_resumes_from_the_store(in_process: tuple[str, Path]) -> None:
    url, files = in_process
    first: Frames = []
    async with httpx.AsyncClient(timeout=20) as client:
        async with client.stream(
            "POST", url, json=BODY, headers={"accept": "text/event-stream"}
        ) as response:
            await _read_until(response, first, b"TEXT_MESSAGE_CONTENT")  # then cut
        (files / "gate").touch()
        status, rest, _ = await get_frames(client, f"{url}/runs/r-1", last_id=first[-1][0])
    assert status == 200
    frames = first + rest
    assert seqs(frames) == list(range(seqs(frames)[0], seqs(frames)[0] + len(frames)))
    run = fold(frame_events(frames))
    said = [m.get("content") for m in run.messages if m["role"] == "assistant"][-1]
    assert said == ANSWER
    assert frame_events(frames)[-1].type == "RUN_FINISHED"


async def test_a_stop_cancels_the_models_call(in_process: tuple[str, Path]) -> None:
    url, files = in_process  # no gate file: the answer waits after its first piece
    observed = files / "observed"
    got: Frames = []
    async with httpx.AsyncClient(timeout=20) as client:
        seen = anyio.Event()

        async def post() -> None:
            async with client.stream(
                "POST", url, json=BODY, headers={"accept": "text/event-stream"}
            ) as response:
                await _read_until(response, got, b"TEXT_MESSAGE_CONTENT", seen)

        async with anyio.create_task_group() as tg:
            tg.start_soon(post)
            await seen.wait()
            stopped = await client.post(f"{url}/runs/r-1/stop")
            assert stopped.status_code == 200, stopped.text

    def calls() -> list[str]:
        return observed.read_text().split() if observed.exists() else []

    await wait_until(lambda: len(calls()) == 2, 10, "the model's call ended")
    assert calls()[0] == "done"  # the tool call's turn
    assert calls()[1] in ("CancelledError", "GeneratorExit")
    assert frame_events(got)[-1].type == "RUN_ERROR"
