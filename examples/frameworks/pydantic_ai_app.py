"""A pydantic-ai agent served durable by agui-pipes, offline: its model is scripted.

From the repository's root (the import path is relative to it)::

    pip install -e '.[server,producers]'
    agui-pipes serve --agent examples.frameworks.pydantic_ai_app:agent --store sqlite:///runs.db

``agent`` is a pydantic-ai ``Agent`` with one tool; ``serve --agent`` recognises
it and serves it through pydantic-ai's own AG-UI adapter, in the server's
process, every run recorded in ``runs.db``. Its model is a ``FunctionModel``
that calls ``get_weather`` once, then answers; give ``Agent`` a real model
(``"openai:gpt-5"``) and nothing else changes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel


async def scripted(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """Stream a ``get_weather`` call first, then the answer once the tool returned."""
    last = messages[-1]
    answered = isinstance(last, ModelRequest) and any(
        isinstance(part, ToolReturnPart) for part in last.parts
    )
    if not answered:
        yield {
            0: DeltaToolCall(
                name="get_weather", json_args='{"city": "Lisbon"}', tool_call_id="call-weather-1"
            )
        }
        return
    for piece in ("It is sunny", " in Lisbon", " today."):
        yield piece


agent: Agent[None, str] = Agent(
    FunctionModel(stream_function=scripted, model_name="scripted"), output_type=str, name="weather"
)


@agent.tool_plain
async def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"
