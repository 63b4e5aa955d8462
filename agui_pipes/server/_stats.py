"""What one served run did, for the per-run INFO log line.

An operator reading the log wants to see, per run, where events were added
or dropped: so the chain is instrumented with pass-through counting stages
between its stages (sync stages fuse into one loop, so a counter costs one
method call per event), and the line reads like
``source 40 → ExpandChunks 52 → Verify 52 → Redact 52 → out 52``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ag_ui.core import BaseEvent, EventType

from .._pipeline.chain import TransformerChain
from .._pipeline.transformer import Condition, StreamTransformer

if TYPE_CHECKING:
    from ..transformers.repair import Repair

__all__ = ["RunStats", "instrument"]

_log = logging.getLogger("agui_pipes.server")


class _Count(StreamTransformer):
    """Pass-through stage that counts what flows past its position in the chain."""

    def __init__(self, counts: list[int], index: int) -> None:
        self._counts = counts
        self._index = index

    @property
    def name(self) -> str:
        return "count"

    def fresh(self) -> _Count:
        return _Count(self._counts, self._index)

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        self._counts[self._index] += 1
        return (event,)

    def passes(self, event_class: type[BaseEvent], fields: frozenset[str]) -> tuple[Condition, ...]:
        # A counter must not stop a relay's bypass: events forwarded
        # through it passed every position, so RunStats adds them to each
        # count (``forwarded``) instead of this stage counting them.
        return ()


class RunStats:
    """Counters and outcome of one served run; ``log()`` writes the INFO line.

    With ``producer_verdicts`` (the agent endpoint, whose driver verifies the
    agent and ends a run that breaks a rule with RUN_ERROR
    ``PROTOCOL_VIOLATION``) such a verdict is also one WARNING line, with the
    rule and the position: the agent's fault, told once and without a traceback.
    """

    def __init__(
        self,
        kind: str,
        run_id: str = "-",
        thread_id: str = "-",
        *,
        producer_verdicts: bool = False,
    ) -> None:
        self.kind = kind
        self.run_id = run_id
        self.thread_id = thread_id
        self.stage_names: list[str] = []
        self.counts: list[int] = [0]  # [source, after stage 1, ..., after stage n]
        self.written = 0
        self.forwarded = 0
        """Events a relay forwarded unseen: they passed every counted position."""
        self.outcome = "incomplete"
        self.detail = ""
        self.repair: Repair | None = None
        """The run's ``Repair`` stage when the server repairs (``repair=True``): its
        report's count goes into the line, so a producer that needs repairs shows."""
        self.violation: tuple[int, str] | None = None
        """Where the producer broke the protocol (the RUN_ERROR's position in the stream)
        and the verdict, when a RUN_ERROR ``PROTOCOL_VIOLATION`` came with its events."""
        self._producer_verdicts = producer_verdicts
        self._started = time.monotonic()
        self._logged = False

    def count_source(self, n: int = 1) -> None:
        self.counts[0] += n

    def note_output(self, event: BaseEvent) -> None:
        """Track the outcome from what reaches the client."""
        kind = event.type
        if kind is EventType.RUN_FINISHED:
            outcome = getattr(event, "outcome", None)
            outcome_type = getattr(outcome, "type", None)
            self.outcome = "finished" if outcome_type in (None, "success") else str(outcome_type)
            self.detail = ""
        elif kind is EventType.RUN_ERROR:
            self.outcome = "error"
            code = getattr(event, "code", None)
            message = getattr(event, "message", "")
            self.detail = f"{code}: {message}" if code else str(message)
            if self._producer_verdicts and code == "PROTOCOL_VIOLATION":
                # The driver put it where the event it refused would have been.
                self.violation = (self.written, str(message))
        elif kind is EventType.RUN_STARTED:
            self.outcome = "incomplete"

    def note_failure(self, error: BaseEvent) -> None:
        """Track the RUN_ERROR the server made of a failure (already logged where it was made)."""
        self.note_output(error)
        self.violation = None

    def stages_line(self) -> str:
        counts = [n + self.forwarded for n in self.counts]
        parts = [f"source {counts[0]}"]
        parts += [f"{name} {n}" for name, n in zip(self.stage_names, counts[1:], strict=True)]
        parts.append(f"out {self.written}")
        return " → ".join(parts)

    def repair_note(self) -> str:
        """``; repaired 2 (content-after-end 2)``, ``; repaired 0``, or nothing without repair."""
        if self.repair is None:
            return ""
        report = self.repair.report
        if not report.count:
            return "; repaired 0"
        by_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(report.counts().items()))
        return f"; repaired {report.count} ({by_rule})"

    def log(self, logger: logging.Logger = _log) -> None:
        if self._logged:
            return
        self._logged = True
        if self.violation is not None:
            position, verdict = self.violation
            logger.warning(
                "run %s: the agent broke the protocol at event #%d of the run's stream "
                "(counted from 0): %s",
                self.run_id,
                position,
                verdict,
            )
        duration = time.monotonic() - self._started
        detail = f" ({self.detail})" if self.detail else ""
        logger.info(
            "%s run %s thread %s: %s%s in %.3fs; events %s%s",
            self.kind,
            self.run_id,
            self.thread_id,
            self.outcome,
            detail,
            duration,
            self.stages_line(),
            self.repair_note(),
        )


def instrument(chain: TransformerChain, stats: RunStats) -> TransformerChain:
    """``chain`` with a counter in front and after each stage, recording into ``stats``."""
    stats.stage_names = [stage.name for stage in chain.stages]
    stats.counts = [0] * (len(chain.stages) + 1)
    staged: list[object] = [_Count(stats.counts, 0)]
    for index, stage in enumerate(chain.stages, start=1):
        staged += [stage, _Count(stats.counts, index)]
    return TransformerChain(staged)  # type: ignore[arg-type]
