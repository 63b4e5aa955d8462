"""A scripted CrewAI flow, served in the framework's own venv.

Run by tests/integrations/test_crewai.py (and benchmarks/bench_frameworks.py) with
that venv's python (tests/_framework_venv.py)::

    python -m tests.integrations._crewai_app own|in-process [--store URL] [--redact]
        [--gate FILE] [--observed FILE] [--pieces N]

``own`` serves ag-ui-crewai's own ``add_crewai_flow_fastapi_endpoint`` at ``/agui``;
``in-process`` serves ``build_app(producer=crewai_producer(flow))`` at ``/agent``.
It prints ``PORT <n>`` once it listens. The flow's model is a LiteLLM custom
provider (no network): it calls the backend ``weather`` tool, then answers in
pieces; when the request offers the frontend tools ``pick_date`` and ``pick_hotel``
it calls both instead; a user message containing "fail" makes it raise. With
``--gate`` it waits, after the answer's first piece, until that file exists;
``--observed`` gets one line per model call: ``done`` or the name of the exception
that ended it (a stop cancels it).
"""

from __future__ import annotations

import os

# No network: LiteLLM's price list from its own package, no CrewAI telemetry or tracing.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

import argparse
import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import litellm
import uvicorn
from ag_ui_crewai import CopilotKitState, copilotkit_emit_tool_result, copilotkit_stream
from crewai.flow.flow import Flow, start
from litellm import CustomLLM, acompletion

ANSWER = ("A weekend", " in Lisbon", " is sunny.")
FRONTEND = ("pick_date", "pick_hotel")
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _tool_call(index: int, call_id: str, name: str, arguments: str, last: bool) -> Any:
    return {
        "text": "",
        "tool_use": {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
            "index": index,
        },
        "is_finished": last,
        "finish_reason": "tool_calls" if last else "",
        "usage": None,
        "index": 0,
    }


class ScriptedModel(CustomLLM):  # type: ignore[misc]
    """LiteLLM's custom provider ``scripted/...``: the model of every call of the flow."""

    def __init__(self, gate: Path | None, observed: Path | None, pieces: int) -> None:
        super().__init__()
        self.gate = gate
        self.observed = observed
        self.pieces = pieces

    def _note(self, what: str) -> None:
        if self.observed is not None:
            with self.observed.open("a") as out:
                out.write(what + "\n")

    async def astreaming(  # type: ignore[override]
        self, model: str, messages: list[Any], *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        options = kwargs.get("optional_params") or {}
        try:
            tools = {tool["function"]["name"] for tool in options.get("tools") or ()}
            said = [m.get("content") or "" for m in messages if m.get("role") == "user"]
            if said and "fail" in said[-1]:
                raise RuntimeError("the scripted model failed")
            answered = messages[-1].get("role") == "tool"
            if not answered and set(FRONTEND) <= tools:
                for n, name in enumerate(FRONTEND):
                    yield _tool_call(n, f"fc-{n + 1}", name, "{}", n == len(FRONTEND) - 1)
            elif not answered:
                yield _tool_call(0, "call-1", "weather", json.dumps({"city": "Lisbon"}), True)
            else:
                for n in range(self.pieces):
                    last = n == self.pieces - 1
                    yield {
                        "text": ANSWER[n] if n < len(ANSWER) else f" and {n}",
                        "tool_use": None,
                        "is_finished": last,
                        "finish_reason": "stop" if last else "",
                        "usage": None,
                        "index": 0,
                    }
                    gated = n == 0 and self.gate is not None
                    while gated and not self.gate.exists():  # type: ignore[union-attr]  # noqa: ASYNC110 - another process makes it
                        await asyncio.sleep(0.005)
            self._note("done")
        except BaseException as exc:
            self._note(type(exc).__name__)
            raise


class TripFlow(Flow[CopilotKitState]):  # type: ignore[misc]
    """The chat flow of ag-ui-crewai's examples: stream the model, run the backend tool."""

    @start()  # type: ignore[misc]
    async def chat(self) -> None:
        tools = [*self.state.copilotkit.actions, WEATHER]
        while True:
            response = await copilotkit_stream(
                await acompletion(
                    model="scripted/trip",
                    messages=[{"role": "system", "content": "Plan trips."}, *self.state.messages],
                    tools=tools,
                    stream=True,
                )
            )
            message = response.choices[0]["message"]
            self.state.messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls or calls[0]["function"]["name"] != "weather":
                return  # answered, or frontend tools for the client to run
            result = json.dumps({"city": json.loads(calls[0]["function"]["arguments"])["city"]})
            self.state.messages.append(
                {"role": "tool", "content": result, "tool_call_id": calls[0]["id"]}
            )
            await copilotkit_emit_tool_result(calls[0]["id"], result)


def scripted(gate: Path | None = None, observed: Path | None = None, pieces: int = 3) -> None:
    """Make ``scripted/...`` LiteLLM's scripted model (one per process)."""
    model = ScriptedModel(gate, observed, pieces)
    litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": model}]


scripted()
flow = TripFlow()
"""What ``agui-pipes serve --agent tests.integrations._crewai_app:flow`` serves."""


def app(mode: str, options: argparse.Namespace) -> Any:
    scripted(options.gate, options.observed, options.pieces)
    if mode == "own":
        from ag_ui_crewai import add_crewai_flow_fastapi_endpoint
        from fastapi import FastAPI

        served = FastAPI()
        add_crewai_flow_fastapi_endpoint(served, TripFlow(), "/agui")
        return served
    from agui_pipes.integrations.crewai import crewai_producer
    from agui_pipes.server import build_app
    from agui_pipes.transformers import Redact

    def redact() -> Redact:
        return Redact(patterns=["Lisbon"], replacement="[city]")

    return build_app(
        producer=crewai_producer(TripFlow()),
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
