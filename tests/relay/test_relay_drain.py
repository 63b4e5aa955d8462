"""``Relay.drain``: a stream cut off mid-run gives what the stages hold, on both paths.

For every built-in stage (each one that holds data is found by the property
itself: its ``finish()`` releases something for the prefix) and a random
valid stream cut where a run is open, the relay's output plus its drain is
what the stages give for the prefix and release at the end, without a
terminal event a stage makes of the cut (the server writes its own).
"""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from agui_pipes import TransformerChain
from agui_pipes._stagekit.builtins import BUILTINS, Builtin
from agui_pipes.codecs import encode_json, encode_sse
from agui_pipes.relay import Relay
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import ExpandChunks
from tests._differential import differential_settings
from tests._held import HOLDERS, built_in_stage, cut_points, released_at_cut

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

_TOOLS = ["search", "internal_debug", "debug_dump", "update_items"]
_NOW = 1_700_000_000_000_000_000


def _relayed(builtin: Builtin, payloads: list[bytes], batch: int) -> bytes:
    relay = Relay(TransformerChain([ExpandChunks(), built_in_stage(builtin)()]))
    out = b""
    for start in range(0, len(payloads), batch):
        out += relay.feed(payloads[start : start + batch])
    return out + relay.drain()


@pytest.mark.parametrize("builtin", BUILTINS, ids=lambda b: b.name)
@differential_settings(25)
@given(events=streams(max_runs=2, tool_names=_TOOLS), data=st.data(), batch=st.integers(1, 9))
def test_a_cut_stream_releases_what_the_stages_hold(
    builtin: Builtin, wire_path: bool, events: list, data: st.DataObject, batch: int
) -> None:
    points = cut_points(events)
    if not points:
        return
    prefix = events[: data.draw(st.sampled_from(points), label="cut")]
    payloads = [encode_json(event) for event in prefix]
    with mock.patch("time.time_ns", return_value=_NOW):
        expected, _ = released_at_cut([ExpandChunks(), built_in_stage(builtin)()], prefix)
        got = _relayed(builtin, payloads, batch)
    assert got == b"".join(encode_sse(event) for event in expected)


# The built-ins that hold data, found on the property's own streams: each must be
# seen holding, so the property above exercises its held data (and a new built-in
# that holds is named by this test failing, not by anyone remembering to list it).


def _cut_streams() -> st.SearchStrategy[list]:
    def cut(events: list) -> st.SearchStrategy[list]:
        points = cut_points(events)
        return st.sampled_from(points).map(lambda k: events[:k]) if points else st.nothing()

    return streams(max_runs=2, tool_names=_TOOLS).flatmap(cut)


def _holds(builtin: Builtin) -> bool:
    def held(prefix: list) -> bool:
        with mock.patch("time.time_ns", return_value=_NOW):
            return bool(released_at_cut([ExpandChunks(), built_in_stage(builtin)()], prefix)[1])

    try:
        find(
            _cut_streams(),
            held,
            settings=settings(max_examples=200, derandomize=True, database=None, deadline=None),
        )
    except NoSuchExample:
        return False
    return True


def test_the_holding_built_ins_are_found_holding_on_generated_streams() -> None:
    assert {builtin.name for builtin in BUILTINS if _holds(builtin)} == HOLDERS
