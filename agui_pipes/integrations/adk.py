"""A Google ADK agent as a producer, through ``ag-ui-adk``'s ``ADKAgent``.

    from google.adk.agents import LlmAgent
    from agui_pipes.integrations.adk import adk_producer
    from agui_pipes.server import build_app

    agent = LlmAgent(name="planner", model="gemini-2.5-flash", tools=[...])
    app = build_app(producer=adk_producer(agent), store="sqlite:///runs.db")

Needs ``ag-ui-adk`` (tested with 0.11.0, google-adk 2.13.0). What this module
changes against ag-ui-adk's own FastAPI endpoint (``add_adk_fastapi_endpoint``):

* **Who the ADK user is.** Given an ADK agent (not an ``ADKAgent``), the
  producer wraps it in an ``ADKAgent`` whose user is the caller's principal
  (``"<scope>:<subject>"``, the scope alone without a subject). ag-ui-adk's
  default makes the user ``thread_user_<threadId>``: anyone who knows a
  thread id shares its ADK session. Given a ready ``ADKAgent``, its own
  ``user_id`` / ``user_id_extractor`` apply.
* **Its own sessions.** An ``ADKAgent`` built without ``session_service=`` or
  ``session_manager=`` uses ag-ui-adk's one process-wide session manager:
  two agents serving the same app name share their threads' sessions. The
  producer gives the agent it wraps an ``InMemorySessionService`` of its own
  unless you pass one (pass a persistent one for sessions that outlive the
  process).
* **Scoped state from the client is dropped**, as the FastAPI endpoint does
  (ADK routes ``app:`` / ``user:`` keys to app- and user-wide state; a client
  must not write them).
* **A stop cancels the ADK run.** ``ADKAgent.run`` runs the agent in a
  background task feeding a queue; closing its stream leaves that task
  running (to the end of the model's turn, or ``execution_timeout_seconds``).
  The producer cancels the run's execution when its stream is closed.
* **Error texts stay in the log.** ag-ui-adk's RUN_ERROR carries the
  exception's text (``BACKGROUND_EXECUTION_ERROR``, ``EXECUTION_ERROR``); the
  producer keeps the code, sends a fixed text and logs the original on
  ``agui_pipes.integrations``.
* **Private session keys leave the state.** ADK's STATE_SNAPSHOT carries
  ``_ag_ui_thread_id``, ``_ag_ui_app_name``, ``_ag_ui_user_id`` (the ADK user
  id) and the adapter's other bookkeeping: :func:`private_state_filter` (a
  ``StateFilter`` denying them) is what ``adk_chain()`` returns; the producer
  does not filter by itself, so the chain is the one place (the same chain
  repairs ag-ui-adk's own server behind ``agui-pipes serve --upstream``).

``agui-pipes serve --agent module:agent`` serves an ADK agent (or an
``ADKAgent``) as ``adk_producer(agent)``, and a module attribute holding an
``adk_producer(agent, ...)`` with your options as it is; either way with
``adk_chain()`` first in the chain.

ADK runs ahead of the client: its background task queues every event, so
backpressure stops at ag-ui-adk's queue, not at the model. Like ADK itself,
the producer needs the server to run on asyncio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
from ag_ui.core import BaseEvent, RunAgentInput

from .._foundation.principal import Principal
from .._lazy import public_dir
from ..transformers.state_filter import StateFilter
from ._run_errors import without_error_text

__all__ = [
    "ADK_PRIVATE_STATE_KEYS",
    "ADKProducer",
    "adk_chain",
    "adk_producer",
    "private_state_filter",
    "producer_for",
]
__dir__ = public_dir(__all__)

ADK_PRIVATE_STATE_KEYS: tuple[str, ...] = (
    "_ag_ui_thread_id",
    "_ag_ui_app_name",
    "_ag_ui_user_id",
    "_ag_ui_context",
    "_ag_ui_invocation_id",
    "_ag_ui_pending_confirm_changes",
    "_ag_ui_processed_message_ids",
)
"""The session keys ag-ui-adk 0.11.0 keeps in ADK state for itself (session_manager.py)."""

_SCOPED_PREFIXES = ("app:", "user:")


def private_state_filter() -> StateFilter:
    """A ``StateFilter`` keeping ag-ui-adk's own session keys out of the client's state."""
    return StateFilter(deny=[f"/{key}" for key in ADK_PRIVATE_STATE_KEYS])


def adk_chain() -> StateFilter:
    """The stage repairing ag-ui-adk's stream: ``chain=adk_chain``, or ``adk_chain() | more``."""
    return private_state_filter()


def _user_of(principal: Principal) -> str:
    return (
        principal.scope if principal.subject is None else f"{principal.scope}:{principal.subject}"
    )


