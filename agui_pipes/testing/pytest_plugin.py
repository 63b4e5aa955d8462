"""pytest fixtures for testing stages, registered through the ``pytest11`` entry point.

* ``agui_events`` — the builders module (``agui_events.text(...)``, ``.run(...)``).
* ``run_stage`` — ``run_stage(stage, events)``: run a *fresh* copy of ``stage``
  over ``events`` and return the output (the given instance stays pristine,
  so one configured stage can serve many cases).
* ``assert_events`` — ``assert_events_equal`` with its readable diff.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType

import pytest
from ag_ui.core import BaseEvent

from .._transformer import Stage
from . import _builders
from ._assertions import assert_events_equal, run_transformer


@pytest.fixture
def agui_events() -> ModuleType:
    """The event builders (``text``, ``tool_call``, ``run``, ...)."""
    return _builders


@pytest.fixture
def run_stage() -> Callable[[Stage, Iterable[BaseEvent]], list[BaseEvent]]:
    """Run a fresh copy of a stage over events and return its output."""

    def _run(stage: Stage, events: Iterable[BaseEvent]) -> list[BaseEvent]:
        return run_transformer(stage.fresh(), events)

    return _run


@pytest.fixture
def assert_events() -> Callable[..., None]:
    """``assert_events(actual, expected)``: equality with a unified diff on failure."""
    return assert_events_equal
