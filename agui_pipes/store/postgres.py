"""``postgresql://user@host:5432/db`` — the event log several processes share, in PostgreSQL.

Why Postgres: teams that run it already have a shared, backed-up database,
and no Redis. Processes behind a load balancer all see every run, so a client
cut from process A resumes on process B, and B's followers wake when A
appends: ``LISTEN/NOTIFY``, through one listening connection per store object
(``_postgres_listener``), not one per follower.

Layout: one schema (``agui_pipes`` by default, option ``schema``) holding a
table per concept (``_postgres_schema``). An append to a live run is one
statement — the run's row moved on, the batch stored as one row (see
``_batches``), the followers notified — so two processes can never
interleave seqs: the row's update is the lock. Anything else (a new run, a
refused append) is one transaction that reads the row ``FOR UPDATE`` and says
why. Sequence numbers are per run, from 1, without holes.

Connections come from a bounded pool (``pool`` connections, 10 by default;
a call waits ``pool_timeout`` seconds, 10, for one, then fails with
:class:`StoreError`, as does any failure of the server). Any option the store
does not take goes to libpq with the URL (``sslmode``, ``connect_timeout``...).

Retention is applied in SQL by ``prune`` with exactly the rules of
``_retention.doomed_runs`` (creation order is ``runs.id``); a run appended to
while the sweep runs is not deleted for its age.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode, urlunsplit

from .._lazy import public_dir
from ._base import DEFAULT_SCOPE, check_page
from ._batches import join_batch, split_batch
from ._errors import RunBroken, UnknownRun
from ._postgres_claims import PostgresClaims, claim_thread
from ._postgres_connection import DEFAULT_POLL, DEFAULT_POOL, DEFAULT_POOL_TIMEOUT
from ._postgres_listener import payload_for
from ._postgres_schema import SCHEMA_NAME, qualified
from ._records import RunStatus, StoredRun, ThreadRecord, check_appendable
from ._url import EXAMPLES, StoreURL

__all__ = ["PostgresEventLog"]
__dir__ = public_dir(__all__)

_COLUMNS = "id, thread_id, run_id, status, created, updated, ended, last_seq, reason, scope"

_NONE = 1 << 62
"""A count no store reaches: stands for "no limit" in the pruning query."""

_APPEND_LIVE = """
WITH moved AS (
    UPDATE {s}.runs SET last_seq = last_seq + %(count)s, updated = %(now)s
    WHERE scope = %(scope)s AND run_id = %(run)s AND thread_id = %(thread)s AND status = 'live'
    RETURNING id, last_seq
), stored AS (
    INSERT INTO {s}.batches (run, last_seq, first_seq, data, lengths)
    SELECT id, last_seq, last_seq - %(count)s + 1, %(data)s, %(lengths)s FROM moved
)
SELECT last_seq - %(count)s + 1, pg_notify(%(channel)s, %(key)s)::text FROM moved
"""
"""The common append — a live run of this thread — as one statement (one round trip)."""

_PRUNE = """
WITH listed AS (
    SELECT id, thread_id, status, updated < %(oldest)s AS old FROM {s}.runs
), ended AS (
    SELECT id, row_number() OVER (PARTITION BY thread_id ORDER BY id DESC) AS n
    FROM listed WHERE status <> 'live' AND NOT old
), kept AS (
    SELECT id, row_number() OVER (ORDER BY id DESC) AS n
    FROM ended WHERE n <= %(per_thread)s
), by_count AS (
    SELECT id FROM ended WHERE n > %(per_thread)s
    UNION SELECT id FROM kept WHERE n > %(total)s
), gone AS (
    DELETE FROM {s}.runs
    WHERE (id IN (SELECT id FROM listed WHERE old) AND updated < %(oldest)s)
       OR id IN (SELECT id FROM by_count)
    RETURNING scope, run_id
), marks_gone AS (
    DELETE FROM {s}.marks USING gone
    WHERE marks.scope = gone.scope AND marks.run_id = gone.run_id
)
SELECT scope, run_id, pg_notify(%(channel)s, CASE
    WHEN octet_length(scope) + octet_length(run_id) < 7900
    THEN length(scope) || ':' || scope || run_id ELSE '*' END)::text
