"""An Agno ``Agent`` or ``Team`` as a producer, through Agno's own AGUI interface.

    from agui_pipes.integrations.agno import agno_producer
    from agui_pipes.server import build_app

    app = build_app(producer=agno_producer(agent), store="sqlite:///runs.db")

Needs ``agno`` (tested with 3.1.10; its AGUI interface needs ``ag-ui-protocol``,
which agui_pipes brings). Each run streams ``run_entity(entity, run_input,
user_id=principal.subject)`` — the function Agno's ``AGUI`` router serves — so the
caller's subject is the run's Agno user (Agno's route reads it from
``forwardedProps.user_id``; here the client cannot pick it). Closing the stream
(a stop, a client gone for good) closes Agno's run.

What the stream gets repaired of (:class:`AgnoRepair`, applied here; put it in the
chain of a gateway in front of Agno's own server for the same stream):

* Agno writes ``current_user_id``, ``current_session_id`` and ``current_run_id``
  into the session state it shares with the client, so the run's
  ``STATE_DELTA`` adds them and its last ``STATE_SNAPSHOT`` carries them: the
  client's state would hold server internals it never set and, sent back on the
  next run, they would be overwritten anyway. They are removed (a delta left
  with no operation is dropped).
* Every Agno event without an AG-UI counterpart (``RunStarted``,
  ``ModelRequestStarted``, its token counts, ...) becomes a ``RAW`` event with
  ``source: "agno"``: several per model call, naming agent ids and usage. They
  are dropped unless ``keep_raw=True``.

Agno reads only the *last* user message of ``messages`` (and trailing tool
results, as a resume of a paused run): the conversation before it is what the
entity's own ``db`` holds for the session (``threadId``). Give the entity a
``db`` for multi-turn threads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    RawEvent,
    RunAgentInput,
    StateDeltaEvent,
    StateSnapshotEvent,
)

from .._foundation.principal import Principal
from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer

__all__ = ["AGNO_RUNTIME_KEYS", "AgnoRepair", "agno_producer", "producer_for"]
__dir__ = public_dir(__all__)

AGNO_RUNTIME_KEYS = frozenset({"current_user_id", "current_session_id", "current_run_id"})
"""The keys Agno injects into a run's session state (agno.agent._init)."""


class AgnoRepair(StreamTransformer):
    """Agno's AG-UI stream without its RAW events and without Agno's keys in the state."""

    event_types = (EventType.RAW, EventType.STATE_SNAPSHOT, EventType.STATE_DELTA)

    def __init__(self, keep_raw: bool = False) -> None:
        self._keep_raw = keep_raw

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, RawEvent):
            return (event,) if self._keep_raw or event.source != "agno" else ()
        if isinstance(event, StateSnapshotEvent) and isinstance(event.snapshot, dict):
            if AGNO_RUNTIME_KEYS.isdisjoint(event.snapshot):
                return (event,)
            kept = {k: v for k, v in event.snapshot.items() if k not in AGNO_RUNTIME_KEYS}
            return (event.model_copy(update={"snapshot": kept}),)
        if isinstance(event, StateDeltaEvent):
            ops = [op for op in event.delta if not _touches_runtime_key(op)]
            if len(ops) == len(event.delta):
                return (event,)
            return (event.model_copy(update={"delta": ops}),) if ops else ()
        return (event,)


def _touches_runtime_key(op: Any) -> bool:
    # A JSON Patch operation on /current_run_id (or below it); "from" too, for move/copy.
    # ag_ui 1.0 parses the operations into models; a producer may also yield dicts.
    if not isinstance(op, dict):
        dump = getattr(op, "model_dump", None)
        if dump is None:
            return False
        op = dump(by_alias=True)
    for field in ("path", "from"):
        pointer = op.get(field)
        if isinstance(pointer, str) and pointer[1:].split("/", 1)[0] in AGNO_RUNTIME_KEYS:
            return pointer.startswith("/")
    return False


def agno_producer(
    entity: Any, *, keep_raw: bool = False
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]]:
    """The producer serving ``entity`` (an ``agno.agent.Agent`` or ``agno.team.Team``)."""
    from agno.os.interfaces.agui.router import run_entity

    if not callable(getattr(entity, "arun", None)):
        raise TypeError(f"agno_producer() takes an agno Agent or Team, got {type(entity).__name__}")

    async def produce(run_input: RunAgentInput, principal: Principal) -> AsyncIterator[BaseEvent]:
        repair = AgnoRepair(keep_raw=keep_raw)
        stream = run_entity(entity, run_input, user_id=principal.subject)
        try:
            async for event in stream:
                for repaired in repair.transform(event):
                    yield repaired
        finally:
            await stream.aclose()  # type: ignore[attr-defined]  # an async generator

    return produce


def producer_for(
    obj: object,
) -> Callable[[RunAgentInput, Principal], AsyncIterator[BaseEvent]] | None:
    """The registry's contract: the producer serving ``obj``, or None if it is not Agno's."""
    from agno.agent import Agent
    from agno.team import Team

    return agno_producer(obj) if isinstance(obj, Agent | Team) else None
