"""What the ``Repair`` stage records: one ``RepairFix`` per change, collected in a report.

Kept apart from the stage so that code reading a report (the CLI, a server's
run log, a test) depends on these three small types only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .._foundation.errors import StreamRejected

__all__ = ["RepairFix", "RepairLimitExceeded", "RepairReport"]


@dataclass(frozen=True)
class RepairFix:
    """One change Repair made to the stream.

    ``rule`` is a stable kebab-case name (docs/repair.md lists them all),
    ``index`` the 0-based position of the *input* event that led to the fix
    (the count of input events for a fix made at the end of the stream),
    ``action`` what was done (``dropped``, ``synthesized``, ``rewritten``,
    ``reopened``) and ``detail`` one sentence saying what was wrong.
    """

    rule: str
    index: int
    action: str
    detail: str

    def as_dict(self) -> dict[str, object]:
        """The fix as JSON-ready data (the value of the ``agui_pipes.repair`` CUSTOM event)."""
        return {
            "rule": self.rule,
            "index": self.index,
            "action": self.action,
            "detail": self.detail,
        }


class RepairReport:
    """Every fix of one stream: the first ``limit`` in full, all of them counted.

    The cap keeps a report of a badly broken, endless stream bounded; the
    counts stay exact, so ``count`` and ``counts()`` still say how much was
    repaired after the list stopped growing.
    """

    __slots__ = ("_by_rule", "_limit", "count", "fixes")

    def __init__(self, limit: int = 1000) -> None:
        self._limit = limit
        self._by_rule: Counter[str] = Counter()
        self.fixes: list[RepairFix] = []
        """The first ``limit`` fixes, in stream order."""
        self.count = 0
        """How many fixes were made, including those past the cap."""

    @property
    def truncated(self) -> bool:
        """True when some fixes are counted but not listed (past the cap)."""
        return self.count > len(self.fixes)

    def add(self, fix: RepairFix) -> None:
        """Record ``fix`` (listed while under the cap, counted always)."""
        self.count += 1
        self._by_rule[fix.rule] += 1
        if len(self.fixes) < self._limit:
            self.fixes.append(fix)

    def counts(self) -> dict[str, int]:
        """How many fixes each rule made (all of them, past the cap too)."""
        return dict(self._by_rule)

    def as_dict(self) -> dict[str, object]:
        """The report as JSON-ready data (what ``agui-pipes repair`` prints)."""
        return {
            "count": self.count,
            "truncated": self.truncated,
            "counts": self.counts(),
            "fixes": [fix.as_dict() for fix in self.fixes],
        }

    def __repr__(self) -> str:
        return f"RepairReport(count={self.count}, counts={self.counts()!r})"


class RepairLimitExceeded(StreamRejected):
    """The stream needed more fixes than ``max_fixes`` allows: it is rejected instead.

    ``rule`` is ``"repair-limit"``; ``report`` is the report so far, so the
    caller can show what was already wrong.
    """

    rule = "repair-limit"

    def __init__(self, message: str, report: RepairReport) -> None:
        super().__init__(message)
        self.report = report
