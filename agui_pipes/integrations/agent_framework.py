"""A Microsoft Agent Framework agent or workflow as a producer, through ``agent-framework-ag-ui``.

    from agui_pipes.integrations.agent_framework import agent_framework_producer
    from agui_pipes.server import build_app

    app = build_app(producer=agent_framework_producer(agent), store="sqlite:///runs.db")

Needs ``agent-framework-ag-ui`` (tested with 1.7.0 and agent-framework-core 1.23.0).
That release declares ``ag-ui-protocol<0.2`` (the 0.1 protocol package) while
agui_pipes needs 1.x: every name its adapter imports exists in 1.0 and the tests
pass with 1.0.0, so install it without its dependency check (docs/integrations.md).

``agent`` is what MAF's own ``add_agent_framework_fastapi_endpoint`` takes — an
agent (``SupportsAgentRun``), a ``Workflow``, or one already wrapped in
``AgentFrameworkAgent`` / ``AgentFrameworkWorkflow`` — and each run gets the
request the endpoint would build (``AGUIRequest``'s form of the input) with the
caller's scope as MAF's authorization scope: its sessions, snapshots and approval
state are kept per agui_pipes scope, as ``authorization_scope_resolver`` does.

What the stream gets repaired of (:class:`AgentFrameworkRepair`, applied here; put
it in the chain of a gateway in front of MAF's own server for the same stream):

* With two or more frontend tool calls in one turn, MAF replays them: a second
  ``TOOL_CALL_START`` for each call already started, a second ``TOOL_CALL_END``
  for each call already ended. The replays are dropped.
* A ``RUN_ERROR`` with no ``RUN_STARTED`` before it (MAF's endpoint answers a
  runner that fails before its first event so) gets the run's ``RUN_STARTED``
  first when the stage knows the run's ids (the producer does; in front of
  MAF's server, serve with ``repair=True``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    RunStartedEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from .._foundation.principal import Principal
from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer

__all__ = ["AgentFrameworkRepair", "agent_framework_producer", "producer_for"]
__dir__ = public_dir(__all__)

# agent-framework-ag-ui's request keys for the authorization scope (its _endpoint sets them
# from authorization_scope_resolver; pinned with the tested version).
_SCOPE_KEYS = ("__ag_ui_approval_scope", "__ag_ui_snapshot_scope")


class AgentFrameworkRepair(StreamTransformer):
    """MAF's AG-UI stream without replayed tool call starts/ends; a RUN_ERROR always started."""

    event_types = (
        EventType.RUN_STARTED,
        EventType.RUN_ERROR,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_END,
    )

    def __init__(self, thread_id: str | None = None, run_id: str | None = None) -> None:
        self._ids = (thread_id, run_id)
        self._started_run = False
        self._started: set[str] = set()
        self._ended: set[str] = set()

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, RunStartedEvent):
            self._started_run = True
            self._started.clear()
            self._ended.clear()
        elif isinstance(event, ToolCallStartEvent):
            if event.tool_call_id in self._started:
                return ()
            self._started.add(event.tool_call_id)
        elif isinstance(event, ToolCallEndEvent):
            if event.tool_call_id in self._ended:
                return ()
            self._ended.add(event.tool_call_id)
        elif isinstance(event, RunErrorEvent) and not self._started_run:
            thread_id, run_id = self._ids
            if thread_id is not None and run_id is not None:
                self._started_run = True
                return (RunStartedEvent(thread_id=thread_id, run_id=run_id), event)
        return (event,)


def agent_framework_producer(
    agent: Any, **runner_options: Any
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]]:
    """The producer serving ``agent`` (MAF agent, workflow, or its AG-UI wrapper).

    ``runner_options`` go to ``AgentFrameworkAgent`` when ``agent`` is a bare agent
    (``state_schema=``, ``predict_state_config=``, ``snapshot_store=``, ...).
    """
    from agent_framework import Workflow
    from agent_framework_ag_ui import AgentFrameworkAgent, AgentFrameworkWorkflow, AGUIRequest

    runner: Any
    if isinstance(agent, AgentFrameworkAgent | AgentFrameworkWorkflow):
        if runner_options:
            raise TypeError("options go to the AgentFrameworkAgent you built, not here")
        runner = agent
    elif isinstance(agent, Workflow):
        runner = AgentFrameworkWorkflow(workflow=agent, **runner_options)
    elif callable(getattr(agent, "run", None)):
        runner = AgentFrameworkAgent(agent=agent, **runner_options)
    else:
        raise TypeError(
            "agent_framework_producer() takes an Agent Framework agent or Workflow (or its "
            f"AgentFrameworkAgent / AgentFrameworkWorkflow), got {type(agent).__name__}"
        )

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        # The request MAF's endpoint hands its runner: AGUIRequest's dump of the body.
        body = run_input.model_dump(by_alias=True, exclude_none=True, mode="json")
        request = AGUIRequest.model_validate(body).model_dump(exclude_none=True)
        for key in _SCOPE_KEYS:
            request[key] = principal.scope
        repair = AgentFrameworkRepair(run_input.thread_id, run_input.run_id)
        stream = runner.run(request)
        try:
            async for event in stream:
                for repaired in repair.transform(event):
                    yield repaired
        finally:
            await stream.aclose()

    return produce


def producer_for(
    obj: object,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]] | None:
    """The registry's contract: the producer serving ``obj``, or None if it is not MAF's.

    An agent (``BaseAgent``, such as ``Agent``), a ``Workflow`` or one already
    wrapped in ``AgentFrameworkAgent`` / ``AgentFrameworkWorkflow``, with
    :func:`agent_framework_producer`'s defaults (the wrapper's own options).
    """
    from agent_framework import BaseAgent, Workflow
    from agent_framework_ag_ui import AgentFrameworkAgent, AgentFrameworkWorkflow

    kinds = (BaseAgent, Workflow, AgentFrameworkAgent, AgentFrameworkWorkflow)
    return agent_framework_producer(obj) if isinstance(obj, kinds) else None
