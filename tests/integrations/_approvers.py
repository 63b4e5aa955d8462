"""Approval flows' agents on the real ADK and Strands adapters, over scripted models.

* **ADK** (ag-ui-adk), two ways to ask. A *frontend tool*: an ``LlmAgent``
  with ag-ui-adk's ``AGUIToolset``, so the client's tool ``approve_transfer``
  is the agent's; its model calls that tool first, and ADK stops on the call
  (a long-running client tool) and waits for its result. A *tool
  confirmation* (``confirm=True``): the server tool ``transfer`` is a
  ``FunctionTool(require_confirmation=True)``, ADK pauses on its
  ``adk_request_confirmation`` call, and ag-ui-adk's
  ``emit_interrupt_outcome=True`` reports that as the canonical outcome. Once
  a function response is in, the model says ``got <the response it received,
  as JSON>``.
* **Strands** (ag-ui-strands): an ``Agent`` whose server tool ``transfer``
  has ag-ui-strands' ``ToolBehavior(interrupt_on_call=True)``: the adapter's
  approval hook interrupts before the tool runs (the canonical outcome,
  Strands' own interrupt id) and reads ``resume[]``; the tool runs only for
  ``{"approved": true}``. Once a tool result is in, the model says ``got
  <the result's content it received, as JSON>``.

Each model keeps what it received in ``seen`` (in-process tests assert on it);
across processes the reply, made from what the model received, is the record.

For ``agui-pipes serve --agent`` in a process of its own, the module's
attributes ``served_adk`` and ``served_adk_confirming`` (producers) and
``served_strands`` (a ``StrandsAgent``, which the integrations' registry
serves) are built on first access from the environment:
``APPROVAL_ADK_SESSIONS`` (an ADK ``DatabaseSessionService`` URL) and
``APPROVAL_STRANDS_SESSIONS`` (a Strands ``FileSessionManager`` directory),
which the processes of one deployment share — the paused framework's state.

:class:`PastExpiry` (a chain stage, ``type: tests.integrations._approvers:PastExpiry``)
makes the interrupts of threads whose id starts with ``expired`` expire in the
past, so an expired interrupt needs no waiting: neither framework sets
``expiresAt`` itself, and the refusal is the server's, not the framework's.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from ag_ui.core import BaseEvent, EventType, RunFinishedEvent, RunStartedEvent

from agui_pipes import StreamTransformer

APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}
ADK_TOOL = {
    "name": "approve_transfer",
    "description": "Ask the user to approve a transfer.",
    "parameters": {"type": "object", "properties": {"amount": {"type": "number"}}},
}
"""The frontend tool the ADK flow's client declares (the approval the model asks for)."""
ADK_CHAIN = (
    "transformers:\n"
    "  - type: interrupt_bridge\n"
    "    dialect: adk\n"
    "    tools: [approve_transfer]\n"
    "    reason: tool_approval\n"
    f"    response_schema: {json.dumps(APPROVAL_SCHEMA)}\n"
)
PAST = "2000-01-01T00:00:00Z"


def _quiet_imports() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ADK's "[EXPERIMENTAL]" notices at import
        import ag_ui_adk  # noqa: F401
        import google.adk.agents  # noqa: F401


# -- ADK -----------------------------------------------------------------------


def adk_agent(model: Any = None, *, confirm: bool = False) -> Any:
    """The ADK agent asking ``approve_transfer`` (the client's tool) before it answers.

    ``confirm``: instead, its own tool ``transfer`` requires ADK's tool confirmation.
    """
    _quiet_imports()
    from ag_ui_adk import AGUIToolset
    from google.adk.agents import LlmAgent
    from google.adk.tools import FunctionTool

    def transfer(amount: int) -> str:
        """Send money to Bob."""
        return f"sent ${amount}"

    tools = [FunctionTool(transfer, require_confirmation=True) if confirm else AGUIToolset()]
    model = model or adk_model("transfer" if confirm else "approve_transfer")
    return LlmAgent(name="bank", model=model, tools=tools)


def adk_model(tool: str = "approve_transfer") -> Any:
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types
    from pydantic import Field

    class ScriptedLlm(BaseLlm):
        """Calls ``tool``; once a function response is in, says what it received."""

        model: str = "scripted"
        tool: str = "approve_transfer"
        seen: list[Any] = Field(default_factory=list)
        """Per call, the function responses the model was given."""
        texts: list[list[str]] = Field(default_factory=list)
        """Per call, the texts of the user's turns it was given."""

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            responses = [
                part.function_response.response
                for content in llm_request.contents
                for part in (content.parts or [])
                if part.function_response is not None
            ]
            self.seen.append(responses)
            self.texts.append(
                [
                    part.text
                    for content in llm_request.contents
                    if content.role == "user"
                    for part in (content.parts or [])
                    if part.text
                ]
            )
            if not responses:
                call = types.FunctionCall(id="call-1", name=self.tool, args={"amount": 5})
                part = types.Part(function_call=call)
            else:
                part = types.Part(text=f"got {json.dumps(responses[-1], sort_keys=True)}")
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    return ScriptedLlm(tool=tool)


