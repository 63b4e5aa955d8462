"""Attacks on the relay's bypass, and the regressions they found.

The bypass (``StreamTransformer.passes``) may send a payload's bytes without
building its event or calling a stage. Its correctness rests on two claims:
a payload whose values are strings, whose keys come in the model's order and
whose length is the compact length is byte-for-byte the encoder's output; and
a stage's promise speaks for the code the chain runs for it. The properties
here feed byte-level respellings of events (escaped keys and values, duplicate
keys, whitespace, quotes, backslashes, control characters, U+2028, non-ASCII,
empty strings, the subagent tag in every position, ``str`` payloads) through
relays with the bypass on and off and through the event-by-event reference
(decode, ``chain.apply_sync``, encode); the same bytes must come out of all
three, and the same error where one is raised.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from ag_ui.core import BaseEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes import Condition, StreamTransformer, TransformerChain
from agui_pipes._fastpath.builders import canonical_framing as _canonical_framing
from agui_pipes._protocol.construct import replace
from agui_pipes._protocol.decode import SPECS as _SPECS
from agui_pipes.codecs import DecodeWarning, decode, encode_ndjson, encode_sse
from agui_pipes.config import load_chain
from agui_pipes.relay import Relay
from agui_pipes.server._stats import _Count
from agui_pipes.testing import run_events, text, tool_call
from agui_pipes.transformers import (
    CoalesceDeltas,
    DropEvents,
    ExpandChunks,
    FilterToolCalls,
    KeepEvents,
    Redact,
    StripRawEvents,
    SubagentVisibility,
    Timestamp,
    ToolResultToState,
    Verify,
)
from tests._differential import differential_settings
from tests._wire_streams import mutate, valid_stream

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

_SETTINGS = differential_settings(60)

Encode = Callable[[BaseEvent], bytes]
Payload = bytes | str


def _outcome(
    stages: Callable[[], list[StreamTransformer]],
    lines: Sequence[Payload],
    batches: Sequence[int],
    *,
    bypass: bool,
    encode: Encode = encode_sse,
    fast_path: bool = True,
) -> tuple[bytes, object, int]:
    """All output (what ``take_unsent`` owes included), then the error or the end output."""
    relay = Relay(
        TransformerChain(stages()),
        encode=encode,
        on_input=None if bypass else (lambda e: None),
        fast_path=fast_path,
    )
    out: list[bytes] = []
    start = 0
    try:
        for size in batches:
            try:
                out.append(relay.feed(lines[start : start + size]))
            except Exception:
                out.append(relay.take_unsent())
                raise
            start += size
        end: object = relay.finish()
    except Exception as exc:
        end = (type(exc).__name__, str(exc))
    return b"".join(out), end, relay.events_forwarded


def _reference(
    stages: Callable[[], list[StreamTransformer]], lines: Sequence[Payload], encode: Encode
) -> bytes | None:
    """Decode, run and encode event by event; None when that path raises."""
    try:
        events = [e for e in (decode(line).event for line in lines) if e is not None]
        return b"".join(encode(e) for e in TransformerChain(stages()).apply_sync(events))
    except Exception:
        return None


def _check(
    stages: Callable[[], list[StreamTransformer]],
    lines: Sequence[Payload],
    batches: Sequence[int],
    encode: Encode = encode_sse,
) -> int:
    """Bypass on == bypass off (bytes and error), and both == the reference when it succeeds."""
    with_bypass = _outcome(stages, lines, batches, bypass=True, encode=encode)
    without = _outcome(stages, lines, batches, bypass=False, encode=encode)
    reference = _outcome(stages, lines, batches, bypass=False, encode=encode, fast_path=False)
    assert with_bypass[:2] == without[:2] == reference[:2]
    assert without[2] == reference[2] == 0
    if not isinstance(with_bypass[1], tuple):
        assert with_bypass[0] + with_bypass[1] == _reference(stages, lines, encode)  # type: ignore[operator]
    return with_bypass[2]


# -- byte-level respellings of one event ---------------------------------------------

_ODD_TEXT = st.sampled_from(
    ["", "a", 'a"b', "a\\b", "\n", "\t", "\x7f", "\u2028", "\u2029", "é", "🙂", "</s>", "{}"]
)


@st.composite
def _spelling(draw: st.DrawFn, event: dict[str, Any]) -> bytes:
    """``event`` as JSON bytes, in one of many spellings a peer could send."""
    keys = list(event)
    order = draw(st.sampled_from(["canonical", "shuffled", "tag first", "tag last"]))
    if order == "shuffled":
        keys = draw(st.permutations(keys))
    elif order.startswith("tag") and "subagentRunId" in keys:
        keys.remove("subagentRunId")
        keys.insert(0 if order == "tag first" else len(keys), "subagentRunId")
    members = []
    for key in keys:
        value = event[key]
        key_text = json.dumps(key)
        if draw(st.integers(0, 19)) == 0:  # an escaped letter: "typ\u0065"
            key_text = f'"{key[:-1]}\\u{ord(key[-1]):04x}"'
        if isinstance(value, str) and draw(st.integers(0, 9)) == 0:
            value_text = json.dumps(value)  # \uXXXX escapes for anything non-ASCII
        else:
            value_text = orjson.dumps(value).decode()
        members.append(f"{key_text}:{value_text}")
    if draw(st.integers(0, 9)) == 0:  # a duplicate key: the last value is what counts
        key = draw(st.sampled_from(keys))
        early = draw(st.sampled_from(["", "x", "m1"]))
        members.insert(0, f"{json.dumps(key)}:{json.dumps(early)}")
    separator = draw(st.sampled_from([",", ",", ",", ", "]))
    text = "{" + separator.join(members) + "}" + draw(st.sampled_from(["", "", "", " ", "\n"]))
    return text.encode()


_HEAD = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_START", "subagentRunId": "s1", "messageId": "m2"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "search"},
    {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "internal_x"},
    {"type": "REASONING_START", "messageId": "r1"},
    {"type": "REASONING_MESSAGE_START", "messageId": "r2", "role": "reasoning"},
]


_TURNS: list[dict[str, Any]] = [
    # Events that change what the stages promise: the run ends (or errors, or
    # restarts), a subagent ends, chunk streams open (and a delta closes them),
    # a blocked call starts, an item is reopened (a violation).
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    {"type": "RUN_ERROR", "message": "boom"},
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m5", "delta": "x"},
    {"type": "TEXT_MESSAGE_CHUNK", "delta": "y"},
    {"type": "TOOL_CALL_CHUNK", "toolCallId": "c5", "toolCallName": "internal_y", "delta": "{"},
    {
        "type": "TOOL_CALL_CHUNK",
        "subagentRunId": "s1",
        "toolCallId": "c6",
        "toolCallName": "search",
        "delta": "{",
    },
    {"type": "TOOL_CALL_START", "toolCallId": "c3", "toolCallName": "internal_z"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
]


@st.composite
def _delta(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 5)) == 0:
        return dict(draw(st.sampled_from(_TURNS)))
    kind = draw(
        st.sampled_from(
            [
                "TEXT_MESSAGE_CONTENT",
                "TOOL_CALL_ARGS",
                "REASONING_MESSAGE_CONTENT",
                "TOOL_CALL_END",
                "TEXT_MESSAGE_END",
            ]
        )
    )
    if kind.startswith("TOOL"):
        call = draw(st.sampled_from(["c1", "c2", "c9"]))
        event: dict[str, Any] = {"type": kind, "toolCallId": call}
    else:
        ids = ["r2", "m1"] if kind.startswith("REASONING") else ["m1", "m2", "m9"]
        event = {"type": kind, "messageId": draw(st.sampled_from(ids))}
    if kind.endswith(("CONTENT", "ARGS")):
        event["delta"] = draw(_ODD_TEXT)
    tag = draw(st.sampled_from([None, None, "s1", "s2", ""]))
    if tag is not None:
        rest = {k: v for k, v in event.items() if k != "type"}
        event = {"type": kind, "subagentRunId": tag, **rest}
    return event


_DELTA_CHAINS: dict[str, Callable[[], list[StreamTransformer]]] = {
    "verify": lambda: [Verify()],
    "verify-warn-inline": lambda: [Verify(on_violation="warn"), SubagentVisibility.inline()],
    "inline-verify-run-error": lambda: [
        SubagentVisibility.inline(),
        Verify(on_violation="run_error"),
    ],
    "filter-inline-counted": lambda: [
        _Count([0, 0, 0], 0),
        FilterToolCalls.deny(["internal_*"]),
        _Count([0, 0, 0], 1),
        SubagentVisibility.inline(),
        _Count([0, 0, 0], 2),
    ],
    "verify-hidden": lambda: [Verify(on_violation="warn"), SubagentVisibility.hidden()],
    "drop-reasoning": lambda: [DropEvents(["reasoning"]), Verify(on_violation="warn")],
    "allow-inline-unexpanded": lambda: [
        FilterToolCalls.allow(["search"]),
        SubagentVisibility.inline(),
    ],
    "expand-producer": lambda: [ExpandChunks(), Verify(profile="producer")],
}


@pytest.mark.parametrize("name", sorted(_DELTA_CHAINS))
@_SETTINGS
@given(data=st.data())
def test_respelled_deltas_come_out_as_the_full_path_and_the_reference_send_them(
    name: str, data: st.DataObject
) -> None:
    events = [*_HEAD, *data.draw(st.lists(_delta(), min_size=1, max_size=8))]
    spelled = [data.draw(_spelling(e)) for e in events]
    lines: list[Payload] = list(spelled)
    if data.draw(st.booleans()):  # some as text: the bypass is for bytes only
        lines = [line.decode() if data.draw(st.booleans()) else line for line in spelled]
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=len(lines), max_size=len(lines)))
    encode = data.draw(st.sampled_from([encode_sse, encode_ndjson]))
    _check(_DELTA_CHAINS[name], lines, sizes, encode)


def test_the_respelling_property_exercises_the_bypass() -> None:
    """Not a timing: canonical deltas of open items do take the bypass in these chains."""
    lines = [encode_sse(decode(e).event)[6:-2] for e in _HEAD]  # type: ignore[arg-type]
    lines += [
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","subagentRunId":"s1","messageId":"m2","delta":"b"}',
        b'{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"}',
    ]
    assert _check(_DELTA_CHAINS["verify-warn-inline"], lines, [len(lines)]) == 3
    # Without Verify, inline also promises the two reasoning starts (the filter skips
    # them); the text starts go to the filter, which holds an assistant message's start
    # while only removed calls follow it (an emptied message must leave no trace).
    assert _check(_DELTA_CHAINS["filter-inline-counted"], lines, [len(lines)]) == 5


# -- whole streams: YAML chains, a stage twice, NDJSON, str payloads --------------------

_YAML_STAGES = [
    "- type: expand_chunks",
    "- type: verify\n    on_violation: warn",
    "- type: verify\n    on_violation: run_error",
    "- type: filter_tool_calls\n    deny: [search]",
    "- type: subagent_visibility\n    mode: inline",
    "- type: subagent_visibility\n    mode: hidden",
    "- type: drop_events\n    families: [reasoning]",
    "- type: strip_raw_events",
    "- type: coalesce_deltas",
]


def _twice() -> list[StreamTransformer]:
    inline = SubagentVisibility.inline()
    return [Verify(on_violation="warn"), inline, ExpandChunks(), inline]


@_SETTINGS
@given(
    rng=st.randoms(use_true_random=False),
    picks=st.lists(st.integers(0, len(_YAML_STAGES) - 1), min_size=1, max_size=4),
    twice=st.booleans(),
    encode=st.sampled_from([encode_sse, encode_ndjson]),
)
def test_yaml_chains_and_a_stage_used_twice_over_respelled_streams(
    rng: random.Random, picks: list[int], twice: bool, encode: Encode
) -> None:
    if twice:
        stages: Callable[[], list[StreamTransformer]] = _twice
    else:
        text = "version: 1\ntransformers:\n" + "\n".join("  " + _YAML_STAGES[i] for i in picks)
        factory = load_chain(text)
        stages = lambda: list(factory().stages)  # type: ignore[arg-type]  # noqa: E731
    items = valid_stream(rng)
    if rng.random() < 0.5:
        items, _ = mutate(rng, items)
    lines: list[Payload] = []
    for item in items:
        line = orjson.dumps(item)
        event = None
        try:
            event = decode(line).event
        except Exception:
            pass
        if event is not None and rng.random() < 0.7:
            line = encode_sse(event)[6:-2]  # canonical: what the bypass may forward
        lines.append(line.decode() if rng.random() < 0.1 else line)
    sizes = [rng.randint(1, 6) for _ in lines]
    _check(stages, lines, sizes, encode)


# -- regressions ----------------------------------------------------------------------


@pytest.mark.parametrize("bypass", [True, False])
@pytest.mark.parametrize("encode", [encode_sse, encode_ndjson])
def test_a_legacy_null_string_field_is_decoded_not_measured(bypass: bool, encode: Encode) -> None:
    """``parentMessageId: null`` once crashed ``feed`` with a TypeError.

    The key set has a generated builder (its fields keep strings as they are),
    which refuses the ``null``; the relay then decoded the payload (a legacy
    null: a warning, the field absent) but still measured it for re-sending as
    if every value were a string: ``len(None)``.
    """
    lines = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":null}',
    ]
    warnings: list[DecodeWarning] = []
    relay = Relay(
        TransformerChain([Verify()]),
        encode=encode,
        on_warning=warnings.append,
        on_input=None if bypass else (lambda e: None),
        fast_path=True,
    )
    out = relay.feed(lines)
    expected = [decode(line).event for line in lines]
    assert out == b"".join(encode(e) for e in expected if e is not None)
    assert [w.code for w in warnings] == ["legacy-null"]


class _NoSubagentCalls(FilterToolCalls):
    """Also removes every call event a subagent sends, by overriding a helper."""

    def _subagent_blocked(self, event: BaseEvent) -> bool:
        return getattr(event, "subagent_run_id", None) is not None


def _blocks_tagged(event: BaseEvent) -> bool:
    return getattr(event, "subagent_run_id", None) is not None


def _instance_override() -> list[StreamTransformer]:
    stage = FilterToolCalls.deny(["x"])
    stage._subagent_blocked = _blocks_tagged  # type: ignore[method-assign]
    return [stage]


_TAGGED_ARGS = [
    b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
    b'{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"search"}',
    b'{"type":"TOOL_CALL_ARGS","subagentRunId":"s1","toolCallId":"c1","delta":"{}"}',
    b'{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"}',
]


@pytest.mark.parametrize(
    "stages",
    [lambda: [_NoSubagentCalls.deny(["x"])], _instance_override],
    ids=["subclass", "instance attribute"],
)
def test_overriding_a_helper_the_handlers_call_voids_the_promise(
    stages: Callable[[], list[StreamTransformer]],
) -> None:
    """FilterToolCalls promised from its own ``_subagent_blocked``; an override must see
    the events (the bypass once forwarded the tagged ARGS the override drops)."""
    out, end, forwarded = _outcome(stages, _TAGGED_ARGS, [4], bypass=True)
    assert (out, end) == _outcome(stages, _TAGGED_ARGS, [4], bypass=False)[:2]
    assert b"subagentRunId" not in out
    assert forwarded == 0


class _Renamed(Verify):
    """Adds a method and overrides only what runs on every path: the promise holds."""

    def finish(self) -> Sequence[BaseEvent]:
        return super().finish()

    def describe(self) -> str:
        return "verify, renamed"


def test_a_subclass_that_overrides_nothing_the_promise_relies_on_keeps_the_bypass() -> None:
    lines = _TAGGED_ARGS[:2] + [_TAGGED_ARGS[3]] * 3
    assert _check(lambda: [_Renamed()], lines, [5]) == 3


def _class_of(wire: dict[str, Any]) -> type[BaseEvent]:
    event = decode(wire).event
    assert event is not None
    return type(event)


class _Unsets(StreamTransformer):
    """A user stage that promises (and does) one rewrite: ``field`` unset."""

    def __init__(self, field: str) -> None:
        self.field = field

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if self.field in type(event).model_fields:
            return (replace(event, self.field, None),)
        return (event,)

    def passes(self, event_class: type[BaseEvent], fields: frozenset[str]) -> tuple[Condition, ...]:
        if self.field in event_class.model_fields:
            return (Condition.drops(self.field),)
        return ()


_DROPPABLE = [
    {
        "type": "TEXT_MESSAGE_START",
        "subagentRunId": "s1",
        "messageId": "m1",
        "role": "user",
        "name": "n",
    },
    {"type": "TEXT_MESSAGE_CONTENT", "subagentRunId": "s1", "messageId": "m1", "delta": "a"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f", "parentMessageId": "m1"},
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "m2",
        "toolCallId": "c1",
        "content": "r",
        "role": "tool",
    },
    {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"},
    {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a", "description": "d"},
]


_DROPPABLE_FIELDS = sorted(
    {name for e in _DROPPABLE for name in _class_of(e).model_fields} - {"type"}
)


@_SETTINGS
@given(field=st.sampled_from(_DROPPABLE_FIELDS), data=st.data())
def test_a_promised_drop_of_any_field_comes_out_as_the_stage_writes_it(
    field: str, data: st.DataObject
) -> None:
    """``Condition.drops`` once removed the member even for a field the encoder writes
    as ``null`` when unset (a required ``delta``, REASONING_MESSAGE_START's ``role``)."""
    canonical = [_canonical_bytes(e) for e in _DROPPABLE]
    respelled = [data.draw(_spelling(e)) for e in _DROPPABLE]
    for lines in (canonical, respelled):
        _check(lambda: [_Unsets(field)], lines, [data.draw(st.integers(1, len(lines)))] * 6)


def _canonical_bytes(wire: dict[str, Any]) -> bytes:
    event = decode(wire).event
    assert event is not None
    return encode_sse(event)[6:-2]


def test_a_promised_drop_of_a_field_written_as_null_is_not_forwarded() -> None:
    line = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a"}'
    out, _, forwarded = _outcome(lambda: [_Unsets("delta")], [line], [1], bypass=True)
    assert out == b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":null}\n\n'
    assert forwarded == 0
    # An omittable field is still dropped in the bypass, from the bytes.
    start = b'{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"user","name":"n"}'
    out, _, forwarded = _outcome(lambda: [_Unsets("name")], [start], [1], bypass=True)
    assert out == b'data: {"type":"TEXT_MESSAGE_START","messageId":"m1","role":"user"}\n\n'
    assert forwarded == 1


# -- stages that make no promise -------------------------------------------------------


class _Spy(StreamTransformer):
    """Makes no promise and routes everything."""

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event,)


