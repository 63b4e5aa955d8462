"""Testing kit: builders, a stage runner, readable assertions, stream strategies.

Unit-testing a transformer takes a few lines::

    from agui_pipes.testing import run_events, text, run_transformer, assert_events_equal

    out = run_transformer(MyStage(), run_events(text("m1", "hi")))
    assert_events_equal(out, run_events(text("m1", "HI")))

Hypothesis strategies that generate valid AG-UI streams live in
``agui_pipes.testing.strategies`` (imported on demand, so hypothesis stays a
test-only dependency). Fixtures are registered with pytest by the package's
``pytest11`` entry point (``agui_pipes.testing.pytest_plugin``).

``MockServer`` (and ``agui-pipes mock``) is the other side: a fake AG-UI
backend for testing a frontend — scripted scenarios, replayed recordings,
planted faults (docs/testing.md, "Testing a frontend").
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._assertions import assert_events_equal, event_lines, run_transformer
    from ._builders import (
        reasoning,
        run_error,
        run_events,
        run_finished,
        run_started,
        step,
        subagent,
        tagged,
        text,
        text_chunks,
        tool_call,
        tool_call_chunks,
    )
    from ._collect import collect
    from ._mock.faults import FAULT_HEADER
    from ._mock.replay import ReplayError
    from ._mock.scenarios import ScenarioFile, load_scenarios
    from ._mock.server import MockServer, mock_app

    run = run_events
    """Deprecated: the 0.1 name of ``run_events``."""
else:
    from .._lazy import attach

    __getattr__, __dir__ = attach(
        __name__,
        {
            "assert_events_equal": "._assertions",
            "event_lines": "._assertions",
            "run_transformer": "._assertions",
            "reasoning": "._builders",
            "run_error": "._builders",
            "run_events": "._builders",
            "run_finished": "._builders",
            "run_started": "._builders",
            "step": "._builders",
            "subagent": "._builders",
            "tagged": "._builders",
            "text": "._builders",
            "text_chunks": "._builders",
            "tool_call": "._builders",
            "tool_call_chunks": "._builders",
            "collect": "._collect",
            "FAULT_HEADER": "._mock.faults",
            "ReplayError": "._mock.replay",
            "ScenarioFile": "._mock.scenarios",
            "load_scenarios": "._mock.scenarios",
            "MockServer": "._mock.server",
            "mock_app": "._mock.server",
        },
        deprecated={"run": "run_events"},
    )

__all__ = [
    "FAULT_HEADER",
    "MockServer",
    "ReplayError",
    "ScenarioFile",
    "assert_events_equal",
    "collect",
    "event_lines",
    "load_scenarios",
    "mock_app",
    "reasoning",
    "run_error",
    "run_events",
    "run_finished",
    "run_started",
    "run_transformer",
    "step",
    "subagent",
    "tagged",
    "text",
    "text_chunks",
    "tool_call",
    "tool_call_chunks",
]
