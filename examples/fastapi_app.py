"""An AG-UI agent inside a FastAPI app, with a pipeline in front of it.

    pip install 'agui-pipes[server]' fastapi
    uvicorn examples.fastapi_app:app --port 8000
    curl -N -X POST localhost:8000/agent -H 'content-type: application/json' \
         -d '{"threadId": "t1", "runId": "r1", "messages": [
              {"id": "u1", "role": "user", "content": "weather in Lisbon?"}]}'

The agent endpoint is a plain ASGI app, so it goes next to ordinary FastAPI
routes as a Starlette ``Route`` appended to ``app.routes``. Each request gets a fresh chain from the
factory; a client that disconnects cancels the agent (its ``finally`` runs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import anyio
from ag_ui.core import BaseEvent, TextMessageContentEvent, ToolCallArgsEvent
from fastapi import FastAPI
from starlette.routing import Route

from agui_pipes import RunContext, RunOutcome, StreamTransformer, TransformerChain
from agui_pipes.server import AgentEndpoint
from agui_pipes.transformers import Verify

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


class MaskEmails(StreamTransformer):
    """Masks e-mail addresses in assistant text and tool arguments (per delta)."""

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, TextMessageContentEvent | ToolCallArgsEvent):
            masked = _EMAIL.sub("[email]", event.delta)
            if masked != event.delta:
                return (event.model_copy(update={"delta": masked}),)
        return (event,)


def city_of(ctx: RunContext[Any]) -> str:
    for message in reversed(ctx.messages):
        content = getattr(message, "content", None)
        if getattr(message, "role", None) == "user" and isinstance(content, str):
            found = re.search(r"\bin ([A-Z][\w-]+)", content)
            if found:
                return found.group(1)
    return "Lisbon"


async def weather_agent(ctx: RunContext[Any]) -> RunOutcome:
    """Looks the weather up with a (pretend) tool, then answers."""
    city = city_of(ctx)
    with ctx.tool_call("get_weather") as call:
        call.args_json({"city": city})
        await anyio.sleep(0.01)  # standing in for the weather service
        call.result_json({"city": city, "sky": "sunny", "celsius": 24})
    ctx.say(f"It is sunny and 24 °C in {city}. Questions? Write to weather@example.com.")
    return RunOutcome.success()


def chain() -> TransformerChain:
    # Built per request: stages keep per-run state.
    return TransformerChain([MaskEmails(), Verify(profile="producer")])


app = FastAPI(title="weather agent")
# A Starlette Route takes any ASGI app (app.add_route() is typed for request handlers only).
app.routes.append(Route("/agent", AgentEndpoint(weather_agent, chain=chain), methods=["POST"]))


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}
