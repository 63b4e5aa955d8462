"""What the store knows about a run or a thread — ``RunStatus``, ``StoredRun``,
``ThreadRecord`` — and the checks on it.

Why the checks live beside the record: whether a run takes an append, can be
read, or can be resumed from a client's SSE id is decided by its record
alone, the same way in every backend and in the one ``follow`` loop; written
once here, a backend (or a plugin backend) cannot answer differently.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .._foundation.principal import DEFAULT_SCOPE
from ._errors import RunBroken, RunEnded, UnknownRun, WrongRun, WrongThread
from ._ids import parse_event_id

__all__ = [
    "RunStatus",
    "StoredRun",
    "ThreadRecord",
    "check_appendable",
    "check_readable",
    "resume_seq",
]


class RunStatus(str, enum.Enum):
    """Where a run's log stands. Only ``LIVE`` runs take appends."""

    LIVE = "live"
    FINISHED = "finished"
    ERROR = "error"
    CANCELLED = "cancelled"
    BROKEN = "broken"
    """A write failed: the log has a hole, so reads raise :class:`RunBroken`."""
    LOST = "lost"
    """The writing process stopped heartbeating (it died): the stored events are
    readable, and a follower raises :class:`RunLost` after them."""

    @property
    def ended(self) -> bool:
        return self is not RunStatus.LIVE


@dataclass(frozen=True)
class StoredRun:
    """One run as the store knows it.

    ``created`` / ``updated`` / ``ended`` are Unix times in seconds;
    ``updated`` is the last append or status change, which retention by age
    measures from (a run still being written is never "old"). ``scope`` is
    the tenant whose run it is: runs are keyed by (scope, run id), so two
    scopes may each hold a run of the same id.
    """

    thread_id: str
    run_id: str
    status: RunStatus
    created: float
    updated: float
    ended: float | None
    last_seq: int
    reason: str | None = None
    scope: str = DEFAULT_SCOPE

    @property
    def key(self) -> tuple[str, str]:
        """What the store keys the run by: (scope, run id)."""
        return self.scope, self.run_id


@dataclass(frozen=True)
class ThreadRecord:
    """One thread of a scope, as ``EventLog.threads`` lists it.

    ``created`` is when its first run was created (Unix time); ``cursor``
    is what to pass as ``before=`` to list the threads created before it.
    """

    thread_id: str
    created: float
    cursor: int


def check_appendable(record: StoredRun, thread_id: str) -> None:
    """Raise what an append to ``record`` under ``thread_id`` must raise, if anything."""
    if record.status is RunStatus.BROKEN:
        raise RunBroken(record.run_id, record.reason or "a write failed")
    if record.thread_id != thread_id:
        raise WrongThread(
            f"run {record.run_id!r} belongs to thread {record.thread_id!r}, not {thread_id!r}"
        )
    if record.status.ended:
        raise RunEnded(
            f"run {record.run_id!r} ended ({record.status.value}); its log takes no more events"
        )


def check_readable(record: StoredRun | None, run_id: str) -> StoredRun:
    """``record``, if the run can be read: :class:`UnknownRun` for none, :class:`RunBroken`."""
    if record is None:
        raise UnknownRun(run_id)
    if record.status is RunStatus.BROKEN:
        raise RunBroken(run_id, record.reason or "a write failed")
    return record


def resume_seq(record: StoredRun, last_event_id: str, epoch: str) -> int:
    """The seq after which a client holding SSE id ``last_event_id`` resumes the run.

    :class:`BadEventId` for an unparsable id; :class:`WrongRun` for an id of
    another run, of another store ``epoch``, or past the end of an ended run.
    """
    run_id = record.run_id
    parsed = parse_event_id(last_event_id)
    if parsed.epoch != epoch:
        raise WrongRun(
            f"event id {last_event_id!r} is from another store epoch ({parsed.epoch!r}, "
            f"this store's is {epoch!r}): the store was reset; start the run again"
        )
    if parsed.run_id != run_id:
        raise WrongRun(
            f"event id {last_event_id!r} belongs to run {parsed.run_id!r}, not {run_id!r}"
        )
    if record.status.ended and parsed.seq > record.last_seq:
        raise WrongRun(
            f"event id {last_event_id!r} is past the end of run {run_id!r} "
            f"(its last event is #{record.last_seq})"
        )
    return parsed.seq
