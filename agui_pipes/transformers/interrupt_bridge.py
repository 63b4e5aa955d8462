"""InterruptBridge: a framework's interrupt dialect in front of, and behind, canonical AG-UI 1.0.

A 1.0 client pauses and resumes with the canonical contract: the run ends
``RUN_FINISHED{outcome: {type: "interrupt", interrupts: [...]}}`` and the next
run answers in ``resume[]``. Upstreams in the field signal and read it in a
dialect of their own; the bridge translates both halves of one upstream's:

* the **stream half** (``transform``) turns the dialect's signal into the
  canonical outcome on the run's RUN_FINISHED — ``langgraph``: the legacy
  ``CUSTOM on_interrupt`` events (passed on as they are); ``adk``: the tool
  calls the run left without a result (of the configured ``tools``, or any);
* the **request half** (``rewrite_request``, called by the gateway before the
  request goes upstream) turns the client's ``resume[]`` into what the
  upstream reads — ``langgraph``: ``forwardedProps.command.resume``; ``adk``:
  one tool-result message per answered call — and drops ``resume``.

A RUN_FINISHED that already carries an outcome passes unchanged (a canonical
upstream needs no bridge and is not translated twice). The request half is
stateless: everything it writes follows from the canonical answers (and, for
``adk``, the client's messages), because the canonical ids are the dialect's
own — LangGraph's interrupt id, the tool call's id. The translation rules:
``_stagekit/langgraph_interrupts.py``, ``_stagekit/adk_interrupts.py``;
guide: docs/interrupts.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    Interrupt,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer
from .._protocol.construct import replace
from .._stagekit import adk_interrupts, langgraph_interrupts

__all__ = ["Dialect", "InterruptBridge"]
__dir__ = public_dir(__all__)

Dialect = Literal["langgraph", "adk"]

_DIALECTS: tuple[str, ...] = ("langgraph", "adk")


class InterruptBridge(StreamTransformer):
    """Translate one upstream's interrupt dialect to the canonical contract and back.

    ``dialect`` is the upstream's: ``"langgraph"`` (ag-ui-langgraph's legacy
    ``on_interrupt`` / ``forwardedProps.command.resume``) or ``"adk"`` (stops
    on frontend tool calls, reads tool-result messages). For ``adk``:
    ``tools`` names the tools whose unanswered calls are interrupts (None:
    every call left without a result), ``reason`` is their interrupts'
    reason, ``response_schema`` their ``responseSchema`` and ``expires_in``
    (seconds from the run's end, by ``clock``) their ``expiresAt``.
    """

    def __init__(
        self,
        dialect: Dialect = "langgraph",
        *,
        tools: Collection[str] | None = None,
        reason: str = adk_interrupts.DEFAULT_REASON,
        response_schema: dict[str, Any] | None = None,
        expires_in: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if dialect not in _DIALECTS:
            raise ValueError(f"dialect must be 'langgraph' or 'adk', got {dialect!r}")
        if dialect == "langgraph" and (
            tools is not None or response_schema is not None or expires_in is not None
        ):
            raise ValueError(
                "tools, response_schema and expires_in describe pending tool calls: they "
                "apply to dialect 'adk' only (LangGraph's interrupt value carries its own)"
            )
        if isinstance(tools, str):
            raise TypeError(f"tools must be a list of tool names, got the string {tools!r}")
        if expires_in is not None and not expires_in > 0:
            raise ValueError(f"expires_in must be a positive number of seconds, got {expires_in}")
        self.dialect: Dialect = dialect
        self.tools = frozenset(tools) if tools is not None else None
        self.reason = reason
        self.response_schema = response_schema
        self.expires_in = expires_in
        self._clock = clock
        if dialect == "langgraph":
            self.event_types = (EventType.RUN_STARTED, EventType.CUSTOM, EventType.RUN_FINISHED)
        else:
            self.event_types = (
                EventType.RUN_STARTED,
                EventType.TOOL_CALL_START,
                EventType.TOOL_CALL_CHUNK,
                EventType.TOOL_CALL_RESULT,
                EventType.RUN_FINISHED,
            )
        self._thread_id = ""
        self._run_id = ""
        self._interrupts: list[Interrupt] = []  # langgraph: signalled this run
        self._calls: dict[str, str | None] = {}  # adk: unanswered call id -> subagent run

    # -- the stream half -------------------------------------------------------

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if isinstance(event, RunStartedEvent):
            self._thread_id, self._run_id = event.thread_id, event.run_id
            self._interrupts.clear()
            self._calls.clear()
        elif isinstance(event, CustomEvent):
            if event.name == langgraph_interrupts.ON_INTERRUPT:
                self._interrupts.append(
                    langgraph_interrupts.interrupt_from_custom(
                        event,
                        thread_id=self._thread_id,
                        run_id=self._run_id,
                        index=len(self._interrupts),
                    )
                )
        elif isinstance(event, ToolCallStartEvent):
            self._note_call(event.tool_call_id, event.tool_call_name, event.subagent_run_id)
        elif isinstance(event, ToolCallChunkEvent):
            if event.tool_call_id is not None and event.tool_call_name is not None:
                self._note_call(event.tool_call_id, event.tool_call_name, event.subagent_run_id)
        elif isinstance(event, ToolCallResultEvent):
            self._calls.pop(event.tool_call_id, None)
        elif isinstance(event, RunFinishedEvent):
            return (self._finished(event),)
        return (event,)

    def _note_call(self, call_id: str, name: str, subagent: str | None) -> None:
        if self.tools is None or name in self.tools:
            self._calls[call_id] = subagent

    def _finished(self, event: RunFinishedEvent) -> RunFinishedEvent:
        if self.dialect == "langgraph":
            interrupts = list(self._interrupts)
        else:
            expires_at = self._expires_at()
            interrupts = [
                adk_interrupts.interrupt_for_call(
                    call_id,
                    reason=self.reason,
                    response_schema=self.response_schema,
                    expires_at=expires_at,
                    subagent_run_id=subagent,
                )
                for call_id, subagent in self._calls.items()
            ]
        self._interrupts.clear()
        self._calls.clear()
        if not interrupts or event.outcome is not None:
            return event  # nothing pending, or the upstream already speaks 1.0
        return replace(
            event, "outcome", RunFinishedInterruptOutcome(type="interrupt", interrupts=interrupts)
        )

    def _expires_at(self) -> str | None:
        if self.expires_in is None:
            return None
        moment = datetime.fromtimestamp(self._clock() + self.expires_in, tz=timezone.utc)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z")

    # -- the request half ------------------------------------------------------

    def rewrite_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request with its ``resume[]`` in the upstream's dialect (module doc)."""
        entries = request.get("resume")
        if not entries:
            return request
        rewritten = {key: value for key, value in request.items() if key != "resume"}
        if self.dialect == "langgraph":
            props = dict(request.get("forwardedProps") or {})
            command = props.get("command")
            command = dict(command) if isinstance(command, dict) else {}
            command["resume"] = langgraph_interrupts.command_resume(entries)
            props["command"] = command
            rewritten["forwardedProps"] = props
        else:
            rewritten["messages"] = adk_interrupts.with_tool_results(
                request.get("messages") or [], entries
            )
        return rewritten
