"""CPU per event and time to first event: each framework in-process vs its own server.

For ADK, Strands and LlamaIndex, with the scripted models of tests/integrations (a
``weather`` tool call, its result, a streamed answer), over real HTTP on 127.0.0.1:

* **in-process** — ``build_app(producer=<integration>)``, no chain, no store;
* **own server** — the framework's own FastAPI endpoint serving an equal agent;
* **gateway in front** — ``build_app(upstream=<own server>)``: the second hop.

All servers run under uvicorn in this process (a thread each), so "CPU per event" is
this process's CPU time (server and client) over the runs, divided by the events
received; "first event" is the median time from sending the POST to the first SSE
frame. Run: ``python benchmarks/bench_framework_producers.py [runs]``.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

warnings.filterwarnings("ignore")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' scripted models

from agui_pipes.server import build_app  # noqa: E402
from tests._servers import serve  # noqa: E402
from tests.integrations._framework_checks import HEADERS, body  # noqa: E402


def _measure(url: str, runs: int, tag: str) -> tuple[float, float, int]:
    """(CPU µs per event, median ms to the first event, events per run) over ``runs``.

    Every run is a new thread (``tag`` keeps the cases apart): ADK and Strands keep
    per-thread state, and a second run on a thread is another scenario.
    """
    firsts: list[float] = []
    count = 0
    with httpx.Client(timeout=60) as client:
        client.post(url, json=body("warm-up", f"{tag}-warm"), headers=HEADERS).read()
        cpu = time.process_time()
        for n in range(runs):
            sent = time.perf_counter()
            first: float | None = None
            with client.stream(
                "POST", url, json=body(f"r-{n}", f"{tag}-t-{n}"), headers=HEADERS
            ) as response:
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        if first is None:
                            first = time.perf_counter() - sent
                        count += 1
            assert first is not None
            firsts.append(first)
        cpu = time.process_time() - cpu
    return cpu / count * 1e6, statistics.median(firsts) * 1e3, count // runs


def _adk() -> tuple[Any, Any, str]:
    from ag_ui_adk import ADKAgent, add_adk_fastapi_endpoint
    from fastapi import FastAPI
    from google.adk.sessions import InMemorySessionService

    from agui_pipes.integrations.adk import adk_producer
    from tests.integrations.test_adk import _agent

    own = FastAPI()
    adapter = ADKAgent(adk_agent=_agent(), session_service=InMemorySessionService())
    add_adk_fastapi_endpoint(own, adapter, path="/agent")
    return adk_producer(_agent()), own, "/agent"


def _strands() -> tuple[Any, Any, str]:
    from ag_ui_strands import StrandsAgent, add_strands_fastapi_endpoint
    from fastapi import FastAPI

    from agui_pipes.integrations.strands import strands_producer
    from tests.integrations.test_strands import _agent

    own = FastAPI()
    add_strands_fastapi_endpoint(own, StrandsAgent(_agent(), name="planner"), "/agent")
    return strands_producer(_agent(), name="planner"), own, "/agent"


def _llamaindex() -> tuple[Any, Any, str]:
    from agui_pipes.integrations.llamaindex import llamaindex_producer
    from tests.integrations.test_llamaindex import _framework_app, _workflow

    return llamaindex_producer(_workflow()), _framework_app(), "/li/run"


FRAMEWORKS: dict[str, Callable[[], tuple[Any, Any, str]]] = {
    "adk": _adk,
    "strands": _strands,
    "llamaindex": _llamaindex,
}


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    print("| framework | served by | events/run | CPU µs/event | first event ms (median) |")
    print("|---|---|---:|---:|---:|")
    for name, make in FRAMEWORKS.items():
        producer, own, path = make()
        app = build_app(producer=producer, path="/agent", keepalive=None)
        with serve(app) as ours, serve(own) as theirs:
            in_front = build_app(upstream=f"{theirs.url}{path}", path="/agent", keepalive=None)
            with serve(in_front) as gateway:
                cases = (
                    ("agui_pipes in-process", f"{ours.url}/agent"),
                    ("its own server", f"{theirs.url}{path}"),
                    ("agui_pipes gateway in front of it", f"{gateway.url}/agent"),
                )
                for case, (label, url) in enumerate(cases):
                    cpu, first, per_run = _measure(url, runs, f"{name}-{case}")
                    print(f"| {name} | {label} | {per_run} | {cpu:.0f} | {first:.1f} |")


if __name__ == "__main__":
    main()
