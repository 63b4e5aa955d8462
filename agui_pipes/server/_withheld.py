"""A protocol violation found inside a chain, told to the client without quoting the stream.

Stages of a chain may hide entities (FilterToolCalls, SubagentVisibility, a
state filter). A violation raised *before* them — by chunk expansion, or by a
``verify`` stage early in the chain — is worded from events the client never
sees and may name what they hide. The servers therefore tell the client the
rule and the position only, and log the full message. A verification of what
the client actually receives (the gateway's own, last) quotes only that, so it
is sent in full.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ag_ui.core import BaseEvent

from ..transformers import Verify
from ..verify import ProtocolViolation, Rule
from ._failures import RunFailure

__all__ = ["ToldViolations", "WithheldViolation"]


class WithheldViolation(RunFailure):
    """A protocol violation found before the end of the chain, told without quoting the stream.

    The client gets code ``PROTOCOL_VIOLATION`` with the rule, the event's
    position and type and the stage that found it; ``violation`` is the
    original, whose full message is in the server's log.
    """

    def __init__(
        self,
        violation: ProtocolViolation,
        *,
        origin: str = "upstream event",
        log: str = "gateway log",
    ) -> None:
        rule = getattr(violation, "rule", None)
        what = (
            f"rule `{rule.value}` ({rule.describe()})"
            if isinstance(rule, Rule)
            else ("the AG-UI protocol")
        )
        event, index = violation.event, violation.index
        if event is not None and index is not None:
            where = f"{origin} #{index} ({event.type.value})"
        elif event is not None:
            where = f"a {event.type.value} event"
        else:
            where = "the end of the stream"
        stage = f", found by stage {violation.stage}" if violation.stage else ""
        super().__init__(
            "PROTOCOL_VIOLATION",
            f"the agent's events break {what} at {where}{stage}; the message is withheld "
            f"because it may quote what the pipeline hides (see the {log})",
        )
        self.violation = violation


class ToldViolations:
    """Decides what the client may read of a violation (see ``WithheldViolation``).

    ``final`` is the server's own verification of what the client receives, if
    any: its violations are safe to quote. ``origin`` and ``log`` word the
    withheld message for the server at hand. The full message is logged where
    the run's failure is (``log_failure``), once.
    """

    __slots__ = ("_final", "_log_name", "_origin")

    def __init__(self, final: Verify | None, *, origin: str, log: str) -> None:
        self._final = final
        self._origin = origin
        self._log_name = log

    def check(self, exc: BaseException) -> None:
        """Raise the withheld form of ``exc`` when it must not reach the client as it is."""
        if not isinstance(exc, ProtocolViolation) or exc.stage is None:
            return  # not a stage's verdict (e.g. malformed upstream bytes: UPSTREAM_MALFORMED)
        final = self._final
        if final is not None and any(v is exc for v in final.violations):
            return  # the server's own check of what the client receives: safe to quote
        raise WithheldViolation(exc, origin=self._origin, log=self._log_name) from exc

    async def guard(self, events: AsyncIterator[BaseEvent]) -> AsyncIterator[BaseEvent]:
        """``events`` as they are; a violation they raise is told as :meth:`check` says."""
        try:
            async for event in events:
                yield event
        except Exception as exc:
            self.check(exc)
            raise
