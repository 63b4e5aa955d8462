"""A CrewAI ``Flow`` (or a ``@CrewBase`` crew) as a producer, through ``ag-ui-crewai``.

    from agui_pipes.integrations.crewai import crewai_producer
    from agui_pipes.server import build_app

    app = build_app(producer=crewai_producer(flow), store="sqlite:///runs.db")

Needs ``ag-ui-crewai`` (tested with 1.0.0, crewai 1.15.30, litellm 1.110.2). It runs
on asyncio only, as ag-ui-crewai does.

ag-ui-crewai has no event-level entry point: the translation of a flow's run into
AG-UI events lives inside the FastAPI route ``add_crewai_flow_fastapi_endpoint``
(``add_crewai_crew_fastapi_endpoint`` for a crew) registers, as a private generator
of encoded SSE. The producer registers that route on a router of its own that is
never served and calls the route's handler function for each run — the run's input
and a request holding only ``accept: text/event-stream`` — with no socket and no
second HTTP hop. The handler's streaming body (one SSE frame a chunk) is decoded
here: the one cost of a hop that in-process keeps, each event encoded by ag-ui-crewai
and decoded again. Everything the route does per run happens as it would behind
CrewAI's own server: the flow copied for the run, its inputs, a resume of a flow
paused for feedback, the flow timeout (``AGUI_CREWAI_FLOW_TIMEOUT_SECONDS``).

What the producer changes:

* **Threads are the caller's.** ag-ui-crewai keys what outlives a run by the
  thread id alone: the flow state's ``id`` (and so a ``@persist`` flow's stored
  state), a flow paused for human feedback (``Flow.from_pending(threadId)``), a
  conversational flow's session, a crew's memory namespace. Two callers in
  different scopes using one thread id would share them; the producer hands
  ag-ui-crewai ``"<scope>/<threadId>"`` and gives the client its own id back.
* **A stop cancels the flow's run.** Closing the body closes ag-ui-crewai's
  generator, whose teardown cancels crewai's kickoff task: an ``async`` flow method
  awaiting the model gets the ``CancelledError``. What CrewAI runs in a worker
  thread cannot be cancelled — a flow's synchronous methods, a crew's
  ``kickoff()`` (the crew endpoint's crew runs so), a conversational flow's turn:
  the run's events stop there (nothing more reaches the client, the store records
  the stop) and the thread runs to its end in the background.

What the stream gets repaired of (:class:`CrewAIRepair`, applied here; put it in
the chain of a gateway in front of CrewAI's own server for the same stream): a
flow's state is the client's state plus what ag-ui-crewai puts into every run's
inputs (:data:`CREWAI_INPUT_KEYS`: the conversation again in LiteLLM's shape, the
frontend tools twice, the context, the thread id), so each ``STATE_SNAPSHOT``
carries them back. The next run overwrites them from the request whatever the
client sends, so they are removed (a ``STATE_DELTA`` left with no operation is
dropped).

Passed on as they are: ag-ui-crewai's ``RUN_ERROR`` carries ``threadId`` and
``runId``, which AG-UI 1.0 does not describe (decoding drops them, here and in a
gateway alike); a run it refuses before starting it (a resume with nothing paused,
``AGUI_CREWAI_NO_PENDING_FEEDBACK``; a busy conversational thread) is one
``RUN_ERROR`` with no ``RUN_STARTED``, which 1.0 allows; its error texts name a code,
never the exception's text.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import anyio
from ag_ui.core import (
    BaseEvent,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
)

from .._foundation.principal import Principal
from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer
from .._protocol.construct import replace
from ..codecs import SSEDecoder, decode

__all__ = ["CREWAI_INPUT_KEYS", "CrewAIRepair", "crewai_producer", "producer_for"]
__dir__ = public_dir(__all__)

_log = logging.getLogger("agui_pipes.integrations")

CREWAI_INPUT_KEYS = frozenset({"id", "messages", "tools", "context", "copilotkit", "ag-ui"})
"""The state keys ag-ui-crewai sets on every run's inputs (``crewai_prepare_inputs``,
and ``id`` the thread id), overwriting the client's keys of those names."""

_ACCEPT = (b"accept", b"text/event-stream")


