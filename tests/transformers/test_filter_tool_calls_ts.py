"""FilterToolCalls against the official FilterToolCallsMiddleware (@ag-ui/client 1.0.0).

Wherever the middleware's reach covers the stream (explicit tool-call events,
exact names), both must deliver the same messages and state. Where we
deliberately go further (snapshots, echo, pending ids, subagents,
globs) the middleware leaks and we do not — that is asserted separately, and
listed in docs/transformers/filter_tool_calls.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    ToolCall,
    ToolCallResultEvent,
)

from agui_pipes.testing import (
    reasoning,
    run_events,
    step,
    subagent,
    text,
    tool_call,
    tool_call_chunks,
)
from agui_pipes.transformers import FilterToolCalls
from tests.transformers._stage_helpers import consumed, through, wire

_CALL = ToolCall(id="c1", function=FunctionCall(name="secret_tool", arguments="{}"))
Oracle = Callable[..., list[dict[str, Any]]]

_CASES: list[tuple[str, list[BaseEvent]]] = [
    (
        "explicit calls, results, text around",
        run_events(
            text("m1", "hi")
            + tool_call("c1", "secret_tool", '{"a":', "1}", result="r1", parent_message_id="m1")
            + tool_call("c2", "search", '{"q":2}', result="r2", parent_message_id="m1")
            + text("m2", "bye")
        ),
    ),
    (
        "interleaved calls in a step, reasoning",
        run_events(
            step(
                "plan",
                reasoning("r1", "thinking")
                + tool_call("c1", "search", "{}")
                + tool_call("c2", "secret_tool", "{}")
                + [
                    ToolCallResultEvent(message_id="t2", tool_call_id="c2", content="x"),
                    ToolCallResultEvent(message_id="t1", tool_call_id="c1", content="y"),
                ],
            )
        ),
    ),
    (
        "blocked call inside a subagent (not spawning it)",
        run_events(
            subagent(
                "s1",
                "worker",
                text("m3", "sub") + tool_call("c3", "secret_tool", "{}", result="z"),
            )
            + text("m4", "parent")
        ),
    ),
    (
        "chunks with id-less continuations (the middleware sees them expanded)",
        run_events(
            text("m0", "x")
            + tool_call_chunks("c1", "secret_tool", '{"x"', ":1}", parent_message_id="m0")
            + tool_call_chunks("c2", "search", '{"y"', ":2}", parent_message_id="m0")
        ),
    ),
    ("only blocked calls", run_events(tool_call("c1", "secret_tool", "{}", result="only"))),
    (
        "two runs",
        run_events(tool_call("c1", "secret_tool", result="a"))
        + run_events(tool_call("c1", "search", result="b"), run_id="run-2"),
    ),
]


def _verdicts(
    oracle: Oracle, cases: Sequence[list[BaseEvent]], **mode: list[str]
) -> list[dict[str, Any]]:
    return oracle([{"stream": events, **mode} for events in cases])


@pytest.mark.parametrize("mode", ["deny", "allow"])
def test_agrees_with_the_middleware(ts_oracle: Oracle, mode: str) -> None:
    names = ["secret_tool"] if mode == "deny" else ["search"]
    ours_stage = FilterToolCalls(**{mode: names})
    results = _verdicts(ts_oracle, [events for _, events in _CASES], **{mode: names})
    for (label, events), theirs in zip(_CASES, results, strict=True):
        assert theirs["outcome"] == "completed", (label, theirs["error"])
        ours = consumed(through(ours_stage, events))
        assert ours.messages == theirs["messages"], label
        assert ours.state == theirs["state"], label


def test_where_we_go_further_the_middleware_leaks(ts_oracle: Oracle) -> None:
    """Documented differences: each of these streams leaks through the middleware."""
    leaks = {
        "snapshot": run_events(
            [
                *tool_call("c1", "secret_tool", "{}"),
                MessagesSnapshotEvent(messages=[AssistantMessage(id="a1", tool_calls=[_CALL])]),
            ]
        ),
        "spawned subagent": run_events(
            tool_call("c1", "secret_tool", "{}")
            + subagent("s1", "w", text("m2", "from the secret tool"), parent_tool_call_id="c1")
        ),
    }
    results = _verdicts(ts_oracle, list(leaks.values()), deny=["secret_tool"])
    stage = FilterToolCalls.deny(["secret_tool"])
    for (label, events), theirs in zip(leaks.items(), results, strict=True):
        ours = through(stage, events)
        consumed(ours)
        assert "secret_tool" not in wire(ours) and "from the secret" not in wire(ours), label
        leaked = str(theirs["messages"]) + str(theirs["events"])
        assert "secret" in leaked, label
