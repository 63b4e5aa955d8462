"""StateFilter where users meet it: a chain file run by `agui-pipes run`, and the gateway.

The upstream is shaped like ag-ui-langgraph: the graph state carries the LangChain
``messages`` list, whose tool message holds a secret, next to what the UI renders.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from agui_pipes import Consumer, RunResult
from tests.hostile._harness import serve_bytes, serve_gateway

SECRET = "tok_live_4242"
CHAIN = """\
transformers:
  - type: state_filter
    allow: [/todos, /messages/*/content]
    deny: [/messages/*/tool_calls]
"""
STATE = {
    "messages": [
        {"type": "human", "content": "balance?"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "bank", "args": {"t": SECRET}}]},
    ],
    "todos": [],
    "config": {"api_key": SECRET},
}
EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "STATE_SNAPSHOT", "snapshot": STATE},
    {
        "type": "STATE_DELTA",
        "delta": [
            {"op": "add", "path": "/messages/-", "value": {"type": "tool", "content": "ok"}},
            {"op": "copy", "from": "/config", "path": "/todos/-"},
            {"op": "add", "path": "/todos/-", "value": {"title": "pay"}},
            {"op": "replace", "path": "/config/api_key", "value": SECRET + "-rotated"},
        ],
    },
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]
EXPECTED = {
    "messages": [{"content": "balance?"}, {"content": ""}, {"content": "ok"}],
    # /todos is allowed whole: a value copied there shows (pointers scope places)
    "todos": [{"api_key": SECRET}, {"title": "pay"}],
}


def _consumed(payloads: list[dict[str, Any]]) -> RunResult:
    consumer = Consumer()
    consumer.push_many(payloads)
    return consumer.finish()


def test_agui_pipes_run_applies_a_state_filter_chain_file(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(CHAIN)
    stream = tmp_path / "in.ndjson"
    stream.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    done = subprocess.run(
        [sys.executable, "-m", "agui_pipes", "run", "-c", str(chain), str(stream)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "-rotated" not in done.stdout and '"config"' not in done.stdout
    assert '"tool_calls"' not in done.stdout
    result = _consumed([json.loads(line) for line in done.stdout.splitlines()])
    assert result.state == EXPECTED


def test_the_gateway_sends_the_client_only_the_scoped_state(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(CHAIN)
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in EVENTS).encode()
    run_input = {
        "threadId": "t",
        "runId": "r",
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with serve_bytes(body) as upstream, serve_gateway(upstream, "--config", str(chain)) as gw:
        reply = httpx.post(gw.url, json=run_input, timeout=60)
    assert reply.status_code == 200
    text = reply.text
    assert "-rotated" not in text and '"tool_calls"' not in text
    payloads = [
        json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")
    ]
    assert _consumed(payloads).state == EXPECTED
