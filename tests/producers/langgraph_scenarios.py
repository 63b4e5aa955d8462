"""ag-ui-langgraph scenarios: a scripted chat model in LangChain agents.

``ScriptedChatModel`` is a real ``BaseChatModel``: it streams
``AIMessageChunk`` values (text pieces, ``tool_call_chunks``) chosen by a
script from the conversation so far, and supports ``bind_tools`` (which
``langchain.agents.create_agent`` requires). The agents are served by
ag-ui-langgraph's own FastAPI endpoint (``add_langgraph_fastapi_endpoint``),
with the adapter's defaults except where a scenario says otherwise.

Tool calls are streamed the way OpenAI-style providers do it — the first chunk
carries the id and name with empty arguments, later chunks the argument text —
because ag-ui-langgraph drops the argument text of the chunk that opens a call
(see docs/testing.md, "Recording real producers"). Tools are ``async``: a sync
tool runs in a worker thread, whose callbacks could interleave differently
from one recording to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ag_ui_langgraph import (  # type: ignore[import-untyped]
    LangGraphAgent,
    add_langgraph_fastapi_endpoint,
)
from fastapi import FastAPI
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ._common import SECRET_ARG, SECRET_RESULT, Scenario

PACKAGES = (
    "ag-ui-langgraph",
    "langgraph",
    "langchain",
    "langchain-core",
    "ag-ui-protocol",
    "fastapi",
    "httpx",
)

_Script = Callable[[Sequence[BaseMessage]], list[AIMessageChunk]]

_VARYING = (
    "rawEvent / RAW.event: LangGraph run ids (uuid7), checkpoint namespaces and metadata",
    "ids LangChain mints: the tool-result message ids inside STATE_SNAPSHOT and "
    "MESSAGES_SNAPSHOT, the 'lc_run--<uuid>' id of a model's closing chunk",
)


class ScriptedChatModel(BaseChatModel):
    """A chat model whose streamed chunks come from ``script(conversation)``.

    The turn is read from the conversation (how many AI messages it already
    holds), so the same script answers the same way however often the graph
    calls the model — no hidden counter to reset between recordings.
    """

    script: _Script

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        # The script already knows which tools it calls; binding changes nothing.
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        chunks = self.script(messages)
        merged = chunks[0]
        for chunk in chunks[1:]:
            merged = merged + chunk
        message = AIMessage(content=merged.content, tool_calls=merged.tool_calls, id=merged.id)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self.script(messages):
            generation = ChatGenerationChunk(message=chunk)
            if run_manager is not None:
                run_manager.on_llm_new_token(chunk.text, chunk=generation)
            yield generation


def _turn(messages: Sequence[BaseMessage]) -> int:
    """1 for the first model call of this conversation, 2 for the next, ..."""
    since_user = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage):
            since_user += 1
    return since_user + 1


def _text_chunks(message_id: str, *pieces: str) -> list[AIMessageChunk]:
    return [AIMessageChunk(content=piece, id=message_id) for piece in pieces]


def _call_chunks(
    message_id: str, call_id: str, name: str, *arg_pieces: str
) -> list[AIMessageChunk]:
    """A streamed tool call: id and name first (empty args), then the argument text."""
    opener = AIMessageChunk(
        content="",
        id=message_id,
        tool_call_chunks=[{"name": name, "args": "", "id": call_id, "index": 0}],
    )
    return [opener] + [
        AIMessageChunk(
            content="",
            id=message_id,
            tool_call_chunks=[{"name": None, "args": piece, "id": None, "index": 0}],
        )
        for piece in arg_pieces
    ]


@tool
async def internal_lookup(key: str) -> str:
    """Look up an internal record (denied to end users by the gateway)."""
    return SECRET_RESULT


@tool
async def get_weather(city: str) -> str:
    """Public tool: the weather in a city."""
    return f"sunny in {city}"


def _served(graph: Any, **agent_options: Any) -> FastAPI:
    app = FastAPI()
    add_langgraph_fastapi_endpoint(
        app, LangGraphAgent(name="scripted", graph=graph, **agent_options), "/"
    )
    return app


# -- scenarios ---------------------------------------------------------------


def _text_app() -> FastAPI:
    def script(messages: Sequence[BaseMessage]) -> list[AIMessageChunk]:
        return _text_chunks("ai-text-1", "Hello", " from", " LangGraph", "!")

    model = ScriptedChatModel(script=script)
    return _served(create_agent(model, tools=[], checkpointer=InMemorySaver()))


def _tool_app() -> FastAPI:
    def script(messages: Sequence[BaseMessage]) -> list[AIMessageChunk]:
        turn = _turn(messages)
        if turn == 1:
            return _call_chunks(
                "ai-call-1", "call-internal-1", "internal_lookup", '{"key": "SECRET-', 'ARG-7f3a"}'
            )
        if turn == 2:
            return _call_chunks(
                "ai-call-2", "call-weather-1", "get_weather", '{"city": ', '"Paris"}'
            )
        return _text_chunks("ai-answer-1", "It is sunny", " in Paris.")

    model = ScriptedChatModel(script=script)
    graph = create_agent(model, tools=[internal_lookup, get_weather], checkpointer=InMemorySaver())
    return _served(graph)


def _subagent_app() -> FastAPI:
    """A deepagents-shaped delegation: a ``task`` tool (``subagent_type``) runs an agent."""

    def researcher_script(messages: Sequence[BaseMessage]) -> list[AIMessageChunk]:
        if _turn(messages) == 1:
            return _call_chunks(
                "sub-ai-1",
                "call-internal-sub-1",
                "internal_lookup",
                '{"key": "SECRET-',
                'ARG-7f3a"}',
            )
        return _text_chunks("sub-ai-2", "Notes:", " the record is fine.")

    researcher = create_agent(
        ScriptedChatModel(script=researcher_script), tools=[internal_lookup], name="researcher"
    )

    @tool
    async def task(description: str, subagent_type: str) -> str:
        """Delegate a task to a subagent."""
        result = await researcher.ainvoke({"messages": [HumanMessage(content=description)]})
        return str(result["messages"][-1].content)

    def script(messages: Sequence[BaseMessage]) -> list[AIMessageChunk]:
        if _turn(messages) == 1:
            return _call_chunks(
                "ai-task-1",
                "call-task-1",
                "task",
                '{"description": "check the record", ',
                '"subagent_type": "researcher"}',
            )
        return _text_chunks("ai-answer-1", "The researcher", " says it is fine.")

    graph = create_agent(
        ScriptedChatModel(script=script), tools=[task], checkpointer=InMemorySaver()
    )
    return _served(graph, subagent_visibility="attributed")


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        producer="langgraph",
        name="text",
        description="create_agent with no tools; one streamed text answer in four chunks.",
        contains=(
            "TEXT_MESSAGE_*",
            "STEP_*",
            "RAW (default emit_raw_events)",
            "STATE_SNAPSHOT with LangChain messages",
            "MESSAGES_SNAPSHOT",
        ),
        app=_text_app,
        varying=_VARYING,
    ),
    Scenario(
        producer="langgraph",
        name="tool-call",
        description=(
            f"internal_lookup (args carry {SECRET_ARG!r}, result {SECRET_RESULT!r}), then the "
            "public get_weather, then a text answer."
        ),
        contains=(
            "TOOL_CALL_* x2",
            "internal_* tool",
            "RAW with the tool's input and output",
            "STATE_SNAPSHOT with LangChain messages (tool calls and tool messages)",
            "MESSAGES_SNAPSHOT",
        ),
        app=_tool_app,
        varying=_VARYING,
        notes=(
            "TOOL_CALL_RESULT.messageId is the toolCallId, while the same tool message has a "
            "uuid id in STATE_SNAPSHOT and MESSAGES_SNAPSHOT.",
            "The denied tool's arguments and result also travel in STATE_SNAPSHOT "
            "(snapshot.messages, LangChain dump), MESSAGES_SNAPSHOT and RAW events.",
        ),
    ),
    Scenario(
        producer="langgraph",
        name="subagent",
        description=(
            "The parent calls a deepagents-shaped `task` tool (description, subagent_type); the "
            "tool runs a second create_agent ('researcher') that calls internal_lookup and "
            "streams its notes; the parent answers. subagent_visibility='attributed'."
        ),
        contains=(
            "SUBAGENT_STARTED/FINISHED",
            "events tagged with subagentRunId",
            "internal_* tool inside the subagent",
            "STEP_* inside the subagent",
            "STATE_SNAPSHOT with LangChain messages",
            "MESSAGES_SNAPSHOT",
            "RAW",
        ),
        app=_subagent_app,
        varying=(*_VARYING, "subagentRunId ('tools:<checkpoint task id>')"),
        notes=(
            "SUBAGENT_* events appear only with subagent_visibility='attributed' (default "
            "'inline' streams the subagent's events as the parent's own).",
        ),
    ),
)


def versions() -> dict[str, Any]:
    from importlib.metadata import version

    return {name: version(name) for name in PACKAGES}
