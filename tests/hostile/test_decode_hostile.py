"""Deep nesting, huge numbers and NaN / Infinity, as a user meets them: CLI and gateway.

Each case runs the real ``agui-pipes`` command (or the gateway in front of a
fixed upstream) in a child under a memory ceiling, and must end the
documented way: ``verify`` and ``run`` exit 1 for a malformed event in an
NDJSON or SSE stream and 2 for a JSON-array file that is not valid JSON
(docs/cli.md), the gateway answers a RUN_ERROR with code
``UPSTREAM_MALFORMED``; always a message naming the problem, never a
traceback. Before, a 100k-deep array and a 1M-digit integer escaped as
``RecursionError`` / ``ValueError`` tracebacks (``INTERNAL_ERROR`` at the
gateway) and NaN was accepted, printed as ``NaN`` or turned into ``null``.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from agui_pipes._foundation import json as _json
from agui_pipes._foundation.limits import DEFAULT_LIMITS

from ._harness import assert_clean, run_cli, serve_bytes, serve_gateway

LIMIT = DEFAULT_LIMITS.max_depth
STARTED = '{"type":"RUN_STARTED","threadId":"t","runId":"r"}'
FINISHED = '{"type":"RUN_FINISHED","threadId":"t","runId":"r"}'


def custom(value: str) -> str:
    return '{"type":"CUSTOM","name":"n","value":' + value + "}"


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


# name -> (the bad event, words the error message must contain)
HOSTILE: dict[str, tuple[str, str]] = {
    "100k-deep": (custom(nested(100_000)), f"limit of {LIMIT} levels"),
    "1025-deep": (custom(nested(LIMIT)), f"limit of {LIMIT} levels"),
    "1M-digit integer": (custom("9" * 1_000_000), "range of a double"),
    "NaN": (custom("NaN"), "NaN is not JSON"),
    "Infinity": (custom("Infinity"), "Infinity is not JSON"),
    "-Infinity": (custom("-Infinity"), "-Infinity is not JSON"),
    "nested NaN": (
        '{"type":"STATE_SNAPSHOT","snapshot":{"a":[{"b":NaN}]}}',
        "NaN is not JSON",
    ),
}


def stream(fmt: str, events: list[str]) -> bytes:
    if fmt == "ndjson":
        return "".join(e + "\n" for e in events).encode()
    if fmt == "sse":
        return "".join(f"data: {e}\n\n" for e in events).encode()
    return ("[" + ",".join(events) + "]").encode()


CHAIN = "version: 1\ntransformers:\n  - type: expand_chunks\n"


@pytest.fixture
def chain_file(tmp_path: Path) -> str:
    path = tmp_path / "chain.yaml"
    path.write_text(CHAIN)
    return str(path)


@pytest.mark.parametrize("fmt", ["ndjson", "sse", "json"])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_verify_refuses_cleanly(name: str, fmt: str) -> None:
    bad, words = HOSTILE[name]
    data = stream(fmt, [STARTED, bad, FINISHED])
    outcome = run_cli("verify", "--result", "--input-format", fmt, "-", stdin=data)
    if fmt == "json":
        # The whole file is one JSON document, and it is not valid JSON.
        assert_clean(outcome, exit_code=2, message="is not valid JSON")
    else:
        assert_clean(outcome, exit_code=1, message="rejected:")
    assert words in outcome.stderr, outcome.describe()
    assert b"NaN" not in outcome.stdout and b"Infinity" not in outcome.stdout


@pytest.mark.parametrize("fmt", ["ndjson", "sse", "json"])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_run_refuses_cleanly(name: str, fmt: str, chain_file: str) -> None:
    bad, words = HOSTILE[name]
    data = stream(fmt, [STARTED, bad, FINISHED])
    outcome = run_cli("run", "-c", chain_file, "--input-format", fmt, "-", stdin=data)
    assert_clean(outcome, exit_code=2 if fmt == "json" else 1, message=words)
    assert b"null" not in outcome.stdout  # nothing was turned into null


@pytest.mark.parametrize("fmt", ["ndjson", "sse"])
def test_the_deepest_nesting_orjson_accepts_goes_through_unchanged(
    fmt: str, chain_file: str
) -> None:
    deepest = custom(nested(LIMIT - 1))  # the event object is level 1
    data = stream(fmt, [STARTED, deepest, FINISHED])
    verified = run_cli("verify", "--input-format", fmt, "-", stdin=data)
    assert_clean(verified, exit_code=0)
    ran = run_cli("run", "-c", chain_file, "--input-format", fmt, "-", stdin=data)
    assert_clean(ran, exit_code=0)
    assert deepest.encode() + b"\n" in ran.stdout


def test_in_a_json_array_the_array_is_one_of_the_levels(chain_file: str) -> None:
    fits = custom(nested(LIMIT - 2))  # the array and the event object are two levels
    outcome = run_cli("run", "-c", chain_file, "-", stdin=stream("json", [STARTED, fits, FINISHED]))
    assert_clean(outcome, exit_code=0)
    assert fits.encode() + b"\n" in outcome.stdout


def _run_error(gateway_url: str) -> dict[str, object]:
    run_input = {"threadId": "t", "runId": "r", "messages": []}
    response = httpx.post(
        gateway_url,
        json=run_input,
        headers={"accept": "text/event-stream"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    events = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    assert events, response.text
    last: dict[str, object] = events[-1]
    return last


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_gateway_answers_upstream_malformed(name: str) -> None:
    bad, words = HOSTILE[name]
    body = stream("sse", [STARTED, bad, FINISHED])
    with serve_bytes(body) as upstream, serve_gateway(upstream) as gateway:
        last = _run_error(gateway.url)
    assert last["type"] == "RUN_ERROR"
    assert last["code"] == "UPSTREAM_MALFORMED", last
    assert words in str(last["message"])
    # serve_gateway asserts on exit that the gateway's log holds no traceback.


def test_verify_result_prints_a_state_as_deep_as_decode_accepts() -> None:
    # Regression: `verify --result` wrote the result with the standard library's
    # recursive writer, which died near 1000 levels with a RecursionError traceback.
    levels = 1023  # the event is level 1, so its snapshot's arrays reach the limit
    state = "[" * levels + "]" * levels
    body = (
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        f'{{"type":"STATE_SNAPSHOT","snapshot":{state}}}\n'
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n'
    ).encode()
    outcome = run_cli("verify", "--result", "-", stdin=body)
    assert_clean(outcome, exit_code=0)
    printed = _json.loads(outcome.stdout)
    depth, node = 0, printed["state"]
    while isinstance(node, list):
        depth, node = depth + 1, (node[0] if node else None)
    assert depth == levels
