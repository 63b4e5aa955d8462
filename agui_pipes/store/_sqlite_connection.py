"""The SQLite event log's connection: one ``sqlite3`` connection, its lock and thread hops.

``SQLiteConnection`` is the part of ``SQLiteEventLog`` that owns the file
handle: opening it off the event loop (``_sqlite_file.open_file``: layout,
migration, the epoch), running each call in a worker thread under one lock
(sqlite3 connections are not shared between threads otherwise), closing, and
the in-process change signals followers wait on. The queries (``sqlite.py``)
build on it.

Every call is bounded by ``timeout`` seconds (5 by default), waiting for the
lock included: a stalled disk (a frozen file system, a dying device) blocks
the worker thread in a system call nobody can interrupt, so the caller stops
waiting at the deadline, the store reports itself stuck (``StoreUnavailable``
at once for every later call, and in ``health``) until that thread returns,
and no further thread piles up behind it. SQLite's own ``busy_timeout`` (for
another process holding the write lock) is half of it, so a lock held too
long is SQLite's "database is locked", not a deadline. Each write also checks
that the path still names the file that was opened: a file deleted or
replaced under the server would take writes that no restart can find.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from ._base import ChangeSignals, EventLog
from ._errors import StoreError, StoreUnavailable
from ._retention import Retention
from ._sqlite_faults import FileIdentity, file_identity, file_problem, unavailable_reason
from ._sqlite_file import open_file

__all__ = ["DEFAULT_TIMEOUT", "SQLiteConnection"]

_T = TypeVar("_T")

_log = logging.getLogger("agui_pipes.store")

DEFAULT_TIMEOUT = 5.0
"""Seconds one call to a SQLite event log may take, waiting for its lock included."""


class SQLiteConnection(EventLog):
    """The connection, lock and change signals of one SQLite event log (module doc)."""

    def __init__(
        self,
        path: str | Path,
        retention: Retention | None = None,
        poll_interval: float = 0.1,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(retention)
        if not poll_interval > 0:
            raise ValueError(
                f"poll_interval must be a positive number of seconds, got {poll_interval!r}"
            )
        if not (isinstance(timeout, int | float) and 0 < timeout <= 3600):
            raise ValueError(
                f"timeout must be a number of seconds from 0 (excluded) to 3600, got {timeout!r}"
            )
        self.path = str(path)
        self.poll_interval = poll_interval
        self.timeout = float(timeout)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._signals = ChangeSignals()
        self._identity: FileIdentity | None = None  # the file opened (None: in memory)
        self._busy_since: float | None = None  # monotonic start of the call holding the lock
        self._busy_call: threading.Event | None = None  # set once that call's caller gave up
        self._stuck_logged = False
        self._gone: str | None = None  # the file was deleted or replaced: for good
        self._failure: tuple[float, str] | None = None  # (when, why) the last write failed
        self._health: tuple[float, str | None] | None = None  # (when, answer) of the last probe
        self._writing: set[tuple[str, str]] = set()  # runs written here and not ended yet

    def __repr__(self) -> str:
        return f"SQLiteEventLog({self.path!r})"

    # -- calls -------------------------------------------------------------------

    async def _call(
        self, function: Callable[[sqlite3.Connection], _T], *, write: bool = True
    ) -> _T:
        """Run ``function`` on the connection in a worker thread, bounded by ``timeout``."""
        conn = self._conn
        if conn is None:
            raise self._not_open()
        self._check_not_stuck()
        if write and self._gone is not None:
            raise StoreUnavailable(self._gone, f"SQLite event log {self.path!r}")
        timeout = self.timeout
        abandoned = threading.Event()

        def locked() -> _T:
            if not self._lock.acquire(timeout=timeout):
                raise _LockWait
            try:
                if abandoned.is_set():
                    raise _LockWait  # the caller gave up: do not write behind its back
                self._busy_since = time.monotonic()
                self._busy_call = abandoned
                if write and self._identity is not None:
                    gone = file_problem(self.path, self._identity)
                    if gone is not None:
                        raise _Gone(gone)
                return function(conn)
            finally:
                self._busy_since = None
                self._busy_call = None
                self._lock.release()

        try:
            # Shielded, so a cancelled caller still waits for a write it started
            # (it may have committed); bounded, so a stalled disk cannot hold it.
            with anyio.CancelScope(shield=True), anyio.move_on_after(timeout) as deadline:
                result = await anyio.to_thread.run_sync(locked, abandon_on_cancel=True)
        except _LockWait:
            raise self._timed_out(write) from None
        except _Gone as exc:
            self._file_gone(str(exc))
            raise StoreUnavailable(str(exc), f"SQLite event log {self.path!r}") from None
        except sqlite3.Error as exc:
            # One family of errors for callers, whatever the backend; the
            # sqlite3 error (locked, disk full, I/O) stays chained.
            reason = unavailable_reason(exc)
            detail = f"the SQLite event log {self.path!r} failed: {exc}"
            if reason is None:
                raise StoreError(detail) from exc
            if write:
                self._failure = (time.monotonic(), reason)
            raise StoreUnavailable(reason, detail) from exc
        if deadline.cancelled_caught:
            abandoned.set()
            raise self._timed_out(write)
        if write:
            self._failure = None
        return result

    def _check_not_stuck(self) -> None:
        """Raise at once while a call that overran its deadline still holds the file."""
        since = self._busy_since
        if since is None:
            if self._stuck_logged:
                self._stuck_logged = False
                _log.warning("event log %s: the stalled call returned; writes go on", self.path)
            return
        late = time.monotonic() - since
        # Past its deadline, or given up on by its caller (whose deadline counted from
        # before the thread started, so ``late`` may still be just under ``timeout``).
        busy = self._busy_call
        if late > self.timeout or (busy is not None and busy.is_set()):
            raise StoreUnavailable(
                f"a write has not returned after {max(late, self.timeout):.1f} s "
                f"(timeout {self.timeout:g} s)",
                f"SQLite event log {self.path!r}: the disk is stalled or very slow",
            )

    def _timed_out(self, write: bool) -> StoreUnavailable:
        what = "write" if write else "read"
        reason = f"a {what} timed out after {self.timeout:g} s"
        if not self._stuck_logged:
            self._stuck_logged = True
            _log.error(
                "event log %s: a %s did not return within %g s (a stalled or very slow disk?); "
                "the store answers unavailable until it does",
                self.path,
                what,
                self.timeout,
            )
        return StoreUnavailable(reason, f"SQLite event log {self.path!r}")

    def _file_gone(self, reason: str) -> None:
        if self._gone is None:
            self._gone = reason
            _log.error(
                "event log %s: %s; writes are refused (they would be lost): restore the file "
                "or restart the server to create a new one",
                self.path,
                reason,
            )

    # -- lifecycle -----------------------------------------------------------------

    async def _open(self) -> str:
        timeout = self.timeout
        abandoned = threading.Event()

        def opening() -> tuple[sqlite3.Connection, str, FileIdentity | None]:
            conn, epoch = open_file(self.path, busy_ms=int(timeout * 500))
            if abandoned.is_set():  # the caller gave up: nobody will close it
                conn.close()
            identity = None if self.path == ":memory:" else file_identity(self.path)
            return conn, epoch, identity

        with anyio.CancelScope(shield=True), anyio.move_on_after(timeout) as deadline:
            self._conn, epoch, self._identity = await anyio.to_thread.run_sync(
                opening, abandon_on_cancel=True
            )
        if deadline.cancelled_caught:
            abandoned.set()
            raise StoreUnavailable(
                f"opening the database file timed out after {timeout:g} s",
                f"SQLite event log {self.path!r}: the disk is stalled or very slow",
            )
        return epoch

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        self._signals.changed_all()
        if conn is not None:
            timeout = self.timeout

            def close() -> None:
                # A stalled call holds the lock: the connection is left to it
                # rather than the shutdown waiting on the disk.
                if self._lock.acquire(timeout=timeout):
                    try:
                        conn.close()
                    finally:
                        self._lock.release()
                else:
                    _log.error("event log %s: closed without waiting for a stalled call", self.path)

            with anyio.CancelScope(shield=True), anyio.move_on_after(timeout):
                await anyio.to_thread.run_sync(close, abandon_on_cancel=True)

    def _change(self, scope: str, run_id: str) -> object:
        return self._signals.token((scope, run_id))

    async def _wait(self, change: object) -> None:
        assert isinstance(change, anyio.Event)
        with anyio.move_on_after(self.poll_interval):
            await change.wait()


class _LockWait(Exception):
    """The worker thread could not take the connection's lock in time (or was abandoned)."""


class _Gone(Exception):
    """The database file is not the one opened (deleted or replaced)."""
