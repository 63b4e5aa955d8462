"""The Postgres event log's tables: their layout, creating them, and the epoch.

Why apart from the queries: what a database must hold to be read — the
tables of one schema, the layout version in ``meta`` — is decided once, when
the store opens; the queries (``postgres.py``, ``_postgres_claims.py``) rely
on it. A schema of another layout is refused, not misread.

One table per concept, each with the index its hot query needs:

* ``runs`` — one row per run, unique on (scope, run id); ``id`` is the
  creation order (``thread_runs``, retention) and what batches point at;
  indexed by (thread id, id) for ``thread_runs`` and pruning threads;
* ``batches`` — one row per appended batch (the payloads joined, their
  lengths: see ``_batches``), keyed by (run, last seq), so "the entries after
  seq N" is one index range scan from the batch holding N + 1;
* ``marks`` — the cross-process signals per run (reader, stop, heartbeat,
  the creating request's digest);
* ``threads`` — which scope owns a thread, and the listing order (``id``,
  the page cursor), indexed by (scope, id);
* ``leases`` — one live run per thread, keyed by (scope, thread id);
* ``meta`` — the layout version and the epoch.

Several processes may open a fresh database at once: the tables are created
under a transaction-scoped advisory lock, so exactly one creates them.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ._base import new_epoch
from ._errors import StoreError

__all__ = ["FORMAT", "SCHEMA_NAME", "channel_for", "create_tables", "qualified"]

FORMAT = "1"
"""The layout version kept in ``meta``: a schema of another layout is refused, not misread."""

SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}")
"""What a ``schema=`` option may be: a lowercase SQL identifier of at most 40 characters
(short enough for the notification channel named after it)."""

_TABLES = """
CREATE TABLE IF NOT EXISTS {s}.meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.runs (
    id BIGSERIAL PRIMARY KEY,
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    updated DOUBLE PRECISION NOT NULL,
    ended DOUBLE PRECISION,
    last_seq BIGINT NOT NULL,
    reason TEXT,
    UNIQUE (scope, run_id)
);
CREATE INDEX IF NOT EXISTS runs_by_thread ON {s}.runs (thread_id, id);
CREATE TABLE IF NOT EXISTS {s}.batches (
    run BIGINT NOT NULL REFERENCES {s}.runs (id) ON DELETE CASCADE,
    last_seq BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    data BYTEA NOT NULL,
    lengths BYTEA NOT NULL,
    PRIMARY KEY (run, last_seq)
);
CREATE TABLE IF NOT EXISTS {s}.marks (
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (scope, run_id, kind)
);
CREATE TABLE IF NOT EXISTS {s}.threads (
    id BIGSERIAL PRIMARY KEY,
    thread_id TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS threads_by_scope ON {s}.threads (scope, id);
CREATE TABLE IF NOT EXISTS {s}.leases (
    scope TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    expires DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (scope, thread_id)
)
"""


@functools.lru_cache(maxsize=512)
def qualified(schema: str, query: str) -> str:
    """``query`` with ``{s}`` naming the store's schema (checked against ``SCHEMA_NAME``).

    Cached: the queries are a fixed set, built once per schema rather than per call.
    """
    return query.replace("{s}", f'"{schema}"')


def channel_for(schema: str) -> str:
    """The notification channel of the store in ``schema`` (the appends' wake-ups)."""
    return f"agui_pipes.{schema}"


async def create_tables(conn: Any, schema: str) -> str:
    """Create the tables of ``schema`` if need be, check their layout: the store's epoch.

    ``conn`` is an autocommit ``psycopg.AsyncConnection``.
    """
    async with conn.transaction():
        # One creator at a time across processes: concurrent CREATE ... IF NOT EXISTS
        # of one table can still fail on the catalog's unique index.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"agui_pipes:{schema}",))
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        for statement in qualified(schema, _TABLES).split(";"):
            await conn.execute(statement)
        await conn.execute(
            qualified(schema, "INSERT INTO {s}.meta VALUES ('format', %s) ON CONFLICT DO NOTHING"),
            (FORMAT,),
        )
        await conn.execute(
            qualified(schema, "INSERT INTO {s}.meta VALUES ('epoch', %s) ON CONFLICT DO NOTHING"),
            (new_epoch(),),
        )
        cursor = await conn.execute(
            qualified(schema, "SELECT key, value FROM {s}.meta WHERE key IN ('format', 'epoch')")
        )
        values = dict(await cursor.fetchall())
    if values.get("format") != FORMAT:
        raise StoreError(
            f"the Postgres event log in schema {schema!r} has layout {values.get('format')!r}; "
            f"this version of agui_pipes reads layout {FORMAT!r} only: use another schema"
        )
    return str(values["epoch"])