def adk_bank(sessions: str | None = None, model: Any = None, *, confirm: bool = False) -> Any:
    """The ADK agent as agui_pipes' producer; ``sessions``: a database session service URL.

    ``confirm``: the tool confirmation flow, reported as the canonical outcome.
    """
    _quiet_imports()
    from agui_pipes.integrations.adk import adk_producer

    options: dict[str, Any] = {"emit_interrupt_outcome": True} if confirm else {}
    if sessions is not None:
        from google.adk.sessions import DatabaseSessionService

        options["session_service"] = DatabaseSessionService(sessions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return adk_producer(adk_agent(model, confirm=confirm), **options)


# -- Strands -------------------------------------------------------------------


def strands_model() -> Any:
    from strands.models.model import Model

    class ScriptedModel(Model):
        """Calls ``transfer``; once its result is in, says the result's content it received."""

        def __init__(self) -> None:
            self.config: dict[str, Any] = {}
            self.seen: list[list[Any]] = []  # per call, the tool results it was given
            self.texts: list[list[str]] = []  # per call, the texts of the user's turns

        def update_config(self, **model_config: Any) -> None:
            self.config.update(model_config)

        def get_config(self) -> Any:
            return self.config

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model streams text and tool calls only")

        async def stream(  # type: ignore[override]
            self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
        ) -> AsyncGenerator[dict[str, Any], None]:
            results = [b["toolResult"] for m in messages for b in m["content"] if "toolResult" in b]
            self.seen.append(results)
            self.texts.append(
                [
                    b["text"]
                    for m in messages
                    if m["role"] == "user"
                    for b in m["content"]
                    if "text" in b
                ]
            )
            yield {"messageStart": {"role": "assistant"}}
            if not results:
                start = {"toolUse": {"toolUseId": "call-1", "name": "transfer"}}
                yield {"contentBlockStart": {"start": start}}
                args = json.dumps({"amount": 5})
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": args}}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
                return
            said = f"got {json.dumps(results[-1]['content'], sort_keys=True)}"
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": said}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}

    return ScriptedModel()


def strands_bank(sessions: str | None = None, model: Any = None) -> Any:
    """The Strands ``StrandsAgent`` whose ``transfer`` asks for approval first.

    ``sessions``: a directory for per-thread ``FileSessionManager`` sessions
    (where Strands keeps the paused interrupt), named by a digest of the
    thread id (the producer's thread is ``<scope>/<threadId>``, and a Strands
    session id may not hold a ``/``).
    """
    from ag_ui_strands import StrandsAgent, StrandsAgentConfig, ToolBehavior
    from strands import Agent, tool

    @tool
    def transfer(amount: int) -> str:
        """Send money to Bob."""
        return f"sent ${amount}"

    config = StrandsAgentConfig(tool_behaviors={"transfer": ToolBehavior(interrupt_on_call=True)})
    if sessions is not None:
        from strands.session import FileSessionManager

        def session(run_input: Any) -> Any:
            digest = hashlib.sha256(run_input.thread_id.encode()).hexdigest()
            return FileSessionManager(session_id=digest, storage_dir=sessions)

        config.session_manager_provider = session
    agent = Agent(model=model or strands_model(), tools=[transfer], callback_handler=None)
    return StrandsAgent(agent, name="bank", config=config)


# -- the test's expiry ----------------------------------------------------------


class PastExpiry(StreamTransformer):
    """Interrupts of a thread whose id starts with ``expired`` expire in the past."""

    event_types = (EventType.RUN_STARTED, EventType.RUN_FINISHED)

    def __init__(self) -> None:
        self._thread = ""

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if isinstance(event, RunStartedEvent):
            self._thread = event.thread_id
        elif (
            isinstance(event, RunFinishedEvent)
            and self._thread.startswith("expired")
            and event.outcome is not None
            and event.outcome.type == "interrupt"
        ):
            interrupts = [
                i.model_copy(update={"expires_at": PAST}) for i in event.outcome.interrupts
            ]
            outcome = event.outcome.model_copy(update={"interrupts": interrupts})
            return (event.model_copy(update={"outcome": outcome}),)
        return (event,)


def __getattr__(name: str) -> Any:
    """The ``served_*`` agents for ``serve --agent``, from the environment."""
    if name == "served_adk":
        return adk_bank(os.environ["APPROVAL_ADK_SESSIONS"])
    if name == "served_adk_confirming":
        return adk_bank(os.environ["APPROVAL_ADK_SESSIONS"], confirm=True)
    if name == "served_strands":
        return strands_bank(os.environ["APPROVAL_STRANDS_SESSIONS"])
    raise AttributeError(name)
