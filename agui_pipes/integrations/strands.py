"""An AWS Strands agent as a producer, through ``ag-ui-strands``' ``StrandsAgent``.

    from strands import Agent
    from agui_pipes.integrations.strands import strands_producer
    from agui_pipes.server import build_app

    agent = Agent(model=model, tools=[...])
    app = build_app(producer=strands_producer(agent, name="planner"), store="sqlite:///runs.db")

Needs ``ag-ui-strands`` (tested with 1.0.2, strands-agents 1.62.0). What this
module changes against ag-ui-strands' own FastAPI endpoint
(``add_strands_fastapi_endpoint``):

* **Threads are the caller's.** ``StrandsAgent`` keeps one Strands ``Agent``
  (its conversation, its interrupts) per thread id, and a thread id alone: two
  callers in different scopes using the same thread id would share one
  conversation. The producer hands the adapter the thread as
  ``"<scope>/<threadId>"`` and gives the client its own thread id back, so
  each scope has its own threads, as in agui_pipes' store.
* **The per-thread cache is bounded.** The adapter keeps every thread's agent
  for the life of the process; given a Strands ``Agent``, the producer builds
  the ``StrandsAgent`` over a cache of the ``max_threads`` (default
  :data:`DEFAULT_MAX_THREADS`) most recently used threads. A thread that fell
  out is rebuilt from the history the client sends. A ready ``StrandsAgent``
  keeps its own cache (pass ``agents_by_thread=RecentThreads(n)`` to bound it).
* **Who asks.** ``invocation_state(run_input, principal)``, when given, makes
  the run's Strands invocation state (what tools and hooks see, never the
  model), as the endpoint's ``invocation_state_provider`` does from the request.
* **Error texts stay in the log.** ag-ui-strands' RUN_ERROR carries the
  exception's text (``STRANDS_FORCE_STOP``, ``STRANDS_ERROR``); the producer
  keeps the code, sends a fixed text and logs the original on
  ``agui_pipes.integrations``.
* **A stop closes the adapter's stream**, and with it the Strands run; the
  endpoint instead shields the run from a client that disconnects (running each
  step in a task of its own, which makes Strands' OpenTelemetry context log
  "Failed to detach context" on every run; one task here, no such errors).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from ag_ui.core import BaseEvent, RunAgentInput

from .._foundation.principal import Principal
from .._lazy import public_dir
from ._run_errors import without_error_text

__all__ = ["DEFAULT_MAX_THREADS", "RecentThreads", "producer_for", "strands_producer"]
__dir__ = public_dir(__all__)

DEFAULT_MAX_THREADS = 1024
"""How many threads' Strands agents a producer keeps (most recently used first)."""


class RecentThreads(OrderedDict[str, Any]):
    """A mapping of thread ids to Strands agents that keeps the ``limit`` most recently used."""

    def __init__(self, limit: int = DEFAULT_MAX_THREADS) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"RecentThreads: limit is a whole number >= 1, got {limit!r}")
        super().__init__()
        self.limit = limit

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


def _scoped_thread(principal: Principal, thread_id: str) -> str:
    return f"{principal.scope}/{thread_id}"


def strands_producer(
    agent: Any,
    *,
    name: str | None = None,
    max_threads: int = DEFAULT_MAX_THREADS,
    invocation_state: Callable[[RunAgentInput, Principal], dict[str, Any]] | None = None,
    **strands_agent_options: Any,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]]:
    """The producer serving ``agent``: a Strands ``Agent`` or an ``ag_ui_strands.StrandsAgent``.

    A Strands ``Agent`` is wrapped in ``StrandsAgent(agent, name=name,
    agents_by_thread=RecentThreads(max_threads), **strands_agent_options)``
    (``config=``, ``hooks=``, ...); ``name`` defaults to the agent's own.
    """
    from ag_ui_strands import StrandsAgent

    if isinstance(agent, StrandsAgent):
        if strands_agent_options or name is not None:
            raise TypeError(
                "strands_producer(): StrandsAgent options go to StrandsAgent(...) itself when "
                "you pass one"
            )
        adapter = agent
    elif callable(getattr(agent, "stream_async", None)):
        if "agents_by_thread" in strands_agent_options:
            raise TypeError("strands_producer() sets agents_by_thread= itself; use max_threads=")
        adapter = StrandsAgent(
            agent,
            name=name or getattr(agent, "name", None) or "agent",
            agents_by_thread=RecentThreads(max_threads),
            **strands_agent_options,
        )
    else:
        raise TypeError(
            "strands_producer() takes a Strands Agent (strands.Agent) or an "
            f"ag_ui_strands.StrandsAgent, got {type(agent).__name__}"
        )

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        thread_id = run_input.thread_id
        scoped = _scoped_thread(principal, thread_id)
        options: dict[str, Any] = {}
        if invocation_state is not None:
            options["invocation_state"] = invocation_state(run_input, principal)
        stream = adapter.run(run_input.model_copy(update={"thread_id": scoped}), **options)
        try:
            async for event in stream:
                if getattr(event, "thread_id", None) == scoped:
                    event = event.model_copy(update={"thread_id": thread_id})
                yield without_error_text(event, "Strands", run_input.run_id)
        finally:
            # Shielded: a stop closes this stream from a cancelled scope, where an
            # unshielded await would be cancelled before the Strands run is closed.
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    return produce


def producer_for(
    obj: object,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]] | None:
    """The registry's contract: the producer serving ``obj``, or None if it is not Strands'."""
    from ag_ui_strands import StrandsAgent
    from strands import Agent

    return strands_producer(obj) if isinstance(obj, Agent | StrandsAgent) else None
