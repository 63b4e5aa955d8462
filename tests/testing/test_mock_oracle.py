"""The official TypeScript client (``@ag-ui/client`` HttpAgent) against the mock backend.

What a stock frontend sees: the scenario's messages and state for a normal run, a tool
round trip and an interrupt, and the client's own error for each fault it can notice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agui_pipes.testing import FAULT_HEADER, MockServer
from tests._mock_scenarios import SCENARIOS


@pytest.fixture(scope="module")
def mock() -> Iterator[MockServer]:
    with MockServer(SCENARIOS, keepalive=None) as server:
        yield server


def case(url: str, text: str, fault: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "url": url,
        "threadId": "t1",
        "runId": "r1",
        "initialMessages": [{"id": "u1", "role": "user", "content": text}],
        "headers": {FAULT_HEADER: fault} if fault else {},
        "timeoutMs": 10000,
        **extra,
    }


FAULTS = {
    "status=500": "HTTP 500",
    "status=429; retry-after=1": "HTTP 429",
    "malformed=2": "JSON",
    "break=not-open": "TEXT_MESSAGE_CONTENT",
    "break=duplicate-start": "TEXT_MESSAGE_START",
    "break=first-event": "First event must be 'RUN_STARTED'",
    "break=run-ended": "RUN_FINISHED",
    "duplicate=1": "RUN_STARTED",
    "drop-after=3": "terminated",
    "keepalive=0.05@1": "did not settle",  # the oracle's timeout: the run never ends
}
SILENT = ("truncate-after=3", "break=truncated", "stall=0.2@2")
"""Faults the official client does not notice: a run that stops without its terminal
event completes, as docs/testing.md says of the oracle (a frontend needs its own check)."""


def test_the_official_client_sees_what_the_scenarios_promise(
    mock: MockServer, ts_oracle: Callable[..., list[Any]]
) -> None:
    weather, answered, interrupted, *faulted = ts_oracle(
        [
            case(mock.url, "What's the weather?"),
            case(
                mock.url,
                "weather",
                initialMessages=[
                    {"id": "u1", "role": "user", "content": "weather"},
                    {
                        "id": "a1",
                        "role": "assistant",
                        "toolCalls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "show_weather", "arguments": "{}"},
                            }
                        ],
                    },
                    {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "shown"},
                ],
            ),
            case(mock.url, "delete"),
            *(case(mock.url, "long", fault, timeoutMs=2000) for fault in FAULTS),
            *(case(mock.url, "long", fault) for fault in SILENT),
        ]
    )
    assert weather["outcome"] == "completed", weather["error"]
    roles = [(m["role"], m.get("content")) for m in weather["messages"]]
    assert ("tool", '{"temp":21}') in roles
    calls = [c["function"]["name"] for m in weather["messages"] for c in m.get("toolCalls", [])]
    assert calls == ["get_weather", "show_weather"]
    assert answered["outcome"] == "completed", answered["error"]
    assert answered["messages"][-1]["content"] == "The card says shown."
    assert interrupted["outcome"] == "completed", interrupted["error"]
    finished = interrupted["events"][-1]
    assert finished["outcome"]["type"] == "interrupt"
    noticed, silent = faulted[: len(FAULTS)], faulted[len(FAULTS) :]
    for (fault, wording), result in zip(FAULTS.items(), noticed, strict=True):
        assert result["outcome"] == "failed", (fault, result)
        assert wording in (result["error"] or ""), (fault, result["error"])
    for fault, result in zip(SILENT, silent, strict=True):
        assert result["outcome"] == "completed", (fault, result["error"])
