"""How an agent says its run ended: success, interrupt (waiting on a human) or cancelled.

The outcome is validated when it is built, not when the driver turns it into
RUN_FINISHED, so a malformed outcome fails at the line that made it — as an
``RunError`` with code PROTOCOL, which the driver reports on RUN_ERROR if the
agent lets it escape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ag_ui.core import (
    Interrupt,
    RunFinishedCancelledOutcome,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
)
from pydantic import ValidationError

from ._errors import RunError

__all__ = ["RunOutcome"]

OutcomeKind = Literal["success", "interrupt", "cancelled"]
WireOutcome = RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome


def _interrupt(item: Interrupt | Mapping[str, Any], index: int) -> Interrupt:
    if isinstance(item, Interrupt):
        return item
    if isinstance(item, Mapping):
        try:
            return Interrupt.model_validate(item)
        except ValidationError as exc:
            raise RunError.protocol(
                f"interrupt #{index} is not a valid Interrupt ({exc.error_count()} problems: "
                f"{exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}); an interrupt needs "
                "at least an 'id' and a 'reason'"
            ) from exc
    raise RunError.protocol(
        f"interrupt #{index} is a {type(item).__name__}; pass ag_ui.core.Interrupt(id=..., "
        "reason=...) or a mapping with 'id' and 'reason'"
    )


@dataclass(frozen=True)
class RunOutcome:
    """The value an agent returns. Build it with the class methods."""

    kind: OutcomeKind
    interrupts: tuple[Interrupt, ...] = ()
    result: Any = None
    pending_tool_call_ids: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind == "interrupt" and not self.interrupts:
            raise RunError.protocol(
                "an interrupt outcome needs at least one interrupt; return "
                "RunOutcome.success() if there is nothing to ask the client"
            )
        if self.kind != "interrupt" and self.interrupts:
            raise RunError.protocol(f"a {self.kind} outcome cannot carry interrupts")

    @classmethod
    def success(
        cls, result: Any = None, *, pending_tool_call_ids: Iterable[str] | None = None
    ) -> RunOutcome:
        """The run completed. ``result`` goes on RUN_FINISHED.result when given."""
        pending = None if pending_tool_call_ids is None else tuple(pending_tool_call_ids)
        return cls("success", result=result, pending_tool_call_ids=pending)

    @classmethod
    def interrupt(cls, interrupts: Iterable[Interrupt | Mapping[str, Any]]) -> RunOutcome:
        """Pause the run until the client answers ``interrupts`` (at least one).

        The next run on the thread carries the answers in ``input.resume``;
        read them with ``ctx.resume_for(interrupt_id)``.
        """
        if isinstance(interrupts, Interrupt | Mapping | str):
            raise RunError.protocol(
                "RunOutcome.interrupt takes a list of interrupts, e.g. "
                "RunOutcome.interrupt([Interrupt(id='approve', reason='tool_approval')])"
            )
        return cls(
            "interrupt", interrupts=tuple(_interrupt(i, n) for n, i in enumerate(interrupts))
        )

    @classmethod
    def cancelled(cls) -> RunOutcome:
        """The run stopped because it was asked to (RUN_FINISHED with a cancelled outcome)."""
        return cls("cancelled")

    def to_wire(self) -> WireOutcome | None:
        """The RUN_FINISHED ``outcome`` value (``None`` — absent — for a plain success)."""
        if self.kind == "interrupt":
            return RunFinishedInterruptOutcome(interrupts=list(self.interrupts))
        if self.kind == "cancelled":
            return RunFinishedCancelledOutcome()
        if self.pending_tool_call_ids is not None:
            return RunFinishedSuccessOutcome(pending_tool_call_ids=list(self.pending_tool_call_ids))
        return None
