"""The routed handler for deltas of open items, shared by ``Verify`` and ``Repair``.

Most of a stream is deltas (TEXT_MESSAGE_CONTENT, TOOL_CALL_ARGS,
REASONING_MESSAGE_CONTENT) continuing an item that is open. Mid-run, the
verifier accepts such a delta without any state change when its id is open and
its ``subagent_run_id`` is absent or agrees with the item's recorded owner
(``Verifier.open_items``). A stage built on the verifier can therefore accept
it in its ``route`` handler without calling the verifier at all — the whole
per-event cost of both stages on most of a stream.

The handler is one closure over the verifier's live tables, the stage's
:class:`DeltaGate` and the stage's own handler for everything else
(``fallback``): no extra call is made for an accepted delta.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ag_ui.core import BaseEvent

from .._pipeline.transformer import Transform
from ..verify import OpenItems

__all__ = ["DeltaGate", "open_item_deltas"]


class DeltaGate:
    """What an open-item delta handler reads and counts, kept current by its stage.

    ``shut``: True while a delta must not be accepted unseen (between runs, the
    stage stopped or on its full path); the handler then calls ``fallback``.
    ``seen``: incremented for every delta the handler accepts; a stage that
    numbers its input events (``Repair``) counts the others into it too.
    """

    __slots__ = ("seen", "shut")

    def __init__(self, *, shut: bool = True, seen: int = 0) -> None:
        self.shut = shut
        self.seen = seen


def open_item_deltas(table: OpenItems, gate: DeltaGate, fallback: Transform) -> Transform:
    """A handler accepting a delta of an open item whose tag agrees, else calling ``fallback``.

    A missing owner record accepts any tag, as the verifier does.
    """
    opened, owners = table.ids, table.owners
    if table.by_tool_call:

        def continuing_call(event: Any) -> Iterable[BaseEvent]:
            call_id = event.tool_call_id
            if call_id in opened and not gate.shut:
                tag = event.subagent_run_id
                if tag is None or owners.get(call_id, tag) == tag:
                    gate.seen += 1
                    return (event,)
            return fallback(event)

        return continuing_call

    def continuing_message(event: Any) -> Iterable[BaseEvent]:
        message_id = event.message_id
        if message_id in opened and not gate.shut:
            tag = event.subagent_run_id
            if tag is None or owners.get(message_id, tag) == tag:
                gate.seen += 1
                return (event,)
        return fallback(event)

    return continuing_message
