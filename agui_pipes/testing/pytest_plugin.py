"""pytest fixtures for testing stages, registered through the ``pytest11`` entry point.

Each fixture is the testing-kit function of the same name, prefixed ``agui_``
so it cannot collide with a project's own fixtures:

* ``agui_events`` — the builders module (``agui_events.text(...)``,
  ``agui_events.run_events(...)``).
* ``agui_run_transformer`` — ``run_transformer(stage, events)``: runs the given
  instance (pass ``stage.fresh()`` to keep a configured stage pristine).
* ``agui_assert_events_equal`` — ``assert_events_equal`` with its readable diff.

The kit is imported when a fixture is first used, not when pytest loads the
plugin: every pytest session of a project with agui_pipes installed loads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from .._lazy import public_dir

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent

    from .._pipeline.transformer import Stage

__all__ = ["agui_assert_events_equal", "agui_events", "agui_run_transformer"]
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
