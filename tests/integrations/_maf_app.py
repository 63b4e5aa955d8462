"""A scripted Microsoft Agent Framework agent, served in the framework's own venv.

Run by tests/integrations/test_agent_framework.py (and benchmarks/bench_frameworks.py)
with that venv's python (tests/_framework_venv.py)::

    python -m tests.integrations._maf_app own|in-process [--store URL] [--redact]
        [--gate FILE] [--observed FILE] [--pieces N]

``own`` serves MAF's own ``add_agent_framework_fastapi_endpoint`` at ``/agui``;
``in-process`` serves ``build_app(producer=agent_framework_producer(agent))`` at
``/agent``. It prints ``PORT <n>`` once it listens. The scripted chat client
(no provider, no network) calls the ``weather`` tool, then answers in pieces;
when the request offers the frontend tools ``pick_date`` and ``pick_hotel`` it
calls both instead. With ``--gate`` it waits, after the answer's first piece,
until that file exists; ``--observed`` gets one line per model call: ``done`` or
the name of the exception that ended it (a stop cancels it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
    tool,
)

ANSWER = ("A weekend", " in Lisbon", " is sunny.")
FRONTEND = ("pick_date", "pick_hotel")


def _tool_names(options: Mapping[str, Any]) -> set[str]:
    names = set()
    for item in options.get("tools") or ():
        name = item.get("name") if isinstance(item, dict) else getattr(item, "name", None)
        if isinstance(name, str):
            names.add(name)
    return names


class ScriptedClient(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
    def __init__(
        self, gate: Path | None, observed: Path | None, pieces: int, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._gate = gate
        self._observed = observed
        self._pieces = pieces

    def _note(self, what: str) -> None:
        if self._observed is not None:
            with self._observed.open("a") as out:
                out.write(what + "\n")

    def _inner_get_response(
        self,
        *,
        messages: Sequence[Message],
        stream: bool = False,
        options: Mapping[str, Any],
        **kwargs: Any,
    ) -> Any:
        async def updates() -> AsyncIterator[ChatResponseUpdate]:
            try:
                answered = any(c.type == "function_result" for m in messages for c in m.contents)
                if not answered and set(FRONTEND) <= _tool_names(options):
                    calls = [
                        Content.from_function_call(call_id=f"fc-{n}", name=name, arguments="{}")
                        for n, name in enumerate(FRONTEND, 1)
                    ]
                    yield ChatResponseUpdate(role="assistant", contents=calls)
                elif not answered:
                    call = Content.from_function_call(
                        call_id="call-1", name="weather", arguments=json.dumps({"city": "Lisbon"})
                    )
                    yield ChatResponseUpdate(role="assistant", contents=[call])
                else:
                    for n in range(self._pieces):
                        piece = ANSWER[n] if n < len(ANSWER) else f" and {n}"
                        yield ChatResponseUpdate(
                            role="assistant", contents=[Content.from_text(piece)], message_id="a-1"
                        )
                        gated = n == 0 and self._gate is not None
                        while gated and not self._gate.exists():  # type: ignore[union-attr]  # noqa: ASYNC110 - another process makes it
                            await asyncio.sleep(0.005)
                self._note("done")
            except BaseException as exc:
                self._note(type(exc).__name__)
                raise

        if stream:
            return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

        async def whole() -> ChatResponse:
            return ChatResponse.from_updates([u async for u in updates()])

        return whole()


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return json.dumps({"city": city, "sky": "sunny"})


def agent(gate: Path | None = None, observed: Path | None = None, pieces: int = 3) -> Agent:
    return Agent(name="scripted", client=ScriptedClient(gate, observed, pieces), tools=[weather])


def one_scope() -> str:
    from agui_pipes.server.auth import ANONYMOUS

    return ANONYMOUS.scope


def app(mode: str, options: argparse.Namespace) -> Any:
    scripted = agent(options.gate, options.observed, options.pieces)
    if mode == "own":
        from agent_framework_ag_ui import add_agent_framework_fastapi_endpoint
        from fastapi import FastAPI

        served = FastAPI()
        add_agent_framework_fastapi_endpoint(
            served,
            scripted,
            "/agui",
            keepalive_seconds=None,
            authorization_scope_resolver=one_scope,  # as the producer: agui_pipes' scope
        )
        return served
    from agui_pipes.integrations.agent_framework import agent_framework_producer
    from agui_pipes.server import build_app
    from agui_pipes.transformers import Redact

    def redact() -> Redact:
        return Redact(patterns=["Lisbon"], replacement="[city]")

    return build_app(
        producer=agent_framework_producer(scripted),
        chain=redact if options.redact else None,
        store=options.store,
        path="/agent",
        keepalive=None,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["own", "in-process"])
    parser.add_argument("--store")
    parser.add_argument("--redact", action="store_true")
    parser.add_argument("--gate", type=Path)
    parser.add_argument("--observed", type=Path)
    parser.add_argument("--pieces", type=int, default=3)
    options = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    config = uvicorn.Config(
        app(options.mode, options), log_level="warning", loop="asyncio", http="h11"
    )
    server = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
