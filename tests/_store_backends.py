"""Fixtures giving each event log test one store URL per backend (memory, SQLite, Redis,
Postgres)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._postgres import postgres_server
from tests._redis_server import redis_server

BACKENDS = ["memory", "sqlite", "redis", "postgres"]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server's database, for the whole session (tests/_postgres.py)."""
    with postgres_server() as url:
        yield url


def store_url_for(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of ``kind``: a new file, a new key prefix or schema on the shared
    server."""
    if kind == "memory":
        return "memory:"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    if kind == "postgres":
        url = request.getfixturevalue("postgres_url")
        return f"{url}?schema=t{uuid.uuid4().hex[:12]}"
    url = request.getfixturevalue("redis_url")
    return f"{url}?prefix=t{uuid.uuid4().hex[:12]}:"