def _session_scoped(run_input: RunAgentInput) -> RunAgentInput:
    state = run_input.state
    if not isinstance(state, dict):
        return run_input
    kept = {
        key: value
        for key, value in state.items()
        if not (isinstance(key, str) and key.startswith(_SCOPED_PREFIXES))
    }
    if len(kept) == len(state):
        return run_input
    return run_input.model_copy(update={"state": kept})


def adk_producer(agent: Any, **adk_agent_options: Any) -> ADKProducer:
    """The producer serving ``agent``: an ADK agent (``BaseAgent``) or an ``ag_ui_adk.ADKAgent``.

    An ADK agent is wrapped in an ``ADKAgent(adk_agent=agent, **adk_agent_options)``
    whose user is the caller's principal; ``adk_agent_options`` are ADKAgent's
    (``app_name=``, ``session_service=``, ``emit_messages_snapshot=``, ...).
    """
    from ag_ui_adk import ADKAgent
    from google.adk.agents import BaseAgent

    runs: dict[str, Principal] = {}
    if isinstance(agent, ADKAgent):
        if adk_agent_options:
            raise TypeError(
                "adk_producer(): ADKAgent options go to ADKAgent(...) itself when you pass "
                f"one; got {sorted(adk_agent_options)}"
            )
        adapter = agent
    elif isinstance(agent, BaseAgent):
        for taken in ("adk_agent", "user_id", "user_id_extractor"):
            if taken in adk_agent_options:
                raise TypeError(
                    f"adk_producer() sets {taken}= itself (the ADK user is the caller's "
                    "principal); pass a ready ADKAgent to choose your own"
                )

        def user_id(run_input: RunAgentInput) -> str:
            principal = runs.get(run_input.run_id)
            if principal is None:  # a run this producer did not start (never: the key is ours)
                raise LookupError(f"no caller recorded for run {run_input.run_id!r}")
            return _user_of(principal)

        if (
            "session_service" not in adk_agent_options
            and "session_manager" not in adk_agent_options
        ):
            from google.adk.sessions import InMemorySessionService

            adk_agent_options["session_service"] = InMemorySessionService()
        adapter = ADKAgent(adk_agent=agent, user_id_extractor=user_id, **adk_agent_options)
    else:
        raise TypeError(
            "adk_producer() takes an ADK agent (google.adk.agents.BaseAgent) or an "
            f"ag_ui_adk.ADKAgent, got {type(agent).__name__}"
        )
    return ADKProducer(adapter, runs)


class ADKProducer:
    """What :func:`adk_producer` returns: ``producer(run_input, principal)`` over an ``ADKAgent``.

    A class of its own so that ``serve --agent`` knows one (a module attribute
    holding ``adk_producer(agent, app_name=...)`` is served as it is, with
    ``adk_chain()`` first in its chain).
    """

    __slots__ = ("_runs", "adapter")

    def __init__(self, adapter: Any, runs: dict[str, Principal]) -> None:
        self.adapter = adapter
        """The ``ag_ui_adk.ADKAgent`` each run streams."""
        self._runs = runs

    async def __call__(
        self, run_input: RunAgentInput, principal: Principal
    ) -> AsyncIterator[BaseEvent]:
        adapter, runs = self.adapter, self._runs
        run_input = _session_scoped(run_input)
        runs[run_input.run_id] = principal
        stream = adapter.run(run_input)
        execution: Any = None
        try:
            async for event in stream:
                if execution is None:
                    execution = _execution(adapter, run_input)
                yield without_error_text(event, "ADK", run_input.run_id)
        finally:
            if execution is None:
                execution = _execution(adapter, run_input)
            # Shielded: a stop closes this stream from a cancelled scope, where an
            # unshielded await would be cancelled before ADK's run is.
            with anyio.CancelScope(shield=True):
                try:
                    await stream.aclose()
                finally:
                    runs.pop(run_input.run_id, None)
                    if execution is not None and not execution.task.done():
                        await execution.cancel()


def producer_for(obj: object) -> ADKProducer | None:
    """The registry's contract: the producer serving ``obj``, or None if it is not ADK's.

    An ``ADKProducer`` is served as it is; an ADK agent or an ``ADKAgent`` gets
    :func:`adk_producer`'s defaults (the caller as the ADK user, sessions in
    memory, the agent's name as the app name).
    """
    if isinstance(obj, ADKProducer):
        return obj
    from ag_ui_adk import ADKAgent
    from google.adk.agents import BaseAgent

    return adk_producer(obj) if isinstance(obj, ADKAgent | BaseAgent) else None


def _execution(adapter: Any, run_input: RunAgentInput) -> Any:
    """The background execution ag-ui-adk started for this run, if it has one yet.

    ag-ui-adk keys its executions by (thread, ADK user, app) in
    ``_active_executions``; 0.11.0 has no public handle on them.
    """
    key: Sequence[str] = (
        run_input.thread_id,
        adapter._get_user_id(run_input),
        adapter._get_app_name(run_input),
    )
    return adapter._active_executions.get(tuple(key))
