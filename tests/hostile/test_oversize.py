"""Oversized frames, lines and documents: refused at the cap, in bounded memory.

An NDJSON line or SSE frame past the decoders' cap (16 MiB by default) rejects
the stream at that event; a JSON-array file past its cap is refused before it is
parsed, with the way to stream it instead; the gateway answers UPSTREAM_MALFORMED.
Each case runs in a child process under the memory ceiling.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agui_pipes._cli._input import MAX_DOCUMENT_BYTES
from agui_pipes.codecs import DEFAULT_MAX_FRAME_BYTES

from ._harness import assert_clean, run_cli, serve_bytes, serve_gateway

_BIG = "x" * (DEFAULT_MAX_FRAME_BYTES + 64 * 1024)
_EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": _BIG},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]
_BODIES = {
    "ndjson": b"".join(json.dumps(e).encode() + b"\n" for e in _EVENTS),
    "sse": b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in _EVENTS),
}
_WHAT = {"ndjson": "one line exceeds the size cap", "sse": "one frame exceeds the size cap"}
# The input itself is ~17 MiB and the reader holds at most one capped frame.
_MEMORY_BOUND_MIB = 250


@pytest.mark.parametrize("fmt", ["ndjson", "sse"])
def test_verify_rejects_an_oversize_event_at_the_cap(fmt: str) -> None:
    outcome = run_cli("verify", "--input-format", fmt, "-", stdin=_BODIES[fmt])
    assert_clean(outcome, exit_code=1, message=_WHAT[fmt], max_rss_mib=_MEMORY_BOUND_MIB)
    assert "(after 2 events)" in outcome.stderr


@pytest.mark.parametrize("fmt", ["ndjson", "sse"])
def test_run_rejects_an_oversize_event_at_the_cap(fmt: str, tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text("version: 1\ntransformers:\n  - strip_raw_events\n", encoding="utf-8")
    outcome = run_cli("run", "-c", str(chain), "--input-format", fmt, "-", stdin=_BODIES[fmt])
    assert_clean(outcome, exit_code=1, message=_WHAT[fmt], max_rss_mib=_MEMORY_BOUND_MIB)
    # What came before the oversize event was written; nothing after it.
    written = outcome.stdout.decode()
    assert "TEXT_MESSAGE_START" in written and "RUN_FINISHED" not in written


def test_an_oversize_json_array_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    filler = {"type": "CUSTOM", "name": "n", "value": "v" * 1000}
    count = MAX_DOCUMENT_BYTES // len(json.dumps(filler)) + 100
    path = tmp_path / "big.json"
    path.write_text(json.dumps([_EVENTS[0], *([filler] * count)]), encoding="utf-8")
    outcome = run_cli("verify", str(path))
    # Parsed whole, ~65 MiB of JSON would take several hundred MiB as objects.
    assert_clean(outcome, exit_code=2, message="give it as NDJSON", max_rss_mib=300)


def test_the_gateway_answers_upstream_malformed_for_an_oversize_frame() -> None:
    with serve_bytes(_BODIES["sse"]) as upstream, serve_gateway(upstream) as gateway:
        response = httpx.post(
            gateway.url,
            json={
                "threadId": "t",
                "runId": "r",
                "messages": [],
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
            },
            timeout=60,
        )
    events = [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ]
    assert [e["type"] for e in events] == ["RUN_STARTED", "TEXT_MESSAGE_START", "RUN_ERROR"]
    assert events[-1]["code"] == "UPSTREAM_MALFORMED"
    assert "exceeds the size cap" in events[-1]["message"]
