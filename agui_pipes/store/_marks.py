"""Signals between processes sharing one event log: small marks kept per run in the store.

Why marks in the store: several processes share one log, and only the process
running a run can cancel it or tell it is alive. Each mark is one small value
per run, written on a timer (never per event), so the cost does not grow with
the events. ``RunMarks`` is the part of ``EventLog`` that reads and writes them;
a backend provides ``_put_mark`` / ``_get_mark``.
"""

from __future__ import annotations

import abc

from .._foundation.principal import DEFAULT_SCOPE

__all__ = ["RunMarks"]


class RunMarks(abc.ABC):
    """Reader, stop and heartbeat marks of runs (module doc)."""

    @abc.abstractmethod
    def _check_open(self) -> None: ...

    @abc.abstractmethod
    def _now(self) -> float: ...

    @abc.abstractmethod
    async def _put_mark(self, scope: str, run_id: str, kind: str, value: str) -> None:
        """Set the run's ``kind`` mark (shared by every process using the store)."""

    @abc.abstractmethod
    async def _get_mark(self, scope: str, run_id: str, kind: str) -> str | None:
        """The run's ``kind`` mark, or None."""

    async def touch_reader(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> None:
        """Say a reader (on any process) follows the run now: it holds the run past its grace."""
        self._check_open()
        await self._put_mark(scope, run_id, "reader", repr(self._now()))

    async def reader_seen(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> float | None:
        """When a reader last called ``touch_reader`` for the run (Unix time), or None."""
        self._check_open()
        return _time(await self._get_mark(scope, run_id, "reader"))

    async def request_stop(self, run_id: str, reason: str, *, scope: str = DEFAULT_SCOPE) -> None:
        """Ask the process running the run to stop it (it polls ``stop_requested``)."""
        self._check_open()
        await self._put_mark(scope, run_id, "stop", reason)

    async def stop_requested(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> str | None:
        """The reason of a pending stop request for the run, or None."""
        self._check_open()
        return await self._get_mark(scope, run_id, "stop")

    async def put_history_snapshot(
        self, run_id: str, data: bytes, *, scope: str = DEFAULT_SCOPE
    ) -> None:
        """Keep a thread's folded history on its first run (``run_id``), replacing the last.

        Kept as the run's ``history`` mark, so it is deleted with that run;
        ``data`` is UTF-8 text (a JSON document).
        """
        self._check_open()
        await self._put_mark(scope, run_id, "history", data.decode())

    async def history_snapshot(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> bytes | None:
        """What ``put_history_snapshot`` kept on the run, or None."""
        self._check_open()
        value = await self._get_mark(scope, run_id, "history")
        return None if not value else value.encode()

    async def heartbeat(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> None:
        """Say the process writing the run is alive (call it every few seconds)."""
        self._check_open()
        await self._put_mark(scope, run_id, "beat", repr(self._now()))

    async def heartbeat_seen(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> float | None:
        """When the run's writer last called ``heartbeat`` (Unix time), or None."""
        self._check_open()
        return _time(await self._get_mark(scope, run_id, "beat"))


def _time(value: str | None) -> float | None:
    return None if value is None else float(value)
