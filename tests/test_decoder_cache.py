"""One peer permuting key orders cannot use up the generated builders of every other peer.

The decoder compiles a builder per wire key set (the fast path of ``decode``
and of the relay). Key orders come from the wire, so the cache is keyed by
the set: every order of one set shares one builder, and the orders a peer
invents are remembered only up to a bound, while the model's own order — what
encoders write — always is. Before, 1,024 permuted events used the
process-wide compile budget up and every new shape from any peer took the
slow checked path from then on.
"""

from __future__ import annotations

import importlib
import itertools
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from ag_ui.core import BaseEvent

from agui_pipes import StreamTransformer, TransformerChain
from agui_pipes.codecs import encode_sse
from agui_pipes.decode import decode
from agui_pipes.relay import Relay

decode_module = importlib.import_module("agui_pipes.decode")

_CACHES = ("_BUILDERS", "_SET_BUILDERS", "_RELAY_ENTRIES", "_SHAPES", "_LANE_FACTORIES")


@pytest.fixture
def empty_caches() -> Iterator[None]:
    """Start from a process that has compiled nothing; put the caches back afterwards."""
    saved = {name: dict(getattr(decode_module, name)) for name in _CACHES}
    compiled = decode_module._COMPILED_BUILDERS[0]
    for name in _CACHES:
        getattr(decode_module, name).clear()
    decode_module._COMPILED_BUILDERS[0] = 0
    try:
        yield
    finally:
        for name, content in saved.items():
            cache = getattr(decode_module, name)
            cache.clear()
            cache.update(content)
        decode_module._COMPILED_BUILDERS[0] = compiled


_CHUNK_FIELDS = {
    "messageId": "m",
    "role": "assistant",
    "delta": "d",
    "name": "n",
    "timestamp": 5,
    "subagentRunId": "s",
}


def permuted_chunks(count: int) -> list[bytes]:
    """``count`` valid TEXT_MESSAGE_CHUNK events, one key set, each in its own key order."""
    keys = ["type", *_CHUNK_FIELDS]
    values: dict[str, Any] = {"type": "TEXT_MESSAGE_CHUNK", **_CHUNK_FIELDS}
    orders = itertools.islice(itertools.permutations(keys), count)
    return [json.dumps({k: values[k] for k in order}).encode() for order in orders]


class _PassToolStarts(StreamTransformer):
    """Promises to pass every TOOL_CALL_START: the relay forwards them on its lane."""

    event_types = ("TOOL_CALL_START",)

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event,)

    def passes(self, event_class: type[BaseEvent], fields: frozenset[str]) -> tuple[()]:
        return ()


_NEW_SHAPE = b'{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"search"}'
_NEW_KEY = ("TOOL_CALL_START", ("type", "toolCallId", "toolCallName"))


@pytest.mark.usefixtures("empty_caches")
def test_permuted_key_orders_do_not_crowd_out_a_later_shape_in_decode() -> None:
    attack = permuted_chunks(decode_module._BUILDER_LIMIT + 100)
    reference = decode(attack[0]).event
    for payload in attack:
        assert decode(payload).event == reference
    # Every order shares the one builder of the key set.
    assert decode_module._COMPILED_BUILDERS[0] == 1
    assert len(decode_module._BUILDERS) <= decode_module._BUILDER_LIMIT
    # A legitimate shape seen afterwards still gets its generated builder.
    assert decode(_NEW_SHAPE).event is not None
    assert decode_module._BUILDERS[_NEW_KEY] is not None
    assert decode_module._COMPILED_BUILDERS[0] == 2


@pytest.mark.usefixtures("empty_caches")
def test_permuted_key_orders_do_not_switch_the_relay_lane_off_for_a_later_shape() -> None:
    attacker = Relay(TransformerChain([]))
    attack = permuted_chunks(decode_module._BUILDER_LIMIT + 100)
    assert attacker.feed(attack) == b"".join(
        encode_sse(decode(p).event) for p in attack  # type: ignore[arg-type]
    )
    other = Relay(TransformerChain([_PassToolStarts()]))
    assert other.feed([_NEW_SHAPE, _NEW_SHAPE]) == (b"data: " + _NEW_SHAPE + b"\n\n") * 2
    assert other.events_forwarded == 2  # built by no one, forwarded on the lane


@pytest.mark.usefixtures("empty_caches")
def test_an_order_past_the_bound_still_uses_the_shared_builder() -> None:
    attack = permuted_chunks(decode_module._BUILDER_LIMIT + 100)
    for payload in attack:
        decode(payload)
    late = attack[-1]
    key = ("TEXT_MESSAGE_CHUNK", tuple(json.loads(late)))
    assert key not in decode_module._BUILDERS  # not remembered: the table is full
    canonical = ("TEXT_MESSAGE_CHUNK", frozenset(key[1]))
    assert decode_module._SET_BUILDERS[canonical] is not None
    assert decode(late).event == decode(attack[0]).event
    assert decode_module._COMPILED_BUILDERS[0] == 1  # nothing compiled again


def test_every_builder_key_set_fits_the_compile_budget() -> None:
    # The bound on compiled builders is never what stops a key set: AG-UI 1.0
    # has fewer builder key sets than the bound, whatever their orders.
    total = 0
    for spec in decode_module._SPECS.values():
        keys = [k for k in spec.fields if spec.builder_attr(k) is not None]
        required = [f.key for f in spec.required]
        if all(r in keys for r in required):
            total += 2 ** (len(keys) - len(required))
    assert total < decode_module._BUILDER_LIMIT
