"""The SQLite log's claims: run creation and thread leases, each one
`BEGIN IMMEDIATE` transaction that checks and writes.
"""

from __future__ import annotations

import sqlite3

from ._errors import ThreadTaken
from ._sqlite_file import immediate
from ._sqlite_health import SQLiteHealth

__all__ = ["SQLiteClaims", "claim_thread"]


class SQLiteClaims(SQLiteHealth):
    """The SQLite log's claims: run creation and thread leases, each one"""

    async def _create(self, scope: str, thread_id: str, run_id: str, digest: str | None) -> bool:
        now = self._now()

        def write(conn: sqlite3.Connection) -> bool:
            # Check and write in one BEGIN IMMEDIATE transaction: the compare-and-set.
            with immediate(conn):
                row = conn.execute(
                    "SELECT 1 FROM runs WHERE scope = ? AND run_id = ?", (scope, run_id)
                ).fetchone()
                if row is not None:
                    return False
                claim_thread(conn, thread_id, scope, now)
                conn.execute(
                    "INSERT INTO runs (scope, run_id, thread_id, status, created, updated,"
                    " last_seq) VALUES (?, ?, ?, 'live', ?, ?, 0)",
                    (scope, run_id, thread_id, now, now),
                )
                if digest is not None:
                    conn.execute(
                        "INSERT OR REPLACE INTO marks (scope, run_id, kind, value)"
                        " VALUES (?, ?, 'digest', ?)",
                        (scope, run_id, digest),
                    )
            return True

        created = await self._call(write)
        if created:
            self._writing.add((scope, run_id))
        if created and self._sweep_due(now):
            await self.prune(now)
        return created

    async def _acquire(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> str | None:
        now = self._now()

        def write(conn: sqlite3.Connection) -> str | None:
            with immediate(conn):
                row = conn.execute(
                    "SELECT run_id FROM leases WHERE scope = ? AND thread_id = ? AND expires > ?",
                    (scope, thread_id, now),
                ).fetchone()
                if row is not None and row[0] != run_id:
                    return str(row[0])
                conn.execute(
                    "INSERT OR REPLACE INTO leases (scope, thread_id, run_id, expires)"
                    " VALUES (?, ?, ?, ?)",
                    (scope, thread_id, run_id, now + ttl_ms / 1000),
                )
            return None

        return await self._call(write)

    async def _renew(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> bool:
        now = self._now()

        def write(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE leases SET expires = ?"
                " WHERE scope = ? AND thread_id = ? AND run_id = ? AND expires > ?",
                (now + ttl_ms / 1000, scope, thread_id, run_id, now),
            )
            return cursor.rowcount > 0

        return await self._call(write)

    async def _release(self, scope: str, thread_id: str, run_id: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM leases WHERE scope = ? AND thread_id = ? AND run_id = ?",
                (scope, thread_id, run_id),
            )

        await self._call(write)


def claim_thread(conn: sqlite3.Connection, thread_id: str, scope: str, now: float) -> None:
    """Make ``scope`` the owner of a new thread, or raise ThreadTaken if another scope is."""
    conn.execute(
        "INSERT OR IGNORE INTO threads (thread_id, scope, created) VALUES (?, ?, ?)",
        (thread_id, scope, now),
    )
    (owner,) = conn.execute(
        "SELECT scope FROM threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if owner != scope:
        raise ThreadTaken(thread_id)
