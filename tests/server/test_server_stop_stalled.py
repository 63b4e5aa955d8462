"""A stop of a recorded run whose client reads nothing ends it cancelled, on every path.

A stalled client fills the frame queue, so the stop's cancellation reaches
the run's reader while it waits on that queue — outside the generator that
records the frames, whose source holds cancel scopes and task groups of its
own across its yields. It used to unwind them out of order (RuntimeError,
"Exception in ASGI application") and record the run as an error. Now the run
is recorded CANCELLED, the stop answers ``cancelled``, the agent upstream is
cancelled, and the log ends with the stop's RUN_ERROR.

Real uvicorn, a raw socket that never reads; the agent endpoint (a driver
agent) and the gateway's two recorded paths (the relay of a sync chain, and
``chain.apply`` for a chain with an async stage). Served as ``build_app``
serves them: a bare ``AgentEndpoint`` or ``Gateway`` is the run's POST route
only (it reads any request as a run), so the stop and replay routes a store
adds are the app's (``routes(path)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent

from agui_pipes import AsyncStreamTransformer, TransformerChain
from agui_pipes.server import AgentEndpoint, build_app
from tests._servers import serve
from tests._slow_clients import Flood, poll, stalled_client, wait_until_held

SEND_BUFFER = 65536


class AsyncPass(AsyncStreamTransformer):
    """Makes the gateway's chain async: it then runs through ``chain.apply``."""

    async def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event,)


def _stop_while_stalled(app: Any, agent: Flood) -> httpx.Response:
    with serve(app) as server, stalled_client(server.port):
        poll(lambda: agent.emitted > 0, 10, "the agent started")
        wait_until_held(lambda: agent.emitted)
        stopped = httpx.post(f"{server.url}/runs/r/stop", timeout=30)
        assert agent.ended.wait(20), "the stop did not end the agent"
        replay = httpx.get(f"{server.url}/runs/r", timeout=30)
    assert agent.ended_by == "CancelledError", agent.ended_by
    assert replay.text.rstrip().endswith("}"), replay.text[-200:]
    last = replay.text.rstrip().rsplit("data: ", 1)[-1]
    assert '"type":"RUN_ERROR"' in last and '"code":"CANCELLED"' in last, last
    return stopped


def test_the_endpoint_records_a_stopped_stalled_run_as_cancelled(tmp_path: Path) -> None:
    agent = Flood(100_000)
    app = build_app(
        agent=agent.run,
        store=f"sqlite:///{tmp_path / 'r.db'}",
        keepalive=None,
        send_buffer=SEND_BUFFER,
    )
    stopped = _stop_while_stalled(app, agent)
    assert stopped.json()["status"] == "cancelled", stopped.text


@pytest.mark.parametrize("path", ["relay", "apply"])
def test_the_gateway_records_a_stopped_stalled_run_as_cancelled(tmp_path: Path, path: str) -> None:
    agent = Flood(100_000)
    upstream_app = AgentEndpoint(agent=agent.run, keepalive=None)
    with serve(upstream_app) as upstream:
        stages = [AsyncPass()] if path == "apply" else []
        gateway = build_app(
            upstream=f"{upstream.url}/",
            chain=lambda: TransformerChain(stages),
            store=f"sqlite:///{tmp_path / 'r.db'}",
            keepalive=None,
            send_buffer=SEND_BUFFER,
        )
        stopped = _stop_while_stalled(gateway, agent)
    assert stopped.json()["status"] == "cancelled", stopped.text
