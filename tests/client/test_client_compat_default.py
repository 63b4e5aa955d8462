"""``Client`` reads an agent's events with the reference client's boundary by default;
``compat=False`` is the strict 1.0 view."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agui_pipes.client import Client

pytestmark = pytest.mark.anyio

STARTED = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
THINKING = [
    {"type": "THINKING_START"},
    {"type": "THINKING_TEXT_MESSAGE_START"},
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "Let me check."},
    {"type": "THINKING_TEXT_MESSAGE_END"},
    {"type": "THINKING_END"},
]
INPUT = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "?"}]}


def _old_agent() -> httpx.AsyncClient:
    body = b"".join(
        b"data: " + json.dumps(item).encode() + b"\n\n" for item in [STARTED, *THINKING, FINISHED]
    )

    async def agent(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, stream=httpx.ByteStream(body), headers={"content-type": "text/event-stream"}
        )

    return httpx.AsyncClient(transport=httpx.MockTransport(agent))


async def _read(**options: Any) -> tuple[list[str], Any]:
    async with (
        _old_agent() as http,
        Client(http) as client,
        client.run("http://agent/", INPUT, **options) as events,
    ):
        types = [event.type.value async for event in events]
        return types, events.result()


async def test_thinking_events_are_translated_with_no_configuration() -> None:
    types, result = await _read()
    assert types[1:6] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]
    assert [(m["role"], m["content"]) for m in result.messages] == [("reasoning", "Let me check.")]
    codes = [warning.code for warning in result.warnings]
    assert "compat" in codes and "unknown-event-type" not in codes


async def test_compat_false_is_the_strict_view() -> None:
    types, result = await _read(compat=False)
    assert types == ["RUN_STARTED", "RUN_FINISHED"]
    assert result.messages == []
    assert [w.code for w in result.warnings].count("unknown-event-type") == 5


async def test_compat_false_with_a_peer_is_refused() -> None:
    with pytest.raises(ValueError, match="compat=False turns it off"):
        await _read(compat=False, peer="0.0.45")
