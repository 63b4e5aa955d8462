"""The ``compat`` stage, the decoder's legacy reading and the request shims (docs/compat.md).

One test per translation, through public APIs: ``agui_pipes.decode``,
``Consumer(compat=...)``, ``Compat`` in a chain (sync, relay, and ``apply`` on
asyncio and trio), ``request_for`` / ``down_for_request``, the YAML ``compat``
type, the client and the gateway / endpoint with ``compat_down``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallResultEvent,
)

from agui_pipes import Consumer, ProtocolViolation, TransformerChain, decode
from agui_pipes.codecs import SSEDecoder, encode_sse
from agui_pipes.config import ConfigError, load_chain
from agui_pipes.relay import Relay
from agui_pipes.transformers import ExpandChunks, Verify
from agui_pipes.transformers.compat import (
    Compat,
    LegacyEventType,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ThinkingTextMessageContentEvent,
    ThinkingTextMessageEndEvent,
    ThinkingTextMessageStartEvent,
    declared_version,
    down_for_request,
    request_for,
)
from agui_pipes.verify import Verifier

STARTED = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
THINKING = [
    {"type": "THINKING_START", "title": "Working"},
    {"type": "THINKING_TEXT_MESSAGE_START"},
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "Let me "},
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "check."},
    {"type": "THINKING_TEXT_MESSAGE_END"},
    {"type": "THINKING_END"},
]


def counter() -> Any:
    numbers = itertools.count(1)
    return lambda: f"id-{next(numbers)}"


def binary(**fields: Any) -> dict[str, Any]:
    return {"type": "binary", "mimeType": "image/png", **fields}


def snapshot_with(*parts: Any) -> dict[str, Any]:
    return {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [{"id": "u1", "role": "user", "content": list(parts)}],
    }


def wire(event: BaseEvent) -> dict[str, Any]:
    dumped: dict[str, Any] = json.loads(encode_sse(event)[6:])
    return dumped


# -- the decoder ---------------------------------------------------------------


def test_without_legacy_reading_thinking_is_dropped_as_before() -> None:
    decoded = decode(THINKING[0])
    assert decoded.event is None
    assert [w.code for w in decoded.warnings] == ["unknown-event-type"]
    assert "THINKING_START" in str(decoded.warnings[0])


@pytest.mark.parametrize("form", ["dict", "str", "bytes"])
def test_legacy_reading_builds_the_legacy_models(form: str) -> None:
    expected = [
        ThinkingStartEvent,
        ThinkingTextMessageStartEvent,
        ThinkingTextMessageContentEvent,
        ThinkingTextMessageContentEvent,
        ThinkingTextMessageEndEvent,
        ThinkingEndEvent,
    ]
    for item, cls in zip(THINKING, expected, strict=True):
        given: Any = {"dict": item, "str": json.dumps(item), "bytes": json.dumps(item).encode()}
        decoded = decode(given[form], legacy=True)
        assert type(decoded.event) is cls
        assert decoded.warnings == ()
        assert wire(decoded.event) == item  # encodes back to its own pre-1.0 shape


def test_legacy_reading_is_as_strict_as_1_0() -> None:
    with pytest.raises(ProtocolViolation, match=r"THINKING_TEXT_MESSAGE_CONTENT .*`delta`"):
        decode({"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": 3}, legacy=True)
    decoded = decode({"type": "THINKING_END", "future": 1}, legacy=True)
    assert type(decoded.event) is ThinkingEndEvent
    assert [w.code for w in decoded.warnings] == ["unknown-property"]
    # what 1.0 rejects is still rejected, and unknown types still dropped
    with pytest.raises(ProtocolViolation, match="TEXT_MESSAGE_CONTENT"):
        decode({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"}, legacy=True)
    assert decode({"type": "THINKING_SOMETHING"}, legacy=True).event is None


def test_binary_parts_are_upgraded_only_when_legacy_is_read() -> None:
    item = snapshot_with({"type": "text", "text": "see"}, binary(url="https://x/cat.png"))
    plain = decode(item)
    assert isinstance(plain.event, MessagesSnapshotEvent)
    assert [w.code for w in plain.warnings] == ["unknown-member"]
    assert len(wire(plain.event)["messages"][0]["content"]) == 1

    legacy = decode(item, legacy=True)
    assert [w.code for w in legacy.warnings] == ["legacy-content"]
    assert "/messages/0/content" in str(legacy.warnings[0])
    assert legacy.event is not None
    assert wire(legacy.event)["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "value": "https://x/cat.png", "mimeType": "image/png"},
    }


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (
            binary(data="QUJD", url="https://x/a.png"),
            {"type": "image", "source": {"type": "data", "value": "QUJD", "mimeType": "image/png"}},
        ),
        (
            {"type": "binary", "mimeType": "audio/wav", "url": "https://x/a.wav"},
            {
                "type": "audio",
                "source": {"type": "url", "value": "https://x/a.wav", "mimeType": "audio/wav"},
            },
        ),
        (
            {"type": "binary", "mimeType": "video/mp4", "url": "u", "filename": "clip.mp4"},
            {
                "type": "video",
                "source": {"type": "url", "value": "u", "mimeType": "video/mp4"},
                "metadata": {"filename": "clip.mp4"},
            },
        ),
        (
            {"type": "binary", "mimeType": "application/pdf", "data": "JVBE"},
            {
                "type": "document",
                "source": {"type": "data", "value": "JVBE", "mimeType": "application/pdf"},
            },
        ),
    ],
)
def test_binary_upgrade_follows_the_reference_rules(
    part: dict[str, Any], expected: dict[str, Any]
) -> None:
    decoded = decode(snapshot_with(part), legacy=True)
    assert decoded.event is not None
    assert wire(decoded.event)["messages"][0]["content"] == [expected]


def test_an_id_only_binary_part_cannot_be_upgraded_and_says_so() -> None:
    decoded = decode(snapshot_with(binary(id="file-1")), legacy=True)
    codes = [w.code for w in decoded.warnings]
    assert codes == ["legacy-content", "legacy-content", "unknown-member"]
    assert "file-1" in str(decoded.warnings[1])
    assert decoded.event is not None
    assert wire(decoded.event)["messages"][0]["content"] == []


def test_a_binary_mirror_of_a_modern_part_is_not_duplicated() -> None:
    modern = {
        "type": "image",
        "source": {"type": "url", "value": "https://x/p.png", "mimeType": "image/png"},
    }
    decoded = decode(snapshot_with(modern, binary(url="https://x/p.png")), legacy=True)
    assert decoded.event is not None
    assert wire(decoded.event)["messages"][0]["content"] == [modern]


def test_binary_parts_of_a_run_started_input_echo_are_upgraded() -> None:
    item = {
        **STARTED,
        "input": {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "u1", "role": "user", "content": [binary(url="https://x/p.png")]}],
        },
    }
    decoded = decode(item, legacy=True)
    assert isinstance(decoded.event, RunStartedEvent)
    assert "/input/messages/0/content" in str(decoded.warnings[0])
    assert wire(decoded.event)["input"]["messages"][0]["content"][0]["type"] == "image"
    assert item["input"]["messages"][0]["content"][0]["type"] == "binary"  # not mutated


# -- a pipeline without compat -------------------------------------------------


def test_a_consumer_without_compat_drops_a_legacy_event_with_the_usual_warning() -> None:
    consumer = Consumer()
    consumer.push(STARTED)
    legacy = decode(THINKING[0], legacy=True).event
    assert legacy is not None
    assert consumer.push(legacy) == ()
    consumer.push(FINISHED)
    result = consumer.finish()
    assert result.messages == []
    assert [str(w) for w in result.warnings] == [str(decode(THINKING[0]).warnings[0])]


def test_the_verifier_lets_a_legacy_event_pass_without_effect_even_first() -> None:
    verifier = Verifier()
    verifier.observe(ThinkingStartEvent())  # not "the first event must be RUN_STARTED"
    verifier.observe(RunStartedEvent(thread_id="t", run_id="r"))
    verifier.observe(ThinkingTextMessageContentEvent(delta="x"))
    verifier.observe(RunFinishedEvent(thread_id="t", run_id="r"))
    verifier.finish()


# -- compat up -----------------------------------------------------------------


def consume(items: list[Any], compat: Compat) -> tuple[list[BaseEvent], Any]:
    consumer = Consumer(compat=compat)
    delivered: list[BaseEvent] = []
    for item in items:
        delivered.extend(consumer.push(item))
    return delivered, consumer.finish()


def test_up_translates_thinking_into_reasoning_with_generated_ids() -> None:
    compat = Compat(ids=counter())
    delivered, result = consume([STARTED, *THINKING, FINISHED], compat)
    assert [type(e) for e in delivered[1:-1]] == [
        ReasoningStartEvent,
        ReasoningMessageStartEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningEndEvent,
    ]
    assert [getattr(e, "message_id", None) for e in delivered[1:-1]] == [
        "id-1",
        "id-2",
        "id-2",
        "id-2",
        "id-2",
        "id-1",
    ]
    assert delivered[2].role == "reasoning"  # type: ignore[attr-defined]
    assert result.messages == [{"id": "id-2", "role": "reasoning", "content": "Let me check."}]
    texts = [str(w) for w in result.warnings]
    assert any("THINKING_START.title 'Working'" in t for t in texts)  # a loss, said so
    for legacy in ("THINKING_START", "THINKING_TEXT_MESSAGE_CONTENT", "THINKING_END"):
        # once per type: the second content event is not announced again
        assert sum(f"converting the pre-1.0 {legacy} " in t for t in texts) == 1
    assert all(w.code == "compat" for w in result.warnings)
    assert {w.index for w in result.warnings} == {1, 2, 3, 5, 6}


def test_up_keeps_base_fields_over_the_translation() -> None:
    compat = Compat(ids=counter())
    out = compat.transform(ThinkingTextMessageStartEvent(timestamp=5, metadata={"k": 1}))
    assert wire(out[0]) == {
        "type": "REASONING_MESSAGE_START",
        "messageId": "id-1",
        "role": "reasoning",
        "timestamp": 5,
        "metadata": {"k": 1},
    }


def test_up_mints_an_id_for_an_orphan_continuation_and_verification_rejects_it() -> None:
    compat = Compat(ids=counter())
    consumer = Consumer(compat=compat)
    consumer.push(STARTED)
    with pytest.raises(ProtocolViolation) as info:
        consumer.push({"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "x"})
    assert info.value.index == 1
    assert any("minting the id 'id-1'" in str(w) for w in consumer.warnings)


def test_up_forgets_an_open_thinking_message_at_the_next_run() -> None:
    compat = Compat(ids=counter())
    compat.transform(ThinkingTextMessageStartEvent())
    started = RunStartedEvent(thread_id="t", run_id="r2")
    assert compat.transform(started) == (started,)
    out = compat.transform(ThinkingTextMessageContentEvent(delta="x"))
    assert out[0].message_id == "id-2"  # type: ignore[attr-defined]  # minted, not id-1
    assert any("minting the id 'id-2'" in str(w) for w in compat.warnings)


def test_up_for_a_current_producer_is_the_identity_on_1_0_events() -> None:
    compat = Compat()
    event = TextMessageStartEvent(message_id="m", subagent_run_id="s")
    assert compat.route(TextMessageStartEvent) is None  # costs nothing in a chain
    assert compat.transform(event) == (event,)
    assert compat.route(ThinkingStartEvent) is not None


def test_up_for_a_pre_subagent_producer_drops_the_lifecycle_and_attribution() -> None:
    delivered, result = consume(
        [
            STARTED,
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "r"},
            {
                "type": "TEXT_MESSAGE_START",
                "messageId": "m",
                "role": "assistant",
                "subagentRunId": "s1",
            },
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "m",
                "delta": "hi",
                "subagentRunId": "s1",
            },
            {"type": "TEXT_MESSAGE_END", "messageId": "m", "subagentRunId": "s1"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [
                    {"id": "m", "role": "assistant", "content": "hi", "subagentRunId": "s1"}
                ],
            },
            {
                **FINISHED,
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "approval", "subagentRunId": "s1"}],
                },
            },
        ],
        Compat(peer="0.0.57"),
    )
    assert not any(isinstance(e, SubagentStartedEvent | SubagentFinishedEvent) for e in delivered)
    assert all("subagentRunId" not in json.dumps(wire(e)) for e in delivered)
    assert result.messages == [{"id": "m", "role": "assistant", "content": "hi"}]
    texts = [str(w) for w in result.warnings]
    assert any(
        "dropping SUBAGENT_STARTED because the producer (protocol 0.0.57)" in t for t in texts
    )
    assert any("dropping SUBAGENT_FINISHED" in t for t in texts)


def test_up_upgrades_a_snapshot_binary_part_in_the_consumer() -> None:
    _, result = consume([STARTED, snapshot_with(binary(url="https://x/p.png")), FINISHED], Compat())
    assert result.messages[0]["content"][0]["type"] == "image"
    assert [w.code for w in result.warnings] == ["legacy-content"]


def test_consumer_refuses_a_down_stage() -> None:
    with pytest.raises(ValueError, match="direction='up'"):
        Consumer(compat=Compat(direction="down", peer="0.0.45"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"direction": "sideways"}, "compat direction must be 'up'"),
        ({"peer": "latest"}, "compat peer must be a protocol version"),
        ({"peer": "1"}, "compat peer must be a protocol version"),
    ],
)
def test_bad_options_are_refused_clearly(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Compat(**options)


def test_fresh_keeps_the_options_and_drops_the_state() -> None:
    compat = Compat(peer="0.0.45", ids=counter())
    compat.transform(ThinkingStartEvent())
    again = compat.fresh()
    assert repr(again) == repr(compat) == "Compat(direction='up', peer='0.0.45')"
    assert again.warnings == []
    out = again.transform(ThinkingEndEvent())  # fresh state: no open span, so an id is minted
    assert isinstance(out[0], ReasoningEndEvent)
    assert any("minting" in str(w) for w in again.warnings)


# -- compat down ---------------------------------------------------------------


def down(peer: str, events: list[BaseEvent]) -> tuple[list[BaseEvent], Compat]:
    compat = Compat(direction="down", peer=peer)
    out = [o for e in events for o in compat.transform(e)]
    return out, compat


REASONING: list[BaseEvent] = [
    ReasoningStartEvent(message_id="r1"),
    ReasoningMessageStartEvent(message_id="r2", role="reasoning"),
    ReasoningMessageContentEvent(message_id="r2", delta="hmm"),
    ReasoningMessageEndEvent(message_id="r2"),
    ReasoningEndEvent(message_id="r1"),
]


def test_down_for_a_current_client_changes_nothing() -> None:
    compat = Compat(direction="down", peer="1.0")
    for event in [*REASONING, SubagentStartedEvent(subagent_run_id="s", name="n")]:
        assert compat.route(type(event)) is None
        assert compat.transform(event) == (event,)


def test_down_spells_reasoning_as_thinking_for_0_0_45() -> None:
    out, compat = down("0.0.45", REASONING)
    assert [wire(e) for e in out] == [
        {"type": "THINKING_START"},
        {"type": "THINKING_TEXT_MESSAGE_START"},
        {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "hmm"},
        {"type": "THINKING_TEXT_MESSAGE_END"},
        {"type": "THINKING_END"},
    ]
    assert compat.warnings == []
    # and the consumer side reads what the down side wrote back into reasoning
    _, result = consume([STARTED, *(wire(e) for e in out), FINISHED], Compat(ids=counter()))
    assert result.messages == [{"id": "id-2", "role": "reasoning", "content": "hmm"}]


def test_down_merges_overlapping_reasoning_for_0_0_45() -> None:
    out, compat = down(
        "0.0.45",
        [
            ReasoningStartEvent(message_id="s1"),
            ReasoningStartEvent(message_id="s2"),
            ReasoningMessageStartEvent(message_id="a", role="reasoning"),
            ReasoningMessageStartEvent(message_id="b", role="reasoning"),
            ReasoningMessageContentEvent(message_id="a", delta="one "),
            ReasoningMessageEndEvent(message_id="a"),
            ReasoningMessageContentEvent(message_id="b", delta="two"),
            ReasoningMessageEndEvent(message_id="b"),
            ReasoningEndEvent(message_id="s1"),
            ReasoningEndEvent(message_id="s2"),
        ],
    )
    assert [wire(e)["type"] for e in out] == [
        "THINKING_START",
        "THINKING_TEXT_MESSAGE_START",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END",
        "THINKING_END",
    ]
    assert [str(w).split(" ")[3] for w in compat.warnings] == ["span", "message"]
    # read back by a consumer: one well-formed reasoning message holding both
    _, result = consume([STARTED, *(wire(e) for e in out), FINISHED], Compat(ids=counter()))
    assert result.messages == [{"id": "id-2", "role": "reasoning", "content": "one two"}]


def test_down_drops_what_0_0_45_cannot_spell_with_a_warning() -> None:
    out, compat = down(
        "0.0.45",
        [
            ReasoningEncryptedValueEvent(subtype="message", entity_id="r2", encrypted_value="x"),
            ReasoningMessageChunkEvent(message_id="r3", delta="d"),
        ],
    )
    assert out == []
    assert [w.code for w in compat.warnings] == ["compat", "compat"]
    assert "REASONING_ENCRYPTED_VALUE" in str(compat.warnings[0])
    assert "expand chunks before this stage" in str(compat.warnings[1])


def test_down_keeps_reasoning_for_0_0_57_but_drops_subagents() -> None:
    out, compat = down(
        "0.0.57",
        [
            *REASONING,
            SubagentStartedEvent(subagent_run_id="s", name="n"),
            TextMessageContentEvent(message_id="m", delta="x", subagent_run_id="s"),
        ],
    )
    assert out[:5] == REASONING
    assert wire(out[5]) == {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}
    assert "dropping SUBAGENT_STARTED because the client (protocol 0.0.57)" in str(
        compat.warnings[0]
    )


def test_down_flattens_content_for_0_0_39() -> None:
    snapshot = decode(
        snapshot_with(
            {"type": "text", "text": "look "},
            {"type": "image", "source": {"type": "url", "value": "u", "mimeType": "image/png"}},
            {"type": "text", "text": "here"},
        )
    ).event
    assert snapshot is not None
    result = ToolCallResultEvent(
        message_id="t1", tool_call_id="c1", content=[{"type": "text", "text": "42"}]
    )
    started = RunStartedEvent(thread_id="t", run_id="r", parent_run_id="p", protocol_version="1.0")
    out, compat = down("0.0.39", [snapshot, result, started])
    assert wire(out[0])["messages"][0]["content"] == "look here"
    assert wire(out[1])["content"] == "42"
    assert wire(out[2]) == {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    assert len(compat.warnings) == 1
    assert "DROPS non-text parts (image)" in str(compat.warnings[0])


def test_down_leaves_out_the_version_declaration_below_1_0() -> None:
    echo = RunAgentInput(
        thread_id="t",
        run_id="r",
        messages=[],
        tools=[],
        context=[],
        state={},
        forwarded_props={},
        protocol_version="1.0",
    )
    started = RunStartedEvent(thread_id="t", run_id="r", protocol_version="1.0", input=echo)
    out, _ = down("0.0.57", [started])
    assert "protocolVersion" not in json.dumps(wire(out[0]))
    assert down("1.0", [started])[0] == [started]


# -- chains: sync, relay, apply (asyncio and trio) ------------------------------


def sse(items: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(item).encode() for item in items]


def frames(data: bytes) -> Iterator[dict[str, Any]]:
    decoder = SSEDecoder()
    for payload in decoder.feed(data):
        yield json.loads(payload)


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_relay_with_compat_reads_and_translates_legacy_shapes(fast_path: bool) -> None:
    chain = TransformerChain([ExpandChunks(), Compat(ids=counter()), Verify()])
    relay = Relay(chain, fast_path=fast_path)
    out = relay.feed(sse([STARTED, *THINKING, snapshot_with(binary(url="u")), FINISHED]))
    out += relay.finish()
    types = [frame["type"] for frame in frames(out)]
    assert types == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    snapshot = list(frames(out))[7]
    assert snapshot["messages"][0]["content"][0]["type"] == "image"


def test_a_relay_without_compat_still_drops_legacy_shapes() -> None:
    relay = Relay(TransformerChain([Verify()]))
    out = relay.feed(sse([STARTED, *THINKING, FINISHED])) + relay.finish()
    assert [frame["type"] for frame in frames(out)] == ["RUN_STARTED", "RUN_FINISHED"]
    assert relay.events_unknown == len(THINKING)


@pytest.mark.anyio
async def test_apply_runs_compat_up_and_down(anyio_backend: str) -> None:
    up = [decode(item, legacy=True).event for item in [STARTED, *THINKING, FINISHED]]

    async def source() -> AsyncIterator[BaseEvent]:
        for event in up:
            assert event is not None
            yield event

    chain = TransformerChain([Compat(ids=counter()), Compat(direction="down", peer="0.0.45")])
    async with chain.apply(source()) as stream:
        out = [wire(event) async for event in stream]
    # up then down again: the old client gets its own spelling, without the title
    assert out[1:-1] == [{k: v for k, v in item.items() if k != "title"} for item in THINKING]


# -- requests ------------------------------------------------------------------


MESSAGES = [
    {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "What is "},
            {"type": "text", "text": "this?"},
            {"type": "image", "source": {"type": "url", "value": "u", "mimeType": "image/png"}},
        ],
    },
    {"id": "u2", "role": "user", "content": [binary(url="https://x/l.png")]},
    {"id": "a1", "role": "assistant", "content": "ok", "subagentRunId": "s0"},
    {
        "id": "a2",
        "role": "assistant",
        "toolCalls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    },
]
INPUT = {"threadId": "t", "runId": "r", "parentRunId": "p", "messages": MESSAGES}


def test_request_for_a_current_peer_declares_and_upgrades_only() -> None:
    sink: list[Any] = []
    body = request_for(None, INPUT, warnings=sink)
    assert body["protocolVersion"] == "1.0"
    assert body["parentRunId"] == "p"
    assert body["messages"][0] == MESSAGES[0]
    assert body["messages"][1]["content"] == [
        {
            "type": "image",
            "source": {"type": "url", "value": "https://x/l.png", "mimeType": "image/png"},
        }
    ]
    assert body["messages"][2]["subagentRunId"] == "s0"
    assert sink == []
    assert INPUT["messages"][1]["content"][0]["type"] == "binary"  # not mutated


def test_request_for_0_0_57_omits_the_version_and_the_attribution() -> None:
    body = request_for("0.0.57", {**INPUT, "protocolVersion": "1.0"})
    assert "protocolVersion" not in body
    assert "subagentRunId" not in body["messages"][2]
    assert body["messages"][1]["content"][0]["type"] == "image"


def test_request_for_0_0_39_flattens_and_reports_what_it_drops() -> None:
    sink: list[Any] = []
    body = request_for("0.0.39", INPUT, warnings=sink)
    assert "parentRunId" not in body
    assert body["messages"][0]["content"] == "What is this?"
    assert body["messages"][1]["content"] == ""  # the binary part is not text
    assert body["messages"][3]["content"] == ""  # absent content: the old schema needs one
    assert [w.code for w in sink] == ["compat", "compat"]
    assert "DROPS non-text parts (image)" in str(sink[0])
    assert "DROPS non-text parts (binary)" in str(sink[1])


def test_request_for_0_0_39_does_not_repair_a_malformed_text_part() -> None:
    sink: list[Any] = []
    malformed = {"id": "u", "role": "user", "content": [{"type": "text", "text": 42}]}
    body = request_for(
        "0.0.39", {"threadId": "t", "runId": "r", "messages": [malformed]}, warnings=sink
    )
    assert body["messages"][0] == malformed
    assert "not flattening" in str(sink[0])


def test_request_for_takes_a_run_agent_input() -> None:
    run_input = RunAgentInput(
        thread_id="t", run_id="r", messages=[], tools=[], context=[], state={}, forwarded_props={}
    )
    body = request_for("0.0.45", run_input)
    assert body["threadId"] == "t"
    assert "protocolVersion" not in body
    with pytest.raises(TypeError, match="RunAgentInput or its wire dict"):
        request_for(None, ["not", "a", "request"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="request_for peer"):
        request_for("v2", INPUT)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [("1.0", None), ("1.1", None), ("2", None), ("0.0.45", "0.0.45"), (None, "0.0.57")],
)
def test_down_for_request_follows_the_declared_version(
    declared: str | None, expected: str | None
) -> None:
    body: dict[str, Any] = {"threadId": "t", "runId": "r", "messages": []}
    if declared is not None:
        body["protocolVersion"] = declared
    assert declared_version(body) == declared
    stage = down_for_request(body)
    if expected is None:
        assert stage is None
    else:
        assert stage is not None
        assert repr(stage) == f"Compat(direction='down', peer={expected!r})"
    served = down_for_request({"threadId": "t", "runId": "r", "messages": []}, undeclared="0.0.39")
    assert repr(served) == "Compat(direction='down', peer='0.0.39')"


# -- YAML ----------------------------------------------------------------------


def test_yaml_compat(tmp_path: Any) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(
        "version: 1\ntransformers:\n  - type: compat\n    direction: down\n"
        "    peer: '0.0.45'\n  - compat\n"
    )
    chain = load_chain(path)()
    assert [repr(stage) for stage in chain] == [
        "Compat(direction='down', peer='0.0.45')",
        "Compat(direction='up', peer='1.0')",
    ]
    path.write_text("version: 1\ntransformers:\n  - type: compat\n    peer: newest\n")
    with pytest.raises(ConfigError, match="peer must be a protocol version"):
        load_chain(path)


# -- client, gateway, endpoint -------------------------------------------------


def sse_body(items: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(item).encode() + b"\n\n" for item in items)


@pytest.mark.anyio
async def test_the_client_talks_to_an_old_agent(anyio_backend: str) -> None:
    from agui_pipes.client import Client

    seen: list[dict[str, Any]] = []

    async def agent(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(await request.aread()))
        body = sse_body([STARTED, *THINKING, FINISHED])
        return httpx.Response(
            200, stream=httpx.ByteStream(body), headers={"content-type": "text/event-stream"}
        )

    http = httpx.AsyncClient(transport=httpx.MockTransport(agent))
    async with Client(http) as client, client.run("http://agent/", INPUT, peer="0.0.39") as events:
        types = [event.type.value async for event in events]
        result = events.result()
    await http.aclose()
    assert seen[0]["messages"][0]["content"] == "What is this?"
    assert "protocolVersion" not in seen[0]
    assert types[1] == "REASONING_START"
    assert result.messages[0]["content"] == "Let me check."


UPSTREAM = [
    STARTED,
    {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "r"},
    {"type": "REASONING_START", "messageId": "r1"},
    {
        "type": "REASONING_MESSAGE_START",
        "messageId": "r2",
        "role": "reasoning",
        "subagentRunId": "s1",
    },
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r2", "delta": "hmm", "subagentRunId": "s1"},
    {"type": "REASONING_MESSAGE_END", "messageId": "r2", "subagentRunId": "s1"},
    {"type": "REASONING_END", "messageId": "r1"},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
    FINISHED,
]


FORWARDED: list[dict[str, Any]] = []


async def _through_gateway(
    body: dict[str, Any], chain: Any = None, upstream_events: list[dict[str, Any]] = UPSTREAM
) -> list[dict[str, Any]]:
    from agui_pipes.server import Gateway

    async def agent(request: httpx.Request) -> httpx.Response:
        FORWARDED.append(json.loads(await request.aread()))
        return httpx.Response(
            200,
            stream=httpx.ByteStream(sse_body(upstream_events)),
            headers={"content-type": "text/event-stream"},
        )

    upstream = httpx.AsyncClient(transport=httpx.MockTransport(agent))
    gateway = Gateway("http://agent/", client=upstream, compat_down=True, chain=chain)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway)) as client:
        response = await client.post("http://gateway/", json=body)
    await upstream.aclose()
    assert response.status_code == 200, response.text
    return list(frames(response.content))


@pytest.mark.anyio
@pytest.mark.parametrize("sync", [True, False], ids=["relay", "apply"])
async def test_the_gateway_serves_each_client_its_era(anyio_backend: str, sync: bool) -> None:
    from agui_pipes import AsyncStreamTransformer

    chain = None if sync else (lambda: TransformerChain([AsyncStreamTransformer()]))
    current = await _through_gateway({**INPUT, "protocolVersion": "1.0"}, chain)
    assert [f["type"] for f in current] == [e["type"] for e in UPSTREAM]

    # an older client's binary part reaches the 1.0 upstream as a media part
    assert FORWARDED[-1]["messages"][1]["content"][0]["type"] == "image"

    undeclared = await _through_gateway(INPUT, chain)  # served as 0.0.57
    assert [f["type"] for f in undeclared] == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "RUN_FINISHED",
    ]
    assert "subagentRunId" not in json.dumps(undeclared)

    old = await _through_gateway({**INPUT, "protocolVersion": "0.0.45"}, chain)
    assert [f["type"] for f in old] == [
        "RUN_STARTED",
        "THINKING_START",
        "THINKING_TEXT_MESSAGE_START",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "THINKING_TEXT_MESSAGE_END",
        "THINKING_END",
        "RUN_FINISHED",
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("sync", [True, False], ids=["relay", "apply"])
async def test_a_gateway_chain_with_compat_up_fronts_an_old_agent(
    anyio_backend: str, sync: bool
) -> None:
    from agui_pipes import AsyncStreamTransformer

    def chain() -> TransformerChain:
        extra = [] if sync else [AsyncStreamTransformer()]
        return TransformerChain([Compat(peer="0.0.45"), *extra])

    body = {**INPUT, "protocolVersion": "1.0"}
    out = await _through_gateway(body, chain, [STARTED, *THINKING, FINISHED])
    assert [f["type"] for f in out][1:3] == ["REASONING_START", "REASONING_MESSAGE_START"]
    assert out[3]["delta"] == "Let me "


def test_compat_undeclared_is_checked_when_the_server_is_built() -> None:
    from agui_pipes.server import AgentEndpoint, Gateway

    with pytest.raises(ValueError, match="compat_undeclared"):
        Gateway("http://agent/", compat_down=True, compat_undeclared="old")

    async def agent(ctx: Any) -> Any:
        raise AssertionError("never run")

    with pytest.raises(ValueError, match="compat_undeclared"):
        AgentEndpoint(agent, compat_down=True, compat_undeclared="old")


@pytest.mark.anyio
async def test_the_endpoint_serves_each_client_its_era(
    anyio_backend: str,
) -> None:
    from agui_pipes.driver import RunContext, RunOutcome
    from agui_pipes.server import AgentEndpoint

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.think("hmm")
        ctx.say("hello")
        return RunOutcome.success()

    endpoint = AgentEndpoint(agent, compat_down=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=endpoint)) as client:
        new = await client.post("http://agent/", json={**INPUT, "protocolVersion": "1.0"})
        old = await client.post("http://agent/", json={**INPUT, "protocolVersion": "0.0.45"})
    new_types = [f["type"] for f in frames(new.content)]
    old_types = [f["type"] for f in frames(old.content)]
    assert "REASONING_MESSAGE_CONTENT" in new_types
    assert old_types == [
        t.replace("REASONING_MESSAGE", "THINKING_TEXT_MESSAGE").replace("REASONING", "THINKING")
        for t in new_types
    ]
    assert LegacyEventType.THINKING_START.value in old_types


def test_agui_pipes_run_with_compat_translates_a_legacy_recording(tmp_path: Any) -> None:
    from agui_pipes._cli import main

    chain = tmp_path / "chain.yaml"
    chain.write_text("version: 1\ntransformers:\n  - compat\n")
    recording = tmp_path / "old.ndjson"
    recording.write_text(
        "".join(json.dumps(item) + "\n" for item in [STARTED, *THINKING, FINISHED])
    )
    out = tmp_path / "new.ndjson"
    assert main(["run", "-c", str(chain), str(recording), "-o", str(out), "-q"]) == 0
    types = [json.loads(line)["type"] for line in out.read_text().splitlines()]
    assert types == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "RUN_FINISHED",
    ]


@pytest.mark.anyio
async def test_consume_takes_compat_too(anyio_backend: str) -> None:
    from agui_pipes import consume

    async def source() -> AsyncIterator[dict[str, Any]]:
        for item in [STARTED, *THINKING, FINISHED]:
            yield item

    result = await consume(source(), compat=Compat())
    assert result.messages[0]["content"] == "Let me check."
    # The default is the reference client's always-on boundary; False the strict 1.0 view.
    default = await consume(source())
    # Reasoning ids are generated per stream (the legacy events carry none).
    assert [(m["role"], m["content"]) for m in default.messages] == [
        (m["role"], m["content"]) for m in result.messages
    ]
    strict = await consume(source(), compat=False)
    assert strict.messages == []


# -- against the reference client ----------------------------------------------


def _legacy_streams() -> list[list[dict[str, Any]]]:
    """Pre-1.0 shapes in the situations the reference boundary handles differently."""
    text = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ok"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    ]
    user = {"id": "u1", "role": "user"}
    return [
        [STARTED, *THINKING, *text, FINISHED],
        [STARTED, *THINKING, *THINKING[1:5], FINISHED],  # two messages, the second outside
        [STARTED, *THINKING[1:5], FINISHED],  # a message without a span
        [STARTED, THINKING[0], THINKING[5], FINISHED],  # an empty span
        [STARTED, THINKING[2], FINISHED],  # content with nothing open: minted, then rejected
        [STARTED, THINKING[0], *text, FINISHED],  # a span never closed
        [
            STARTED,
            snapshot_with(
                {"type": "text", "text": "see"},
                binary(url="https://x/a.png"),
                binary(data="QUJD", filename="a.png"),
            ),
            FINISHED,
        ],
        [STARTED, snapshot_with(binary(id="only-id"), {"type": "text", "text": "t"}), FINISHED],
        [
            STARTED,
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [
                    {
                        **user,
                        "content": [binary(mimeType="application/pdf", url="https://x/d.pdf")],
                    },
                    {"id": "u2", "role": "user", "content": "plain"},
                ],
            },
            FINISHED,
        ],
        [
            {
                **STARTED,
                "input": {
                    "threadId": "t",
                    "runId": "r",
                    "messages": [{**user, "content": [binary(url="https://x/b.png")]}],
                },
            },
            FINISHED,
        ],
    ]


def _without_reasoning_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with generated ids blanked (both sides mint their own UUIDs)."""
    return [{**m, "id": "*"} if m.get("role") == "reasoning" else m for m in messages]