_NO_PROMISE: dict[str, tuple[Callable[[], StreamTransformer], set[str]]] = {
    # stage, and the delta types it routes (the bypass must stay off for exactly those)
    "timestamp": (lambda: Timestamp(clock=lambda: 7), {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"}),
    "strip-raw": (StripRawEvents, {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"}),
    "coalesce": (CoalesceDeltas, {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"}),
    "redact": (lambda: Redact(["secret"]), {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"}),
    "keep-text": (lambda: KeepEvents(["text"]), {"TOOL_CALL_ARGS"}),
    "drop-tools": (lambda: DropEvents(["tool_call"]), {"TOOL_CALL_ARGS"}),
    "tool-result-to-state": (lambda: ToolResultToState.delta("search"), set()),
    "a plain stage": (_Spy, {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"}),
}


@pytest.mark.parametrize("name", sorted(_NO_PROMISE))
@pytest.mark.parametrize("where", ["before", "after"])
def test_a_stage_without_a_promise_turns_the_bypass_off_for_what_it_routes(
    name: str, where: str
) -> None:
    make, routed = _NO_PROMISE[name]

    def stages() -> list[StreamTransformer]:
        promising: list[StreamTransformer] = [Verify(), SubagentVisibility.inline()]
        return [make(), *promising] if where == "before" else [*promising, make()]

    inner = [*text("m1", "a", "b"), *tool_call("c1", "search", "{", "}")]
    lines = [encode_sse(e)[6:-2] for e in run_events(inner)]
    deltas = [line for line in lines if b'_CONTENT"' in line or b'_ARGS"' in line]
    kept = [d for d in deltas if orjson.loads(d)["type"] not in routed]
    assert _check(stages, lines, [3] * len(lines)) == len(kept)


# -- any promise a user stage can make ----------------------------------------------------

_TESTED = ["message_id", "tool_call_id", "delta", "subagent_run_id", "role", "name"]
_OMITTABLE = ["subagent_run_id", "name", "role"]


class _Promiser(StreamTransformer):
    """A user stage keeping exactly the promise it makes, whatever that is.

    When the conditions hold for an event (every tested field present) it passes
    it, with ``drop`` unset; otherwise it changes its state — the containers the
    conditions read — and rewrites the event, so a bypass taken wrongly shows.
    """

    def __init__(self, tests: list[tuple[str, str, str]], drop: str | None) -> None:
        self.tests = tests
        self.drop = drop
        self.box: set[str] = {"m1", "c1", "s1", "a"}
        self.seen: list[str] = []
        self.owner: dict[str, str] = {"m1": "s1"}

    def _holds(self, event: BaseEvent) -> bool:
        for kind, field, other in self.tests:
            if kind == "empty":
                if self.seen:
                    return False
                continue
            value = getattr(event, field, None)
            if value is None:
                return False
            if kind == "in" and value not in self.box:
                return False
            if kind == "not in" and value in self.box:
                return False
            if kind == "maps to":
                mapped = getattr(event, other, None)
                if mapped is None or self.owner.get(value, mapped) != mapped:
                    return False
        return True

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if self._holds(event):
            if self.drop is not None and getattr(event, self.drop, None) is not None:
                return (replace(event, self.drop, None),)
            return (event,)
        for kind, field, _other in self.tests:
            value = getattr(event, field, None)
            if kind == "empty":
                self.seen.append("x")
            elif isinstance(value, str) and kind in ("in", "not in"):
                self.box.symmetric_difference_update({value})
            elif isinstance(value, str) and kind == "maps to":
                self.owner[value] = "s2" if self.owner.get(value) != "s2" else "s1"
        if hasattr(event, "delta") and isinstance(event.delta, str):
            return (replace(event, "delta", event.delta + "!"),)
        return ()

    def passes(self, event_class: type[BaseEvent], fields: frozenset[str]) -> tuple[Condition, ...]:
        out: list[Condition] = []
        for kind, field, other in self.tests:
            if kind == "empty":
                out.append(Condition.empty(self.seen))
            elif kind == "in":
                out.append(Condition.member(field, self.box))
            elif kind == "not in":
                out.append(Condition.not_member(field, self.box))
            else:
                out.append(Condition.maps_to(field, other, self.owner))
        if self.drop is not None and self.drop in event_class.model_fields:
            out.append(Condition.drops(self.drop))
        return tuple(out)


_PROMISES = st.builds(
    _Promiser,
    st.lists(
        st.tuples(
            st.sampled_from(["in", "not in", "empty", "maps to"]),
            st.sampled_from(_TESTED),
            st.sampled_from(["subagent_run_id", "delta", "name"]),
        ),
        max_size=3,
    ),
    st.none() | st.sampled_from(_OMITTABLE),
)

_POOL = st.sampled_from(
    [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a"},
        {"type": "TEXT_MESSAGE_CONTENT", "subagentRunId": "s1", "messageId": "m1", "delta": "a"},
        {"type": "TEXT_MESSAGE_CONTENT", "subagentRunId": "s2", "messageId": "m2", "delta": "s1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "user", "name": "a"},
        {"type": "TEXT_MESSAGE_START", "subagentRunId": "s1", "messageId": "m2"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"},
        {"type": "TOOL_CALL_ARGS", "subagentRunId": "s1", "toolCallId": "c2", "delta": "a"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    ]
)


@_SETTINGS
@given(
    promisers=st.lists(_PROMISES, min_size=1, max_size=3),
    events=st.lists(_POOL, min_size=1, max_size=12),
    data=st.data(),
)
def test_any_kept_promise_is_forwarded_exactly_as_the_stages_would_send_it(
    promisers: list[_Promiser], events: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Conditions of every kind, on present and absent fields, joined over stages, with a
    field dropped before or after other stages test it: the bypass equals the full path."""
    params = [(p.tests, p.drop) for p in promisers]
    lines = [
        _canonical_bytes(e) if data.draw(st.booleans()) else data.draw(_spelling(e)) for e in events
    ]
    sizes = [data.draw(st.integers(1, 4)) for _ in lines]
    _check(lambda: [_Promiser(*p) for p in params], lines, sizes)


# -- the length argument itself, for every event type ---------------------------------


def _string_keys(type_name: str) -> tuple[list[str], dict[str, list[str]], set[str]]:
    """The wire keys a builder takes for ``type_name`` (model order), their choices, and
    the required ones."""
    spec = _SPECS[type_name]
    order = list(spec.cls.model_fields)
    attrs = {**spec.str_attrs, **{k: a for k, (a, _) in spec.choice_attrs.items()}}
    keys = sorted((k for k in attrs if k != "type"), key=lambda k: order.index(attrs[k]))
    choices = {k: sorted(allowed) for k, (_, allowed) in spec.choice_attrs.items()}
    required = {f.key for f in spec.required}
    return keys, choices, required


@settings(max_examples=100, deadline=None)
@given(type_name=st.sampled_from(sorted(_SPECS)), data=st.data())
def test_a_compact_payload_in_model_order_is_the_encoders_output(
    type_name: str, data: st.DataObject
) -> None:
    """What the re-send check and the bypass rely on: string values, the model's key order
    and the compact length (no whitespace, escapes or multi-byte characters) make a
    payload byte-identical to what encoding its event gives — for every event type."""
    keys, choices, required = _string_keys(type_name)
    if not required <= set(keys):
        return  # a required field is not a string: no builder, no bypass
    chosen = [k for k in keys if k in required or data.draw(st.booleans())]
    plain = st.text(
        st.characters(min_codepoint=0x20, max_codepoint=0x7E, blacklist_characters='"\\'),
        max_size=6,
    )
    wire: dict[str, Any] = {"type": type_name}
    for key in chosen:
        wire[key] = data.draw(st.sampled_from(choices[key]) if key in choices else plain)
    payload = orjson.dumps(wire)
    framing = _canonical_framing(type_name, tuple(wire))
    assert framing is not None
    assert len(payload) == framing + sum(len(v) for v in wire.values())
    event = decode(payload).event
    assert event is not None
    assert encode_sse(event) == b"data: " + payload + b"\n\n"
    assert encode_ndjson(event) == payload + b"\n"


def test_every_split_of_a_stream_gives_the_same_bytes_with_the_bypass() -> None:
    """A reroute mid-batch (the run ends, a chunk stream opens) must reach the very next
    payload of the same batch, wherever the batch boundaries fall."""
    lines = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        b'{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"a"}',
        b'{"type":"TEXT_MESSAGE_START","subagentRunId":"s1","messageId":"m1"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","subagentRunId":"s1","messageId":"m1","delta":"a"}',
        b'{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","delta":"b"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"c"}',
        b'{"type":"TEXT_MESSAGE_CHUNK","delta":"d"}',
        b'{"type":"TEXT_MESSAGE_END","messageId":"m1"}',
        b'{"type":"SUBAGENT_FINISHED","subagentRunId":"s1"}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
        b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"e"}',
    ]

    def stages() -> list[StreamTransformer]:
        return [Verify(on_violation="warn"), SubagentVisibility.inline()]

    whole = _outcome(stages, lines, [len(lines)], bypass=False)
    # The first delta (no chunk stream open yet); the second comes while the chunk
    # stream of m2 is open (the inline stage must see it), the last after the run.
    assert _outcome(stages, lines, [len(lines)], bypass=True)[2] == 1
    for cut in range(1, len(lines)):
        for sizes in ([cut, len(lines) - cut], [1] * cut + [len(lines) - cut]):
            with_bypass = _outcome(stages, lines, sizes, bypass=True)
            assert with_bypass[:2] == whole[:2]
            assert with_bypass[2] == 1


class _BrokenPromise(StreamTransformer):
    """A user stage whose ``passes`` is broken in one of three ways."""

    def __init__(self, how: str) -> None:
        self.how = how

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event,)

    def passes(self, event_class: type[BaseEvent], fields: frozenset[str]) -> tuple[Condition, ...]:
        if self.how == "raises":
            raise KeyError("oops")
        if self.how == "not a condition":
            return ("message_id",)  # type: ignore[return-value]
        return (Condition("message_id", {"m1"}, "is in"),)


@pytest.mark.parametrize("how", ["raises", "not a condition", "unknown kind"])
def test_a_broken_promise_is_no_promise(how: str, caplog: pytest.LogCaptureFixture) -> None:
    """Without the bypass ``passes`` is never called, so a ``passes`` that fails must not
    change the output either: it once escaped ``feed`` as the stage's raw exception (or
    compiled an unknown kind as a membership test). Such events go through the stage,
    with a warning naming it."""
    lines = [b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"a"}'] * 2
    with caplog.at_level("WARNING", logger="agui_pipes.chain"):
        out, end, forwarded = _outcome(lambda: [_BrokenPromise(how)], lines, [2], bypass=True)
    assert (out, end) == _outcome(lambda: [_BrokenPromise(how)], lines, [2], bypass=False)[:2]
    assert out == b"".join(b"data: " + line + b"\n\n" for line in lines)
    assert forwarded == 0
    assert "_BrokenPromise.passes(TextMessageContentEvent" in caplog.text
