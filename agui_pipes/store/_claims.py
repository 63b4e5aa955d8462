"""A thread's one live run and a run's one creation: leases and compare-and-set, across processes.

Why in the store: several processes share one log, so "a thread has one live run"
and "two POSTs with one runId run the agent once" can only be decided where they
all write. `ThreadClaims` is the part of `EventLog` that says how: a thread lease
(taken, renewed with the run's heartbeat, released at its end; free past its TTL) and
`create_run`, a compare-and-set that exactly one caller wins. A backend provides
`_create`, `_acquire`, `_renew` and `_release`.
"""

from __future__ import annotations

import abc

from .._foundation.principal import DEFAULT_SCOPE
from ._marks import RunMarks

__all__ = ["ThreadClaims"]


class ThreadClaims(RunMarks):
    """A thread's one live run and a run's one creation, across processes (module doc)."""

    lease_ttl: float = 15.0
    """Seconds a thread lease (``acquire_thread``) lasts unless renewed: a lease
    past it is free, so a thread whose writer died is free again after it.
    Servers renew it at the heartbeat's cadence (a fifth of ``owner_timeout``)."""

    async def create_run(
        self,
        thread_id: str,
        run_id: str,
        *,
        digest: str | None = None,
        scope: str = DEFAULT_SCOPE,
    ) -> bool:
        """Create the run (live, no events) unless the scope holds it: True if this call did.

        The compare-and-set a server starts a run with: of several calls
        naming one run id at once, on any process, exactly one gets True.
        ``digest`` (the request's, see ``run_digest``) is stored with the run
        in the same atomic write. Raises :class:`ThreadTaken` for a thread of
        another scope.
        """
        self._check_open()
        return await self._create(scope, thread_id, run_id, digest)

    async def run_digest(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> str | None:
        """The digest the run was created with (``create_run``), or None (none was given)."""
        self._check_open()
        return await self._get_mark(scope, run_id, "digest")

    async def acquire_thread(
        self,
        thread_id: str,
        run_id: str,
        ttl: float | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> str | None:
        """Take the thread's lease for ``run_id`` for ``ttl`` seconds (``lease_ttl``).

        Returns None when the lease is now ``run_id``'s (taken, or already
        its own), or the run id holding it. Atomic across processes sharing
        the store; a lease past its TTL is free.
        """
        self._check_open()
        return await self._acquire(scope, thread_id, run_id, self._lease_ms(ttl))

    async def renew_thread(
        self,
        thread_id: str,
        run_id: str,
        ttl: float | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> bool:
        """Extend ``run_id``'s lease of the thread by ``ttl``; False if it is not its lease."""
        self._check_open()
        return await self._renew(scope, thread_id, run_id, self._lease_ms(ttl))

    async def release_thread(
        self, thread_id: str, run_id: str, *, scope: str = DEFAULT_SCOPE
    ) -> None:
        """Free the thread's lease if ``run_id`` holds it (another run's is left alone)."""
        self._check_open()
        await self._release(scope, thread_id, run_id)

    def _lease_ms(self, ttl: float | None) -> int:
        seconds = self.lease_ttl if ttl is None else ttl
        if not seconds > 0:
            raise ValueError(f"a lease's ttl must be a positive number of seconds, got {ttl!r}")
        return max(1, int(seconds * 1000))

    @abc.abstractmethod
    async def _create(self, scope: str, thread_id: str, run_id: str, digest: str | None) -> bool:
        """``create_run``, atomically."""

    @abc.abstractmethod
    async def _acquire(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> str | None:
        """``acquire_thread``, atomically."""

    @abc.abstractmethod
    async def _renew(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> bool:
        """``renew_thread``, atomically (only the holder's lease)."""

    @abc.abstractmethod
    async def _release(self, scope: str, thread_id: str, run_id: str) -> None:
        """``release_thread``, atomically (only the holder's lease)."""
