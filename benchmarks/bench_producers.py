"""A framework's agent in-process against its own server and the gateway in front of it.

    python benchmarks/bench_producers.py [--events 200] [--runs 20] [--frameworks NAME ...]

For pydantic-ai and LangGraph, one scripted agent (its model streams
``--events`` text deltas, no provider, no network) is served three ways, each
a uvicorn subprocess:

* **own** — the framework's own AG-UI server (pydantic-ai's
  ``AGUIAdapter.dispatch_request``, ag-ui-langgraph's FastAPI endpoint);
* **gateway** — ``agui-pipes``' gateway in front of that server (two
  processes, the second HTTP hop);
* **in-process** — ``build_app(producer=...)`` (one process, no hop).

Both agui_pipes setups run the same chain (none of your own:
``ExpandChunks | Verify``). ``--runs`` runs are POSTed one after another
(after three warm-up runs) and read to their end, and for each setup:

* **CPU per event** — user + system CPU of the server process(es) over the
  runs (``/proc/PID/stat``), over the events the client received;
* **time to first event** — from sending the POST to the first ``data:``
  frame, median over the runs.

The check is part of the benchmark: a run that does not end with
``RUN_FINISHED`` after ``--events`` deltas fails it.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
_TICKS = os.sysconf("SC_CLK_TCK")
SETUPS = ("own", "gateway", "in-process")


# -- the agents ---------------------------------------------------------------------------


def pydantic_ai_agent(events: int) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def stream(messages: list[Any], info: AgentInfo) -> AsyncIterator[str]:
        for n in range(events):
            yield f"w{n} "

    return Agent(FunctionModel(stream_function=stream, model_name="scripted"), output_type=str)


def langgraph_graph(events: int) -> Any:
    sys.path.insert(0, str(ROOT))
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessageChunk
    from langgraph.checkpoint.memory import InMemorySaver

    from examples.frameworks.langgraph_app import ScriptedChatModel

    class Words(ScriptedChatModel):
        def _chunks(self, messages: Sequence[Any]) -> list[AIMessageChunk]:
            return [AIMessageChunk(content=f"w{n} ", id="ai-1") for n in range(events)]

    return create_agent(Words(), tools=[], checkpointer=InMemorySaver())


def own_app(framework: str, events: int) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    if framework == "pydantic-ai":
        from pydantic_ai.ui.ag_ui import AGUIAdapter

        agent = pydantic_ai_agent(events)

        async def endpoint(request: Request) -> Response:
            return await AGUIAdapter.dispatch_request(request, agent=agent)

        return Starlette(routes=[Route("/", endpoint, methods=["POST"]), Route("/healthz", health)])
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    app.add_route("/healthz", health)
    graph = langgraph_graph(events)
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="scripted", graph=graph), "/")
    return app


def in_process_app(framework: str, events: int) -> Any:
    from agui_pipes.server import build_app

    if framework == "pydantic-ai":
        from agui_pipes.integrations.pydantic_ai import pydantic_ai_producer

        producer = pydantic_ai_producer(pydantic_ai_agent(events))
    else:
        from agui_pipes.integrations.langgraph import langgraph_producer

        producer = langgraph_producer(langgraph_graph(events))
    return build_app(producer=producer, keepalive=None)


def serve(role: str, framework: str, port: int, events: int, upstream: str | None) -> None:
    import logging

    import uvicorn

    if role == "own":
        app = own_app(framework, events)
    elif role == "gateway":
        from agui_pipes.server import build_app

        assert upstream is not None
        app = build_app(upstream=upstream, keepalive=None)
    else:
        app = in_process_app(framework, events)
    logging.getLogger("agui_pipes").setLevel(logging.WARNING)  # no per-run line
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


# -- the measuring side -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


class _Server:
    def __init__(self, argv: list[str], port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"a server exited at start-up:\n{self.output()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"a server did not come up:\n{self.output()}")

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _start(role: str, framework: str, events: int, upstream: str | None = None) -> _Server:
    port = _free_port()
    argv = [sys.executable, __file__, "--_role", role, "--_framework", framework]
    argv += ["--_port", str(port), "--events", str(events)]
    if upstream is not None:
        argv += ["--_upstream", upstream]
    return _Server(argv, port)


def _one_run(client: httpx.Client, url: str, n: int, events: int) -> tuple[float, int]:
    """POST one run and read it to its end: (seconds to the first event, events received)."""
    body = {
        "threadId": f"t-{n}",
        "runId": f"r-{n}",
        "state": {},
        "messages": [{"id": f"u-{n}", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    sent = time.perf_counter()
    first: float | None = None
    frames: list[str] = []
    with client.stream("POST", url, json=body, headers={"accept": "text/event-stream"}) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                if first is None:
                    first = time.perf_counter() - sent
                frames.append(line)
    deltas = sum('"type":"TEXT_MESSAGE_CONTENT"' in frame for frame in frames)
    if not frames or '"type":"RUN_FINISHED"' not in frames[-1] or deltas != events:
        raise SystemExit(f"run {n} at {url} did not finish with {events} deltas: {frames[-1:]}")
    assert first is not None
    return first, len(frames)


def measure(framework: str, setup: str, events: int, runs: int) -> dict[str, float]:
    servers: list[_Server] = []
    try:
        if setup == "in-process":
            servers.append(_start("in-process", framework, events))
        else:
            servers.append(_start("own", framework, events))
            if setup == "gateway":
                servers.append(_start("gateway", framework, events, servers[0].url + "/"))
        url = servers[-1].url + "/"
        with httpx.Client(timeout=60) as client:
            for n in range(3):
                _one_run(client, url, -1 - n, events)
            cpu_before = sum(_cpu(s.process.pid) for s in servers)
            firsts: list[float] = []
            received = 0
            for n in range(runs):
                first, count = _one_run(client, url, n, events)
                firsts.append(first)
                received += count
            cpu = sum(_cpu(s.process.pid) for s in servers) - cpu_before
    finally:
        for server in servers:
            server.stop()
    return {
        "cpu_us_per_event": cpu / received * 1e6,
        "first_event_ms": statistics.median(firsts) * 1000,
        "events_per_run": received / runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200, help="text deltas per run")
    parser.add_argument("--runs", type=int, default=20, help="measured runs per setup")
    parser.add_argument("--frameworks", nargs="+", default=["pydantic-ai", "langgraph"])
    parser.add_argument("--_role", help=argparse.SUPPRESS)
    parser.add_argument("--_framework", help=argparse.SUPPRESS)
    parser.add_argument("--_port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--_upstream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._role:
        serve(args._role, args._framework, args._port, args.events, args._upstream)
        return
    print(f"{args.events} deltas per run, {args.runs} runs per setup (after 3 warm-up runs)")
    header = ("framework", "setup", "events/run", "CPU us/event", "1st event ms")
    print(f"{header[0]:<12} {header[1]:<11} {header[2]:>10} {header[3]:>13} {header[4]:>13}")
    for framework in args.frameworks:
        for setup in SETUPS:
            row = measure(framework, setup, args.events, args.runs)
            print(
                f"{framework:<12} {setup:<11} {row['events_per_run']:>10.0f} "
                f"{row['cpu_us_per_event']:>13.1f} {row['first_event_ms']:>13.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
