"""pydantic-ai scenarios: ``FunctionModel`` streaming scripts behind ``AGUIAdapter``.

No provider and no network: each scenario's model is a streaming function that
yields text, ``DeltaToolCall`` or ``DeltaThinkingPart`` items depending on how
many model requests the conversation holds (its turn). The agent is served by
pydantic-ai's own ``AGUIAdapter.dispatch_request`` on a Starlette route, which
is how pydantic-ai documents serving AG-UI.

Tools are ``async`` and do not await: pydantic-ai runs parallel calls as tasks,
and tools that finish without yielding finish in the order they were started,
so the recorded order of results is stable.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._common import SECRET_ARG, SECRET_RESULT, SECRET_RETRY, Scenario

PACKAGES = ("pydantic-ai-slim", "ag-ui-protocol", "starlette", "httpx")

_Item = str | DeltaToolCalls | DeltaThinkingCalls
_Script = Callable[[int], list[_Item]]
"""turn number (1 = first model request) -> what the model streams."""

_VARYING = (
    "timestamp (wall clock, ms)",
    "messageId of assistant, reasoning and tool-result messages (uuid4 minted by the adapter)",
    "REASONING_ENCRYPTED_VALUE.entityId (the messageId it annotates)",
)


def _turn(messages: list[ModelMessage]) -> int:
    return sum(1 for message in messages if isinstance(message, ModelRequest))


def _model(script: _Script) -> FunctionModel:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[_Item]:
        for item in script(_turn(messages)):
            yield item

    return FunctionModel(stream_function=stream, model_name="scripted")


def _app(agent: Agent[None, str]) -> Starlette:
    async def endpoint(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def _agent(script: _Script, *, refuse_first_attempt: bool = False) -> Agent[None, str]:
    """An agent with every tool the scenarios call (a model only calls what it scripts)."""
    agent: Agent[None, str] = Agent(_model(script), output_type=str)

    @agent.tool_plain
    async def internal_lookup(key: str, attempt: int = 1) -> str:
        """Look up an internal record (denied to end users by the gateway)."""
        if refuse_first_attempt and attempt < 2:
            raise ModelRetry(f"{SECRET_RETRY}: attempt {attempt} refused, call again")
        return SECRET_RESULT

    @agent.tool_plain
    async def get_weather(city: str) -> str:
        """Public tool: the weather in a city."""
        return f"sunny in {city}"

    @agent.tool_plain
    async def fetch_report(report_id: str) -> str:
        """Public tool that fails: its backend raises."""
        raise RuntimeError(f"report service unavailable for {report_id}")

    return agent


def _served(script: _Script, *, refuse_first_attempt: bool = False) -> Callable[[], Starlette]:
    return lambda: _app(_agent(script, refuse_first_attempt=refuse_first_attempt))


# -- scripts -----------------------------------------------------------------


def _text(turn: int) -> list[_Item]:
    return ["Hello", " from", " pydantic-ai", "!"]


def _parallel(turn: int) -> list[_Item]:
    if turn == 1:
        # Interleaved argument deltas of two calls, as OpenAI-style providers stream them.
        return [
            {
                0: DeltaToolCall(
                    name="internal_lookup",
                    json_args='{"key": "SECRET-',
                    tool_call_id="call-internal-1",
                )
            },
            {
                1: DeltaToolCall(
                    name="get_weather", json_args='{"city": "Par', tool_call_id="call-weather-1"
                )
            },
            {0: DeltaToolCall(json_args='ARG-7f3a"}')},
            {1: DeltaToolCall(json_args='is"}')},
        ]
    return ["It is sunny", " in Paris."]


def _retried(turn: int) -> list[_Item]:
    if turn <= 2:
        args = json.dumps({"key": SECRET_ARG, "attempt": turn})
        return [
            {
                0: DeltaToolCall(
                    name="internal_lookup", json_args=args, tool_call_id=f"call-internal-{turn}"
                )
            }
        ]
    return ["Found it", " on the second try."]


def _reasoning(turn: int) -> list[_Item]:
    # One response: a thinking part (its signature arrives with the last delta), then text.
    return [
        {0: DeltaThinkingPart(content="The user said hello;")},
        {0: DeltaThinkingPart(content=" greet them back.", signature="sig-5e6f")},
        "Hi",
        " there.",
    ]


def _failing(turn: int) -> list[_Item]:
    if turn == 1:
        return [
            {
                0: DeltaToolCall(
                    name="fetch_report",
                    json_args='{"report_id": "Q3"}',
                    tool_call_id="call-report-1",
                )
            }
        ]
    return ["unreachable: the failing tool ends the run"]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        producer="pydantic-ai",
        name="text",
        description="One streamed text answer in four deltas.",
        contains=("TEXT_MESSAGE_*",),
        app=_served(_text),
        varying=_VARYING,
    ),
    Scenario(
        producer="pydantic-ai",
        name="parallel-tools",
        description=(
            "Two tool calls in one response with interleaved argument deltas: "
            f"internal_lookup (args carry {SECRET_ARG!r}, result {SECRET_RESULT!r}) and the "
            "public get_weather; both results, then a text answer."
        ),
        contains=(
            "TOOL_CALL_* x2 (parallel)",
            "internal_* tool",
            "empty parent TEXT_MESSAGE",
            "TEXT_MESSAGE_*",
        ),
        app=_served(_parallel),
        varying=_VARYING,
        notes=(
            "pydantic-ai ends a call (TOOL_CALL_END) as soon as the next call starts, then "
            "keeps sending TOOL_CALL_ARGS for the ended call: the stream breaks AG-UI's "
            "'args only while open' rule; both clients reject it.",
            "The tool calls' parentMessageId is an assistant TEXT_MESSAGE_START/END pair with "
            "no content, opened only to own the calls.",
        ),
    ),
    Scenario(
        producer="pydantic-ai",
        name="retried-tool",
        description=(
            "internal_lookup raises ModelRetry on its first attempt (retry text "
            f"{SECRET_RETRY!r}), the model calls it again and it returns {SECRET_RESULT!r}."
        ),
        contains=(
            "TOOL_CALL_* x2",
            "internal_* tool",
            "TOOL_CALL_RESULT of a ModelRetry",
            "REASONING_ENCRYPTED_VALUE on a tool-result message",
            "TEXT_MESSAGE_*",
        ),
        app=_served(_retried, refuse_first_attempt=True),
        varying=_VARYING,
        notes=(
            "The retry prompt is sent as an ordinary TOOL_CALL_RESULT; the retry itself is "
            "recorded in a REASONING_ENCRYPTED_VALUE (subtype 'message') whose entityId is the "
            "tool-result messageId.",
        ),
    ),
    Scenario(
        producer="pydantic-ai",
        name="reasoning",
        description="A thinking part with a signature, then a text answer, in one response.",
        contains=(
            "REASONING_START/MESSAGE_*/END",
            "REASONING_ENCRYPTED_VALUE (signature)",
            "TEXT_MESSAGE_*",
        ),
        app=_served(_reasoning),
        varying=_VARYING,
        notes=(
            "The thinking signature travels as REASONING_ENCRYPTED_VALUE (subtype 'message') "
            "with a JSON text value, not an opaque blob.",
        ),
    ),
    Scenario(
        producer="pydantic-ai",
        name="failing-tool",
        description="The public tool fetch_report raises RuntimeError; the run ends in RUN_ERROR.",
        contains=(
            "TOOL_CALL_*",
            "TOOL_CALL_RESULT of a failed tool",
            "REASONING_ENCRYPTED_VALUE (outcome failed)",
            "RUN_ERROR",
        ),
        app=_served(_failing),
        varying=_VARYING,
        notes=(
            "The exception's message ('report service unavailable for Q3') is sent to the client "
            "as RUN_ERROR.message.",
            "The synthetic TOOL_CALL_RESULT and its REASONING_ENCRYPTED_VALUE carry no timestamp "
            "while every other event does.",
        ),
    ),
)


def versions() -> dict[str, Any]:
    from importlib.metadata import version

    return {name: version(name) for name in PACKAGES}
