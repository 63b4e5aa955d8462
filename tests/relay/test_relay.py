"""Relay: decode → chain → encode in batches, equal to the event-by-event path."""

from __future__ import annotations

import json

import pytest
from ag_ui.core import BaseEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes import StageError, TransformerChain
from agui_pipes.codecs import DecodeError, decode, encode_sse
from agui_pipes.relay import Relay
from agui_pipes.testing import event_lines, run_events, text
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import (
    ExpandChunks,
    FilterToolCalls,
    SubagentVisibility,
    ToolResultToState,
    Verify,
)
from agui_pipes.verify import ProtocolViolation

# Every test here runs on the fast path and on the reference path (tests/conftest.py).
# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = [pytest.mark.usefixtures("wire_path"), pytest.mark.wire]


def chain() -> TransformerChain:
    return TransformerChain(
        [
            ExpandChunks(),
            Verify(),
            FilterToolCalls.deny(["internal_*"]),
            SubagentVisibility.inline(),
            ToolResultToState.delta("update_items"),
        ]
    )


def wire(events: list[BaseEvent], style: str = "sorted") -> list[bytes]:
    """The stream as NDJSON lines in one of several byte-level spellings."""
    if style == "sorted":
        return [line.encode() for line in event_lines(events)]
    if style == "canonical":  # exactly the encoder's bytes: the relay may pass them through
        return [e.model_dump_json(by_alias=True).encode() for e in events]
    if style in ("canonical-spaced", "canonical-escaped"):
        # One byte-level respelling of the encoder's own bytes: same event, not the
        # same bytes, so the relay must re-encode it (a space keeps the text ASCII
        # and escape-free, so only the length tells; an escaped letter in the
        # "type" key takes the re-serialising comparison).
        lines = wire(events, "canonical")
        if style == "canonical-spaced":
            return [line.replace(b",", b", ", 1) for line in lines]
        return [line.replace(b'"type"', b'"typ\\u0065"', 1) for line in lines]
    dumped = [e.model_dump(mode="json", by_alias=True) for e in events]
    if style == "spaced":
        return [json.dumps(d).encode() for d in dumped]
    return [json.dumps(d, ensure_ascii=True, separators=(",", ":")).encode() for d in dumped]


@settings(max_examples=200, deadline=None)
@given(
    streams(max_runs=2, tool_names=["search", "internal_debug", "update_items"]),
    st.integers(1, 7),
    st.sampled_from(
        ["sorted", "canonical", "spaced", "ascii", "canonical-spaced", "canonical-escaped"]
    ),
)
def test_relay_equals_apply_sync(events: list[BaseEvent], batch: int, style: str) -> None:
    lines = wire(events, style)
    expected = b"".join(
        encode_sse(e) for e in chain().apply_sync([decode(line).event for line in lines])
    )
    relay = Relay(chain())
    out = b"".join(relay.feed(lines[i : i + batch]) for i in range(0, len(lines), batch))
    assert out + relay.finish() == expected
    assert relay.events_in == len(lines)


@settings(max_examples=100, deadline=None)
@given(streams(max_runs=2, tool_names=["search", "internal_debug"]), st.integers(1, 7))
def test_feed_payloads_is_feed_unframed(events: list[BaseEvent], batch: int) -> None:
    """What the gateway records: the same events as ``feed``, each JSON apart, in order."""
    lines = wire(events, "sorted")
    framed, apart = Relay(chain()), Relay(chain())
    for i in range(0, len(lines), batch):
        items = apart.feed_payloads(lines[i : i + batch])
        assert framed.feed(lines[i : i + batch]) == b"".join(
            b"data: " + item + b"\n\n" for item in items
        )
    assert framed.finish() == b"".join(b"data: " + i + b"\n\n" for i in apart.finish_payloads())


def test_payloads_owed_after_a_failure_come_apart_too() -> None:
    lines = wire(run_events(text("m1", "hi")))
    bad = [*lines[:3], b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 5}']
    framed, apart = Relay(chain()), Relay(chain())
    for relay in (framed, apart):
        with pytest.raises(DecodeError):
            relay.feed(bad) if relay is framed else relay.feed_payloads(bad)
    items = apart.take_unsent_payloads()
    assert len(items) == 3 and all(item.startswith(b"{") for item in items)
    assert framed.take_unsent() == b"".join(b"data: " + i + b"\n\n" for i in items)
    assert apart.take_unsent_payloads() == []  # taken once


def test_feed_payloads_needs_a_known_framing() -> None:
    relay = Relay(chain(), encode=lambda event: b"<" + encode_sse(event) + b">")
    with pytest.raises(TypeError, match="encode_sse or encode_ndjson"):
        relay.feed_payloads(wire(run_events()))


def test_relay_reports_positions() -> None:
    lines = wire(run_events(text("m1", "hi")))
    bad = [*lines[:2], b'{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 5}']
    with pytest.raises(DecodeError) as info:
        Relay(chain()).feed(bad)
    assert info.value.index == 2
    relay = Relay(chain())
    relay.feed(lines[:-1])
    with pytest.raises(ProtocolViolation, match=r"truncated|still open") as rejected:
        relay.finish()
    assert "end of stream after 4 events" in str(rejected.value)


