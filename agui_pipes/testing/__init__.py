"""Testing kit: builders, a stage runner, readable assertions, stream strategies.

Unit-testing a transformer takes a few lines::

    from agui_pipes.testing import run, text, run_transformer, assert_events_equal

    out = run_transformer(MyStage(), run(text("m1", "hi")))
    assert_events_equal(out, run(text("m1", "HI")))

Hypothesis strategies that generate valid AG-UI streams live in
``agui_pipes.testing.strategies`` (imported on demand, so hypothesis stays a
test-only dependency). Fixtures are registered with pytest by the package's
``pytest11`` entry point (``agui_pipes.testing.pytest_plugin``).
"""

from ._assertions import assert_events_equal, event_lines, run_transformer
from ._builders import (
    reasoning,
    run,
    run_error,
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

__all__ = [
    "assert_events_equal",
    "collect",
    "event_lines",
    "reasoning",
    "run",
    "run_error",
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
