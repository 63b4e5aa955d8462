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
from ._ids import generation_of, parse_event_id, shown_id

__all__ = [
    "RunStatus",
    "StoredRun",
    "ThreadRecord",
    "check_appendable",
    "check_readable",
    "past_the_end",
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

    @property
    def generation(self) -> str:
        """Which life of its run id this run is: in every SSE id of the run.

        A run id may be used again once retention deleted its run; the new
        run's generation differs, so the old run's ids are refused (409)
        instead of resuming inside the new one (``_ids.generation_of``).
        """
        return generation_of(self.created)


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
    another run, of another store ``epoch``, of another generation of the run
    id (a run deleted by retention whose id was used again), or past the end
    of an ended run. Messages quote at most 80 characters of the id.
    """
    run_id = record.run_id
    parsed = parse_event_id(last_event_id)
    shown = shown_id(last_event_id)
    if parsed.epoch != epoch:
        raise WrongRun(
            f"event id {shown} is from another store epoch ({shown_id(parsed.epoch)}, "
            f"this store's is {epoch!r}): the store was reset; start the run again"
        )
    if parsed.run_id != run_id:
        raise WrongRun(
            f"event id {shown} belongs to run {shown_id(parsed.run_id)}, not {shown_id(run_id)}"
        )
    if parsed.generation != record.generation:
        older = "carries no run generation (the older '<epoch>:<runId>:<seq>' form)"
        if parsed.generation:
            older = "is of an earlier run of that id, deleted by retention"
        raise WrongRun(
            f"event id {shown} {older}: it names no position in run {shown_id(run_id)} "
            "as stored now; read the run from its start (no Last-Event-ID)"
        )
    if record.status.ended and parsed.seq > record.last_seq:
        raise past_the_end(last_event_id, run_id, record.last_seq, live=False)
    return parsed.seq


def past_the_end(last_event_id: str, run_id: str, last: int, *, live: bool) -> WrongRun:
    """The 409 of an id past ``last``, the last event of a run (ended, or live and so far)."""
    what = "live run" if live else "run"
    return WrongRun(
        f"event id {shown_id(last_event_id)} is past the end of {what} {shown_id(run_id)} "
        f"(its last event is #{last}): no frame of the run carried it"
    )
