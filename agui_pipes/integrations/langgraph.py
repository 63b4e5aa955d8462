"""A LangGraph graph as a producer, through ``ag-ui-langgraph``'s ``LangGraphAgent``.

    from agui_pipes.integrations.langgraph import langgraph_producer
    from agui_pipes.server import build_app

    app = build_app(producer=langgraph_producer(graph), store="sqlite:///runs.db")

Needs ``ag-ui-langgraph`` (tested with 0.0.47, langgraph 1.2.24). ``graph`` is a
compiled graph (served as ``LangGraphAgent(name=graph.name, graph=graph)``) or a
``LangGraphAgent`` you configured. A ``LangGraphAgent`` keeps the state of the
run it serves on itself, so each run gets its own ``agent.clone()`` (as
ag-ui-langgraph's FastAPI endpoint does); closing the stream closes the
graph's run (its ``astream_events``, which cancels the node running).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput

from .._foundation.principal import Principal
from .._lazy import public_dir

__all__ = ["langgraph_producer", "producer_for"]
__dir__ = public_dir(__all__)


def langgraph_producer(
    graph: Any,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]]:
    """The producer serving ``graph`` (a compiled LangGraph graph or a ``LangGraphAgent``)."""
    agent = _agent_of(graph)
    if agent is None:
        raise TypeError(
            f"langgraph_producer() takes a compiled LangGraph graph or an "
            f"ag_ui_langgraph.LangGraphAgent, got {type(graph).__name__}"
        )

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        stream = agent.clone().run(run_input)
        try:
            async for event in stream:
                yield event
        finally:
            await stream.aclose()

    return produce


def producer_for(
    obj: object,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]] | None:
    """The registry's contract: the producer serving ``obj``, or None if it is not LangGraph's."""
    return None if _agent_of(obj) is None else langgraph_producer(obj)


def _agent_of(obj: object) -> Any:
    from ag_ui_langgraph import LangGraphAgent  # type: ignore[import-untyped]
    from langgraph.graph.state import CompiledStateGraph

    if isinstance(obj, LangGraphAgent):
        return obj
    if isinstance(obj, CompiledStateGraph):
        return LangGraphAgent(name=obj.get_name() or "agent", graph=obj)
    return None
