"""The synchronous path every agent-emitted event takes: transform, verify, send.

Emit is synchronous on purpose: a handle's terminator (TEXT_MESSAGE_END,
STEP_FINISHED) runs in ``__exit__``, which cannot ``await``. So the whole
path — the transformer chain's ``transform``, the ordering verifier, and
``send_nowait`` into the run's memory stream — is plain function calls.

A failure on this path (a verifier rejection, a transformer error, a full
buffer, a vanished consumer) is *sticky*: it is remembered as the run's
failure and every later emit raises it again. An agent that catches the
error and carries on therefore cannot push a stream past an invalid event,
and the run ends in RUN_ERROR with the first failure whatever the agent
returns afterwards.

The pipeline also keeps the state *baseline* — the state a client holds
after applying every STATE_SNAPSHOT / STATE_DELTA that actually left — which
is what ``publish_state`` diffs against. Tracking it on the way out (after
the transformers) rather than on the way in is what keeps deltas correct when
a stage drops or rewrites a state event. The baseline is a
:class:`~agui_pipes._foundation.json_patch.JsonDocument` bounded by the run's ``limits``: a
state event that would take it past them (a snapshot too large, a delta
that would grow it too far) is refused *before* it leaves — the run fails
with PROTOCOL_VIOLATION, rule ``limit-exceeded``, as the producer profile
of ``agui-pipes verify`` would reject the stream — instead of sending a
state every bounded consumer refuses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Final

import anyio
from ag_ui.core import BaseEvent, StateDeltaEvent, StateSnapshotEvent

from .._foundation.errors import StreamRejected
from .._foundation.json_patch import JsonDocument, LimitExceeded, PatchError
from .._foundation.limits import Limits
from .._foundation.limits_scope import resolve_limits
from .._pipeline.transformer import StreamTransformer
from ._cancel import CancelToken
from ._errors import RunError
from ._pace import Pacer

__all__ = ["UNSET", "Pipeline", "limit_error"]

_log = logging.getLogger("agui_pipes.driver")

UNSET: Final[Any] = object()
"""Baseline marker: no state has left the pipeline yet (the next publish is a snapshot)."""

Transform = Callable[[BaseEvent], Iterable[BaseEvent]]
Observe = Callable[[BaseEvent], None]
"""A verifier's check: returns when the event is acceptable, raises ``RunError`` otherwise."""


class Pipeline:
    """One run's emission path. Not thread-safe; used from the run's event loop only."""

    __slots__ = (
        "_chain",
        "_document",
        "_own_state_doc",
        "_own_state_event",
        "_pacer",
        "_send",
        "_transform",
        "baseline",
        "buffer_size",
        "failure",
        "limits",
        "observe",
        "token",
    )

    def __init__(
        self,
        send: Callable[[BaseEvent], None],
        *,
        chain: StreamTransformer | None,
        observe: Observe | None,
        token: CancelToken,
        buffer_size: int | None,
        pacer: Pacer | None = None,
        limits: Limits | None = None,
    ) -> None:
        self._send = send
        self._pacer = pacer if pacer is not None else Pacer(1)
        self.limits = resolve_limits(limits)
        self._document: JsonDocument | None = None
        self._chain = chain
        self._transform: Transform | None = None if chain is None else chain.transform
        self.observe = observe
        self.token = token
        self.buffer_size = buffer_size
        self.failure: RunError | None = None
        self.baseline: Any = UNSET
        self._own_state_event: BaseEvent | None = None
        self._own_state_doc: Any = UNSET

    # -- the agent side ---------------------------------------------------------

    def push(self, event: BaseEvent) -> None:
        """Emit one event from the agent: raises ``RunError`` when it cannot go out."""
        if self.failure is not None:
            raise self.failure
        if self.token._cancelled:
            raise RunError.cancelled(self.token.reason)
        transform = self._transform
        if transform is None:
            self._deliver(event)
            return
        self._through(transform, event)

    def start(self, event: BaseEvent) -> None:
        """Emit RUN_STARTED: like ``push`` but even on a run cancelled before it began."""
        transform = self._transform
        if transform is None:
            self._deliver(event)
        else:
            self._through(transform, event)

    def tail(self, terminal: BaseEvent) -> list[BaseEvent]:
        """The transformers' output for the terminal event, then their ``finish()`` flush.

        Raises whatever the transformers raise; the caller owns the fallbacks.
        """
        chain = self._chain
        if chain is None:
            return [terminal]
        return [*chain.transform(terminal), *chain.finish()]

    def _through(self, transform: Transform, event: BaseEvent) -> None:
        try:
            outputs = transform(event)
        except StreamRejected as exc:
            raise self.fail(RunError.violation(str(exc))) from exc
        except Exception as exc:
            raise self.fail(RunError.agent(exc)) from exc
        for out in outputs:
            self._deliver(out)

    def push_state(self, event: StateSnapshotEvent | StateDeltaEvent, doc: Any) -> None:
        """Emit a state event made by ``publish_state``; ``doc`` is the full state it encodes.

        When this very event comes out of the transformers, the baseline
        becomes ``doc`` directly (no patch application needed).
        """
        self._own_state_event = event
        self._own_state_doc = doc
        try:
            self.push(event)
        finally:
            self._own_state_event = None
            self._own_state_doc = UNSET

    def fail(self, error: RunError) -> RunError:
        """Record ``error`` as the run's failure (the first one wins) and return it."""
        if self.failure is None:
            self.failure = error
        return error

    def _deliver(self, event: BaseEvent) -> None:
        observe = self.observe
        if observe is not None:
            try:
                observe(event)
            except RunError as error:
                raise self.fail(error) from None
        cls = event.__class__
        if cls is StateSnapshotEvent or cls is StateDeltaEvent:
            self._follow_state(event)
        try:
            self._send(event)
        except anyio.WouldBlock:
            raise self.fail(RunError.buffer_full(self.buffer_size or 0, event)) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise self.fail(RunError.disconnected()) from None
        self._pacer.sent += 1

    # -- the state baseline ---------------------------------------------------------

    def _follow_state(self, event: BaseEvent) -> None:
        """Move the baseline past ``event`` (before it is sent: a refusal keeps it in)."""
        try:
            if event is self._own_state_event:
                self._document = JsonDocument(self._own_state_doc, limits=self.limits, copy=False)
            elif isinstance(event, StateSnapshotEvent):
                self._document = JsonDocument(event.snapshot, limits=self.limits)
            elif isinstance(event, StateDeltaEvent):
                if self._document is None:
                    return  # the client holds no known state to patch; the next publish snapshots
                try:
                    self._document.patch(event.delta)
                except LimitExceeded:
                    raise
                except PatchError as exc:
                    # A client skips a patch that fails to apply and keeps its state;
                    # we cannot be sure it did, so the next publish sends a snapshot.
                    _log.warning("a STATE_DELTA that left the run does not apply: %s", exc)
                    self._document = None
                    self.baseline = UNSET
                    return
        except LimitExceeded as exc:
            raise self.fail(limit_error(exc, event)) from None
        if self._document is not None:
            self.baseline = self._document.value


def limit_error(exc: LimitExceeded, event: BaseEvent | None) -> RunError:
    """PROTOCOL_VIOLATION, rule ``limit-exceeded``: what the producer profile says of it."""
    from ..verify import Rule, VerificationError

    failure = VerificationError(Rule.LIMIT_EXCEEDED, str(exc), event)
    return RunError.violation(str(failure), verification=failure)
