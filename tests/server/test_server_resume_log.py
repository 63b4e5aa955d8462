"""The resume route's per-run INFO line says what the resume sent and how the run ended.

Found by benchmarks/load_check.py: every ``GET runs/{runId}`` was logged as
``client disconnected`` with ``events source 0 → out 0``, however many frames it had
sent and although the run had finished, because the route hands ``SSERun`` bytes
it never counted. Under load those lines are what an operator reads.
"""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from starlette.applications import Starlette

from agui_pipes.demo import DemoAgent
from agui_pipes.server import AgentEndpoint, agent_routes
from tests._durable_http import HEADERS
from tests._durable_http import get_frames as _get
from tests._durable_http import read_frames as _read
from tests._servers import run_input, serve, wait_until

pytestmark = pytest.mark.anyio


def _resume_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in list(caplog.records)
        if record.getMessage().startswith("resume run ")
    ]


async def test_a_resume_is_logged_with_its_frames_and_the_runs_outcome(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    routes = agent_routes("/agent", DemoAgent(), store="memory:", keepalive=None)
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    app = Starlette(routes=routes, lifespan=endpoint.lifespan)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            body = json.dumps(run_input("logged"))
            async with client.stream("POST", "/agent", content=body, headers=HEADERS) as answer:
                whole = await _read(answer)
            status, replay, _ = await _get(client, "/agent/runs/logged")
            assert (status, replay) == (200, whole)
            await wait_until(lambda: len(_resume_lines(caplog)) == 1, 10, "the first line")
            status, tail, _ = await _get(client, "/agent/runs/logged", whole[9][0])
            assert (status, tail) == (200, whole[10:])
            await wait_until(lambda: len(_resume_lines(caplog)) == 2, 10, "the second line")
    from_start, after_ten = _resume_lines(caplog)
    n = len(whole)
    assert from_start.startswith("resume run logged thread thread-1: finished in "), from_start
    assert from_start.endswith(f"; events source {n} → out {n}"), from_start
    assert after_ten.startswith("resume run logged thread thread-1: finished in "), after_ten
    assert after_ten.endswith(f"; events source {n - 10} → out {n - 10}"), after_ten
