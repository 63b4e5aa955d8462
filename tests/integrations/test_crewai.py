"""CrewAI through agui_pipes in-process, against ag-ui-crewai's own server.

ag-ui-crewai pins fastapi<0.116 and crewai pydantic<2.13, which the test venv cannot
hold, so the framework runs in a venv of its own (tests/_framework_venv.py: a frozen
pin list installed without a resolver, built once and cached) and both servers are
subprocesses of it (tests/integrations/_crewai_app.py): ag-ui-crewai's own endpoint,
with an agui_pipes gateway (here, in the test venv) in front of it, and
``build_app(producer=crewai_producer(flow))``. A scripted LiteLLM provider calls a
backend tool and answers; both streams after the chain are the same events; the
in-process one passes the TypeScript client, resumes after a cut, and a stop cancels
the model's call. tests/integrations/_crewai_direct.py checks what needs the
producer itself (threads per scope, the registry) in that venv, and
``agui-pipes serve --agent tests.integrations._crewai_app:flow --store ...`` serves
the flow durably.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agui_pipes import fold
from agui_pipes.integrations.crewai import CREWAI_INPUT_KEYS, CrewAIRepair
from agui_pipes.server import build_app
from agui_pipes.transformers import Redact
from tests._durable_http import Frames, get_frames, seqs, take_frames
from tests._durable_http import events as frame_events
from tests._framework_venv import REPO_ROOT, framework_python, framework_server
from tests._servers import serve, wait_until
from tests.integrations._crewai_pins import EXTRAS, PINS
from tests.integrations._same_stream import normalised, post_events, types

pytestmark = pytest.mark.anyio

APP = "tests.integrations._crewai_app"
# Importing crewai and LiteLLM takes 10-45 s on a busy 2-core machine: the servers get longer.
WITHIN = 240.0
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
FAILING = {**BODY, "messages": [{**USER, "content": "fail, please"}]}
# A resume of a thread with nothing paused: ag-ui-crewai answers with a bare RUN_ERROR.
NOTHING_PAUSED = {**BODY, "resume": [{"interruptId": "i-1", "status": "resolved", "payload": 1}]}


@pytest.fixture(scope="module")
def crewai_python() -> Path:
    return framework_python("crewai", pins=PINS, extras=EXTRAS)


@contextlib.contextmanager
def _in_process(crewai_python: Path, files: Path, *extra: str) -> Iterator[tuple[str, Path]]:
    """CrewAI in-process behind agui_pipes with a SQLite store: its url, its files."""
    args = ["--store", f"sqlite:///{files / 'runs.db'}", *extra]
    args += ["--gate", str(files / "gate"), "--observed", str(files / "observed")]
    with framework_server(crewai_python, APP, "in-process", *args, within=WITHIN) as served:
        yield f"{served.url}/agent", files


@pytest.fixture
def in_process(crewai_python: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    # No chain: a redact stage holds text back until it can rule a match out, and the
    # cut and stop tests act on the first piece of the answer as it arrives.
    with _in_process(crewai_python, tmp_path) as served:
        yield served


@pytest.fixture
def in_process_redacted(crewai_python: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with _in_process(crewai_python, tmp_path, "--redact") as served:
        yield served


def _redact() -> Redact:
    return Redact(patterns=["Lisbon"], replacement="[city]")


def _snapshots(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]


@pytest.fixture(scope="module")
def own_and_gateway(crewai_python: Path) -> Iterator[tuple[str, str]]:
    """ag-ui-crewai's own server and a gateway in front of it: their urls."""
    with framework_server(crewai_python, APP, "own", within=WITHIN) as own:
        fronted = build_app(
            upstream=f"{own.url}/agui",
            chain=lambda: CrewAIRepair() | _redact(),
            path="/agent",
            keepalive=None,
        )
        with serve(fronted) as gateway:
            yield f"{own.url}/agui", f"{gateway.url}/agent"


