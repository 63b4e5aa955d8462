"""StateDiff: send later state snapshots as JSON Patch deltas when that is smaller.

Agents that publish their whole state after every change (many frameworks
do) resend kilobytes to change a field. The run driver's rule is: the first
publish of a run is a STATE_SNAPSHOT, and afterwards a JSON Patch diff is
sent as STATE_DELTA only when it serialises strictly smaller than the full
state. This stage applies that rule to any stream.

The baseline is the state as the client will have it: every STATE_SNAPSHOT
and STATE_DELTA that left this stage is applied (a delta that does not apply
is skipped, as the client skips it), so a delta is always computed against
what the client holds. Each diff is checked by applying it to a copy of the
baseline and comparing with the snapshot as JSON (``true`` is not ``1``); a
diff that would not reproduce the snapshot exactly is never sent. The
baseline resets at every RUN_STARTED (from ``input.state`` when the echo
carries it, otherwise unknown, so the run's first snapshot passes as is).

The baseline is bounded by ``limits`` (None: the limits in effect — the
server's, else ``DEFAULT_LIMITS``), the same bounds a consumer applies: a
delta that would take it past them is skipped and a snapshot past them
passes through unchanged with the baseline kept — what such a consumer does
with them — each with a warning logged and recorded in ``warnings``. So a
hostile 1 KB delta of repeated ``copy`` operations costs this stage a
bounded walk, not gigabytes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Final

import ag_ui.core as ag
import jsonpatch
from ag_ui.core import BaseEvent, EventType
from pydantic import ValidationError

from .._foundation.json_patch import JsonDocument, LimitExceeded, PatchError, json_equal
from .._foundation.limits import Limits
from .._foundation.limits_scope import resolve_limits
from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer
from .._protocol.decode import DecodeWarning

__all__ = ["StateDiff"]
__dir__ = public_dir(__all__)

logger = logging.getLogger(__name__)

_UNKNOWN: Final = object()


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


class StateDiff(StreamTransformer):
    """Replace a STATE_SNAPSHOT after the first by a STATE_DELTA when the delta is smaller."""

    event_types = (EventType.RUN_STARTED, EventType.STATE_SNAPSHOT, EventType.STATE_DELTA)

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = resolve_limits(limits)
        self._state: JsonDocument | None = None
        self.warnings: list[DecodeWarning] = []
        """Structured copies of the warnings logged (state past the limits), in order."""

    def _warn(self, what: str, exc: LimitExceeded) -> None:
        message = f"StateDiff: {what}: {exc}"
        logger.warning("%s", message)
        self.warnings.append(DecodeWarning("state-limit-exceeded", message))

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        cls = type(event)
        if cls is ag.StateSnapshotEvent:
            return self._snapshot(event)  # type: ignore[arg-type]
        if cls is ag.StateDeltaEvent:
            if self._state is not None:
                try:
                    self._state.patch(event.delta)  # type: ignore[attr-defined]
                except LimitExceeded as exc:
                    self._warn("a STATE_DELTA was left out of the baseline", exc)
                except PatchError:
                    pass  # skipped by the client too; its state is unchanged
            return (event,)
        if cls is ag.RunStartedEvent:
            echo = event.input  # type: ignore[attr-defined]
            self._state = None
            if isinstance(echo, ag.RunAgentInput) and echo.state is not None:
                try:
                    self._state = JsonDocument(echo.state, limits=self.limits)
                except LimitExceeded as exc:
                    self._warn("the RUN_STARTED input state is not a baseline", exc)
        return (event,)

    def _snapshot(self, event: ag.StateSnapshotEvent) -> Sequence[BaseEvent]:
        new = event.snapshot
        document = self._state
        if document is None:
            try:
                self._state = JsonDocument(new, limits=self.limits)
            except LimitExceeded as exc:
                self._warn("a STATE_SNAPSHOT passed unchanged and is not a baseline", exc)
            return (event,)
        old = document.value
        try:
            document.reset(new)
        except LimitExceeded as exc:
            self._warn("a STATE_SNAPSHOT passed unchanged, the baseline is kept", exc)
            return (event,)
        delta = self._diff(old, new, self.limits)
        if delta is None:
            return (event,)
        fields = {
            "delta": delta,
            "subagentRunId": event.subagent_run_id,
            "timestamp": event.timestamp,
            "metadata": event.metadata,
            "rawEvent": event.raw_event,
        }
        replacement = ag.StateDeltaEvent.model_validate(
            {k: v for k, v in fields.items() if v is not None}
        )
        return (replacement,)

    @staticmethod
    def _diff(old: Any, new: Any, limits: Limits) -> list[dict[str, Any]] | None:
        """A patch from ``old`` to ``new`` that is strictly smaller and exact, else None."""
        if not isinstance(old, dict | list) or not isinstance(new, dict | list):
            return None
        try:
            operations: list[dict[str, Any]] = jsonpatch.make_patch(old, new).patch
        except Exception:  # jsonpatch raises assorted errors on exotic values
            return None
        if _size(operations) >= _size(new):
            return None
        try:
            parsed = ag.StateDeltaEvent.model_validate({"delta": operations}).delta
            # ``old`` is no longer the baseline (reset replaced it): patch it in place.
            check = JsonDocument(old, limits=limits, copy=False)
            check.patch(parsed)
            return operations if json_equal(check.value, new, limits) else None
        except (PatchError, ValidationError):
            return None
