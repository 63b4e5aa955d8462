"""No trace of a filtered call, against the real `agui-pipes serve` under a memory ceiling.

An agent that streams its answer into the state by index, after an internal call
whose result sits in the state's message list, must not make the gateway send the
whole (scrubbed) state per token: one small delta in stays one small delta out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from ._harness import serve_bytes, serve_gateway

SECRET = "ROUTING-SECRET-99"


def _frames(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


def _stream(tokens: int) -> bytes:
    history = [{"type": "human", "id": f"h{i}", "content": "x" * 2000} for i in range(100)]
    messages = [
        *history,
        {
            "type": "ai",
            "id": "ai1",
            "content": "",
            "tool_calls": [{"id": "call_int", "name": "internal_ledger", "args": {}}],
        },
        {
            "type": "tool",
            "id": "t1",
            "tool_call_id": "call_int",
            "name": "internal_ledger",
            "content": SECRET,
        },
        {"type": "ai", "id": "ai2", "content": ""},
    ]
    answer = len(messages) - 1
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"messages": messages}},
        *(
            {
                "type": "STATE_DELTA",
                "delta": [
                    {"op": "replace", "path": f"/messages/{answer}/content", "value": f"t{i}"},
                    {"op": "add", "path": "/tokens", "value": i},
                ],
            }
            for i in range(tokens)
        ),
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    return _frames(events)


def test_streaming_into_the_state_after_a_removed_call_is_not_amplified(
    tmp_path: Path,
) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(
        'transformers:\n  - type: filter_tool_calls\n    deny: ["internal_*"]\n'
        '    state_messages: ["/messages"]\n'
    )
    body = _stream(2000)
    with serve_bytes(body) as upstream, serve_gateway(upstream, "--config", str(chain)) as gw:
        response = httpx.post(
            gw.url, json={"threadId": "t", "runId": "r", "messages": []}, timeout=60
        )
    assert response.status_code == 200
    out = response.content
    assert b"RUN_FINISHED" in out and b"RUN_ERROR" not in out
    assert SECRET.encode() not in out and b"call_int" not in out
    # ~200 KB of snapshot once, then small deltas: never the state per token (~400 MB).
    assert len(out) < 2 * len(body), (len(out), len(body))
    assert out.count(b"STATE_SNAPSHOT") == 1
