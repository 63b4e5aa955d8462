"""Fixtures giving each event log test one store URL per backend (memory, SQLite, Redis)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._redis_server import redis_server

BACKENDS = ["memory", "sqlite", "redis"]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


def store_url_for(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of ``kind``: a new file, or a new key prefix on the shared server."""
    if kind == "memory":
        return "memory:"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    url = request.getfixturevalue("redis_url")
    return f"{url}?prefix=t{uuid.uuid4().hex[:12]}:"
