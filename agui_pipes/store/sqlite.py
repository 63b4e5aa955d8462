"""``sqlite:///runs.db`` — the embedded event log for one server: a file, survives restarts.

Why stdlib ``sqlite3`` and not ``aiosqlite``: no dependency, and the few
blocking calls are easy to move off the event loop ourselves with
``anyio.to_thread.run_sync`` — which, unlike aiosqlite's own thread, works
on trio as well as asyncio.

* WAL mode: readers (followers, resuming clients) never block the writer,
  and other processes may open the same file to read it (``agui-pipes
  history``) while a server writes.
* ``synchronous=NORMAL``: a commit survives a crash of the process; a power
  loss may lose the last commits (the SQLite default trade-off for WAL).
* One connection per store object, used from worker threads under a lock:
  sqlite3 connections must not be used by two threads at once, and a
  batch append is one transaction (one fsync at most), so the lock is held
  for one short statement group at a time.
* Followers in this process wake when an append commits; followers in other
  processes poll every ``poll_interval`` seconds (0.1 by default), the only
  notification SQLite offers across processes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .._lazy import public_dir
from ._base import DEFAULT_SCOPE, check_page
from ._batches import join_batch, split_batch
from ._errors import RunBroken, UnknownRun
from ._records import RunStatus, StoredRun, ThreadRecord, check_appendable
from ._retention import doomed_runs
from ._sqlite_claims import SQLiteClaims, claim_thread
from ._sqlite_connection import DEFAULT_TIMEOUT
from ._sqlite_file import checkpoint, immediate
from ._url import EXAMPLES, StoreURL

__all__ = ["SQLiteEventLog"]
__dir__ = public_dir(__all__)


_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)
"""``UPDATE ... RETURNING`` (SQLite 3.35+): an append to a live run in two statements."""

_COLUMNS = "id, thread_id, run_id, status, created, updated, ended, last_seq, reason, scope"

_Row = tuple[int, str, str, str, float, float, "float | None", int, "str | None", str]


def _record(row: _Row) -> StoredRun:
    _, thread_id, run_id, status, created, updated, ended, last_seq, reason, scope = row
    return StoredRun(
        thread_id, run_id, RunStatus(status), created, updated, ended, last_seq, reason, scope
    )


class SQLiteEventLog(SQLiteClaims):
    """The event log in one SQLite file; see the module docstring."""

    @classmethod
    def from_url(cls, url: StoreURL) -> SQLiteEventLog:
        """``sqlite:///`` then the file's path; options ``poll`` and ``timeout``."""
        if not url.text.lower().startswith("sqlite:///") or url.parts.netloc:
            raise ValueError(
                f"store URL {url.text!r}: a SQLite URL is 'sqlite:///' followed by the file's "
                f"path (three slashes, then the path; a fourth for an absolute one); {EXAMPLES}"
            )
        path = url.parts.path[1:]
        if not path:
            raise ValueError(f"store URL {url.text!r} names no database file; {EXAMPLES}")
        poll = url.number("poll", float, 0.1)
        timeout = url.number("timeout", float, DEFAULT_TIMEOUT)
        url.no_more()
        return cls(path, url.retention, poll_interval=poll, timeout=timeout)

    # -- lifecycle -------------------------------------------------------------

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

        def write(conn: sqlite3.Connection) -> tuple[int, bool]:
            with immediate(conn):
                if count and _RETURNING:
                    # The common case, a live run of this thread, in two statements:
                    # the run's row moved on and read back at once, then the batch.
                    moved = conn.execute(
                        "UPDATE runs SET last_seq = last_seq + ?, updated = ?"
                        " WHERE scope = ? AND run_id = ? AND thread_id = ? AND status = 'live'"
                        " RETURNING id, last_seq",
                        (count, now, scope, run_id, thread_id),
                    ).fetchone()
                    if moved is not None:
                        key, last = moved[0], moved[1] - count
                        conn.execute(
                            "INSERT INTO batches (run, last_seq, first_seq, data, lengths)"
                            " VALUES (?, ?, ?, ?, ?)",
                            (key, last + count, last + 1, data, lengths),
                        )
                        return last + 1, False
                # A new run, or one that refuses the append: read it and say why.
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM runs WHERE scope = ? AND run_id = ?", (scope, run_id)
                ).fetchone()
                if row is None:
                    claim_thread(conn, thread_id, scope, now)
                    cursor = conn.execute(
                        "INSERT INTO runs (scope, run_id, thread_id, status, created, updated,"
                        " last_seq) VALUES (?, ?, ?, 'live', ?, ?, 0)",
                        (scope, run_id, thread_id, now, now),
                    )
                    key, last, created = cursor.lastrowid, 0, True
                    assert key is not None
                else:
                    check_appendable(_record(row), thread_id)
                    key, last, created = row[0], row[7], False
                if count:
                    conn.execute(
                        "INSERT INTO batches (run, last_seq, first_seq, data, lengths)"
                        " VALUES (?, ?, ?, ?, ?)",
                        (key, last + count, last + 1, data, lengths),
                    )
                    conn.execute(
                        "UPDATE runs SET last_seq = ?, updated = ? WHERE id = ?",
                        (last + count, now, key),
                    )
            return last + 1, created

        first, created = await self._call(write)
        self._writing.add((scope, run_id))
        if payloads:
            self._signals.changed((scope, run_id))
        if created and self._sweep_due(now):
            await self.prune(now)
        return list(range(first, first + len(payloads)))

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
        key = (scope, run_id)
        # The last run this store writes has ended: a quiet moment to fold the WAL into
        # the database and empty it (see WAL_LIMIT), so it does not stay at its peak.
        # While other runs are being written, the automatic checkpoint does it, instead
        # of one checkpoint (a disk sync) per run's end.
        quiet = not (self._writing - {key})

        def write(conn: sqlite3.Connection) -> _Row | None:
            conn.execute(
                "UPDATE runs SET status = ?, ended = ?, updated = ?, reason = ?"
                " WHERE scope = ? AND run_id = ? AND status = 'live'",
                (status.value, now, now, reason, scope, run_id),
            )
            row: _Row | None = conn.execute(
                f"SELECT {_COLUMNS} FROM runs WHERE scope = ? AND run_id = ?", (scope, run_id)
            ).fetchone()
            if quiet:
                checkpoint(conn, int(self.timeout * 500))
            return row

        row = await self._call(write)
        self._writing.discard(key)
        if row is None:
            raise UnknownRun(run_id)
        self._signals.changed((scope, run_id))
        return _record(row)

    async def mark_broken(self, run_id: str, reason: str, *, scope: str = DEFAULT_SCOPE) -> None:
        self._check_open()
        now = self._now()

        def write(conn: sqlite3.Connection) -> None:
            with immediate(conn):
                conn.execute(
                    "INSERT INTO runs (scope, run_id, thread_id, status, created, updated, ended,"
                    " last_seq, reason) VALUES (?, ?, '', 'broken', ?, ?, ?, 0, ?)"
                    " ON CONFLICT (scope, run_id) DO UPDATE SET status = 'broken', updated = ?,"
                    " ended = ?, reason = ?",
                    (scope, run_id, now, now, now, reason, now, now, reason),
                )
                conn.execute(
                    "DELETE FROM batches WHERE run ="
                    " (SELECT id FROM runs WHERE scope = ? AND run_id = ?)",
                    (scope, run_id),
                )

        await self._call(write)
        self._writing.discard((scope, run_id))
        self._signals.changed((scope, run_id))

    async def prune(self, now: float | None = None) -> int:
        self._check_open()
        when = self._now() if now is None else now
        retention = self.retention

        def write(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            with immediate(conn):
                rows = conn.execute(f"SELECT {_COLUMNS} FROM runs ORDER BY id").fetchall()
                doomed = doomed_runs([_record(row) for row in rows], retention, when)
                for scope, run_id in doomed:
                    conn.execute(
                        "DELETE FROM batches WHERE run ="
                        " (SELECT id FROM runs WHERE scope = ? AND run_id = ?)",
                        (scope, run_id),
                    )
                    conn.execute("DELETE FROM runs WHERE scope = ? AND run_id = ?", (scope, run_id))
                    conn.execute(
                        "DELETE FROM marks WHERE scope = ? AND run_id = ?", (scope, run_id)
                    )
                if doomed:
                    # A thread whose last run went is no one's any more.
                    conn.execute(
                        "DELETE FROM threads WHERE NOT EXISTS"
                        " (SELECT 1 FROM runs WHERE runs.thread_id = threads.thread_id)"
                    )
            return doomed

        doomed = await self._call(write)
        for key in doomed:
            self._writing.discard(key)
            self._signals.changed(key)
        return len(doomed)

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

        def query(conn: sqlite3.Connection) -> list[tuple[int, bytes]]:
            row = conn.execute(
                "SELECT id, status, reason FROM runs WHERE scope = ? AND run_id = ?",
                (scope, run_id),
            ).fetchone()
            if row is None:
                raise UnknownRun(run_id)
            key, status, reason = row
            if status == RunStatus.BROKEN.value:
                raise RunBroken(run_id, reason or "a write failed")
            entries: list[tuple[int, bytes]] = []
            batches = conn.execute(
                "SELECT first_seq, data, lengths FROM batches WHERE run = ? AND last_seq > ?"
                " ORDER BY last_seq",
                (key, after),
            )
            for first_seq, data, lengths in batches:
                entries.extend(split_batch(first_seq, data, lengths, after))
                if limit is not None and len(entries) >= limit:
                    del entries[limit:]
                    break
            return entries

        return await self._call(query, write=False)

    async def run(self, run_id: str, *, scope: str = DEFAULT_SCOPE) -> StoredRun | None:
        self._check_open()

        def query(conn: sqlite3.Connection) -> _Row | None:
            row: _Row | None = conn.execute(
                f"SELECT {_COLUMNS} FROM runs WHERE scope = ? AND run_id = ?", (scope, run_id)
            ).fetchone()
            return row

        row = await self._call(query, write=False)
        return None if row is None else _record(row)

    async def thread_runs(self, thread_id: str, *, scope: str = DEFAULT_SCOPE) -> list[StoredRun]:
        self._check_open()

        def query(conn: sqlite3.Connection) -> list[StoredRun]:
            rows: list[_Row] = conn.execute(
                f"SELECT {_COLUMNS} FROM runs WHERE thread_id = ? AND scope = ? ORDER BY id",
                (thread_id, scope),
            ).fetchall()
            # The records are made in the worker thread too: a thread of 10,000 runs
            # took the event loop ~0.1 s to turn into records.
            return [_record(row) for row in rows]

        return await self._call(query, write=False)

    async def thread_scope(self, thread_id: str) -> str | None:
        self._check_open()

        def query(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT scope FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._call(query, write=False)

    async def threads(
        self, *, scope: str = DEFAULT_SCOPE, limit: int = 50, before: int | None = None
    ) -> list[ThreadRecord]:
        self._check_open()
        check_page(limit, before)

        def query(conn: sqlite3.Connection) -> list[tuple[str, float, int]]:
            rows: list[tuple[str, float, int]] = conn.execute(
                "SELECT thread_id, created, id FROM threads WHERE scope = ? AND id < ?"
                " ORDER BY id DESC LIMIT ?",
                (scope, (1 << 62) if before is None else before, limit),
            ).fetchall()
            return rows

        return [ThreadRecord(*row) for row in await self._call(query, write=False)]

    async def _put_mark(self, scope: str, run_id: str, kind: str, value: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO marks (scope, run_id, kind, value) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (scope, run_id, kind) DO UPDATE SET value = excluded.value",
                (scope, run_id, kind, value),
            )

        await self._call(write)

    async def _get_mark(self, scope: str, run_id: str, kind: str) -> str | None:
        def query(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT value FROM marks WHERE scope = ? AND run_id = ? AND kind = ?",
                (scope, run_id, kind),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._call(query, write=False)
