"""The relay's bypass never changes what comes out.

When every stage promises (``StreamTransformer.passes``) that an event of
its class and shape goes through unchanged, and the payload is already the
encoder's bytes, the relay forwards the payload without building the event
or calling any stage. The references are the same relay with the bypass
turned off (an ``on_input`` hook needs every event, so it disables the
bypass) and the relay on the reference path (``fast_path=False``): same
bytes out, the same error at the same event, on valid streams and on mutated
ones, for chains whose stages promise under different states.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import orjson
import pytest
from ag_ui.core import BaseEvent, TextMessageContentEvent
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes import Condition, StreamTransformer, TransformerChain
from agui_pipes._pipeline.chain import sync_segment
from agui_pipes.codecs import decode, encode_sse
from agui_pipes.relay import Relay
from agui_pipes.testing import run_events, text
from agui_pipes.transformers import (
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    SubagentVisibility,
    ToolResultToState,
    Verify,
)
from tests._differential import (
    assert_bypass_agrees,
    differential_settings,
    gateway_stages,
    relay_outcome,
)
from tests._wire_streams import mutate, valid_stream

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

_SETTINGS = differential_settings(60)

CHAINS: dict[str, Callable[[], list[StreamTransformer]]] = {
    "gateway": gateway_stages,
    # No expansion first: inline and the filter see chunk streams open and close.
    "unexpanded": lambda: [
        FilterToolCalls.allow(["search"]),
        SubagentVisibility.inline(),
    ],
    "verify-run-error": lambda: [ExpandChunks(), Verify(on_violation="run_error")],
    "verify-warn": lambda: [ExpandChunks(), Verify(on_violation="warn")],
    "producer": lambda: [ExpandChunks(), Verify(profile="producer")],
    "hidden": lambda: [ExpandChunks(), Verify(), SubagentVisibility.hidden()],
    "drop-reasoning": lambda: [ExpandChunks(), DropEvents(["reasoning"]), Verify()],
}


def _canonical(item: object) -> bytes:
    """The encoder's own bytes for an item that decodes; the item as sent otherwise."""
    try:
        event = decode(item).event  # type: ignore[arg-type]
    except Exception:
        event = None
    if event is None:
        return item if isinstance(item, bytes) else orjson.dumps(item)
    return encode_sse(event)[len(b"data: ") : -2]


def _compare(name: str, lines: Sequence[bytes], batch: int) -> int:
    return assert_bypass_agrees(CHAINS[name], lines, batch)


@pytest.mark.parametrize("name", sorted(CHAINS))
@_SETTINGS
@given(rng=st.randoms(use_true_random=False), batch=st.integers(1, 9), canonical=st.booleans())
def test_bypass_matches_the_full_path_on_valid_streams(
    name: str, rng: random.Random, batch: int, canonical: bool
) -> None:
    items = valid_stream(rng)
    lines = [_canonical(i) if canonical else orjson.dumps(i) for i in items]
    _compare(name, lines, batch)


@pytest.mark.parametrize("name", sorted(CHAINS))
@_SETTINGS
@given(rng=st.randoms(use_true_random=False), batch=st.integers(1, 9))
def test_bypass_matches_the_full_path_on_mutated_streams(
    name: str, rng: random.Random, batch: int
) -> None:
    items, _ = mutate(rng, valid_stream(rng))
    lines = [i if isinstance(i, bytes | str) else _canonical(i) for i in items]
    _compare(name, [line.encode() if isinstance(line, str) else line for line in lines], batch)


def test_the_bypass_carries_most_of_a_canonical_stream() -> None:
    """Not a timing: the bypass must actually be taken, or the tests above prove nothing."""
    rng = random.Random(7)
    lines = [_canonical(i) for _ in range(10) for i in valid_stream(rng)]
    deltas = sum(b'_CONTENT"' in line or b'TOOL_CALL_ARGS"' in line for line in lines)
    assert deltas > 20
    forwarded = _compare("gateway", lines, 8)
    assert deltas // 3 < forwarded <= deltas


def _content(message_id: str, delta: str) -> bytes:
    return b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"%s","delta":"%s"}' % (
        message_id.encode(),
        delta.encode(),
    )


