"""pytest fixtures for testing stages, registered through the ``pytest11`` entry point.

Each fixture is the testing-kit function of the same name, prefixed ``agui_``
so it cannot collide with a project's own fixtures:

* ``agui_events`` — the builders module (``agui_events.text(...)``,
  ``agui_events.run_events(...)``).
* ``agui_run_transformer`` — ``run_transformer(stage, events)``: runs the given
  instance (pass ``stage.fresh()`` to keep a configured stage pristine).
* ``agui_assert_events_equal`` — ``assert_events_equal`` with its readable diff.
* ``agui_mock_server`` — a started ``MockServer`` (the fake AG-UI backend) on a
  free 127.0.0.1 port, stopped after the test; it serves the scenarios of
  ``agui_mock_scenarios`` (override that fixture — a path, YAML text or a
  mapping — or call ``agui_mock_server.use(...)`` in the test). The server has
  its own thread and loop, so the test may be sync, asyncio or trio.

The kit is imported when a fixture is first used, not when pytest loads the
plugin: every pytest session of a project with agui_pipes installed loads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from .._lazy import public_dir

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent

    from .._pipeline.transformer import Stage
    from ._mock.server import MockServer, ScenarioSource

__all__ = [
    "agui_assert_events_equal",
    "agui_events",
    "agui_mock_scenarios",
    "agui_mock_server",
    "agui_run_transformer",
]
__dir__ = public_dir(__all__)

_RunTransformer = Callable[["Stage", "Iterable[BaseEvent]"], "list[BaseEvent]"]


@pytest.fixture
def agui_events() -> ModuleType:
    """The event builders (``text``, ``tool_call``, ``run_events``, ...)."""
    from . import _builders

    return _builders


@pytest.fixture
def agui_run_transformer() -> _RunTransformer:
    """``run_transformer(stage, events)``: run a stage over events, then its ``finish()``."""
    from ._assertions import run_transformer

    return run_transformer


@pytest.fixture
def agui_assert_events_equal() -> Callable[..., None]:
    """``assert_events_equal(actual, expected)``: equality with a unified diff on failure."""
    from ._assertions import assert_events_equal

    return assert_events_equal


@pytest.fixture
def agui_mock_scenarios() -> ScenarioSource:
    """The scenarios ``agui_mock_server`` serves: none (override this fixture to give some)."""
    return None


@pytest.fixture
def agui_mock_server(agui_mock_scenarios: ScenarioSource) -> Iterator[MockServer]:
    """A ``MockServer`` serving ``agui_mock_scenarios`` on a free port of 127.0.0.1."""
    from . import MockServer

    with MockServer(agui_mock_scenarios) as server:
        yield server
