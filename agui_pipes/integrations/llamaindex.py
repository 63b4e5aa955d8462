"""A LlamaIndex workflow as a producer, through ``llama-index-protocols-ag-ui``.

    from llama_index.protocols.ag_ui.agent import AGUIChatWorkflow
    from agui_pipes.integrations.llamaindex import llamaindex_producer
    from agui_pipes.server import build_app

    workflow = AGUIChatWorkflow(llm=llm, backend_tools=[...], frontend_tools=[...])
    app = build_app(producer=llamaindex_producer(workflow), store="sqlite:///runs.db")

Needs ``llama-index-protocols-ag-ui`` (tested with 0.6.0, llama-index-core
0.14.25, llama-index-workflows 2.26.1). What this module does that
``get_ag_ui_workflow_router``'s FastAPI route does, and what it changes:

* **The run events are the producer's.** The workflow streams content only;
  the route adds ``RUN_STARTED`` and ``RUN_FINISHED`` around it, and so does
  the producer (``RUN_FINISHED`` once the workflow's result is in).
* **Only AG-UI events leave.** The workflow's stream also carries its own
  step events; like the route, the producer passes on the AG-UI ones only,
  as plain ``ag_ui.core`` events (the workflow's are subclasses of both).
* **Timestamps in milliseconds.** The adapter stamps events with whole
  *seconds* since the epoch; AG-UI's ``timestamp`` is milliseconds. The
  producer multiplies them (a value already past 10^11 is left alone).
* **Failures.** The route sends the exception's text as ``RUN_ERROR.message``
  and ``str(type(e))`` as its code; the producer lets the exception go, so
  the client gets ``AGENT_ERROR`` naming its type only (the log has the rest).
* **A stop cancels the workflow** (``handler.cancel_run()``, as the route
  does on a failure), whatever step it is in.

``workflow`` is a ``Workflow`` (each run gets its own context, so one object
serves every run) or a zero-argument function making one per run, sync or
async, like the route's ``workflow_factory``. The adapter streams text and
tool calls as ``*_CHUNK`` events (valid AG-UI; the client expands them);
put ``ExpandChunks`` in the chain to send START/CONTENT/END instead.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Event,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
)
from pydantic import TypeAdapter

from .._foundation.principal import Principal
from .._lazy import public_dir

__all__ = ["llamaindex_producer", "producer_for"]
__dir__ = public_dir(__all__)

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_MILLISECONDS_FROM = 10**11
"""A timestamp at or past this is milliseconds already (10^11 s is the year 5138)."""


def _plain(event: BaseEvent) -> BaseEvent:
    """The workflow's event as a plain ``ag_ui.core`` event, its timestamp in milliseconds."""
    wire = event.model_dump(mode="json", by_alias=True, exclude_none=True)
    stamp = wire.get("timestamp")
    if isinstance(stamp, int) and stamp < _MILLISECONDS_FROM:
        wire["timestamp"] = stamp * 1000
    plain: BaseEvent = _EVENT.validate_python(wire)
    return plain


def llamaindex_producer(
    workflow: Any,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]]:
    """The producer serving ``workflow`` (a LlamaIndex ``Workflow`` or a function making one)."""
    from llama_index.core.workflow import Workflow
    from llama_index.protocols.ag_ui.router import AG_UI_EVENTS

    if not isinstance(workflow, Workflow) and not callable(workflow):
        raise TypeError(
            "llamaindex_producer() takes a llama_index Workflow (such as AGUIChatWorkflow) or "
            f"a function returning one, got {type(workflow).__name__}"
        )

    async def make() -> Any:
        if isinstance(workflow, Workflow):
            return workflow
        made = workflow()
        if inspect.isawaitable(made):
            made = await made
        if not isinstance(made, Workflow):
            raise TypeError(
                f"the workflow factory returned {type(made).__name__}, not a llama_index Workflow"
            )
        return made

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        thread_id, run_id = run_input.thread_id, run_input.run_id
        handler = (await make()).run(input_data=run_input)
        finished = False
        try:
            yield RunStartedEvent(
                thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION
            )
            async for event in handler.stream_events():
                if isinstance(event, AG_UI_EVENTS):
                    yield _plain(event)
            await handler
            finished = True
        finally:
            if not finished and not handler.is_done():
                # Shielded: a stop closes this stream from a cancelled scope, where
                # an unshielded await would be cancelled before the workflow is.
                with anyio.CancelScope(shield=True):
                    await handler.cancel_run()
        yield RunFinishedEvent(thread_id=thread_id, run_id=run_id)

    return produce


def producer_for(
    obj: object,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]] | None:
    """The registry's contract: the producer serving ``obj`` (a LlamaIndex ``Workflow``), or
    None."""
    from llama_index.core.workflow import Workflow

    return llamaindex_producer(obj) if isinstance(obj, Workflow) else None