def test_a_delta_after_run_error_is_refused_although_its_message_is_still_open() -> None:
    """Verify's promise ends with the run: RUN_ERROR leaves the message open but gated."""
    head = [_canonical(e.model_dump(by_alias=True, exclude_none=True)) for e in run_events()[:1]]
    lines = [
        *head,
        b'{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}',
        _content("m1", "a"),
        b'{"type":"RUN_ERROR","message":"boom"}',
        _content("m1", "b"),
    ]
    relay = Relay(TransformerChain([Verify()]), fast_path=True)
    with pytest.raises(Exception, match="RUN_ERROR"):
        relay.feed(lines)
    relay = Relay(TransformerChain([Verify()]), fast_path=True)
    relay.feed(lines[:3])
    assert relay.events_forwarded == 1  # the first delta went through the bypass


def test_a_blocked_calls_canonical_args_are_still_dropped() -> None:
    lines = [
        _canonical(e.model_dump(by_alias=True, exclude_none=True)) for e in run_events()[:1]
    ] + [
        b'{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"internal_x"}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"}',
        b'{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"search"}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"c2","delta":"{}"}',
    ]
    relay = Relay(
        TransformerChain([Verify(), FilterToolCalls.deny(["internal_*"])]), fast_path=True
    )
    out = relay.feed(lines)
    assert b'"c1"' not in out
    assert out.count(b'"c2"') == 2
    assert relay.events_forwarded == 1


class _Spy(StreamTransformer):
    """A plain stage: it makes no promise, so it must see every event."""

    def __init__(self) -> None:
        self.seen = 0

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self.seen += 1
        return (event,)


class _RoutesItsOwnWay(Verify):
    """Replaces ``route`` without restating ``passes``: Verify's promise is void."""

    def route(self, event_class: type[BaseEvent]) -> Callable[..., Sequence[BaseEvent]]:
        return self.transform


def _stream() -> list[bytes]:
    return [encode_sse(e)[6:-2] for e in run_events(text("m1", "a", "b", "c"))]


@pytest.mark.parametrize(
    "make",
    [
        lambda: [Verify(), _Spy()],
        lambda: [_RoutesItsOwnWay()],
        lambda: [Verify(enabled=False)],
    ],
    ids=["plain stage", "route replaced", "transform replaced"],
)
def test_stages_that_cannot_promise_see_every_event(
    make: Callable[[], list[StreamTransformer]],
) -> None:
    stages = make()
    relay = Relay(TransformerChain(stages), fast_path=True)
    out = relay.feed(_stream()) + relay.finish()
    assert out == b"".join(encode_sse(e) for e in run_events(text("m1", "a", "b", "c")))
    assert relay.events_forwarded == 0
    for stage in stages:
        if isinstance(stage, _Spy):
            assert stage.seen == len(_stream())


def test_a_stage_skipped_by_its_route_does_not_block_the_bypass() -> None:
    lines = _stream()
    relay = Relay(TransformerChain([Verify(), ToolResultToState.delta("x")]), fast_path=True)
    relay.feed(lines)
    assert relay.events_forwarded == 3


class _OnlyFrom(StreamTransformer):
    """A user stage with its own promise: deltas of allowed messages pass."""

    event_types = ("TEXT_MESSAGE_CONTENT",)

    def __init__(self) -> None:
        self.allowed: set[str] = {"m1"}
        self.seen = 0

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self.seen += 1
        if isinstance(event, TextMessageContentEvent) and event.message_id in self.allowed:
            return (event,)
        return ()

    def passes(
        self, event_class: type[BaseEvent], fields: frozenset[str]
    ) -> tuple[Condition, ...] | None:
        return (Condition.member("message_id", self.allowed),)


def test_a_user_stage_promise_is_honoured_and_its_container_read_live() -> None:
    stage = _OnlyFrom()
    relay = Relay(TransformerChain([stage]), fast_path=True)
    assert relay.feed([_content("m1", "a"), _content("m2", "b")]) == (
        b"data: " + _content("m1", "a") + b"\n\n"
    )
    assert (relay.events_forwarded, stage.seen) == (1, 1)
    stage.allowed.add("m2")
    assert relay.feed([_content("m2", "c")]) == b"data: " + _content("m2", "c") + b"\n\n"
    assert (relay.events_forwarded, stage.seen) == (2, 1)


