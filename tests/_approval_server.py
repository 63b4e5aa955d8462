"""An approval flow's server in a process of its own, for the cross-process interrupt tests.

Run as ``python tests/_approval_server.py PORT STORE_URL FLOW``: uvicorn serving
``/agent`` with a store, where FLOW is ``driver`` (the run driver's approver of
tests/server/test_server_interrupts.py: asks ``approve-1``, already expired on a
thread whose id starts with ``expired``) or ``pydantic-ai`` (a pydantic-ai agent
whose ``book_flight`` tool requires approval, scripted by a ``FunctionModel``:
its deferred tool request is the interrupt ``int-call-1``, served through
pydantic-ai's own ``AGUIAdapter``). Two such processes on one store are two
servers of one deployment.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from agui_pipes.server import build_app


def pydantic_ai_approver() -> Any:
    """An agent that calls ``book_flight`` (approval required), then says what it got."""
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.messages import ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    async def model(messages: list[Any], info: AgentInfo) -> AsyncIterator[Any]:
        returns = [
            part
            for message in messages
            for part in getattr(message, "parts", ())
            if isinstance(part, ToolReturnPart)
        ]
        if returns:
            yield f"Result: {returns[-1].content}"
            return
        call = DeltaToolCall(
            name="book_flight", json_args='{"city": "Lisbon"}', tool_call_id="call-1"
        )
        yield {0: call}

    agent = Agent(
        FunctionModel(stream_function=model, model_name="scripted"),
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain(requires_approval=True)
    def book_flight(city: str) -> str:
        return f"booked {city}"

    return agent


def main() -> None:
    port, store, flow = sys.argv[1:4]
    if flow == "pydantic-ai":
        from agui_pipes.integrations.pydantic_ai import pydantic_ai_producer

        app = build_app(
            producer=pydantic_ai_producer(pydantic_ai_approver()),
            store=store,
            path="/agent",
            keepalive=None,
        )
    else:
        from agui_pipes.driver import RunContext, RunOutcome
        from tests.server.test_server_interrupts import PAST, Approver

        fresh, expired = Approver(), Approver(expires_at=PAST)

        async def approver(ctx: RunContext[Any]) -> RunOutcome:
            chosen = expired if ctx.thread_id.startswith("expired") else fresh
            return await chosen.run(ctx)

        app = build_app(agent=approver, store=store, path="/agent", keepalive=None)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", http="h11")


@contextmanager
def approval_server(store: str, flow: str) -> Iterator[str]:
    """This script as a real server process on a free port: its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__)), str(port), store, flow], env=env
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the approval server did not start ({process.poll()})"
                    ) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/agent"
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
