"""The one place the producer-side ordering verifier plugs into the driver.

Every post-transform event goes through the ``Observe`` function built here;
a rejection becomes ``RunError`` with code PROTOCOL_VIOLATION carrying the
verifier's ``VerificationError`` (its ``rule``, ``event`` and ``detail``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
)

from ._errors import RunError
from ._pipeline import Observe

__all__ = ["producer_observer"]

_DELTA_CLASSES = (TextMessageContentEvent, ToolCallArgsEvent, ReasoningMessageContentEvent)


def producer_observer() -> Observe:
    """A fresh producer-profile verifier (one per run), as an ``Observe`` callable.

    Most of a run's events are deltas of an item that is open (a message's
    text, a tool call's arguments), and the verifier accepts such a delta
    without changing any state when it comes mid-run, untagged or tagged by
    the item's owner (``Verifier.open_items``). That check is made here
    against the verifier's own live tables, so the common event costs two
    lookups; every other event, and any delta that is not plainly
    acceptable, goes to ``Verifier.observe`` and gets its exact verdict.
    """
    from ..verify import VerificationError, Verifier

    verifier = Verifier(profile="producer")
    check = verifier.observe
    tables: dict[type[BaseEvent], tuple[str, Mapping[str, None], Mapping[str, str | None]]] = {}
    for cls in _DELTA_CLASSES:
        table = verifier.open_items(cls)
        assert table is not None, f"the verifier keeps no open-item table for {cls.__name__}"
        tables[cls] = (
            "tool_call_id" if table.by_tool_call else "message_id",
            table.ids,
            table.owners,
        )

    # The verifier's gate (before RUN_STARTED, after the run ended) changes only
    # inside ``check``, which only this function calls, so it is read after each
    # call instead of on every delta.
    gated = verifier.between_runs

    def observe(event: BaseEvent) -> None:
        nonlocal gated
        table = tables.get(type(event))
        if table is not None and not gated:
            field, opened, owners = table
            # .get: an event built with model_construct may lack a field, and then
            # the verifier's own handler is what says so.
            fields: dict[str, Any] = event.__dict__
            item: Any = fields.get(field)
            if item in opened:
                tag = fields.get("subagent_run_id")
                if tag is None or owners.get(item, tag) == tag:
                    return
        try:
            check(event)
        except VerificationError as failure:
            raise RunError.violation(str(failure), verification=failure) from None
        finally:
            gated = verifier.between_runs

    return observe
