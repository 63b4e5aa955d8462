"""A LangGraph graph as a producer, through ``ag-ui-langgraph``'s ``LangGraphAgent``.

    from ag_ui_langgraph import LangGraphAgent
    from agui_pipes.integrations.langgraph import langgraph_producer
    from agui_pipes.server import build_app

    agent = LangGraphAgent(name="planner", graph=graph)
    app = build_app(producer=langgraph_producer(agent), store="sqlite:///runs.db")

Needs ``ag-ui-langgraph`` (tested with 0.0.47, langgraph 1.2.24). A
``LangGraphAgent`` keeps the state of the run it serves on itself, so each run
gets its own ``agent.clone()`` (as ag-ui-langgraph's FastAPI endpoint does);
closing the stream closes the graph's run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput, StateSnapshotEvent
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .._foundation.principal import Principal
from .._lazy import public_dir

__all__ = ["langgraph_producer"]
__dir__ = public_dir(__all__)


def langgraph_producer(
    agent: Any,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]]:
    """The producer serving ``agent`` (an ``ag_ui_langgraph.LangGraphAgent``)."""
    if not callable(getattr(agent, "run", None)) or not callable(getattr(agent, "clone", None)):
        raise TypeError(
            f"langgraph_producer() takes an ag_ui_langgraph.LangGraphAgent, got "
            f"{type(agent).__name__}"
        )

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        stream = agent.clone().run(run_input)
        try:
            async for event in stream:
                yield _portable(event)
        finally:
            await stream.aclose()

    return produce


def _portable(event: BaseEvent) -> BaseEvent:
    """The event with a state snapshot of LangChain objects turned into the JSON they dump to.

    ag-ui-langgraph puts the graph's state on STATE_SNAPSHOT as it holds it: for
    a ``MessagesState`` graph that is LangChain message objects, which its own
    encoder serializes through pydantic but which are no JSON value to a chain
    or a store. They become what that encoder would have written (a copy per
    snapshot: snapshots come at step ends, not per token).
    """
    if isinstance(event, StateSnapshotEvent):
        try:
            snapshot = to_jsonable_python(event.snapshot)
        except PydanticSerializationError:
            return event  # not pydantic's either: the encoder names the value it refuses
        return event.model_copy(update={"snapshot": snapshot})
    return event
