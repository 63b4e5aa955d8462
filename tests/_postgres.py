"""A real PostgreSQL server in a temporary directory, for the Postgres event log tests.

No mock: the backend's compare-and-set inserts, row locks and LISTEN/NOTIFY
wake-ups are exactly what a fake would get wrong. The server is a throwaway
cluster (``initdb`` in a fresh directory, run by the ``postgres`` user when the
tests run as root, since PostgreSQL refuses to run as root) listening on a
free loopback port, with ``fsync`` off: the tests check behaviour, not
durability across power loss (``durable=True`` keeps the defaults, for
benchmarks). When no ``initdb``/``pg_ctl`` exists, or they cannot run here, the
tests skip with a loud reason naming what is missing (``.ci/run`` installs the
``postgresql`` package).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

NO_POSTGRES = "POSTGRES BACKEND NOT TESTED: {why} (apt-get install postgresql; .ci/run installs it)"

_SEARCH = ("/usr/local/bin", *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True))
"""Where the server's binaries live besides PATH: Debian keeps them per major version."""


def postgres_binary(name: str) -> str | None:
    """The path of one of the server's programs (`initdb`, `pg_ctl`), or None."""
    found = shutil.which(name)
    if found is not None:
        return found
    for directory in _SEARCH:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _user() -> dict[str, Any]:
    """How to run the server's tools: as the ``postgres`` user when we are root
    (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return {}
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip(NO_POSTGRES.format(why="running as root and there is no 'postgres' user"))
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _run(command: list[str], user: dict[str, Any], cwd: Path, what: str) -> None:
    result = subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        check=False,
        timeout=120,
        **user,
    )
    if result.returncode != 0:
        output = result.stdout.decode(errors="replace")[-2000:]
        pytest.skip(NO_POSTGRES.format(why=f"{what} failed ({result.returncode}): {output}"))


@contextlib.contextmanager
def postgres_server(durable: bool = False) -> Iterator[str]:
    """Start a throwaway PostgreSQL; yield a ``postgresql://`` URL of its database; remove it.

    ``durable`` keeps PostgreSQL's own defaults (``fsync``, ``synchronous_commit``: every
    commit flushed to disk), for benchmarks; tests turn them off, they check behaviour.
    """
    initdb, pg_ctl = postgres_binary("initdb"), postgres_binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        missing = " and ".join(n for n, b in (("initdb", initdb), ("pg_ctl", pg_ctl)) if b is None)
        pytest.skip(NO_POSTGRES.format(why=f"no {missing} on PATH or in /usr/lib/postgresql"))
    user = _user()
    directory = Path(tempfile.mkdtemp(prefix="agui-pg-", dir="/tmp"))
    data = directory / "data"
    try:
        if user:
            os.chown(directory, user["user"], user["group"])
        _run(
            [initdb, "-D", str(data), "-U", "agui", "-A", "trust", "-E", "UTF8", "--no-sync"],
            user,
            directory,
            "initdb",
        )
        port = _free_port()
        options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        _run(
            [pg_ctl, "-D", str(data), "-o", options, "-l", str(directory / "log"), "-w", "start"],
            user,
            directory,
            "pg_ctl start",
        )
        try:
            _create_database(port)
            yield f"postgresql://agui@127.0.0.1:{port}/agui_test"
        finally:
            subprocess.run(
                [pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=directory,
                check=False,
                timeout=60,
                **user,
            )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _create_database(port: int) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(
                f"postgresql://agui@127.0.0.1:{port}/postgres", autocommit=True
            ) as conn:
                conn.execute("CREATE DATABASE agui_test")
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
