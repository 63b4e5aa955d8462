"""Claiming a run before it is served: one live run per thread, and idempotent retries.

A recorded run POST is claimed here before its response starts:

* a runId the scope already holds is *rejoined* when the request is the same
  (its digest, ``request_digest``, equals the one stored with the run): the
  client gets the run's stream from the start, as ``GET runs/{runId}`` gives
  it, instead of a second run; another body under that runId is 409
  ``run_exists``;
* the thread's lease is taken in the store (``EventLog.acquire_thread``), so
  one run per thread is live across every process sharing the store; while
  another run holds it the POST is 409 ``thread_busy`` naming that run
  (``concurrency="reject"``), or that run is stopped first, as ``POST
  runs/{runId}/stop`` stops it (``concurrency="supersede"``);
* the run is created by the store's compare-and-set (``create_run``): of
  several POSTs naming one runId at once, on any process, exactly one starts
  the agent; the others rejoin it (or get 409 for another body).

The served run renews the lease at its heartbeat's cadence and releases it at
its end (``_recording``); a lease whose owner died is free after the store's
``lease_ttl``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import anyio
from ag_ui.core import Message, ResumeEntry, RunAgentInput

from ..store import EventLog, RunStatus, StoreError, ThreadTaken
from ._http import BadRequest
from ._interrupt_gate import check_interrupts
from ._live_run import LiveRun
from ._options import Concurrency, Interrupts
from ._store_health import store_unavailable

__all__ = [
    "CONCURRENCY",
    "INTERRUPTS",
    "ClaimedInput",
    "Concurrency",
    "RunClaims",
    "request_digest",
]

CONCURRENCY: tuple[Concurrency, ...] = ("reject", "supersede")
INTERRUPTS: tuple[Interrupts, ...] = ("enforce", "cancel", "off")

SUPERSEDED = "superseded by a new run of the thread (concurrency='supersede')"
"""The reason recorded with the RUN_ERROR CANCELLED of a superseded run."""


def request_digest(run_input: RunAgentInput) -> str:
    """sha256 of the input's canonical JSON (sorted keys, no whitespace), in hex."""
    canonical = json.dumps(
        run_input.model_dump(mode="json", by_alias=True),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class ClaimedInput(NamedTuple):
    """What a claimed run was given: its messages and its answers, as the agent reads them.

    ``resume`` is the request's, with the cancellations ``interrupts="cancel"``
    added: what the agent (or the upstream) is actually sent.
    """

    messages: list[Message]
    resume: list[ResumeEntry]


class RunClaims:
    """The runs a server claimed and has not started serving yet (module doc)."""

    def __init__(
        self,
        store: Callable[[], Awaitable[EventLog]],
        live: dict[tuple[str, str], LiveRun],
        *,
        concurrency: Concurrency,
        stop_wait: float,
        logger: logging.Logger,
        interrupts: Interrupts = "enforce",
    ) -> None:
        if concurrency not in CONCURRENCY:
            raise ValueError(
                f"concurrency must be one of {', '.join(map(repr, CONCURRENCY))}, "
                f"got {concurrency!r}"
            )
        if interrupts not in INTERRUPTS:
            raise ValueError(
                f"interrupts must be one of {', '.join(map(repr, INTERRUPTS))}, got {interrupts!r}"
            )
        self._store = store
        self._live = live
        self.concurrency = concurrency
        self.interrupts = interrupts
        self._stop_wait = stop_wait
        self._log = logger
        self._claimed: dict[tuple[str, str], str] = {}
        self._inputs: dict[tuple[str, str], ClaimedInput] = {}

    async def claim(self, run_input: RunAgentInput, scope: str) -> bool:
        """Claim the run: False when this POST must start it, True when it must rejoin it.

        With ``interrupts="cancel"``, the open interrupts the run leaves
        unanswered are added to ``run_input.resume`` as ``cancelled`` answers (in
        place: the agent, the upstream and the recorded input see them; the
        request digest is the POSTed body's, so a retry still rejoins).

        Raises ``BadRequest``: 404 for another scope's thread, the interrupt
        contract's refusals (``_interrupt_gate``; unless ``interrupts="off"``),
        409 ``run_exists`` / ``thread_busy``, 503 when the store fails.
        """
        thread_id, run_id = run_input.thread_id, run_input.run_id
        digest = request_digest(run_input)
        try:
            store = await self._store()
            owner = await store.thread_scope(thread_id)
            if owner is not None and owner != scope:
                raise thread_not_found(thread_id)
            if self.interrupts != "off":
                # Before the run exists: a refused request writes nothing.
                cancel = self.interrupts == "cancel"
                answers = await check_interrupts(
                    store, run_input, scope, new_input="cancel" if cancel else "refuse"
                )
                if answers is not None and len(answers) > len(run_input.resume or ()):
                    run_input.resume = answers
            if await store.run(run_id, scope=scope) is not None:
                return await self._rejoins(store, run_id, digest, scope)
            await self._lease(store, thread_id, run_id, scope)
            if not await store.create_run(thread_id, run_id, digest=digest, scope=scope):
                return await self._rejoins(store, run_id, digest, scope)
        except ThreadTaken as exc:
            raise thread_not_found(thread_id) from exc
        except StoreError as exc:
            # Before the response starts: a 503 with retry-after, the detail in the log only.
            raise store_unavailable(exc, self._log, f"run {run_id}: not started") from exc
        self._claimed[scope, run_id] = thread_id
        self._inputs[scope, run_id] = ClaimedInput(
            list(run_input.messages), list(run_input.resume or ())
        )
        return False

    def take(self, scope: str, run_id: str) -> bool:
        """Whether the run was claimed here (and is now being served): it exists already."""
        return self._claimed.pop((scope, run_id), None) is not None

    def claimed_input(self, scope: str, run_id: str) -> ClaimedInput:
        """What the claimed run was given (once; nothing for a run not claimed)."""
        return self._inputs.pop((scope, run_id), None) or ClaimedInput([], [])

    async def unclaimed(self, scope: str, run_id: str) -> None:
        """End a claimed run whose serving never began (the client left first)."""
        self._inputs.pop((scope, run_id), None)
        thread_id = self._claimed.pop((scope, run_id), None)
        if thread_id is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                store = await self._store()
                await store.end_run(
                    run_id,
                    RunStatus.CANCELLED,
                    "the client left before the run started",
                    scope=scope,
                )
                await store.release_thread(thread_id, run_id, scope=scope)
            except StoreError as exc:
                self._log.warning("run %s: cannot end the unserved run: %s", run_id, exc)

    async def _rejoins(self, store: EventLog, run_id: str, digest: str, scope: str) -> bool:
        if await store.run_digest(run_id, scope=scope) == digest:
            return True
        raise BadRequest(
            409,
            "run_exists",
            f"run {run_id!r} is already in the event log with another request: a run id "
            f"names one run; start a new run with a new runId, or resume this one with GET "
            f"runs/{run_id}",
        )

    async def _lease(self, store: EventLog, thread_id: str, run_id: str, scope: str) -> None:
        """Take the thread's lease for the run, stopping its holder first if superseding."""
        holder = await store.acquire_thread(thread_id, run_id, scope=scope)
        if holder is None:
            return
        record = await store.run(holder, scope=scope)
        ending = record is not None and record.status.ended  # its lease is being released
        if self.concurrency == "reject" and not ending:
            raise _thread_busy(thread_id, holder)
        if not ending:
            await self._stop(store, holder, scope)
        deadline = time.monotonic() + self._stop_wait
        while holder is not None:
            if time.monotonic() >= deadline:
                raise _thread_busy(thread_id, holder)
            await anyio.sleep(0.05)
            holder = await store.acquire_thread(thread_id, run_id, scope=scope)

    async def _stop(self, store: EventLog, run_id: str, scope: str) -> None:
        """Stop the run holding the thread, as ``POST runs/{runId}/stop`` does, and wait."""
        self._log.info("run %s: %s", run_id, SUPERSEDED)
        live = self._live.get((scope, run_id))
        if live is not None:
            live.stop(SUPERSEDED)
            with anyio.move_on_after(self._stop_wait):
                await live.done.wait()
            return
        await store.request_stop(run_id, SUPERSEDED, scope=scope)
        await store.check_owner(run_id, scope=scope)


def _thread_busy(thread_id: str, holder: str) -> BadRequest:
    return BadRequest(
        409,
        "thread_busy",
        f"thread {thread_id!r} has a live run, {holder!r}: one run per thread at a time; "
        f"wait for it to end, stop it with POST runs/{holder}/stop, or rejoin it with GET "
        f"runs/{holder}",
        [{"runId": holder}],
    )


def thread_not_found(thread_id: str) -> BadRequest:
    """The 404 of a thread the scope does not hold (none, or another scope's)."""
    return BadRequest(404, "not_found", f"no thread {thread_id!r} in the event log")
