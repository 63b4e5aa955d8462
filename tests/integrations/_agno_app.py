"""A scripted Agno agent served in a subprocess, for benchmarks/bench_frameworks.py.

    python -m tests.integrations._agno_app own|in-process [--pieces N]

``own`` serves Agno's own ``AGUI`` router at ``/agui``; ``in-process`` serves
``build_app(producer=agno_producer(agent))`` at ``/agent``. It prints
``PORT <n>`` once it listens. The scripted model (no provider, no network)
calls the ``weather`` tool, then answers in ``--pieces`` pieces.
"""

from __future__ import annotations

import argparse
import json
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from agno.agent import Agent
from agno.models.base import Model
from agno.models.response import ModelResponse


@dataclass
class PiecesModel(Model):
    id: str = "scripted"
    name: str = "scripted"
    provider: str = "scripted"
    pieces: int = 3

    def invoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        raise NotImplementedError("streams only")

    async def ainvoke(self, *args: Any, **kwargs: Any) -> ModelResponse:
        raise NotImplementedError("streams only")

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        raise NotImplementedError("async only")

    async def ainvoke_stream(  # type: ignore[override]
        self, messages: list[Any], assistant_message: Any, **kwargs: Any
    ) -> AsyncIterator[ModelResponse]:
        if not any(m.role == "tool" for m in messages):
            call = {"name": "weather", "arguments": json.dumps({"city": "Lisbon"})}
            yield ModelResponse(tool_calls=[{"id": "call-1", "type": "function", "function": call}])
            return
        for n in range(self.pieces):
            yield ModelResponse(content=f"piece {n} ")

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


def weather(city: str) -> str:
    """The weather in a city."""
    return json.dumps({"city": city, "sky": "sunny"})


def app(mode: str, pieces: int) -> Any:
    agent = Agent(model=PiecesModel(pieces=pieces), tools=[weather])
    if mode == "own":
        from agno.os.interfaces.agui import AGUI
        from fastapi import FastAPI

        served = FastAPI()
        served.include_router(AGUI(agent=agent).get_router())
        return served
    from agui_pipes.integrations.agno import agno_producer
    from agui_pipes.server import build_app

    return build_app(producer=agno_producer(agent), path="/agent", keepalive=None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["own", "in-process"])
    parser.add_argument("--pieces", type=int, default=3)
    options = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    config = uvicorn.Config(
        app(options.mode, options.pieces), log_level="warning", loop="asyncio", http="h11"
    )
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
