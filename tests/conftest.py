"""Shared test configuration: every async test runs on asyncio and on trio."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

# CI explores the same examples on every run (derandomize), so a landing cannot
# turn red by drawing a new random example; local runs keep exploring randomly
# (and keep their example database), which is where new failures are found.
# No example has a deadline: a deadline is a timing assertion, and on a loaded
# machine (two cores, the whole suite at once) a correct example can take seconds.
settings.register_profile("local", deadline=None)
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")

# The session's PostgreSQL server, visible to every module that parametrizes over the
# store backends (tests/_store_backends.py: BACKENDS), as redis_url is by import.
from tests._store_backends import postgres_url  # noqa: E402, F401

if TYPE_CHECKING:
    from tests._oracle import OracleResult


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# --- TypeScript oracle (tests/_oracle.py, tests/harness/) -------------------------------
# Tests marked ``node`` or using ``ts_oracle`` skip only when node/npm are missing;
# an install or harness failure is an error, never a silent skip.

_NODE_MISSING = "node/npm not found: the @ag-ui/client oracle (tests/harness) cannot run"


# The modules whose tests cross the wire entry points (decode, encode, Relay) end to end
# say so themselves, with a module-level ``pytestmark`` holding ``pytest.mark.wire``.
# CI runs them a second time with AGUI_PIPES_FAST_PATH=0 (`pytest -m wire`), so the
# reference path passes the same tests as the fast path, not only the equivalence ones.
# A test run on both paths by the ``wire_path`` fixture must be one of them.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests._oracle import ts_available

    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "wire_path" in fixtures and item.get_closest_marker("wire") is None:
            raise pytest.UsageError(
                f"{item.nodeid} runs on both wire paths (wire_path) but its module is not "
                "marked `pytestmark = pytest.mark.wire`, so `-m wire` would leave it out"
            )
        if "ts_oracle" in fixtures:
            item.add_marker(pytest.mark.node)
    if ts_available():
        return
    skip = pytest.mark.skip(reason=_NODE_MISSING)
    for item in items:
        if item.get_closest_marker("node") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def ts_oracle() -> Callable[..., list[OracleResult]]:
    """``run_oracle(cases)`` from tests/_oracle.py, with the node harness installed."""
    from tests._oracle import ensure_installed, run_oracle, ts_available

    if not ts_available():
        pytest.skip(_NODE_MISSING)
    ensure_installed()
    return run_oracle


# --- The wire's two paths (agui_pipes._fastpath and the reference path) ------------------


@pytest.fixture(params=[True, False], ids=["fast-path", "reference-path"], scope="module")
def wire_path(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Run a module's tests once per path of the wire entry points, as their default.

    ``decode``, ``encode_*`` and ``Relay`` read their ``fast_path`` default from
    ``agui_pipes._fastpath.ENABLED`` (what ``AGUI_PIPES_FAST_PATH`` sets): the
    module's tests, written against the defaults, check both paths' outputs.
    Module-scoped, so hypothesis tests may use it. Yields whether it is the fast path.
    """
    import agui_pipes._fastpath as fastpath

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fastpath, "ENABLED", bool(request.param))
        yield bool(request.param)
