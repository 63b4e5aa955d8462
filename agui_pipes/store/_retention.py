"""Retention: how long runs are kept, which runs a sweep deletes, and when sweeps run.

Written once for every backend: ``memory:`` and ``sqlite:`` prune with
``doomed_runs`` in Python and keep exactly the same runs; Redis applies the
same counts and turns ``max_age`` into key expiry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._records import StoredRun

__all__ = ["Retention", "SweepSchedule", "doomed_runs"]


@dataclass(frozen=True)
class Retention:
    """How long runs are kept. ``None`` everywhere (the default) keeps everything.

    * ``max_age`` — seconds since a run's last write; older runs are deleted,
      ended or not (a run nobody wrote to for that long belongs to a process
      that died).
    * ``max_runs_per_thread`` / ``max_runs`` — the newest ended runs kept per
      thread / in the whole store; a live run is never deleted for a count.
    * ``interval`` — at most one sweep per this many seconds per store object.

    Sweeps run when a run is created (its first append), rate-limited by
    ``interval``, and whenever ``EventLog.prune()`` is awaited (a server can
    call it on a timer). Redis also sets key expiry from ``max_age``, so
    runs of a crashed fleet still go away.
    """

    max_age: float | None = None
    max_runs_per_thread: int | None = None
    max_runs: int | None = None
    interval: float = 60.0

    def __post_init__(self) -> None:
        for name in ("max_age", "max_runs_per_thread", "max_runs"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"Retention.{name} must be positive or None, got {value!r}")
        if not self.interval >= 0:
            raise ValueError(f"Retention.interval must be >= 0 seconds, got {self.interval!r}")

    @property
    def keeps_everything(self) -> bool:
        return self.max_age is None and self.max_runs_per_thread is None and self.max_runs is None


class SweepSchedule:
    """When a store sweeps on its own: at most once per ``Retention.interval``, per object."""

    def __init__(self) -> None:
        self._last = float("-inf")

    def due(self, retention: Retention, now: float) -> bool:
        """True at most once per ``retention.interval``: time to prune on this create."""
        if retention.keeps_everything or now - self._last < retention.interval:
            return False
        self._last = now
        return True


def doomed_runs(
    records: Sequence[StoredRun], retention: Retention, now: float
) -> list[tuple[str, str]]:
    """The runs (``(scope, run id)`` keys) ``retention`` deletes among ``records``
    (oldest first) at time ``now``.

    Shared by the backends that prune in Python, so ``memory:`` and
    ``sqlite:`` keep exactly the same runs.
    """
    doomed: set[tuple[str, str]] = set()
    if retention.max_age is not None:
        limit = now - retention.max_age
        doomed.update(r.key for r in records if r.updated < limit)
    # newest first; creation order, not timestamps, which tie within a clock tick
    ended = [r for r in reversed(records) if r.status.ended and r.key not in doomed]
    if retention.max_runs_per_thread is not None:
        seen: dict[str, int] = {}
        for r in ended:
            count = seen[r.thread_id] = seen.get(r.thread_id, 0) + 1
            if count > retention.max_runs_per_thread:
                doomed.add(r.key)
    if retention.max_runs is not None:
        kept = [r for r in ended if r.key not in doomed]
        doomed.update(r.key for r in kept[retention.max_runs :])
    return sorted(doomed)
