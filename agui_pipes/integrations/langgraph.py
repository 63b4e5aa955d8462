"""A LangGraph graph as a producer, through ``ag-ui-langgraph``'s ``LangGraphAgent``.

    from agui_pipes.integrations.langgraph import langgraph_producer
    from agui_pipes.server import build_app

    app = build_app(producer=langgraph_producer(graph), store="sqlite:///runs.db")

Needs ``ag-ui-langgraph`` (tested with 0.0.47, langgraph 1.2.24). ``graph`` is a
compiled graph (served as ``LangGraphAgent(name=graph.name, graph=graph)``) or a
``LangGraphAgent`` you configured. A ``LangGraphAgent`` keeps the state of the
run it serves on itself, so each run gets its own ``agent.clone()`` (as
ag-ui-langgraph's FastAPI endpoint does).

The graph's run is cancelled when the stream is closed: LangGraph runs its nodes
in asyncio tasks of its own, which only a native cancellation of the task
iterating ``astream_events`` reaches (closing the generators, or a cancel scope
around them, leaves the node running until the process ends). So each run is
iterated in a task of its own, handing one event at a time over (the producer
stays paced by its reader), and that task is cancelled on close. LangGraph is
asyncio-only, and so is this producer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from ag_ui.core import BaseEvent, RunAgentInput

from .._foundation.principal import Principal
from .._lazy import public_dir

__all__ = ["langgraph_producer", "producer_for"]
__dir__ = public_dir(__all__)

_CLOSE_TIMEOUT = 5.0
"""Seconds a closed run's task may take to cancel the graph's nodes before the stream's
close stops waiting for it (the endpoint waits as long for a producer to close)."""


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
        handed: asyncio.Queue[tuple[BaseEvent | None, BaseException | None]] = asyncio.Queue(1)
        stream = agent.clone().run(run_input)

        async def pump() -> None:
            try:
                async for event in stream:
                    await handed.put((event, None))
            except Exception as exc:
                await handed.put((None, exc))
                return
            await handed.put((None, None))

        task = asyncio.create_task(pump(), name=f"agui_pipes langgraph run {run_input.run_id}")
        try:
            while True:
                event, failure = await handed.get()
                if failure is not None:
                    raise failure
                if event is None:
                    return
                yield event
        finally:
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([task], timeout=_CLOSE_TIMEOUT)

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
