"""What went wrong with a SQLite event log, in words a client may read.

Why apart from the connection: the mapping from ``sqlite3`` errors to
"the store cannot serve now" (``StoreUnavailable``, a 503 before a run
starts) is a table, and the file identity check (was the database file
deleted or replaced under the open connection?) is a ``stat``; both are
plain functions the connection (``_sqlite_connection``) calls.
"""

from __future__ import annotations

import os
import sqlite3

__all__ = ["FileIdentity", "file_identity", "file_problem", "unavailable_reason"]

FileIdentity = tuple[int, int]
"""(st_dev, st_ino) of the database file: what names the file the connection holds."""

# SQLite's primary result codes (sqlite3.h); Python 3.11 exposes them on the error.
_REASONS = {
    3: "the database file may not be written (permission denied)",  # SQLITE_PERM
    5: "the database is locked by another writer",  # SQLITE_BUSY
    6: "the database is locked by another writer",  # SQLITE_LOCKED
    7: "the store ran out of memory",  # SQLITE_NOMEM
    8: "the database file is read-only",  # SQLITE_READONLY
    10: "the disk failed a read or write (I/O error)",  # SQLITE_IOERR
    11: "the database file is corrupted",  # SQLITE_CORRUPT
    13: "the disk is full",  # SQLITE_FULL
    14: "the database file cannot be opened",  # SQLITE_CANTOPEN
    26: "the database file is corrupted",  # SQLITE_NOTADB
}

# Python 3.10 has no ``sqlite_errorcode``: the same table by SQLite's own messages.
_BY_MESSAGE = (
    ("disk is full", 13),
    ("readonly", 8),
    ("read-only", 8),
    ("disk i/o error", 10),
    ("database is locked", 5),
    ("malformed", 11),
    ("not a database", 26),
    ("unable to open", 14),
    ("out of memory", 7),
)


def unavailable_reason(exc: sqlite3.Error) -> str | None:
    """The client-safe reason when ``exc`` is a failure of the store itself, else None."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return _REASONS.get(code & 0xFF)
    text = str(exc).lower()
    for needle, primary in _BY_MESSAGE:
        if needle in text:
            return _REASONS[primary]
    return None


def file_identity(path: str) -> FileIdentity | None:
    """The file's (device, inode), or None when nothing is at ``path``."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


def file_problem(path: str, opened: FileIdentity) -> str | None:
    """Why the file at ``path`` is not the one opened as ``opened``, or None when it is."""
    now = file_identity(path)
    if now is None:
        return "the database file was deleted while the server had it open"
    if now != opened:
        return "the database file was replaced while the server had it open"
    return None
