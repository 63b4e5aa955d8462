"""CoalesceDeltas (fewer events, same fold) and Redact (split secrets caught)."""

from __future__ import annotations

import pytest
from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    ReasoningMessageChunkEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextPart,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    UserMessage,
)

from agui_pipes.testing import (
    reasoning,
    run_error,
    run_events,
    run_started,
    subagent,
    text,
    text_chunks,
    tool_call,
    tool_call_chunks,
)
from agui_pipes.transformers import CoalesceDeltas, Redact
from tests.transformers._stage_helpers import consumed, through, through_async, wire

# -- CoalesceDeltas ---------------------------------------------------------------


def _chatty() -> list[BaseEvent]:
    return run_events(
        text("m1", *"Hello world")
        + tool_call("c1", "search", '{"q"', ":", '"x"', "}", result="r")
        + reasoning("r1", "thin", "king")
        + text_chunks("m2", "a", "b", "c")
        + tool_call_chunks("c2", "t", "{", "}", parent_message_id="m2")
        + subagent("s1", "w", text_chunks("m3", "x", "y"))
    )


def test_coalesce_folds_the_same_with_fewer_events() -> None:
    events = _chatty()
    out = through(CoalesceDeltas(), events)
    assert len(out) < len(events)
    assert consumed(out).messages == consumed(events).messages
    contents = [e.delta for e in out if isinstance(e, TextMessageContentEvent)]
    assert contents == ["Hello world"]
    args = [e.delta for e in out if isinstance(e, ToolCallArgsEvent)]
    assert args == ['{"q":"x"}']


def test_coalesce_max_chars_bounds_each_event() -> None:
    events = run_events(text("m1", *"abcdefghij"))
    out = through(CoalesceDeltas(max_chars=4), events)
    assert [e.delta for e in out if isinstance(e, TextMessageContentEvent)] == [
        "abcd",
        "efgh",
        "ij",
    ]


def test_coalesce_never_crosses_other_events_or_items() -> None:
    events = run_events(
        [
            *text("m1", "a")[:2],
            *text("m2", "x")[:2],
            TextMessageContentEvent(message_id="m1", delta="b"),
            TextMessageContentEvent(message_id="m1", delta="c", metadata={"k": 1}),
            TextMessageContentEvent(message_id="m1", delta="d"),
            *text("m1")[-1:],
            *text("m2")[-1:],
        ]
    )
    out = through(CoalesceDeltas(), events)
    assert [getattr(e, "delta", None) for e in out if isinstance(e, TextMessageContentEvent)] == [
        "a",
        "x",
        "b",
        "c",
        "d",
    ]


def test_coalesce_chunks_merge_only_within_their_item() -> None:
    events = run_events(
        [
            SubagentStartedEvent(subagent_run_id="s1", name="w"),
            ToolCallChunkEvent(
                tool_call_id="c1", tool_call_name="t", delta="{", subagent_run_id="s1"
            ),
            TextMessageChunkEvent(message_id="p1", delta="parent"),
            ToolCallChunkEvent(delta="}"),  # untagged, id-less: the only open tool stream
            ToolCallChunkEvent(delta=" ", subagent_run_id="s1"),
            ReasoningMessageChunkEvent(message_id="rm", delta="a", subagent_run_id="s1"),
            ReasoningMessageChunkEvent(delta="b", subagent_run_id="s1"),
            *subagent("s1", "w")[-1:],
        ]
    )
    out = through(CoalesceDeltas(), events)
    assert consumed(out).messages == consumed(events).messages
    assert len(out) == len(events) - 2


def test_coalesce_flushes_at_end_of_stream() -> None:
    events = run_events(text("m1", "a", "b"))[:-2]  # truncated: no END, no RUN_FINISHED
    out = through(CoalesceDeltas(), events)
    assert out[-1].delta == "ab"  # type: ignore[attr-defined]


def test_coalesce_rejects_bad_max_chars() -> None:
    with pytest.raises(ValueError, match="positive integer"):
        CoalesceDeltas(max_chars=0)


@pytest.mark.anyio
async def test_coalesce_through_chain_apply() -> None:
    events = _chatty()
    assert await through_async(CoalesceDeltas(3), events) == through(CoalesceDeltas(3), events)


# -- Redact ------------------------------------------------------------------------

KEY = r"sk-[A-Za-z0-9]{20,}"
SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K"


def _content(events: list[BaseEvent]) -> str:
    return "".join(m.get("content") or "" for m in consumed(events).messages)