class CrewAIRepair(StreamTransformer):
    """ag-ui-crewai's stream without its run inputs (:data:`CREWAI_INPUT_KEYS`) in the state."""

    event_types = (EventType.STATE_SNAPSHOT, EventType.STATE_DELTA)

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, StateSnapshotEvent) and isinstance(event.snapshot, dict):
            if CREWAI_INPUT_KEYS.isdisjoint(event.snapshot):
                return (event,)
            kept = {k: v for k, v in event.snapshot.items() if k not in CREWAI_INPUT_KEYS}
            return (replace(event, "snapshot", kept),)
        if isinstance(event, StateDeltaEvent):
            ops = [op for op in event.delta if not _touches_input_key(op)]
            if len(ops) == len(event.delta):
                return (event,)
            return (replace(event, "delta", ops),) if ops else ()
        return (event,)


def _touches_input_key(op: Any) -> bool:
    # A JSON Patch operation on /messages (or below it); "from" too, for move/copy.
    if not isinstance(op, dict):
        dump = getattr(op, "model_dump", None)
        if dump is None:
            return False
        op = dump(by_alias=True)
    pointers = (op.get("path"), op.get("from"))
    return any(
        isinstance(pointer, str)
        and pointer[:1] == "/"
        and pointer[1:].split("/", 1)[0] in CREWAI_INPUT_KEYS
        for pointer in pointers
    )


def _scoped_thread(principal: Principal, thread_id: str) -> str:
    return f"{principal.scope}/{thread_id}"


def _route_handler(obj: Any, endpoint_options: dict[str, Any]) -> Callable[..., Any]:
    """The handler function of the route ag-ui-crewai registers for ``obj``."""
    from ag_ui_crewai import add_crewai_crew_fastapi_endpoint, add_crewai_flow_fastapi_endpoint
    from crewai.flow.flow import Flow
    from fastapi import APIRouter
    from fastapi.routing import APIRoute

    router = APIRouter()
    if isinstance(obj, Flow):
        add_crewai_flow_fastapi_endpoint(router, obj, "/", **endpoint_options)
    elif callable(getattr(obj, "crew", None)):
        add_crewai_crew_fastapi_endpoint(router, obj, "/", **endpoint_options)
    else:
        raise TypeError(
            "crewai_producer() takes a CrewAI Flow or a @CrewBase crew (an object with a "
            f"crew() factory), got {type(obj).__name__}"
        )
    (route,) = (route for route in router.routes if isinstance(route, APIRoute))
    return route.endpoint


def crewai_producer(
    flow: Any, **endpoint_options: Any
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]]:
    """The producer serving ``flow``: a CrewAI ``Flow``, or a ``@CrewBase`` crew instance.

    ``endpoint_options`` go to ag-ui-crewai's ``add_crewai_flow_fastapi_endpoint``
    (``emit_raw_events=``, ``emission_shape=``, ``conversational=``,
    ``emit_interrupt_outcome=``, ...) or, for a crew,
    ``add_crewai_crew_fastapi_endpoint``.
    """
    from starlette.requests import Request

    handler = _route_handler(flow, endpoint_options)

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        thread_id = run_input.thread_id
        scoped = _scoped_thread(principal, thread_id)
        # The only part of the request the handler reads is its accept header.
        request = Request({"type": "http", "method": "POST", "path": "/", "headers": [_ACCEPT]})
        response = await handler(run_input.model_copy(update={"thread_id": scoped}), request)
        body = response.body_iterator
        repair = CrewAIRepair()
        frames = SSEDecoder()
        index = 0
        try:
            async for chunk in body:
                data = chunk.encode() if isinstance(chunk, str) else chunk
                for payload in frames.feed_bytes(data):
                    decoded = decode(payload, index=index)
                    index += 1
                    for warning in decoded.warnings:
                        _log.debug("CrewAI event: %s", warning)
                    event = decoded.event
                    if event is None:
                        continue
                    for repaired in repair.transform(_unscoped(event, scoped, thread_id)):
                        yield repaired
            frames.close()
        finally:
            # Shielded: a stop closes this stream from a cancelled scope, where an
            # unshielded await would be cancelled before CrewAI's run is.
            with anyio.CancelScope(shield=True):
                await body.aclose()

    return produce


def _unscoped(event: BaseEvent, scoped: str, thread_id: str) -> BaseEvent:
    """``event`` naming the client's thread where ag-ui-crewai named the scoped one."""
    if isinstance(event, RunStartedEvent | RunFinishedEvent):
        return replace(event, "thread_id", thread_id) if event.thread_id == scoped else event
    if isinstance(event, RunErrorEvent) and scoped in event.message:
        return replace(event, "message", event.message.replace(scoped, thread_id))
    return event


def producer_for(
    obj: object,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]] | None:
    """The registry's contract: the producer serving ``obj``, or None if it is not CrewAI's."""
    from crewai.flow.flow import Flow

    return crewai_producer(obj) if isinstance(obj, Flow) else None
