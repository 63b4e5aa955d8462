"""Messages the gateway writes never name what a stage of the chain hides (issue item 8).

The upstream is a pydantic-ai-like agent making parallel tool calls: with
OpenAI's interleaved deltas, pydantic-ai ends the first call when the second
starts and then sends a late argument delta for the first one — TOOL_CALL_ARGS
after TOOL_CALL_END, a protocol violation. When that first call is an internal
one the chain removes, its id and name must appear nowhere in what the client
receives: not in the events, not in a RUN_ERROR message.

Both gateway paths (relay: sync chain; apply: a chain with an async stage), over
real loopback HTTP, the chain declared in YAML as a user would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from agui_pipes import AsyncStreamTransformer, TransformerChain
from agui_pipes.codecs import SSEDecoder, decode
from agui_pipes.config import load_chain
from agui_pipes.server import Gateway
from tests._servers import RecordedUpstream, Running, run_input, serve, wait_until

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = [pytest.mark.anyio, pytest.mark.wire]

SECRETS = (b"internal-call-7", b"internal_lookup", b"res-internal", b"ROUTING-SECRET-99")


def _frames(*events: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


PYDANTIC_AI_PARALLEL = _frames(
    {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"},
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "internal-call-7",
        "toolCallName": "internal_lookup",
        "parentMessageId": "resp-1",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "internal-call-7", "delta": '{"acct":'},
    # part 1 starts: pydantic-ai ends part 0 first ...
    {"type": "TOOL_CALL_END", "toolCallId": "internal-call-7"},
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "call-9",
        "toolCallName": "search",
        "parentMessageId": "resp-1",
    },
    # ... then OpenAI's next delta is for part 0 again: ARGS after END.
    {"type": "TOOL_CALL_ARGS", "toolCallId": "internal-call-7", "delta": ' "A-1"}'},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "call-9", "delta": '{"q": "fx EUR"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "call-9"},
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "res-internal",
        "toolCallId": "internal-call-7",
        "content": "retry: ROUTING-SECRET-99 not found",
        "role": "tool",
    },
    {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": "message",
        "entityId": "res-internal",
        "encryptedValue": "b64...",
    },
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "res-9",
        "toolCallId": "call-9",
        "content": "0.92",
        "role": "tool",
    },
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "The rate is 0.92."},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"},
)

CONFLICTING_CHUNKS = _frames(
    {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"},
    {
        "type": "TOOL_CALL_CHUNK",
        "toolCallId": "internal-call-7",
        "toolCallName": "internal_lookup",
        "delta": '{"acct":',
    },
    # A continuation contradicting the first chunk: ExpandChunks refuses it, before
    # the chain, with a message naming the call and its tool.
    {
        "type": "TOOL_CALL_CHUNK",
        "toolCallId": "internal-call-7",
        "toolCallName": "internal_lookup_v2",
        "delta": ' "A-1"}',
    },
    {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"},
)

FILTER = """
  - type: filter_tool_calls
    deny: ["internal_*"]
"""
CHAINS = {
    # The usual chain: the gateway's verification, after it, sees a valid stream.
    "filter": "transformers:" + FILTER,
    # A Verify that raises *before* the filter: its message quotes the upstream.
    "verify-raise-first": "transformers:\n  - type: verify\n" + FILTER,
    # A Verify that writes a RUN_ERROR before the filter: the filter scrubs it.
    "verify-run-error-first": (
        "transformers:\n  - type: verify\n    on_violation: run_error\n" + FILTER
    ),
}


def _factory(yaml: str, mode: str) -> Any:
    loaded = load_chain(yaml)
    if mode == "relay":
        return loaded
    return lambda: TransformerChain([loaded(), AsyncStreamTransformer()])


@pytest.fixture(scope="module")
def gateway() -> Iterator[Running]:
    upstreams = [
        Route("/agent", RecordedUpstream(PYDANTIC_AI_PARALLEL), methods=["POST"]),
        Route("/chunks", RecordedUpstream(CONFLICTING_CHUNKS), methods=["POST"]),
    ]
    with serve(Starlette(routes=upstreams)) as upstream:
        gateways = {
            f"/{mode}/{name}": Gateway(upstream.url + "/agent", chain=_factory(yaml, mode))
            for mode in ("relay", "apply")
            for name, yaml in CHAINS.items()
        }
        for mode in ("relay", "apply"):
            gateways[f"/{mode}/chunks"] = Gateway(
                upstream.url + "/chunks", chain=_factory(CHAINS["filter"], mode)
            )
        routes = [Route(path, g, methods=["POST"]) for path, g in gateways.items()]

        @asynccontextmanager
        async def lifespan(app: object) -> AsyncIterator[None]:
            try:
                yield
            finally:
                for g in gateways.values():
                    await g.aclose()

        with serve(Starlette(routes=routes, lifespan=lifespan)) as server:
            yield server


async def _body(server: Running, path: str) -> bytes:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            server.url + path, json=run_input(), headers={"accept": "text/event-stream"}
        )
    assert response.status_code == 200
    return response.content


def _events(body: bytes) -> list[Any]:
    decoder = SSEDecoder()
    return [decode(p).event for p in decoder.feed(body)]


def _assert_no_trace(body: bytes) -> None:
    for secret in SECRETS:
        assert secret not in body, f"{secret!r} reached the client:\n{body.decode()}"


@pytest.mark.parametrize("mode", ["relay", "apply"])
async def test_a_violation_of_a_filtered_call_no_longer_ends_the_run(
    gateway: Running, mode: str
) -> None:
    body = await _body(gateway, f"/{mode}/filter")
    _assert_no_trace(body)
    events = _events(body)
    assert events[-1].type.value == "RUN_FINISHED", body.decode()
    assert [e.tool_call_id for e in events if e.type.value == "TOOL_CALL_START"] == ["call-9"]


@pytest.mark.parametrize("mode", ["relay", "apply"])
async def test_a_violation_found_before_the_filter_is_told_without_quoting_the_stream(
    gateway: Running, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agui_pipes.server")
    body = await _body(gateway, f"/{mode}/verify-raise-first")
    _assert_no_trace(body)
    error = _events(body)[-1]
    assert error.type.value == "RUN_ERROR"
    assert error.code == "PROTOCOL_VIOLATION"
    assert "rule `not-open`" in error.message
    assert "upstream event #5 (TOOL_CALL_ARGS)" in error.message
    # The operator still gets the whole story.
    await wait_until(
        lambda: any("internal-call-7" in r.getMessage() for r in caplog.records),
        2.0,
        "the full violation is logged",
    )


@pytest.mark.parametrize("mode", ["relay", "apply"])
async def test_a_run_error_written_before_the_filter_is_scrubbed_by_it(
    gateway: Running, mode: str
) -> None:
    body = await _body(gateway, f"/{mode}/verify-run-error-first")
    _assert_no_trace(body)
    error = _events(body)[-1]
    assert error.type.value == "RUN_ERROR"
    assert "No active tool call found with ID '[hidden]'" in error.message


@pytest.mark.parametrize("mode", ["relay", "apply"])
async def test_a_chunk_violation_before_the_chain_is_told_without_quoting_the_stream(
    gateway: Running, mode: str
) -> None:
    body = await _body(gateway, f"/{mode}/chunks")
    _assert_no_trace(body)
    error = _events(body)[-1]
    assert error.type.value == "RUN_ERROR" and error.code == "PROTOCOL_VIOLATION"
    assert "rule `chunk-conflict`" in error.message
    assert "upstream event #2 (TOOL_CALL_CHUNK), found by stage ExpandChunks" in error.message
