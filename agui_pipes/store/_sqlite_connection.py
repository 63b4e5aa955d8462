"""The SQLite event log's connection: one ``sqlite3`` connection, its lock and thread hops.

``SQLiteConnection`` is the part of ``SQLiteEventLog`` that owns the file
handle: opening it off the event loop (``_sqlite_file.open_file``: layout,
migration, the epoch), running each call in a worker thread under one lock
(sqlite3 connections are not shared between threads otherwise), closing, and
the in-process change signals followers wait on. The queries (``sqlite.py``)
build on it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from ._base import ChangeSignals, EventLog
from ._errors import StoreError
from ._retention import Retention
from ._sqlite_file import open_file

__all__ = ["SQLiteConnection"]

_T = TypeVar("_T")


class SQLiteConnection(EventLog):
    """The connection, lock and change signals of one SQLite event log (module doc)."""

    def __init__(
        self, path: str | Path, retention: Retention | None = None, poll_interval: float = 0.1
    ) -> None:
        super().__init__(retention)
        if not poll_interval > 0:
            raise ValueError(
                f"poll_interval must be a positive number of seconds, got {poll_interval!r}"
            )
        self.path = str(path)
        self.poll_interval = poll_interval
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._signals = ChangeSignals()

    def __repr__(self) -> str:
        return f"SQLiteEventLog({self.path!r})"

    async def _call(self, function: Callable[[sqlite3.Connection], _T]) -> _T:
        conn = self._conn
        if conn is None:
            raise self._not_open()

        def locked() -> _T:
            with self._lock:
                return function(conn)

        try:
            return await anyio.to_thread.run_sync(locked)
        except sqlite3.Error as exc:
            # One family of errors for callers, whatever the backend; the
            # sqlite3 error (locked, disk full, I/O) stays chained.
            raise StoreError(f"the SQLite event log {self.path!r} failed: {exc}") from exc

    async def _open(self) -> str:
        self._conn, epoch = await anyio.to_thread.run_sync(open_file, self.path)
        return epoch

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        self._signals.changed_all()
        if conn is not None:

            def close() -> None:
                with self._lock:
                    conn.close()

            await anyio.to_thread.run_sync(close)

    def _change(self, scope: str, run_id: str) -> object:
        return self._signals.token((scope, run_id))

    async def _wait(self, change: object) -> None:
        assert isinstance(change, anyio.Event)
        with anyio.move_on_after(self.poll_interval):
            await change.wait()
