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
from agui_pipes.codecs import decode, encode_sse
from agui_pipes.relay import Relay

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

# The caches under test are the fast path's own: these tests take it explicitly
# (``fast_path=True``) and compare with the reference path (``fast_path=False``).
builders = importlib.import_module("agui_pipes._fastpath.builders")
bypass = importlib.import_module("agui_pipes._fastpath.bypass")
decode_spec = importlib.import_module("agui_pipes._protocol.decode")

_CACHES = (
    (builders, "BUILDERS"),
    (builders, "SET_BUILDERS"),
    (builders, "RELAY_ENTRIES"),
    (bypass, "SHAPES"),
    (bypass, "BYPASS_FACTORIES"),
)


@pytest.fixture
def empty_caches() -> Iterator[None]:
    """Start from a process that has compiled nothing; put the caches back afterwards."""
    saved = [dict(getattr(module, name)) for module, name in _CACHES]
    compiled = builders.COMPILED_BUILDERS[0]
    for module, name in _CACHES:
        getattr(module, name).clear()
    builders.COMPILED_BUILDERS[0] = 0
    try:
        yield
    finally:
        for (module, name), content in zip(_CACHES, saved, strict=True):
            cache = getattr(module, name)
            cache.clear()
            cache.update(content)
        builders.COMPILED_BUILDERS[0] = compiled


def fast(payload: bytes) -> BaseEvent | None:
    return decode(payload, fast_path=True).event


def reference(payload: bytes) -> BaseEvent | None:
    return decode(payload, fast_path=False).event


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
    """Promises to pass every TOOL_CALL_START: the relay forwards them on its bypass."""

    event_types = ("TOOL_CALL_START",)

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event,)

    def passes(self, event_class: type[BaseEvent], fields: frozenset[str]) -> tuple[()]:
        return ()


_NEW_SHAPE = b'{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"search"}'
_NEW_KEY = ("TOOL_CALL_START", ("type", "toolCallId", "toolCallName"))


@pytest.mark.usefixtures("empty_caches")
def test_permuted_key_orders_do_not_crowd_out_a_later_shape_in_decode() -> None:
    attack = permuted_chunks(builders.BUILDER_LIMIT + 100)
    expected = reference(attack[0])
    for payload in attack:
        assert fast(payload) == expected
    # Every order shares the one builder of the key set.
    assert builders.COMPILED_BUILDERS[0] == 1
    assert len(builders.BUILDERS) <= builders.BUILDER_LIMIT
    # A legitimate shape seen afterwards still gets its generated builder.
    assert fast(_NEW_SHAPE) == reference(_NEW_SHAPE) is not None
    assert builders.BUILDERS[_NEW_KEY] is not None
    assert builders.COMPILED_BUILDERS[0] == 2


@pytest.mark.usefixtures("empty_caches")
def test_permuted_key_orders_do_not_switch_the_relay_bypass_off_for_a_later_shape() -> None:
    attacker = Relay(TransformerChain([]), fast_path=True)
    attack = permuted_chunks(builders.BUILDER_LIMIT + 100)
    assert attacker.feed(attack) == b"".join(
        encode_sse(reference(p), fast_path=False)
        for p in attack  # type: ignore[arg-type]
    )
    other = Relay(TransformerChain([_PassToolStarts()]), fast_path=True)
    assert other.feed([_NEW_SHAPE, _NEW_SHAPE]) == (b"data: " + _NEW_SHAPE + b"\n\n") * 2
    assert other.events_forwarded == 2  # built by no one, forwarded on the bypass


@pytest.mark.usefixtures("empty_caches")
def test_an_order_past_the_bound_still_uses_the_shared_builder() -> None:
    attack = permuted_chunks(builders.BUILDER_LIMIT + 100)
    for payload in attack:
        fast(payload)
    late = attack[-1]
    key = ("TEXT_MESSAGE_CHUNK", tuple(json.loads(late)))
    assert key not in builders.BUILDERS  # not remembered: the table is full
    canonical = ("TEXT_MESSAGE_CHUNK", frozenset(key[1]))
    assert builders.SET_BUILDERS[canonical] is not None
    assert fast(late) == reference(late) == reference(attack[0])
    assert builders.COMPILED_BUILDERS[0] == 1  # nothing compiled again


def test_every_builder_key_set_fits_the_compile_budget() -> None:
    # The bound on compiled builders is never what stops a key set: AG-UI 1.0
    # has fewer builder key sets than the bound, whatever their orders.
    total = 0
    for spec in decode_spec.SPECS.values():
        keys = [k for k in spec.fields if spec.builder_attr(k) is not None]
        required = [f.key for f in spec.required]
        if all(r in keys for r in required):
            total += 2 ** (len(keys) - len(required))
    assert total < builders.BUILDER_LIMIT
