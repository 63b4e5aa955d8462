"""The TypeScript oracle harness itself: wire encoding, case validation, verdicts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageStartEvent,
)

from agui_pipes.testing import run_events, text, text_chunks, tool_call
from tests._oracle import OracleResult, run_one, to_wire
from tests._oracle import _wire_case as wire_case

Oracle = Callable[..., list[OracleResult]]


def _delta(*ops: dict[str, Any]) -> StateDeltaEvent:
    return StateDeltaEvent.model_validate({"delta": list(ops)})


def test_to_wire_omits_absent_fields_and_keeps_required_nulls() -> None:
    assert to_wire(TextMessageStartEvent(message_id="m1")) == {
        "type": "TEXT_MESSAGE_START",
        "messageId": "m1",
    }
    assert to_wire(StateSnapshotEvent(snapshot=None)) == {
        "type": "STATE_SNAPSHOT",
        "snapshot": None,
    }
    assert to_wire(CustomEvent(name="n", value=None))["value"] is None
    delta = to_wire(_delta({"op": "add", "path": "/a", "value": None}))
    assert delta["delta"] == [{"op": "add", "path": "/a", "value": None}]


def test_cases_are_validated_before_node_runs() -> None:
    with pytest.raises(ValueError, match="unknown keys"):
        wire_case({"events": []}, 3)
    with pytest.raises(ValueError, match="not both"):
        wire_case({"stream": [], "deny": ["a"], "allow": ["b"]}, 0)
    with pytest.raises(TypeError, match="case #2 event #1"):
        wire_case([{"type": "RUN_STARTED"}, 42], 2)
    with pytest.raises(TypeError, match="list of tool names"):
        wire_case({"stream": [], "deny": "internal_x"}, 0)
    assert wire_case(run_events(), 0)["stream"][0]["type"] == "RUN_STARTED"


def _types(result: OracleResult) -> list[str]:
    return [e["type"] for e in result["events"]]


@pytest.mark.node
def test_verdicts_come_back_in_case_order(ts_oracle: Oracle) -> None:
    good = run_events(text("m1", "Hel", "lo"))
    bad_first = text("m1", "x")
    unclosed = [*run_events()[:1], *text("m1", "x")[:2], *run_events()[1:]]
    results = ts_oracle([good, bad_first, {"stream": unclosed}, good])
    assert [r["outcome"] for r in results] == ["completed", "failed", "failed", "completed"]
    assert results[0]["messages"] == [{"id": "m1", "role": "assistant", "content": "Hello"}]
    assert "First event must be 'RUN_STARTED'" in (results[1]["error"] or "")
    assert "text messages are still active" in (results[2]["error"] or "")
    assert results[0] == results[3]  # a fresh agent per case: nothing leaks between cases


@pytest.mark.node
def test_chunks_are_delivered_expanded(ts_oracle: Oracle) -> None:
    (result,) = ts_oracle([run_events(text_chunks("m1", "a", "b"))])
    assert result["outcome"] == "completed"
    assert _types(result) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]


@pytest.mark.node
def test_filter_tool_calls_middleware_per_case(ts_oracle: Oracle) -> None:
    stream = run_events(
        text("m1", "hi")
        + tool_call("c1", "internal_debug", '{"a":1}', parent_message_id="m1")
        + tool_call("c2", "search", '{"q":2}', parent_message_id="m1")
    )
    plain, denied, allowed = ts_oracle(
        [
            stream,
            {"stream": stream, "deny": ["internal_debug"]},
            {"stream": stream, "allow": ["internal_debug"]},
        ]
    )

    def calls(result: OracleResult) -> list[str]:
        return [
            call["function"]["name"]
            for message in result["messages"]
            for call in message.get("toolCalls", [])
        ]

    assert calls(plain) == ["internal_debug", "search"]
    assert calls(denied) == ["search"]
    assert calls(allowed) == ["internal_debug"]


@pytest.mark.node
def test_state_application_and_patch_warnings(ts_oracle: Oracle) -> None:
    ok = run_events(
        [StateSnapshotEvent(snapshot={"n": 1}), _delta({"op": "replace", "path": "/n", "value": 2})]
    )
    failing = run_events([_delta({"op": "replace", "path": "/missing", "value": 2})])
    applied, skipped = ts_oracle([ok, failing])
    assert applied["state"] == {"n": 2}
    assert applied["warnings"] == []
    assert skipped["outcome"] == "completed"
    assert skipped["state"] == {}
    assert any("Failed to apply state patch" in w for w in skipped["warnings"])


@pytest.mark.node
def test_run_one_and_empty_batch(ts_oracle: Oracle) -> None:
    assert ts_oracle([]) == []
    result = run_one(run_events(tool_call("c1", "lookup", "{}", result="ok")))
    assert result["outcome"] == "completed"
    assert [m["role"] for m in result["messages"]] == ["assistant", "tool"]


class _SSEServer:
    """A stdlib HTTP server answering every POST with a fixed SSE event stream."""

    def __init__(self, events: list[BaseEvent]) -> None:
        body = "".join(f"data: {json.dumps(to_wire(e))}\n\n" for e in events).encode()
        received: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.received = received
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/agent"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _SSEServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.node
def test_url_cases_run_the_official_http_agent(ts_oracle: Oracle) -> None:
    stream = run_events(text("m1", "over ", "http"), thread_id="t-http", run_id="r-http")
    with _SSEServer(stream) as server:
        (result,) = ts_oracle(
            [
                {
                    "url": server.url,
                    "threadId": "t-http",
                    "runId": "r-http",
                    "forwardedProps": {"k": 1},
                }
            ]
        )
    assert result["outcome"] == "completed", result
    assert result["messages"] == [{"id": "m1", "role": "assistant", "content": "over http"}]
    (request,) = server.received
    assert request["threadId"] == "t-http"
    assert request["runId"] == "r-http"
    assert request["forwardedProps"] == {"k": 1}


def test_url_and_stream_are_exclusive() -> None:
    with pytest.raises(ValueError, match="exactly one of 'stream'"):
        wire_case({"stream": [], "url": "http://x"}, 0)
    with pytest.raises(ValueError, match="exactly one of 'stream'"):
        wire_case({"deny": ["a"]}, 0)
    with pytest.raises(ValueError, match="unknown keys"):
        wire_case({"stream": [], "denied": ["a"]}, 0)
    assert wire_case({"url": "http://x", "headers": {"a": "b"}}, 0) == {
        "url": "http://x",
        "headers": {"a": "b"},
    }


class _TickingServer:
    """Streams RUN_STARTED, then a CUSTOM tick every 50 ms; records a client disconnect."""

    def __init__(self, ticks: int = 200) -> None:
        self.disconnected = threading.Event()
        disconnected = self.disconnected

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    self._chunk(b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n')
                    for i in range(ticks):
                        time.sleep(0.05)
                        self._chunk(b'data: {"type":"CUSTOM","name":"tick","value":%d}\n\n' % i)
                except OSError:
                    disconnected.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/agent"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _TickingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.node
def test_abort_after_events_disconnects_from_the_server(ts_oracle: Oracle) -> None:
    with _TickingServer() as server:
        (result,) = ts_oracle([{"url": server.url, "abortAfterEvents": 3}])
        assert server.disconnected.wait(10), "the server never saw the client go away"
    assert 3 <= len(result["events"]) < 100
    assert result["events"][0]["type"] == "RUN_STARTED"


@pytest.mark.node
def test_timeout_fails_a_hanging_case(ts_oracle: Oracle) -> None:
    with _TickingServer() as server:
        (result,) = ts_oracle([{"url": server.url, "timeoutMs": 300}])
    assert result["outcome"] == "failed"
    assert "oracle timeout" in (result["error"] or "")
