"""Verify: the ordering verifier as a pipeline stage, with a policy for violations.

``Verify(profile="consumer", on_violation="raise", allow_truncated=False)``
checks every event that reaches it (put :class:`ExpandChunks` first: chunks
are verified in their expanded form). On a violation:

* ``"raise"`` — the :class:`~agui_pipes.VerificationError` (a
  ``ProtocolViolation``) propagates out of the chain;
* ``"run_error"`` — the offending event is replaced by a RUN_ERROR with code
  ``PROTOCOL_VIOLATION`` and the stream ends cleanly: everything after it is
  dropped, so downstream sees a well-formed, terminated run (what a server
  relaying a broken agent should send);
* ``"warn"`` — the violation is logged (``agui_pipes.verify`` logger) and
  recorded in ``violations``; the event passes unchanged.

At the end of the upstream a run still open is a ``truncated`` violation,
handled by the same policy (``run_error`` appends the RUN_ERROR);
``allow_truncated=True`` turns that check off. ``enabled=False`` makes the
stage a pass-through that keeps no state.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from ag_ui.core import BaseEvent, RunErrorEvent

from .._lazy import public_dir
from .._pipeline.transformer import Condition, StreamTransformer, Transform
from .._protocol.construct import construct
from .._stagekit.open_deltas import DeltaGate, open_item_deltas
from ..verify import Profile, VerificationError, Verifier

__all__ = ["OnViolation", "Verify"]
__dir__ = public_dir(__all__)

logger = logging.getLogger("agui_pipes.verify")
logger.addHandler(logging.NullHandler())

OnViolation = Literal["raise", "run_error", "warn"]

PROTOCOL_VIOLATION = "PROTOCOL_VIOLATION"


class Verify(StreamTransformer):
    """Check the stream against a :class:`~agui_pipes.Verifier` profile (see module doc)."""

    def __init__(
        self,
        profile: Profile = "consumer",
        on_violation: OnViolation = "raise",
        allow_truncated: bool = False,
        debug: bool = False,
        enabled: bool = True,
    ) -> None:
        if on_violation not in ("raise", "run_error", "warn"):
            raise ValueError(
                f"unknown on_violation policy {on_violation!r}; use 'raise' (stop with "
                "ProtocolViolation), 'run_error' (end the stream with RUN_ERROR) or 'warn'"
            )
        self._verifier = Verifier(profile, debug=debug)
        self._policy: OnViolation = on_violation
        self._allow_truncated = allow_truncated
        self._enabled = enabled
        self._stopped = False
        self._gate = DeltaGate(shut=True)
        """Shut exactly while ``route_key`` is True (the delta handlers read it)."""
        self.violations: list[VerificationError] = []
        """Every violation seen (all policies), in order."""
        if not enabled:
            self.transform = _pass  # type: ignore[method-assign]
            self.finish = _nothing  # type: ignore[method-assign]

    @property
    def verifier(self) -> Verifier:
        """The underlying state machine (for inspection)."""
        return self._verifier

    @property
    def on_violation(self) -> OnViolation:
        """The policy the stage was built with (a server reads it to merge checks)."""
        return self._policy

    @property
    def allow_truncated(self) -> bool:
        """Whether a run left open at the end of the stream is accepted."""
        return self._allow_truncated

    @property
    def enabled(self) -> bool:
        """False for the pass-through form (``enabled=False``)."""
        return self._enabled

    route_key: bool = True
    """Whether the verifier is between runs or the stage has stopped (no delta passes unseen)."""

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if self._stopped:
            return ()
        try:
            self._verifier.observe(event)
        except VerificationError as error:
            return self._violation(error)
        finally:
            self._check_closed()
        return (event,)

    def _check_closed(self) -> None:
        """Keep ``route_key`` naming the run state that ``passes`` answers from."""
        closed = self._verifier.between_runs or self._stopped
        if closed is not self.route_key:
            self.route_key = closed
            self._gate.shut = closed
            self.reroute()

    def passes(
        self, event_class: type[BaseEvent], fields: frozenset[str]
    ) -> tuple[Condition, ...] | None:
        # Mid-run, a delta of an open item, untagged or tagged by the item's
        # owner, is accepted without any state change (what ``verify_delta``
        # below does without calling the handler).
        if self.route_key:
            return None
        table = self._verifier.open_items(event_class)
        if table is None:
            return None
        item = "tool_call_id" if table.by_tool_call else "message_id"
        opened, owners = table.ids, table.owners
        if "subagent_run_id" not in fields:
            return (Condition.member(item, opened),)
        return (
            Condition.member(item, opened),
            Condition.maps_to(item, "subagent_run_id", owners),
        )

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        check = self._verifier.mid_run_check(event_class)
        if check is None:
            return self.transform
        transform = self.transform

        # ``transform`` with the verifier's dispatch resolved once per class. The
        # resolved check holds only mid-run; ``route_key`` says when it does not
        # (between runs, or stopped), and is kept current after every check.
        def verify(event: BaseEvent) -> Sequence[BaseEvent]:
            if self.route_key:
                return transform(event)
            try:
                check(event)
            except VerificationError as error:
                return self._violation(error)
            finally:
                self._check_closed()
            return (event,)

        table = self._verifier.open_items(event_class)
        if table is None:
            return verify
        # The deltas: one continuing an open item needs no handler call.
        return open_item_deltas(table, self._gate, verify)

    def finish(self) -> Sequence[BaseEvent]:
        if self._stopped:
            return ()
        try:
            self._verifier.finish(allow_truncated=self._allow_truncated)
        except VerificationError as error:
            return self._violation(error)
        return ()

    def _violation(self, error: VerificationError) -> Sequence[BaseEvent]:
        self.violations.append(error)
        if self._policy == "raise":
            raise error
        if self._policy == "warn":
            logger.warning("protocol violation (passed on): %s", error.message)
            return () if error.event is None else (error.event,)
        self._stopped = True
        if self._verifier.run_errored:
            return ()  # the run already ended in RUN_ERROR; a second one would be invalid
        return (construct(RunErrorEvent, {"message": error.message, "code": PROTOCOL_VIOLATION}),)


def _pass(event: BaseEvent) -> Sequence[BaseEvent]:
    return (event,)


def _nothing() -> Sequence[BaseEvent]:
    return ()
