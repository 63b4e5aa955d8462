"""The SQLite event log's health: why it cannot take writes now, for ``/healthz``.

Why apart from the connection: the connection bounds each call and notices a
stall or a deleted file as calls fail; ``health`` asks the same questions
without a run to write — the stall flag, a ``stat`` of the file, the last
failed write, then one tiny write transaction — and must stay cheap when a
load balancer asks every second.
"""

from __future__ import annotations

import sqlite3
import time

import anyio
import anyio.to_thread

from ._errors import StoreError, StoreUnavailable
from ._sqlite_connection import SQLiteConnection
from ._sqlite_faults import file_problem

__all__ = ["FAILURE_MEMORY", "HEALTH_EVERY", "SQLiteHealth"]

HEALTH_EVERY = 1.0
"""Seconds the write probe's answer is reused: a load balancer probing often costs one small
write a second."""

FAILURE_MEMORY = 10.0
"""Seconds ``health`` reports a write that failed (disk full...) unless a write succeeded since:
its tiny probe may fit where a run's batches do not."""


class SQLiteHealth(SQLiteConnection):
    """``health()`` of the SQLite event log (module doc)."""

    async def health(self) -> str | None:
        """Why the store cannot take writes now, or None: a stall, the file gone, a write probe.

        The stall and file checks run every time (no disk write: a flag and a
        ``stat``); the probe (one tiny write transaction in ``meta``) runs under
        the same deadline as every call, at most once per ``HEALTH_EVERY`` seconds.
        """
        if self._conn is None:
            return "the event log is not open"
        try:
            self._check_not_stuck()
        except StoreUnavailable as exc:
            return exc.reason
        if self._identity is not None and self._gone is None:
            gone = await anyio.to_thread.run_sync(file_problem, self.path, self._identity)
            if gone is not None:
                self._file_gone(gone)
        if self._gone is not None:
            return self._gone
        now = time.monotonic()
        failure = self._failure
        if failure is not None and now - failure[0] < FAILURE_MEMORY:
            return failure[1]
        cached = self._health
        if cached is not None and now - cached[0] < HEALTH_EVERY:
            return cached[1]
        answer: str | None
        try:
            await self._call(_probe)
            answer = None
        except StoreUnavailable as exc:
            answer = exc.reason
        except StoreError:
            answer = "the event log failed a test write"
        self._health = (time.monotonic(), answer)
        return answer


def _probe(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('health', ?)", (repr(time.time()),))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
