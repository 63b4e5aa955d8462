"""Framework agents in-process behind agui_pipes vs the framework's own AG-UI server.

    python benchmarks/bench_frameworks.py [--runs 20] [--pieces 200] [--json out.json]
        [--framework agno --framework agent-framework --framework crewai]

Each framework's scripted agent (a tool call, then ``--pieces`` text deltas; no
model provider) is served by a subprocess two ways: the framework's own server
(Agno's ``AGUI`` router; MAF's ``add_agent_framework_fastapi_endpoint``;
ag-ui-crewai's ``add_crewai_flow_fastapi_endpoint``) and
``build_app(producer=<framework>_producer(agent))`` (no chain, no store: the
in-process path's own cost, repair included); for CrewAI also a third, an
agui_pipes gateway (tests/integrations/_gateway_app.py, with the integration's
repair) in front of its own server. The client (this process) posts ``--runs``
runs one after another, after two warm-up runs. Reported, never asserted:

* **CPU per event**: the server processes' user + system CPU time over the runs
  (``/proc/<pid>/stat``; both processes for a gateway in front), divided by the
  events the client received;
* **time to first event**: request sent to first SSE frame received, median.

agent-framework and crewai run in venvs of their own (tests/_framework_venv.py;
built on first use, cached). Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests._framework_venv import framework_python, framework_server  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")

APPS = {
    "agno": ("tests.integrations._agno_app", "/agui"),
    "agent-framework": ("tests.integrations._maf_app", "/agui"),
    "crewai": ("tests.integrations._crewai_app", "/agui"),
}
GATEWAY_CHAINS = {"crewai": "agui_pipes.integrations.crewai:CrewAIRepair"}
"""The frameworks measured with a gateway in front too, and its chain."""
# Importing crewai and LiteLLM takes 10-45 s on a busy 2-core machine.
_WITHIN = 300.0


def _python(framework: str) -> Path:
    if framework == "agno":
        return Path(sys.executable)
    if framework == "crewai":
        from tests.integrations._crewai_pins import EXTRAS, PINS

        return framework_python("crewai", pins=PINS, extras=EXTRAS)
    from tests.integrations._maf_pins import EXTRAS, NO_DEPS, REQUIREMENTS

    return framework_python("agent-framework", REQUIREMENTS, NO_DEPS, EXTRAS)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def _body(n: int) -> dict[str, Any]:
    return {
        "threadId": f"t-{n}",
        "runId": f"r-{n}",
        "messages": [{"id": "u", "role": "user", "content": "Where should I go?"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def _run(client: httpx.Client, url: str, n: int) -> tuple[float, int]:
    sent = time.perf_counter()
    first = None
    count = 0
    with client.stream(
        "POST", url, json=_body(n), headers={"accept": "text/event-stream"}
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: "):
                if first is None:
                    first = time.perf_counter() - sent
                count += 1
    assert first is not None, "no event"
    return first, count


SERVERS = {
    "own": "own server",
    "in-process": "agui_pipes in-process",
    "gateway": "gateway in front",
}


def measure(framework: str, mode: str, runs: int, pieces: int) -> dict[str, Any]:
    module, own_path = APPS[framework]
    args = ["own" if mode == "gateway" else mode, "--pieces", str(pieces)]
    with contextlib.ExitStack() as stack:
        served = stack.enter_context(
            framework_server(_python(framework), module, *args, within=_WITHIN)
        )
        pids = [served.pid]
        url = served.url + (own_path if mode == "own" else "/agent")
        if mode == "gateway":
            gateway_args = [served.url + own_path, "--chain", GATEWAY_CHAINS[framework]]
            gateway = stack.enter_context(
                framework_server(
                    Path(sys.executable), "tests.integrations._gateway_app", *gateway_args
                )
            )
            pids.append(gateway.pid)
            url = gateway.url + "/agent"
        with httpx.Client(timeout=60) as client:
            for n in range(2):
                _run(client, url, -1 - n)
            before = sum(map(_cpu_seconds, pids))
            firsts, events = [], 0
            for n in range(runs):
                first, count = _run(client, url, n)
                firsts.append(first)
                events += count
            cpu = sum(map(_cpu_seconds, pids)) - before
    return {
        "framework": framework,
        "server": SERVERS[mode],
        "events_per_run": events // runs,
        "cpu_us_per_event": round(cpu / events * 1e6, 1),
        "first_event_ms": round(statistics.median(firsts) * 1e3, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--pieces", type=int, default=200)
    parser.add_argument("--framework", action="append", choices=sorted(APPS))
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    rows = [
        measure(framework, mode, options.runs, options.pieces)
        for framework in options.framework or sorted(APPS)
        for mode in ("own", "in-process", "gateway")
        if mode != "gateway" or framework in GATEWAY_CHAINS
    ]
    head = ("framework", "server", "events/run", "CPU µs/event", "first event ms")
    print(f"{head[0]:<16} {head[1]:<22} {head[2]:>10} {head[3]:>13} {head[4]:>15}")
    for row in rows:
        print(
            f"{row['framework']:<16} {row['server']:<22} {row['events_per_run']:>10} "
            f"{row['cpu_us_per_event']:>13} {row['first_event_ms']:>15}"
        )
    if options.json:
        options.json.write_text(json.dumps({"rows": rows}, indent=2))


if __name__ == "__main__":
    main()
