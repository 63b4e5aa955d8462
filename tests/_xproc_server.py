"""A durable endpoint in a process of its own, for the multi-process tests.

Run as ``python tests/_xproc_server.py PORT STORE_URL GRACE OWNER_TIMEOUT``:
uvicorn serving ``/agent`` with an agent that streams one delta every 20 ms
until it is cancelled (so only a stop, the detach grace or a killed process
ends its run), or, for a run id starting with ``short``, 5 deltas and done.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette

from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, agent_routes


async def ticker(ctx: RunContext[Any]) -> RunOutcome:
    with ctx.message() as message:
        n = 0
        while not ctx.run_id.startswith("short") or n < 5:
            message.delta(f"t{n} ")
            n += 1
            await anyio.sleep(0.02)
    return RunOutcome.success()


def main() -> None:
    port, store, grace, owner_timeout = sys.argv[1:5]
    routes = agent_routes(
        "/agent",
        ticker,
        store=store,
        detach_grace=float(grace),
        owner_timeout=float(owner_timeout),
        keepalive=None,
    )
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    app = Starlette(routes=routes, lifespan=endpoint.lifespan)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", http="h11")


if __name__ == "__main__":
    main()
