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
    # What type checkers see; `_EXPORTS` below is what runs (a test keeps them equal).
    from ._assertions import assert_events_equal as assert_events_equal
    from ._assertions import event_lines as event_lines
    from ._assertions import run_transformer as run_transformer
    from ._builders import reasoning as reasoning
    from ._builders import run_error as run_error
    from ._builders import run_events as run_events
    from ._builders import run_finished as run_finished
    from ._builders import run_started as run_started
    from ._builders import step as step
    from ._builders import subagent as subagent
    from ._builders import tagged as tagged
    from ._builders import text as text
    from ._builders import text_chunks as text_chunks
    from ._builders import tool_call as tool_call
    from ._builders import tool_call_chunks as tool_call_chunks
    from ._collect import collect as collect
    from ._mock.faults import FAULT_HEADER as FAULT_HEADER
    from ._mock.replay import ReplayError as ReplayError
    from ._mock.scenarios import ScenarioFile as ScenarioFile
    from ._mock.scenarios import load_scenarios as load_scenarios
    from ._mock.server import MockServer as MockServer
    from ._mock.server import mock_app as mock_app
else:
    from .._lazy import attach as _attach

    _EXPORTS = {
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
    }
    __getattr__, __dir__ = _attach(__name__, _EXPORTS)
    __all__ = [*_EXPORTS]