def test_non_canonical_or_odd_values_take_the_full_path() -> None:
    stage = _OnlyFrom()
    relay = Relay(TransformerChain([stage]), fast_path=True)
    spaced = b'{"type":"TEXT_MESSAGE_CONTENT", "messageId":"m1","delta":"a"}'
    reordered = b'{"type":"TEXT_MESSAGE_CONTENT","delta":"a","messageId":"m1"}'
    escaped = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"\\u0061"}'
    unicode = '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"é"}'.encode()
    out = relay.feed([spaced, reordered, escaped, unicode])
    assert out == b"".join([b"data: " + _content("m1", "a") + b"\n\n"] * 3) + (
        b"data: " + unicode + b"\n\n"
    )
    assert (relay.events_forwarded, stage.seen) == (1, 3)  # the UTF-8 one is canonical
    with pytest.raises(Exception, match="delta"):
        relay.feed([b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":[]}'])


def test_condition_constructors() -> None:
    opened = {"m1"}
    assert Condition.member("message_id", opened) == ("message_id", opened, "in")
    assert Condition.not_member("tool_call_id", opened).kind == "not in"
    assert Condition.empty(opened) == (None, opened, "empty")


def test_an_untagged_delta_still_closes_an_open_chunk_stream_in_inline_mode() -> None:
    """Inline's promise holds only while no chunk stream is open: the delta closes it."""
    lines = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m2","role":"assistant"}',
        b'{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"x"}',
        _content("m2", "y"),
        b'{"type":"TEXT_MESSAGE_CHUNK","delta":"z"}',  # no id: nothing open to continue
    ]
    with_bypass = relay_outcome(lambda: [SubagentVisibility.inline()], lines, 9, bypass=True)
    without = relay_outcome(lambda: [SubagentVisibility.inline()], lines, 9, bypass=False)
    assert with_bypass[:2] == without[:2]
    assert b'"messageId":"m1","delta":"z"' not in b"".join(with_bypass[0])


def test_the_bypass_table_stays_bounded_when_a_peer_varies_key_sets() -> None:
    from agui_pipes._fastpath.builders import BUILDER_LIMIT as _BUILDER_LIMIT

    chain = TransformerChain([_OnlyFrom()])
    relay = Relay(chain, fast_path=True)
    lines = [
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a","x%d":"1"}' % i
        for i in range(_BUILDER_LIMIT + 50)
    ]
    out = relay.feed(lines)
    assert out.count(b"data: ") == len(lines)
    segment = sync_segment(chain, hooks=True)  # the loop a fast relay runs the chain in
    assert segment is not None and len(segment.state_cache) <= _BUILDER_LIMIT
    # Junk does not crowd out bypasses: a plain key set seen now still gets one.
    assert relay.feed([_content("m1", "b")]) == b"data: " + _content("m1", "b") + b"\n\n"
    assert relay.events_forwarded == 1


_TAGGED_HEAD = [
    b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
    b'{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"a"}',
    b'{"type":"SUBAGENT_STARTED","subagentRunId":"s2","name":"b"}',
    b'{"type":"TEXT_MESSAGE_START","subagentRunId":"s1","messageId":"m1","role":"assistant"}',
]


@pytest.mark.parametrize(
    "delta",
    [
        b'{"type":"TEXT_MESSAGE_CONTENT","subagentRunId":"s1","messageId":"m1","delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a","subagentRunId":"s1"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","subagentRunId":"s1","delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"\\u00e9\\n","subagentRunId":"s1"}',
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"é","subagentRunId":"s1"}'.encode(),
        b'{"type":"TEXT_MESSAGE_CONTENT", "messageId":"m1","delta":"a","subagentRunId":"s1"}',
    ],
    ids=["model order", "tag last", "tag between", "escaped", "utf-8", "spaced"],
)
def test_inline_strips_the_tag_of_a_forwarded_delta_as_encoding_would(delta: bytes) -> None:
    def stages() -> list[StreamTransformer]:
        return [Verify(), SubagentVisibility.inline()]

    lines = [*_TAGGED_HEAD, delta, delta]
    with_bypass = relay_outcome(stages, lines, 9, bypass=True)
    without = relay_outcome(stages, lines, 9, bypass=False)
    assert with_bypass[:2] == without[:2]
    assert b"subagentRunId" not in b"".join(with_bypass[0])
    assert with_bypass[2] == 2  # key orders other than the model's are rewritten too