@pytest.mark.node
def test_up_agrees_with_the_reference_client(ts_oracle: Any) -> None:
    streams = _legacy_streams()
    theirs = ts_oracle(streams)
    for stream, reference in zip(streams, theirs, strict=True):
        consumer = Consumer(compat=Compat())
        delivered: list[BaseEvent] = []
        outcome = "completed"
        try:
            for item in stream:
                delivered.extend(consumer.push(item))
            result = consumer.finish()
        except ProtocolViolation:
            outcome = "failed"
        assert outcome == reference["outcome"], (stream, reference["error"])
        if outcome == "failed":
            continue
        assert [e.type.value for e in delivered] == [e["type"] for e in reference["events"]]
        assert _without_reasoning_ids(result.messages) == _without_reasoning_ids(
            reference["messages"]
        ), stream


# -- properties on generated streams -------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402

from agui_pipes.testing.strategies import streams  # noqa: E402


def _fold(items: list[Any], compat: Compat | None) -> tuple[list[dict[str, Any]], Any]:
    consumer = Consumer(compat=compat)
    delivered = [wire(e) for item in items for e in consumer.push(item)]
    result = consumer.finish()
    return delivered, (result.messages, result.state, [str(w) for w in result.warnings])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(max_runs=2))
def test_up_for_a_current_producer_is_the_identity_on_valid_streams(
    events: list[BaseEvent],
) -> None:
    items = [wire(event) for event in events]
    assert _fold(items, Compat()) == _fold(items, None)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(max_runs=2, chunks=False, subagents=False))
