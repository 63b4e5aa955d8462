"""A LangGraph agent served durable by agui-pipes, offline: its chat model is scripted.

From the repository's root (the import path is relative to it)::

    pip install -e '.[server,producers]'
    agui-pipes serve --agent examples.frameworks.langgraph_app:graph --store sqlite:///runs.db

``graph`` is a compiled LangGraph graph (LangChain's ``create_agent``) with one
tool; ``serve --agent`` recognises it and serves it through ag-ui-langgraph, in
the server's own process. Every run is recorded in ``runs.db``: a client that
drops resumes with ``GET /runs/{runId}``, ``GET /threads/{threadId}`` gives the
history. Swap ``ScriptedChatModel()`` for a real chat model (``init_chat_model``)
and nothing else changes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver


class ScriptedChatModel(BaseChatModel):
    """A chat model that needs no provider: it calls ``get_weather`` once, then answers.

    It streams like a provider does — text in pieces, a tool call's id and
    name first and its arguments after — and reads its turn from the
    conversation, so it answers the same way however often it is called.
    """

    answer: tuple[str, ...] = ("It is sunny", " in Lisbon", " today.")

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self  # the script knows its one tool

    def _chunks(self, messages: Sequence[BaseMessage]) -> list[AIMessageChunk]:
        if not messages or not isinstance(messages[-1], ToolMessage):
            call = {"name": "get_weather", "args": "", "id": "call-weather-1", "index": 0}
            args = {"name": None, "args": '{"city": "Lisbon"}', "id": None, "index": 0}
            return [
                AIMessageChunk(content="", id="ai-call-1", tool_call_chunks=[call]),
                AIMessageChunk(content="", id="ai-call-1", tool_call_chunks=[args]),
            ]
        return [AIMessageChunk(content=piece, id="ai-answer-1") for piece in self.answer]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        chunks = self._chunks(messages)
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
        for chunk in self._chunks(messages):
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # Streamed in the event loop (LangChain would run _stream in a thread): a stop
        # cancels the model where it awaits, as it would a provider's HTTP stream.
        for chunk in self._chunks(messages):
            generation = ChatGenerationChunk(message=chunk)
            if run_manager is not None:
                await run_manager.on_llm_new_token(chunk.text, chunk=generation)
            yield generation


@tool
async def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


graph = create_agent(
    ScriptedChatModel(), tools=[get_weather], checkpointer=InMemorySaver(), name="weather"
)
