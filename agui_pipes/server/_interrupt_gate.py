"""The thread's interrupt contract, checked on a run POST before anything runs.

With a store and ``interrupts="enforce"`` (the default) or ``"cancel"``, a run POST is checked
against its thread's log by a :class:`~agui_pipes.verify.ThreadVerifier`
before the run is claimed: the agent (or the upstream) is never called, and
nothing is written, for a request that breaks the contract. A refusal is the
verifier's code and status as the endpoint's other JSON errors, with the
interrupt ids in ``details`` (docs/interrupts.md).

What is read: the thread's run records, then the terminal entry of the last
ended run (one short read: the open interrupts are its own). Only a request
answering an id that is not open has the terminal entries of the last
``RECENT_RUNS`` ended runs read too, so that an answer to an interrupt raised
within them is told apart as ``interrupt_answered``; an answer to an older
one reads as ``unknown_interrupt``. The POSTed run itself is left out: a
retry of a run already recorded goes on to the claim, which rejoins it (a
replayed resume is idempotent) or refuses another body.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from ag_ui.core import BaseEvent, ResumeEntry, RunErrorEvent, RunFinishedEvent

from .._protocol.decode import DecodeWarning, as_object, decode_event
from ..verify import InterruptRefused, NewInput, ThreadVerifier
from ._http import BadRequest

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput

    from ..store import EventLog, StoredRun

__all__ = ["RECENT_RUNS", "check_interrupts", "with_resume"]

RECENT_RUNS: Final = 20
"""Ended runs of a thread whose terminal events a run POST's check reads."""


async def check_interrupts(
    store: EventLog, run_input: RunAgentInput, scope: str, *, new_input: NewInput = "refuse"
) -> list[ResumeEntry] | None:
    """The run's admitted answers; raises :class:`BadRequest` for a broken contract.

    None when the run id is already recorded (the claim decides: a retry
    rejoins, another body is 409). With ``new_input="cancel"`` the open
    interrupts the run leaves unanswered are in the answers as ``cancelled``.
    """
    runs = await store.thread_runs(run_input.thread_id, scope=scope)
    if any(record.run_id == run_input.run_id for record in runs):
        return None
    ended = [record for record in runs if record.status.ended]
    try:
        # The open interrupts are the last run's: one short read decides most requests.
        verifier = await _verifier(store, ended[-1:], scope, new_input)
        try:
            return verifier.check(run_input)
        except InterruptRefused as refused:
            if refused.code not in _STRAY or len(ended) < 2:
                raise
        # An answer to an id that is not open: the runs before tell "answered" (409)
        # from "unknown" (422).
        verifier = await _verifier(store, ended[-RECENT_RUNS:], scope, new_input)
        return verifier.check(run_input)
    except InterruptRefused as refused:
        raise BadRequest(
            refused.http_status,
            refused.code,
            refused.message,
            [{"interruptId": interrupt_id} for interrupt_id in refused.interrupt_ids],
        ) from None
    except ValueError as exc:  # a stored interrupt whose expiresAt does not parse
        raise BadRequest(409, "interrupt_unreadable", str(exc)) from None


_STRAY: Final = frozenset({"unknown_interrupt", "no_pending_interrupts"})


async def _verifier(
    store: EventLog, records: list[StoredRun], scope: str, new_input: NewInput
) -> ThreadVerifier:
    verifier = ThreadVerifier(new_input=new_input)
    for record in records:
        terminal = await _terminal(store, record.run_id, record.last_seq, scope)
        verifier.observe(record.run_id, terminal)
    return verifier


async def _terminal(store: EventLog, run_id: str, last_seq: int, scope: str) -> BaseEvent | None:
    """The run's last entry when it is a RUN_FINISHED or RUN_ERROR (None otherwise)."""
    if last_seq < 1:
        return None
    entries = await store.read(run_id, after=last_seq - 1, limit=1, scope=scope)
    if not entries:
        return None
    seq, data = entries[-1]
    warnings: list[DecodeWarning] = []
    event = decode_event(as_object(data, seq), seq, warnings)
    return event if isinstance(event, RunFinishedEvent | RunErrorEvent) else None


def with_resume(body: bytes, answers: list[ResumeEntry]) -> bytes:
    """The POSTed JSON ``body`` with its ``resume`` replaced by ``answers`` (the rest kept).

    For the gateway under ``interrupts="cancel"``: the upstream is sent the
    cancellations the check added, as the endpoint's agent sees them.
    """
    document = json.loads(body)
    document["resume"] = [
        answer.model_dump(mode="json", by_alias=True, exclude_none=True) for answer in answers
    ]
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