@pytest.mark.parametrize("split", [1, 3, 5, 12, len(SECRET) - 1])
def test_redact_catches_a_secret_split_across_deltas(split: int) -> None:
    events = run_events(text("m1", "my key is ", SECRET[:split], SECRET[split:], " ok"))
    out = through(Redact([KEY]), events)
    assert "A1b2" not in wire(out)
    assert _content(out) == "my key is [REDACTED] ok"


def test_redact_secret_across_many_tiny_deltas_and_hold_back_zero() -> None:
    events = run_events(text("m1", *("key " + SECRET + " end")))
    assert "A1b2" not in wire(through(Redact([KEY]), events))
    # with no hold-back, a match that reaches the end of what arrived is still held:
    # it may go on in the next delta
    long_events = run_events(text("m1", "key " + SECRET, "MORE", "LETTERS end"))
    out = through(Redact([KEY], hold_back=0), long_events)
    assert "MORE" not in wire(out) and "A1b2" not in wire(out)
    assert _content(out) == "key [REDACTED] end"


def test_redact_tool_args_results_state_and_snapshots() -> None:
    card = r"\b\d{4}-\d{4}\b"
    events = run_events(
        [
            *tool_call("c1", "pay", '{"card":"12', '34-5678"}', result='{"ok":"1234-5678"}'),
            ToolCallResultEvent(
                message_id="r2", tool_call_id="c1", content=[TextPart(text="paid 1234-5678")]
            ),
            StateSnapshotEvent(snapshot={"cards": ["1234-5678"], "n": 1}),
            StateDeltaEvent(delta=[{"op": "add", "path": "/x", "value": {"c": "1234-5678"}}]),
            MessagesSnapshotEvent(messages=[UserMessage(id="u1", content="my 1234-5678")]),
        ]
    )
    out = through(Redact([card], replacement="####"), events)
    assert "5678" not in wire(out)
    assert consumed(out).state == {"cards": ["####"], "n": 1, "x": {"c": "####"}}


def test_redact_chunks_release_before_the_lane_closes() -> None:
    events = run_events(
        text_chunks("m1", "key ", SECRET[:6], SECRET[6:])
        + tool_call_chunks("c1", "t", '{"k":"', SECRET, '"}', parent_message_id="m1")
        + text("m2", "after")
    )
    out = through(Redact([KEY]), events)
    assert "A1b2" not in wire(out)
    result = consumed(out)
    assert result.messages[0]["content"] == "key [REDACTED]"
    assert result.messages[0]["toolCalls"][0]["function"]["arguments"] == '{"k":"[REDACTED]"}'


def test_redact_releases_held_text_before_run_error_and_at_end() -> None:
    events = [*run_started(), *text("m1", "hello world")[:2], *run_error("boom")]
    out = through(Redact(["zzz"]), events)
    deltas = "".join(e.delta for e in out if isinstance(e, TextMessageContentEvent))
    assert deltas == "hello world"
    assert out[-1].type.value == "RUN_ERROR"
    truncated = [*run_started(), *text("m1", "hello world")[:2]]
    out = through(Redact(["zzz"]), truncated)
    assert "".join(e.delta for e in out if isinstance(e, TextMessageContentEvent)) == (
        "hello world"
    )


def test_redact_state_resets_per_run() -> None:
    stage = Redact([KEY]).fresh()
    first = [*run_started(), *text("m1", "tail text")[:2]]
    for event in first:
        list(stage.transform(event))
    second = run_events(text("m2", "fresh"), run_id="run-2")
    out = [e for event in second for e in stage.transform(event)]
    assert "tail text" not in wire(out)


@pytest.mark.parametrize(
    ("args", "needle"),
    [(([],), "at least one"), ((["("],), "not a valid"), ((["a"], "x", -1), ">= 0")],
)
def test_redact_configuration_errors(args: tuple[object, ...], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        Redact(*args)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_redact_through_chain_apply() -> None:
    events = run_events(text("m1", "a ", SECRET[:4], SECRET[4:]))
    assert await through_async(Redact([KEY]), events) == through(Redact([KEY]), events)


def test_redact_releases_clean_deltas_whole_and_unchanged() -> None:
    events = run_events(text("m1", *["word "] * 30) + text("m2", "a ", SECRET, " b"))
    out = through(Redact([KEY], hold_back=16), events)
    clean = [e for e in events if isinstance(e, TextMessageContentEvent) and e.message_id == "m1"]
    released = [e for e in out if isinstance(e, TextMessageContentEvent) and e.message_id == "m1"]
    assert all(a is b for a, b in zip(clean, released, strict=True))
    assert _content(out) == "word " * 30 + "a [REDACTED] b"
