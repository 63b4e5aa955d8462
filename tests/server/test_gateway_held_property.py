"""A gateway whose upstream stops mid-run sends what the stages hold, then its RUN_ERROR.

The property of issue 27 for every built-in stage, on generated streams: the
upstream sends a valid stream cut where a run is open — ending there, or
followed by a malformed frame or half a frame — and the client receives
exactly what the chain gives for that prefix and releases at its end
(``tests._held.released_at_cut``, worked out the plain way), then the
gateway's RUN_ERROR with the code of the cut. Both gateway paths (a sync
chain through the relay, an async one through ``chain.apply``) and both wire
paths. The gateway is served in process (httpx's ASGI transport) so that
hypothesis can afford hundreds of runs; tests/server/test_gateway_held_data.py
takes the same path over real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from unittest import mock

import anyio
import httpx
import pytest
from ag_ui.core import BaseEvent
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes import AsyncStreamTransformer, TransformerChain
from agui_pipes._stagekit.builtins import BUILTINS, Builtin
from agui_pipes.codecs import SSEDecoder, encode_json, encode_sse
from agui_pipes.server import Gateway
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import ExpandChunks
from tests._differential import differential_settings
from tests._held import built_in_stage, cut_points, released_at_cut
from tests._servers import RecordedUpstream, run_input

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

_TOOLS = ["search", "internal_debug", "debug_dump", "update_items"]
_NOW = 1_700_000_000_000_000_000

ENDINGS = {
    "ends": (b"", "UPSTREAM_TRUNCATED"),
    "malformed": (b"data: {not json\n\n", "UPSTREAM_MALFORMED"),
    "half a frame": (b'data: {"type": "CUSTOM", "na', "UPSTREAM_TRUNCATED"),
}


class _AsyncPass(AsyncStreamTransformer):
    """Passes every event; makes the chain async, so the gateway runs ``chain.apply``."""

    async def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event,)


async def _client_stream(body: bytes, chain: TransformerChain) -> bytes:
    upstream = httpx.AsyncClient(transport=httpx.ASGITransport(RecordedUpstream(body)))
    gateway = Gateway("http://upstream.test/", chain=lambda: chain, client=upstream)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(gateway), base_url="http://gateway.test"
    ) as client:
        response = await client.post(
            "/", content=json.dumps(run_input()), headers={"accept": "text/event-stream"}
        )
    await upstream.aclose()
    assert response.status_code == 200
    return response.content


@pytest.mark.parametrize("builtin", BUILTINS, ids=lambda b: b.name)
@differential_settings(20)
@given(
    events=streams(max_runs=2, tool_names=_TOOLS),
    data=st.data(),
    ending=st.sampled_from(sorted(ENDINGS)),
    apply=st.booleans(),
)
def test_the_client_gets_the_held_data_then_the_gateways_run_error(
    builtin: Builtin,
    wire_path: bool,
    events: list[BaseEvent],
    data: st.DataObject,
    ending: str,
    apply: bool,
) -> None:
    points = cut_points(events)
    if not points:
        return
    prefix = events[: data.draw(st.sampled_from(points), label="cut")]
    tail, code = ENDINGS[ending]
    body = b"".join(encode_sse(event) for event in prefix) + tail
    stages = [built_in_stage(builtin)(), *([_AsyncPass()] if apply else [])]
    with mock.patch("time.time_ns", return_value=_NOW):
        expected, _ = released_at_cut([ExpandChunks(), built_in_stage(builtin)()], prefix)
        got = anyio.run(_client_stream, body, TransformerChain(stages))
    payloads = SSEDecoder().feed_bytes(got)
    if _ended(expected):  # the chain ended the run itself (a verifier's RUN_ERROR): no second
        assert payloads == [encode_json(event) for event in expected]
        return
    assert payloads[:-1] == [encode_json(event) for event in expected]
    error = json.loads(payloads[-1])
    assert (error["type"], error["code"]) == ("RUN_ERROR", code)


def _ended(events: Sequence[BaseEvent]) -> bool:
    """Whether the last run of ``events`` ended (the gateway then writes no terminal)."""
    for event in reversed(events):
        if event.type.value in ("RUN_FINISHED", "RUN_ERROR"):
            return True
        if event.type.value == "RUN_STARTED":
            return False
    return False
