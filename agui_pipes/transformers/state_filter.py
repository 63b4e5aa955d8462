"""StateFilter: send the client only the parts of the state it may see.

Agent frameworks publish their whole graph state: ``ag-ui-langgraph`` puts
the LangChain ``messages`` list — internal tool calls and their secret
results included — into every STATE_SNAPSHOT. This stage scopes state by
JSON Pointers: an ``allow`` list keeps only those subtrees (and the objects
and arrays on the way to them), a ``deny`` list removes subtrees, and with
both the deny list applies inside what the allow list keeps. A ``*`` segment
matches any key or array index (``/messages/*/content``).

The client must end up with exactly the pruned state, whatever mix of
snapshots and deltas carries it: ``fold(output).state ==
prune(fold(input).state)``. Snapshots are pruned whole. Deltas are
translated against the stage's one copy of the state as the input has it
(``_stagekit.scoped_document``): operations inside hidden parts are dropped, values
are pruned, ``copy`` / ``move`` out of hidden parts become an ``add`` of the
pruned value (or a ``remove``), array indices are mapped to the pruned
array. Where inserting or removing an array element changes *which* elements
show (a pattern names an index, such as ``/items/0``), no operation says that,
and the delta is replaced by a STATE_SNAPSHOT of the pruned state. A delta
that does not apply to the state is sent on empty (the client would skip it
too, and its values must not reach it), with a warning logged on
``agui_pipes.state_filter``.

The view carries across runs like the client's state does; a RUN_STARTED whose
input echoes ``state`` re-bases it (the echo is pruned too), and when that
state holds hidden parts, a STATE_SNAPSHOT of the pruned state follows the
RUN_STARTED, so the client's coordinates (array indices) are the stage's.
``rawEvent`` of every state event is removed: it typically carries the
framework's unfiltered state.

With ``activities=True`` the same pointers scope the content of activity
messages (ACTIVITY_SNAPSHOT / ACTIVITY_DELTA, and activity messages inside
MESSAGES_SNAPSHOT and the RUN_STARTED echo), one copy per activity; an
activity delta that cannot be translated becomes one ``replace`` of the whole
pruned content.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ag_ui.core as ag
from ag_ui.core import BaseEvent

from .._foundation.limits import DEFAULT_LIMITS, Limits
from .._lazy import public_dir
from .._protocol.construct import replace
from .._stagekit.dispatch import TableDispatch, handled_types
from .._stagekit.pointer_scope import PointerScope
from .._stagekit.scoped_document import ScopedDocument, replace_root

__all__ = ["StateFilter"]
__dir__ = public_dir(__all__)

logger = logging.getLogger("agui_pipes.state_filter")

_Handler = Callable[[Any], Sequence[BaseEvent]]


def _pointers(value: Iterable[str] | str | None, option: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise ValueError(
            f"StateFilter({option}=...): give a list of JSON Pointers, e.g. {option}=[{value!r}]"
        )
    return list(value)


class StateFilter(TableDispatch):
    """Keep only the allowed parts of the state (JSON Pointers, ``*`` for any key or index).

    ``StateFilter(deny=["/messages", "/config/api_key"])``,
    ``StateFilter(allow=["/todos", "/user/name"])``,
    ``StateFilter(allow=["/messages/*/content"], deny=["/messages/*/secret"], activities=True)``.
    """

    def __init__(
        self,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        activities: bool = False,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        if not isinstance(activities, bool):
            raise ValueError(f"StateFilter: activities must be true or false, got {activities!r}")
        if not isinstance(limits, Limits):
            raise ValueError(f"StateFilter: limits must be an agui_pipes.Limits, got {limits!r}")
        self._scope = PointerScope(
            _pointers(allow, "allow"), _pointers(deny, "deny"), "StateFilter"
        )
        self._limits = limits
        self._state = ScopedDocument(self._scope, limits, "state")
        self._activities: dict[str, ScopedDocument] | None = {} if activities else None
        handlers: dict[type[BaseEvent], _Handler] = {
            ag.StateSnapshotEvent: self._state_snapshot,
            ag.StateDeltaEvent: self._state_delta,
            ag.RunStartedEvent: self._run_started,
        }
        if activities:
            handlers[ag.ActivitySnapshotEvent] = self._activity_snapshot
            handlers[ag.ActivityDeltaEvent] = self._activity_delta
            handlers[ag.MessagesSnapshotEvent] = self._messages_snapshot
        self._handlers = handlers
        self.event_types = handled_types(handlers)

    # -- state -------------------------------------------------------------------

    def _state_snapshot(self, event: ag.StateSnapshotEvent) -> Sequence[BaseEvent]:
        snapshot = self._state.reset(event.snapshot)
        if snapshot is not event.snapshot:
            event = replace(event, "snapshot", snapshot)
        return (_no_raw(event),)

    def _state_delta(self, event: ag.StateDeltaEvent) -> Sequence[BaseEvent]:
        translated = self._state.apply(event.delta)
        if translated.resync:
            snapshot = ag.StateSnapshotEvent(
                snapshot=self._state.pruned(),
                timestamp=event.timestamp,
                metadata=event.metadata,
                subagent_run_id=event.subagent_run_id,
            )
            return (snapshot,)
        if translated.error is not None:
            _skipped("STATE_DELTA", translated.error)
        if not translated.unchanged:
            event = replace(event, "delta", translated.operations)
        return (_no_raw(event),)

    def _run_started(self, event: ag.RunStartedEvent) -> Sequence[BaseEvent]:
        echo = event.input
        if not isinstance(echo, ag.RunAgentInput):
            return (event,)
        update: dict[str, Any] = {}
        resync: BaseEvent | None = None
        if echo.state is not None:
            state = self._state.reset(echo.state)
            if state is not echo.state:
                update["state"] = state
                # the client holds the state it sent, hidden parts and all: give it the
                # stage's view, so later deltas' paths mean the same on both sides
                resync = ag.StateSnapshotEvent(snapshot=self._state.pruned())
        if self._activities is not None:
            messages, changed = self._activity_messages(echo.messages)
            if changed:
                update["messages"] = messages
        if not update:
            return (event,)
        started = event.model_copy(
            update={"input": echo.model_copy(update=update), "raw_event": None}
        )
        return (started,) if resync is None else (started, resync)

    # -- activities ----------------------------------------------------------------

    def _document(self, message_id: str) -> ScopedDocument:
        assert self._activities is not None
        document = ScopedDocument(self._scope, self._limits, f"content of activity {message_id!r}")
        self._activities[message_id] = document
        return document

    def _activity_snapshot(self, event: ag.ActivitySnapshotEvent) -> Sequence[BaseEvent]:
        assert self._activities is not None
        known = self._activities.get(event.message_id)
        if known is not None and event.replace is False:
            # the client keeps what it has; still, nothing hidden may travel
            content = self._scope.prune_root(event.content)
        else:
            content = self._document(event.message_id).reset(event.content)
        if content is not event.content:
            event = replace(event, "content", content)
        return (_no_raw(event),)

    def _activity_delta(self, event: ag.ActivityDeltaEvent) -> Sequence[BaseEvent]:
        assert self._activities is not None
        document = self._activities.get(event.message_id)
        if document is None:
            # content the stage never saw: it cannot tell what the patch reveals
            return (_no_raw(replace(event, "patch", [])),)
        translated = document.apply(event.patch)
        if translated.resync:
            # a root replace, not an ACTIVITY_SNAPSHOT: patches may have made the
            # content something a snapshot cannot carry (an array), and a snapshot
            # would also re-attribute the activity
            whole = replace_root(document.pruned())
            return (_no_raw(replace(event, "patch", [whole])),)
        if translated.error is not None:
            _skipped(f"ACTIVITY_DELTA of {event.message_id!r}", translated.error)
        if not translated.unchanged:
            event = replace(event, "patch", translated.operations)
        return (_no_raw(event),)

    def _activity_messages(self, messages: Sequence[Any]) -> tuple[list[Any], bool]:
        out: list[Any] = []
        changed = False
        for message in messages:
            if isinstance(message, ag.ActivityMessage):
                content = self._document(message.id).reset(message.content)
                if content is not message.content:
                    message = message.model_copy(update={"content": content})
                    changed = True
            out.append(message)
        return out, changed

    def _messages_snapshot(self, event: ag.MessagesSnapshotEvent) -> Sequence[BaseEvent]:
        messages, changed = self._activity_messages(event.messages)
        if changed:
            event = replace(event, "messages", messages)
        return (_no_raw(event),)


def _skipped(what: str, error: str) -> None:
    # the client would have warned about the original; it now gets an empty patch
    logger.warning("StateFilter: %s did not apply and was sent empty: %s", what, error)


def _no_raw(event: BaseEvent) -> BaseEvent:
    return event if event.raw_event is None else replace(event, "raw_event", None)
