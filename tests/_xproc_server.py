"""A durable endpoint in a process of its own, for the multi-process tests.

Run as ``python tests/_xproc_server.py PORT STORE_URL GRACE OWNER_TIMEOUT [CONCURRENCY]``:
uvicorn serving ``/agent`` with an agent that streams one delta every 20 ms
until it is cancelled (so only a stop, the detach grace or a killed process
ends its run), or, for a run id starting with ``short``, 5 deltas and done.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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
    concurrency = sys.argv[5] if len(sys.argv) > 5 else "reject"
    routes = agent_routes(
        "/agent",
        ticker,
        store=store,
        detach_grace=float(grace),
        owner_timeout=float(owner_timeout),
        keepalive=None,
        concurrency=concurrency,
    )
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    app = Starlette(routes=routes, lifespan=endpoint.lifespan)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", http="h11")


_SERVER_SCRIPT = Path(__file__)


@contextmanager
def server_process(
    store: str, grace: float, owner_timeout: float, concurrency: str = "reject"
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """This script as a real uvicorn server process on a free port: its URL and process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [
            sys.executable,
            str(_SERVER_SCRIPT),
            str(port),
            store,
            str(grace),
            str(owner_timeout),
            concurrency,
        ],
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the server process did not start ({process.poll()})"
                    ) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


if __name__ == "__main__":
    main()