def test_down_to_0_0_45_then_up_gives_the_same_reasoning_content(
    events: list[BaseEvent],
) -> None:
    """What an old client reads back (through its own translation) is what was sent.

    The ids are the old era's loss (THINKING_* carry none), so messages are compared
    with reasoning ids blanked. Encrypted values have no old spelling (dropped, as
    tested above), so the expectation is the stream without them; a stream whose
    reasoning overlaps (merged, as tested above) is not a round trip and is skipped,
    and so is one whose MESSAGES_SNAPSHOT names a reasoning message: its id is the
    one thing the old spelling cannot carry, so the snapshot no longer matches it.
    """
    if any(
        isinstance(e, MessagesSnapshotEvent) and any(m.role == "reasoning" for m in e.messages)
        for e in events
    ):
        return
    kept = [e for e in events if not isinstance(e, ReasoningEncryptedValueEvent)]
    down_stage = Compat(direction="down", peer="0.0.45")
    sent = [wire(o) for e in kept for o in down_stage.transform(e)]
    if down_stage.warnings:
        return
    original = Consumer()
    for event in kept:
        original.push(event)
    expected = original.finish()
    _, (messages, state, _) = _fold(sent, Compat(ids=counter()))
    assert _without_reasoning_ids(messages) == _without_reasoning_ids(expected.messages)
    assert state == expected.state
