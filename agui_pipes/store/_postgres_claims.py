"""The Postgres log's claims: run creation as an insert that one caller wins, thread leases
as an upsert that takes a free or expired lease only.

Leases are timed by the database server's clock, not the callers': processes on
several hosts share a lease, and one clock decides when it has run out.
"""

from __future__ import annotations

from typing import Any

from ._errors import ThreadTaken
from ._postgres_connection import PostgresConnection
from ._postgres_schema import qualified

__all__ = ["PostgresClaims", "claim_thread"]

_NOW = "extract(epoch FROM clock_timestamp())"


class PostgresClaims(PostgresConnection):
    """The Postgres log's claims (module doc)."""

    async def _create(self, scope: str, thread_id: str, run_id: str, digest: str | None) -> bool:
        now = self._now()
        schema = self.schema

        async def write() -> bool:
            async with self._connections() as conn, conn.transaction():
                found = await conn.execute(
                    qualified(schema, "SELECT 1 FROM {s}.runs WHERE scope = %s AND run_id = %s"),
                    (scope, run_id),
                )
                if await found.fetchone() is not None:
                    return False
                await claim_thread(conn, schema, thread_id, scope, now)
                # The compare-and-set: of concurrent inserts of one (scope, run id), on
                # any process, exactly one returns its row.
                inserted = await conn.execute(
                    qualified(
                        schema,
                        "INSERT INTO {s}.runs (scope, run_id, thread_id, status, created, updated,"
                        " last_seq) VALUES (%s, %s, %s, 'live', %s, %s, 0)"
                        " ON CONFLICT (scope, run_id) DO NOTHING RETURNING id",
                    ),
                    (scope, run_id, thread_id, now, now),
                )
                if await inserted.fetchone() is None:
                    return False
                if digest is not None:
                    await conn.execute(
                        qualified(
                            schema,
                            "INSERT INTO {s}.marks (scope, run_id, kind, value)"
                            " VALUES (%s, %s, 'digest', %s) ON CONFLICT (scope, run_id, kind)"
                            " DO UPDATE SET value = excluded.value",
                        ),
                        (scope, run_id, digest),
                    )
            return True

        created = await self._io(write())
        if created and self._sweep_due(now):
            await self.prune(now)
        return created

    async def _acquire(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> str | None:
        schema = self.schema

        async def write() -> str | None:
            async with self._connections() as conn:
                while True:
                    # Taken if free, expired or already this run's; the row lock the upsert
                    # holds makes the check and the write one step across processes.
                    taken = await conn.execute(
                        qualified(
                            schema,
                            "INSERT INTO {s}.leases (scope, thread_id, run_id, expires)"
                            f" VALUES (%s, %s, %s, {_NOW} + %s)"
                            " ON CONFLICT (scope, thread_id) DO UPDATE"
                            " SET run_id = excluded.run_id, expires = excluded.expires"
                            f" WHERE leases.expires <= {_NOW} OR leases.run_id = excluded.run_id"
                            " RETURNING run_id",
                        ),
                        (scope, thread_id, run_id, ttl_ms / 1000),
                    )
                    if await taken.fetchone() is not None:
                        return None
                    holder = await conn.execute(
                        qualified(
                            schema,
                            "SELECT run_id FROM {s}.leases WHERE scope = %s AND thread_id = %s"
                            f" AND expires > {_NOW}",
                        ),
                        (scope, thread_id),
                    )
                    row = await holder.fetchone()
                    if row is not None:
                        return str(row[0])
                    # It expired or was released between the two statements: try again.

        return await self._io(write())

    async def _renew(self, scope: str, thread_id: str, run_id: str, ttl_ms: int) -> bool:
        schema = self.schema

        async def write() -> bool:
            async with self._connections() as conn:
                cursor = await conn.execute(
                    qualified(
                        schema,
                        f"UPDATE {{s}}.leases SET expires = {_NOW} + %s"
                        " WHERE scope = %s AND thread_id = %s AND run_id = %s"
                        f" AND expires > {_NOW}",
                    ),
                    (ttl_ms / 1000, scope, thread_id, run_id),
                )
                return bool(cursor.rowcount > 0)

        return await self._io(write())

    async def _release(self, scope: str, thread_id: str, run_id: str) -> None:
        schema = self.schema

        async def write() -> None:
            async with self._connections() as conn:
                await conn.execute(
                    qualified(
                        schema,
                        "DELETE FROM {s}.leases WHERE scope = %s AND thread_id = %s"
                        " AND run_id = %s",
                    ),
                    (scope, thread_id, run_id),
                )

        await self._io(write())


async def claim_thread(conn: Any, schema: str, thread_id: str, scope: str, now: float) -> None:
    """Make ``scope`` the owner of a new thread, or raise ThreadTaken if another scope is.

    Inside the caller's transaction: a concurrent claim of the same thread waits
    for this one to commit or roll back, then sees its row.
    """
    await conn.execute(
        qualified(
            schema,
            "INSERT INTO {s}.threads (thread_id, scope, created) VALUES (%s, %s, %s)"
            " ON CONFLICT (thread_id) DO NOTHING",
        ),
        (thread_id, scope, now),
    )
    cursor = await conn.execute(
        qualified(schema, "SELECT scope FROM {s}.threads WHERE thread_id = %s"), (thread_id,)
    )
    row = await cursor.fetchone()
    if row is None or row[0] != scope:
        raise ThreadTaken(thread_id)
