"""A pydantic-ai ``Agent`` as a producer, through pydantic-ai's own ``AGUIAdapter``.

    from agui_pipes.integrations.pydantic_ai import pydantic_ai_producer
    from agui_pipes.server import build_app

    app = build_app(producer=pydantic_ai_producer(agent), store="sqlite:///runs.db")

Needs ``pydantic-ai-slim[ag-ui]`` (tested with 2.68.0). Each run builds an
``AGUIAdapter`` for its ``RunAgentInput`` (the adapter converts the input's
messages, tools and state) and streams ``adapter.run_stream(...)``; closing
the stream (a stop, a client gone for good) closes pydantic-ai's run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput

from .._foundation.principal import Principal
from .._lazy import public_dir

__all__ = ["producer_for", "pydantic_ai_producer"]
__dir__ = public_dir(__all__)


def pydantic_ai_producer(
    agent: Any,
    *,
    deps: Callable[[RunAgentInput, Principal], Any] | None = None,
    **run_options: Any,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]]:
    """The producer serving ``agent`` (a pydantic-ai ``Agent``).

    ``deps(run_input, principal)``, when given, makes each run's dependencies
    (so a tool can see who asks); ``run_options`` go to ``run_stream``
    (``model=``, ``model_settings=``, ``usage_limits=``, ...).
    """
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    if "deps" in run_options:
        raise TypeError("pass deps= as a function of (run_input, principal), not a value")

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        adapter = AGUIAdapter(agent, run_input)
        options = dict(run_options)
        if deps is not None:
            options["deps"] = deps(run_input, principal)
        stream = adapter.run_stream(**options)
        try:
            async for event in stream:
                yield event
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    return produce


def producer_for(
    obj: object,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]] | None:
    """The registry's contract: the producer serving ``obj``, or None for another kind."""
    from pydantic_ai.agent import AbstractAgent

    return pydantic_ai_producer(obj) if isinstance(obj, AbstractAgent) else None