def test_a_delta_tagged_by_another_subagent_is_refused_not_forwarded() -> None:
    wrong = b'{"type":"TEXT_MESSAGE_CONTENT","subagentRunId":"s2","messageId":"m1","delta":"a"}'
    lines = [*_TAGGED_HEAD, wrong]

    def stages() -> list[StreamTransformer]:
        return [Verify(), SubagentVisibility.inline()]

    with_bypass = relay_outcome(stages, lines, 9, bypass=True)
    assert with_bypass[:2] == relay_outcome(stages, lines, 9, bypass=False)[:2]
    error = with_bypass[1]
    assert isinstance(error, tuple) and error[0] == "VerificationError" and "s2" in error[1]


class _RouteFails(StreamTransformer):
    """A stage whose route() raises for content events (a bug in the stage)."""

    def route(self, event_class: type[BaseEvent]) -> Callable[..., Sequence[BaseEvent]] | None:
        if event_class is TextMessageContentEvent:
            raise RuntimeError("route() is broken (expected by the test)")
        return self.transform

    def passes(self, event_class: type[BaseEvent], fields: frozenset[str]) -> tuple[Condition, ...]:
        return ()


def test_a_failing_route_fails_as_on_the_full_path_at_the_same_count() -> None:
    lines = [_content("m1", "a")]
    outcomes = []
    for bypass in (True, False):
        hook = None if bypass else (lambda e: None)
        relay = Relay(TransformerChain([_RouteFails()]), on_input=hook, fast_path=True)
        with pytest.raises(RuntimeError, match="route"):
            relay.feed(lines)
        outcomes.append(relay.events_in)
    assert outcomes == [1, 1]


def test_relays_share_bypass_code_but_each_reads_its_own_stages() -> None:
    """Bypass code is generated once per shape for every relay (a gateway runs many at
    once); the containers it tests must still be each relay's own stages'."""
    start = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}',
    ]
    first = Relay(TransformerChain([Verify(), SubagentVisibility.inline()]), fast_path=True)
    second = Relay(TransformerChain([Verify(), SubagentVisibility.inline()]), fast_path=True)
    first.feed(start)
    second.feed(start[:1])  # m1 never opened here
    assert first.feed([_content("m1", "a")]) == b"data: " + _content("m1", "a") + b"\n\n"
    with pytest.raises(Exception, match="m1"):
        second.feed([_content("m1", "a")])
    assert (first.events_forwarded, second.events_forwarded) == (1, 0)


@pytest.mark.parametrize(
    ("timestamp", "passed", "rewritten"),
    [
        (b"1767225600060", 2, 2),
        (b"0", 2, 2),
        (b"-5", 2, 2),
        (b"9007199254740991", 2, 2),
        # Not the encoder's spelling of 0: not forwarded as is, but rewritten (dropping
        # the tag writes the rest afresh).
        (b"-0", 0, 2),
        (b" 5", 0, 2),
        (b"  5", 0, 2),
        (b"5 ", 0, 2),
        (b"5.0", 0, 0),
        (b"1e3", 0, 0),
        (b"true", 0, 0),
        (b"9007199254740992", 0, 0),
        (b'"5"', 0, 0),
    ],
)
def test_timestamped_deltas_take_the_bypass_when_the_number_is_the_encoders(
    timestamp: bytes, passed: int, rewritten: int
) -> None:
    """Producers that stamp every event: an integer ``timestamp`` is checked and sized
    like the strings are; anything else takes the full path (and its verdict)."""
    start = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}',
    ]
    canonical = b'{"type":"TEXT_MESSAGE_CONTENT","timestamp":%s,"messageId":"m1","delta":"a"}'
    tagged = (
        b'{"type":"TEXT_MESSAGE_CONTENT","timestamp":%s,"subagentRunId":"s1",'
        b'"messageId":"m1","delta":"b"}'
    )
    head = [
        start[0],
        b'{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"a"}',
        start[1].replace(b'"role"', b'"subagentRunId":"s1","role"'),
    ]
    for lines, forwarded in (
        ([*start, canonical % timestamp], passed),
        ([*head, tagged % timestamp], rewritten),
    ):
        lines = [*lines, lines[-1]]

        def stages() -> list[StreamTransformer]:
            return [Verify(), SubagentVisibility.inline()]

        with_bypass = relay_outcome(stages, lines, 9, bypass=True)
        without = relay_outcome(stages, lines, 9, bypass=False)
        assert with_bypass[:2] == without[:2]
        assert with_bypass[2] == forwarded