@pytest.fixture(scope="module")
def redacted_no_store(
    crewai_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """CrewAI in-process behind agui_pipes, with the same chain and no store: its url."""
    gate = tmp_path_factory.mktemp("crewai") / "gate"
    gate.touch()
    args = ["--redact", "--gate", str(gate)]
    with framework_server(crewai_python, APP, "in-process", *args, within=WITHIN) as served:
        yield f"{served.url}/agent"


@pytest.mark.parametrize(
    "body",
    [BODY, {**BODY, "tools": FRONTEND_TOOLS}, FAILING, NOTHING_PAUSED],
    ids=["backend-tool", "frontend-tools", "error", "nothing-paused"],
)
async def test_in_process_equals_the_gateway_in_front_of_crewais_own_server(
    own_and_gateway: tuple[str, str], redacted_no_store: str, body: dict[str, Any]
) -> None:
    own, gateway = own_and_gateway
    raw = await post_events(own, body)
    via_gateway = await post_events(gateway, body)
    direct = await post_events(redacted_no_store, body)

    assert normalised(direct) == normalised(via_gateway)
    if body is NOTHING_PAUSED:
        # A run refused before it started: one RUN_ERROR (1.0 allows it), passed on.
        assert types(raw) == types(direct) == ["RUN_ERROR"]
        assert direct[-1]["code"] == "AGUI_CREWAI_NO_PENDING_FEEDBACK"
        assert direct[-1]["message"].startswith("thread=t-1 run=r-1:")  # the client's thread
        return
    assert types(direct)[0] == "RUN_STARTED"
    if body is FAILING:
        assert types(direct)[-1] == "RUN_ERROR"
        assert direct[-1]["code"] == "AGUI_CREWAI_FLOW_ERROR_MIDSTREAMFALLBACKERROR"
        assert "scripted model failed" not in json.dumps(direct)  # the text stays in the log
        # ag-ui-crewai's RUN_ERROR carries ids AG-UI 1.0 does not describe: decoded away.
        assert {"threadId", "runId"} <= set(raw[-1])
        assert not {"threadId", "runId"} & set(direct[-1])
        return
    assert types(direct)[-1] == "RUN_FINISHED"
    assert direct[0]["threadId"] == "t-1"  # not the scoped thread ag-ui-crewai ran
    # Every STATE_SNAPSHOT of CrewAI's own carries the run's inputs back; repaired, none.
    assert all(CREWAI_INPUT_KEYS & set(snapshot) for snapshot in _snapshots(raw))
    assert _snapshots(direct) and not any(
        CREWAI_INPUT_KEYS & set(snapshot) for snapshot in _snapshots(direct)
    )
    started = [e["toolCallId"] for e in direct if e["type"] == "TOOL_CALL_START"]
    if body["tools"]:
        assert started == ["fc-1", "fc-2"]
        assert "TEXT_MESSAGE_START" not in types(direct)  # the client runs the tools
    else:
        assert started == ["call-1"]
        assert "TOOL_CALL_RESULT" in types(direct)
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


def test_threads_are_the_callers_a_crew_runs_and_the_registry_knows_a_flow(
    crewai_python: Path,
) -> None:
    done = subprocess.run(
        [str(crewai_python), "-m", "tests.integrations._crewai_direct"],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},  # agui_pipes: the checkout's
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Two scopes, one thread id: CrewAI ran two threads; each client saw its own id.
    assert report["flow_ids"] == ["alice/t-1", "bob/t-1"]
    assert report["client_thread_ids"] == [["t-1", "t-1"], ["t-1", "t-1"]]
    assert report["registry"] == {"flow": True, "other": False}
    assert report["not_a_flow"].startswith("crewai_producer() takes a CrewAI Flow")
    # A crew: ag-ui-crewai's ChatWithCrewFlow streams the chat model's turn (here a call of
    # a tool the crew does not know, which ends the turn).
    assert report["crew"][0] == "RUN_STARTED" and report["crew"][-1] == "RUN_FINISHED"
    assert report["crew_tool_calls"] == ["weather"]


def test_serve_agent_serves_a_flow_durably(crewai_python: Path, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    command = [str(crewai_python), "-m", "agui_pipes", "serve"]
    command += ["--agent", "tests.integrations._crewai_app:flow", "--port", str(port)]
    command += ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
    try:
        deadline = time.monotonic() + WITHIN
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        answer = httpx.post(url, json=BODY, headers={"accept": "text/event-stream"}, timeout=60)
        assert answer.status_code == 200
        assert '"type":"TOOL_CALL_START"' in answer.text and "is sunny." in answer.text
        assert answer.text.rstrip().splitlines()[-1].startswith('data: {"type":"RUN_FINISHED"')
        replay = httpx.get(f"{url}/runs/r-1", timeout=30)
        assert replay.status_code == 200 and replay.text == answer.text  # recorded as sent
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
