"""The SQLite file of an event log: its layout, opening (creating) it, and write transactions.

Why apart from the queries: what a file must look like to be read — the
tables, the layout version in ``meta``, the pragmas it is opened with — is
decided once, when the store opens; the queries (``sqlite.py``) rely on it.
A file of another layout is refused, not misread; a file of layout 1 (written
by 0.1, before scopes) is migrated in place, its runs becoming the default
scope's, in the one transaction that opens it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ._base import new_epoch
from ._errors import StoreError, StoreUnavailable
from ._sqlite_faults import unavailable_reason

__all__ = ["FORMAT", "WAL_LIMIT", "checkpoint", "immediate", "open_file"]

_SCHEMA = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    ended REAL,
    last_seq INTEGER NOT NULL,
    reason TEXT,
    UNIQUE (scope, run_id)
);
CREATE INDEX runs_by_thread ON runs (thread_id, id);
CREATE TABLE IF NOT EXISTS batches (
    run INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    lengths BLOB NOT NULL,
    PRIMARY KEY (run, last_seq)
);
CREATE TABLE marks (
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (scope, run_id, kind)
);
CREATE TABLE threads (
    id INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX threads_by_scope ON threads (scope, id)
"""

_MIGRATE_FROM_1 = """
ALTER TABLE runs RENAME TO runs_1;
ALTER TABLE marks RENAME TO marks_1;
DROP INDEX IF EXISTS runs_by_thread;
{schema};
INSERT INTO runs (id, scope, run_id, thread_id, status, created, updated, ended, last_seq, reason)
    SELECT id, 'default', run_id, thread_id, status, created, updated, ended, last_seq, reason
    FROM runs_1;
INSERT INTO marks (scope, run_id, kind, value)
    SELECT 'default', run_id, kind, value FROM marks_1;
INSERT INTO threads (thread_id, scope, created)
    SELECT thread_id, 'default', MIN(created) FROM runs_1 WHERE thread_id != ''
    GROUP BY thread_id ORDER BY MIN(id);
DROP TABLE runs_1;
DROP TABLE marks_1
"""
"""Layout 1 (0.1: runs keyed by run id alone) to 2: every run, mark and thread becomes
the default scope's. ``batches`` point at ``runs.id``, which the copy keeps."""

_LEASES = """
CREATE TABLE IF NOT EXISTS leases (
    scope TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (scope, thread_id)
)
"""
"""Thread leases (one live run per thread): added to any layout-2 file when opened, since
a file without it holds no lease; rows are short-lived, so it needs no migration."""

WAL_LIMIT = 1024 * 1024
"""Bytes of WAL after which SQLite checkpoints it (``wal_autocheckpoint``, in pages of the
file) and to which a reset WAL is truncated (``journal_size_limit``). SQLite's defaults
(1,000 pages, no limit) let the WAL of 16 KiB pages grow to 16 MB and stay there: a
token-paced run commits a few pages per event, so its WAL was hundreds of times its
events. ``end_run`` also checkpoints (``checkpoint``)."""

FORMAT = "2"
"""The layout version kept in ``meta``: a file of another layout is refused, not misread."""


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def open_file(path: str, busy_ms: int = 2500) -> tuple[sqlite3.Connection, str]:
    """Open (creating if need be) the event log at ``path``: its connection and its epoch.

    ``busy_ms`` is SQLite's ``busy_timeout``: how long a statement waits for
    another process's write lock before failing "database is locked".
    Blocking: run it in a worker thread.
    """
    if path != ":memory:" and not Path(path).parent.is_dir():
        raise StoreError(
            f"cannot open the SQLite event log {path!r}: its directory "
            f"{str(Path(path).parent)!r} does not exist; create it first"
        )
    try:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the SQLite event log {path!r}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        # Batches are blobs of tens of KB: larger pages make fewer overflow pages
        # to chain and write (about half the write cost of 4 KiB pages). Only a
        # new file takes it; an existing one keeps its page size.
        conn.execute("PRAGMA page_size = 16384")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        (page,) = conn.execute("PRAGMA page_size").fetchone()
        conn.execute(f"PRAGMA wal_autocheckpoint = {max(1, WAL_LIMIT // int(page))}")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        found = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        layout = FORMAT if found is None else found[0]
        if found is None:
            _run_script(conn, _SCHEMA)
            conn.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
        elif layout == "1":
            _run_script(conn, _MIGRATE_FROM_1.format(schema=_SCHEMA))
            conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (FORMAT,))
            layout = FORMAT
        if layout == FORMAT:
            conn.execute(_LEASES)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('epoch', ?)", (new_epoch(),))
        (epoch,) = conn.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.close()
        reason = unavailable_reason(exc)
        if reason is not None and "corrupted" not in reason:  # the disk, not the file
            raise StoreUnavailable(
                reason, f"cannot open the SQLite event log {path!r}: {exc}"
            ) from exc
        raise StoreError(
            f"cannot use {path!r} as an event log: {exc} (is it a SQLite database "
            f"this version of agui_pipes wrote?)"
        ) from exc
    if layout != FORMAT:
        conn.close()
        raise StoreError(
            f"the SQLite event log {path!r} has layout {layout!r}; this version of "
            f"agui_pipes reads layout {FORMAT!r} only: use another file"
        )
    return conn, str(epoch)


def checkpoint(conn: sqlite3.Connection, busy_ms: int) -> None:
    """Copy the WAL into the database and empty it, if nobody is in the way (at a run's end).

    ``TRUNCATE`` waits for readers and writers through the busy handler, so
    the handler is off for it: with another process reading (or writing),
    SQLite answers busy at once and the WAL stays as it is — it is folded at
    the next end, or by the automatic checkpoint (``WAL_LIMIT``). A checkpoint
    that fails (a full disk cannot take the pages) leaves the WAL as it was,
    which is still correct: the write it follows has committed, so it is not
    that write's failure. ``busy_ms`` is the busy timeout to restore.
    """
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.OperationalError:
        pass
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``); rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