FROM gone
"""
"""``doomed_runs`` in SQL (``_retention``): by age, then the newest ended runs per thread,
then in the store; the age is checked again as each row is deleted, so a run written
meanwhile stays. Batches go with their run (``ON DELETE CASCADE``)."""

_Row = tuple[int, str, str, str, float, float, "float | None", int, "str | None", str]


def _record(row: _Row) -> StoredRun:
    _, thread_id, run_id, status, created, updated, ended, last_seq, reason, scope = row
    return StoredRun(
        thread_id, run_id, RunStatus(status), created, updated, ended, last_seq, reason, scope
    )


class PostgresEventLog(PostgresClaims):
    """The event log in PostgreSQL; see the module docstring.

    ``conninfo`` is a libpq URL (``postgresql://[user[:password]@]host[:port]/db``).
    """

    @classmethod
    def from_url(cls, url: StoreURL) -> PostgresEventLog:
        """``postgresql://`` / ``postgres://``; options ``schema``, ``pool``, ``pool_timeout``,
        ``poll``, the rest to libpq."""
        schema = url.options.pop("schema", "agui_pipes")
        if not SCHEMA_NAME.fullmatch(schema):
            raise ValueError(
                f"store URL {url.text!r}: option schema={schema!r} must be a lowercase SQL name "
                f"(letters, digits, '_', not starting with a digit; at most 40 characters)"
            )
        pool = url.number("pool", int, DEFAULT_POOL)
        pool_timeout = url.number("pool_timeout", float, DEFAULT_POOL_TIMEOUT)
        poll = url.number("poll", float, DEFAULT_POLL)
        if not url.parts.path.strip("/") and not url.parts.hostname and not url.options:
            raise ValueError(f"store URL {url.text!r} names no Postgres server; {EXAMPLES}")
        # quote, not urlencode's default quote_plus: libpq reads '+' as a plus, not a space.
        query = urlencode(url.options, quote_via=quote)
        conninfo = urlunsplit(url.parts._replace(query=query))
        _check_conninfo(url.text, conninfo)
        return cls(
            conninfo, url.retention, schema=schema, pool=pool, pool_timeout=pool_timeout, poll=poll
        )

    # -- writes ----------------------------------------------------------------

    async def append(
        self,
        thread_id: str,
        run_id: str,
        payloads: Sequence[bytes],
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> list[int]:
        self._check_open()
        now = self._now()
        count = len(payloads)
        data, lengths = join_batch(payloads) if count else (b"", b"")
        schema = self.schema
        key = payload_for(scope, run_id)

        async def write() -> tuple[int, bool]:
            async with self._connections() as conn:
                if count:
                    moved = await conn.execute(
                        qualified(schema, _APPEND_LIVE),
                        {
                            "count": count,
                            "now": now,
                            "scope": scope,
                            "run": run_id,
                            "thread": thread_id,
                            "data": data,
                            "lengths": lengths,
                            "channel": self.channel,
                            "key": key,
                        },
                    )
                    row = await moved.fetchone()
                    if row is not None:
                        return int(row[0]), False
                # A new run, or one that refuses the append: read it and say why.
                async with conn.transaction():
                    return await self._append_slowly(
                        conn, thread_id, run_id, scope, now, count, data, lengths
                    )

        first, created = await self._io(write())
        if created and self._sweep_due(now):
            await self.prune(now)
        return list(range(first, first + count))

    async def _append_slowly(
        self,
        conn: Any,
        thread_id: str,
        run_id: str,
        scope: str,
        now: float,
        count: int,
        data: bytes,
        lengths: bytes,
    ) -> tuple[int, bool]:
        schema = self.schema
        found = await _locked_run(conn, schema, scope, run_id)
        created = False
        if found is None:
            await claim_thread(conn, schema, thread_id, scope, now)
            inserted = await conn.execute(
                qualified(
                    schema,
                    "INSERT INTO {s}.runs (scope, run_id, thread_id, status, created, updated,"
                    " last_seq) VALUES (%s, %s, %s, 'live', %s, %s, 0)"
                    f" ON CONFLICT (scope, run_id) DO NOTHING RETURNING {_COLUMNS}",
                ),
                (scope, run_id, thread_id, now, now),
            )
            row: _Row | None = await inserted.fetchone()
            created = row is not None
            # None: another process created it meanwhile, so it is an existing run now.
            found = (row[0], _record(row)) if row is not None else None
            found = found or await _locked_run(conn, schema, scope, run_id)
            assert found is not None
        key, record = found
        if not created:
            check_appendable(record, thread_id)
        if count:
            await conn.execute(
                qualified(
                    schema,
                    "INSERT INTO {s}.batches (run, last_seq, first_seq, data, lengths)"
                    " VALUES (%s, %s, %s, %s, %s)",
                ),
                (key, record.last_seq + count, record.last_seq + 1, data, lengths),
            )
            await conn.execute(
                qualified(schema, "UPDATE {s}.runs SET last_seq = %s, updated = %s WHERE id = %s"),
                (record.last_seq + count, now, key),
            )
            await self._notify(conn, scope, run_id)
        return record.last_seq + 1, created

    async def _notify(self, conn: Any, scope: str, run_id: str) -> None:
        """Wake the run's followers in every process, when this transaction commits."""
        await conn.execute("SELECT pg_notify(%s, %s)", (self.channel, payload_for(scope, run_id)))

    async def end_run(
        self,
        run_id: str,
        status: RunStatus = RunStatus.FINISHED,
        reason: str | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> StoredRun:
        self._check_open()
        status = RunStatus(status)
        now = self._now()
        schema = self.schema

        async def write() -> _Row | None:
            async with self._connections() as conn, conn.transaction():
                ended = await conn.execute(
                    qualified(
                        schema,
                        "UPDATE {s}.runs SET status = %s, ended = %s, updated = %s, reason = %s"
                        " WHERE scope = %s AND run_id = %s AND status = 'live'"
                        f" RETURNING {_COLUMNS}",
                    ),
                    (status.value, now, now, reason, scope, run_id),
                )
                row: _Row | None = await ended.fetchone()
                if row is not None:
                    await self._notify(conn, scope, run_id)
                    return row
                # Already ended (the first ending wins), or unknown.
                found = await conn.execute(
                    qualified(
                        schema,
                        f"SELECT {_COLUMNS} FROM {{s}}.runs WHERE scope = %s AND run_id = %s",
                    ),
                    (scope, run_id),
                )
                row = await found.fetchone()
                return row

        row = await self._io(write())
        if row is None:
            raise UnknownRun(run_id)
        return _record(row)

    async def mark_broken(self, run_id: str, reason: str, *, scope: str = DEFAULT_SCOPE) -> None:
        self._check_open()
        now = self._now()
        schema = self.schema

        async def write() -> None:
            async with self._connections() as conn, conn.transaction():
                broken = await conn.execute(
                    qualified(
                        schema,
                        "INSERT INTO {s}.runs (scope, run_id, thread_id, status, created, updated,"
                        " ended, last_seq, reason) VALUES (%s, %s, '', 'broken', %s, %s, %s, 0, %s)"
                        " ON CONFLICT (scope, run_id) DO UPDATE SET status = 'broken',"
                        " updated = excluded.updated, ended = excluded.ended,"
                        " reason = excluded.reason RETURNING id",
                    ),
                    (scope, run_id, now, now, now, reason),
                )
                (key,) = await broken.fetchone()
                await conn.execute(
                    qualified(schema, "DELETE FROM {s}.batches WHERE run = %s"), (key,)
                )
                await self._notify(conn, scope, run_id)

        await self._io(write())

    async def prune(self, now: float | None = None) -> int:
        self._check_open()
        when = self._now() if now is None else now
        retention = self.retention
        schema = self.schema
        oldest = float("-inf") if retention.max_age is None else when - retention.max_age
        per_thread = retention.max_runs_per_thread
        total = retention.max_runs

        async def write() -> int:
            async with self._connections() as conn, conn.transaction():
                gone = await conn.execute(
                    qualified(schema, _PRUNE),
                    {
                        "oldest": oldest,
                        "per_thread": _NONE if per_thread is None else per_thread,
                        "total": _NONE if total is None else total,
                        "channel": self.channel,
                    },
                )
                doomed = len(await gone.fetchall())
                if doomed:
                    # A thread whose last run went is no one's any more.
                    await conn.execute(
                        qualified(
                            schema,
                            "DELETE FROM {s}.threads WHERE NOT EXISTS"
                            " (SELECT 1 FROM {s}.runs WHERE runs.thread_id = threads.thread_id)",
                        )
                    )
                return doomed

        return await self._io(write())

    # -- reads -----------------------------------------------------------------

    async def read(
        self,
        run_id: str,
        after: int = 0,
        limit: int | None = None,
        *,
        scope: str = DEFAULT_SCOPE,
    ) -> list[tuple[int, bytes]]:
        self._check_open()
        schema = self.schema

        async def query() -> list[tuple[int, bytes]]:
            async with self._connections() as conn:
                # The run's status and the batches after ``after`` in one round trip; every
                # batch holds at least one entry, so ``limit`` batches hold ``limit`` entries.
                cursor = conn.cursor(binary=True)
                await cursor.execute(
                    qualified(
                        schema,
                        "SELECT r.status, r.reason, b.first_seq, b.data, b.lengths"
                        " FROM {s}.runs r LEFT JOIN LATERAL (SELECT first_seq, data, lengths"
                        " FROM {s}.batches WHERE run = r.id AND last_seq > %s"
                        " ORDER BY last_seq LIMIT %s) b ON true"
                        " WHERE r.scope = %s AND r.run_id = %s",
                    ),
                    (max(after, 0), limit, scope, run_id),
                )
                rows = await cursor.fetchall()
            if not rows:
                raise UnknownRun(run_id)
            status, reason = rows[0][0], rows[0][1]
            if status == RunStatus.BROKEN.value:
                raise RunBroken(run_id, reason or "a write failed")
            entries: list[tuple[int, bytes]] = []
            for _, _, first_seq, data, lengths in rows:
                if first_seq is not None:
                    entries.extend(split_batch(first_seq, bytes(data), bytes(lengths), after))
            return entries if limit is None else entries[:limit]

        return await self._io(query())

    async def run(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> StoredRun | None:
        self._check_open()
        schema = self.schema

        async def query() -> _Row | None:
            async with self._connections() as conn:
                cursor = await conn.execute(
                    qualified(
                        schema,
                        f"SELECT {_COLUMNS} FROM {{s}}.runs WHERE scope = %s AND run_id = %s",
                    ),
                    (scope, run_id),
                )
                row: _Row | None = await cursor.fetchone()
                return row

        row = await self._io(query())
        return None if row is None else _record(row)

    async def thread_runs(self, thread_id: str, *, scope: str = DEFAULT_SCOPE) -> list[StoredRun]:
        self._check_open()
        schema = self.schema

        async def query() -> list[_Row]:
            async with self._connections() as conn:
                cursor = await conn.execute(
                    qualified(
                        schema,
                        f"SELECT {_COLUMNS} FROM {{s}}.runs WHERE thread_id = %s AND scope = %s"
                        " ORDER BY id",
                    ),
                    (thread_id, scope),
                )
                rows: list[_Row] = await cursor.fetchall()
                return rows

        return [_record(row) for row in await self._io(query())]

    async def thread_scope(self, thread_id: str) -> str | None:
        self._check_open()
        schema = self.schema

        async def query() -> str | None:
            async with self._connections() as conn:
                cursor = await conn.execute(
                    qualified(schema, "SELECT scope FROM {s}.threads WHERE thread_id = %s"),
                    (thread_id,),
                )
                row = await cursor.fetchone()
                return None if row is None else str(row[0])

        return await self._io(query())

    async def threads(
        self, *, scope: str = DEFAULT_SCOPE, limit: int = 50, before: int | None = None
    ) -> list[ThreadRecord]:
        self._check_open()
        check_page(limit, before)
        schema = self.schema

        async def query() -> list[tuple[str, float, int]]:
            async with self._connections() as conn:
                cursor = await conn.execute(
                    qualified(
                        schema,
                        "SELECT thread_id, created, id FROM {s}.threads WHERE scope = %s"
                        " AND id < %s ORDER BY id DESC LIMIT %s",
                    ),
                    (scope, _NONE if before is None else before, limit),
                )
                rows: list[tuple[str, float, int]] = await cursor.fetchall()
                return rows

        return [ThreadRecord(*row) for row in await self._io(query())]

    # -- marks -----------------------------------------------------------------

    async def _put_mark(self, scope: str, run_id: str, kind: str, value: str) -> None:
        schema = self.schema

        async def write() -> None:
            async with self._connections() as conn:
                await conn.execute(
                    qualified(
                        schema,
                        "INSERT INTO {s}.marks (scope, run_id, kind, value) VALUES (%s, %s, %s, %s)"
                        " ON CONFLICT (scope, run_id, kind) DO UPDATE SET value = excluded.value",
                    ),
                    (scope, run_id, kind, value),
                )

        await self._io(write())

    async def _get_mark(self, scope: str, run_id: str, kind: str) -> str | None:
        schema = self.schema

        async def query() -> str | None:
            async with self._connections() as conn:
                cursor = await conn.execute(
                    qualified(
                        schema,
                        "SELECT value FROM {s}.marks"
                        " WHERE scope = %s AND run_id = %s AND kind = %s",
                    ),
                    (scope, run_id, kind),
                )
                row = await cursor.fetchone()
                return None if row is None else str(row[0])

        return await self._io(query())


async def _locked_run(
    conn: Any, schema: str, scope: str, run_id: str
) -> tuple[int, StoredRun] | None:
    """The run's row id and record, the row locked until the transaction ends (so no
    append runs meanwhile), or None."""
    cursor = await conn.execute(
        qualified(
            schema,
            f"SELECT {_COLUMNS} FROM {{s}}.runs WHERE scope = %s AND run_id = %s FOR UPDATE",
        ),
        (scope, run_id),
    )
    row: _Row | None = await cursor.fetchone()
    return None if row is None else (row[0], _record(row))


def _check_conninfo(text: str, conninfo: str) -> None:
    """Refuse a URL libpq cannot parse (an unknown option, a bad port) now, not at connect."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the Postgres event log needs psycopg 3 and psycopg_pool: "
            "pip install 'agui-pipes[postgres]'"
        ) from exc
    import psycopg

    try:
        conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        raise ValueError(f"store URL {text!r}: libpq cannot read it: {exc}; {EXAMPLES}") from None