def test_relay_counts_unknown_events_and_warns() -> None:
    seen = []
    lines = [
        *wire(run_events())[:1],
        json.dumps({"type": "THINKING_START"}).encode(),
        wire(run_events())[1],
    ]
    relay = Relay(TransformerChain([ExpandChunks()]), on_warning=seen.append)
    out = relay.feed(lines) + relay.finish()
    assert out.count(b"data: ") == 2
    assert relay.events_in == 3
    assert [w.code for w in seen] == ["unknown-event-type"]


def test_relay_needs_a_sync_chain_used_once() -> None:
    from agui_pipes import AsyncStreamTransformer

    with pytest.raises(TypeError, match="synchronous"):
        Relay(TransformerChain([AsyncStreamTransformer()]))
    c = chain()
    Relay(c)
    with pytest.raises(RuntimeError, match="already processed"):
        Relay(c)
    relay = Relay(chain())
    relay.feed(wire(run_events()))
    relay.finish()
    with pytest.raises(RuntimeError, match="already called"):
        relay.finish()
    with pytest.raises(StageError) as info:
        Relay(TransformerChain([_Boom()])).feed(wire(run_events()))
    assert info.value.index == 0


class _Boom(ExpandChunks):
    def transform(self, event: BaseEvent):  # type: ignore[no-untyped-def, override]
        raise ValueError("bug")


def test_ndjson_invalid_utf8_is_an_error_not_a_replacement() -> None:
    from agui_pipes.codecs import CodecError, NDJSONDecoder

    decoder = NDJSONDecoder()
    good = b'{"type": "STEP_STARTED", "stepName": "ok"}\n'
    assert decoder.feed(good) == [good.decode().strip()]
    with pytest.raises(CodecError, match="not valid UTF-8"):
        decoder.feed(b'{"type": "STEP_STARTED", "stepName": "\xff"}\n')


def test_relay_passes_canonical_bytes_through_and_reencodes_the_rest() -> None:
    from agui_pipes.codecs import encode_ndjson

    events = run_events(text("m1", "héllo", "wörld"))
    lines = wire(events, "canonical")
    for encode in (encode_sse, encode_ndjson):
        relay = Relay(chain(), encode=encode)
        out = relay.feed(lines) + relay.finish()
        assert out == b"".join(encode(e) for e in events)
    escaped = wire(events, "ascii")
    relay = Relay(chain())
    assert relay.feed(escaped) + relay.finish() == b"".join(encode_sse(e) for e in events)
    assert b"\\u00e9" not in b"".join(encode_sse(e) for e in events)


def test_builder_caches_stay_bounded_and_correct_when_a_peer_varies_key_sets() -> None:
    """Key sets come from the wire: past the cache bounds they take the checked path."""
    import importlib
    import itertools

    builders = importlib.import_module("agui_pipes._fastpath.builders")

    caches = (builders.BUILDERS, builders.RELAY_ENTRIES, builders.SET_BUILDERS)
    saved = (*(dict(cache) for cache in caches), builders.COMPILED_BUILDERS[0])
    try:
        limit = builders.BUILDER_LIMIT
        negative = builders.NEGATIVE_LIMIT
        # Distinct key sets a hostile or sloppy peer might send (an unknown extra key each).
        junk = [
            json.dumps({"type": "RUN_STARTED", "threadId": "t", "runId": "r", f"x{i}": 1}).encode()
            for i in range(negative + 50)
        ]
        relay = Relay(TransformerChain([]), fast_path=True)
        out = relay.feed(junk)
        assert out.count(b"data: ") == len(junk)
        assert len(builders.BUILDERS) <= negative + limit
        assert len(builders.RELAY_ENTRIES) <= negative + limit
        # Junk does not crowd out builders: a plain key set seen now still gets one.
        events = run_events(text("m1", "a"))
        fresh = [e.model_dump_json(by_alias=True, exclude_none=True).encode() for e in events]
        relay = Relay(TransformerChain([]), fast_path=True)
        assert relay.feed(fresh) == b"".join(encode_sse(e) for e in events)
        content = fresh[2]
        assert builders.BUILDERS[("TEXT_MESSAGE_CONTENT", tuple(json.loads(content)))]
        # Valid key sets in every order: compiled builders stop at the bound.
        fields = {
            "subagentRunId": "s",
            "name": "n",
            "description": "d",
            "parentSubagentRunId": "p",
            "parentToolCallId": "c",
            "parentMessageId": "m",
        }
        orders = itertools.islice(itertools.permutations(fields), limit + 50)
        valid = [
            json.dumps({"type": "SUBAGENT_STARTED", **{k: fields[k] for k in order}}).encode()
            for order in orders
        ]
        relay = Relay(TransformerChain([]), fast_path=True)
        out = relay.feed(valid)
        assert builders.COMPILED_BUILDERS[0] <= limit
        assert out == b"".join(encode_sse(decode(line).event) for line in valid)  # type: ignore[arg-type]
    finally:
        for cache, content in zip(caches, saved[:3], strict=True):
            cache.clear()
            cache.update(content)  # type: ignore[attr-defined]
        builders.COMPILED_BUILDERS[0] = saved[3]
