"""The ordering verifier: one test per rule and per reference wording, both profiles."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes import StreamRejected
from agui_pipes.testing import (
    reasoning,
    run_error,
    run_events,
    run_finished,
    run_started,
    step,
    subagent,
    tagged,
    text,
    tool_call,
)
from agui_pipes.verify import ProtocolViolation, Rule, VerificationError, Verifier


def check(events: Sequence[BaseEvent], profile: str = "consumer") -> Verifier:
    verifier = Verifier(profile)  # type: ignore[arg-type]
    verifier.observe_all(events)
    return verifier


def rejection(
    events: Sequence[BaseEvent], profile: str = "consumer", debug: bool = False
) -> VerificationError:
    verifier = Verifier(profile, debug=debug)  # type: ignore[arg-type]
    with pytest.raises(VerificationError) as info:
        verifier.observe_all(events)
    return info.value


START = run_started()
FINISH = run_finished()


def text_start(mid: str, sub: str | None = None) -> TextMessageStartEvent:
    return TextMessageStartEvent(message_id=mid, subagent_run_id=sub)


def content(mid: str, sub: str | None = None) -> TextMessageContentEvent:
    return TextMessageContentEvent(message_id=mid, delta="x", subagent_run_id=sub)


def text_end(mid: str, sub: str | None = None) -> TextMessageEndEvent:
    return TextMessageEndEvent(message_id=mid, subagent_run_id=sub)


# -- rule metadata -----------------------------------------------------------


def test_rules_are_kebab_case_and_described() -> None:
    for rule in Rule:
        assert rule.value == rule.name.lower().replace("_", "-")
        assert rule.describe()
        assert not rule.describe().endswith(".")
    producer_rules = {
        "run-ended",
        "duplicate-run-started",
        "duplicate-start",
        "not-open",
        "unknown-id",
        "out-of-order",
        "open-at-finish",
        "owner-mismatch",
    }
    assert producer_rules <= {r.value for r in Rule}


def test_error_hierarchy() -> None:
    assert issubclass(VerificationError, ProtocolViolation)
    assert issubclass(ProtocolViolation, StreamRejected)


def test_message_format_and_fields() -> None:
    events = [*START, content("m9")]
    error = rejection(events)
    assert error.rule is Rule.NOT_OPEN
    assert error.event is events[1]
    assert "No active text message found with ID 'm9'" in error.detail
    assert str(error).startswith(
        "TEXT_MESSAGE_CONTENT breaks rule `not-open` "
        "(content and terminators require a matching start): Cannot send"
    )
    assert error.open_dump is None


def test_debug_dump_lists_what_is_open() -> None:
    error = rejection([*START, text_start("m1"), content("m2")], debug=True)
    assert error.open_dump == '[open: messages={"m1"}]'
    assert str(error).endswith('[open: messages={"m1"}]')
    error = rejection([*START, content("m2")], debug=True)
    assert error.open_dump == "[nothing open]"


def test_unknown_profile_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="consumer"):
        Verifier("strict")  # type: ignore[arg-type]


# -- valid streams -----------------------------------------------------------


def test_full_valid_stream_is_accepted_by_both_profiles() -> None:
    inner = [
        *step("plan", text("m1", "a", "b")),
        *tool_call("c1", "search", '{"q":1}', result="[]", parent_message_id="m1"),
        *reasoning("r1", "hmm"),
        StateSnapshotEvent(snapshot={"a": 1}),
        CustomEvent(name="x", value=None),
        *subagent("s1", "helper", text("m2", "sub") + step("plan")),
    ]
    for profile in ("consumer", "producer"):
        verifier = check(run_events(inner), profile)
        assert not verifier.run_open
        verifier.finish()


def test_closed_ids_may_be_reopened() -> None:
    check(
        [
            *START,
            *text("m1", "a"),
            *text("m1", "b"),
            *tool_call("c", "t"),
            *tool_call("c", "t"),
            *FINISH,
        ],
        "producer",
    )


def test_separate_id_spaces_overlap_freely() -> None:
    events = [
        *START,
        text_start("x"),
        ToolCallStartEvent(tool_call_id="x", tool_call_name="t"),
        ReasoningStartEvent(message_id="x"),
        ReasoningMessageStartEvent(message_id="x", role="reasoning"),
        ReasoningMessageEndEvent(message_id="x"),
        ReasoningEndEvent(message_id="x"),
        ToolCallEndEvent(tool_call_id="x"),
        text_end("x"),
        *FINISH,
    ]
    check(events)


def test_several_runs_in_one_stream_for_the_consumer() -> None:
    verifier = check([*run_events(text("m", "a")), *run_error("x"), *run_events(), *run_started()])
    assert verifier.run_open
    with pytest.raises(VerificationError) as info:
        verifier.finish()
    assert info.value.rule is Rule.TRUNCATED
    verifier.finish(allow_truncated=True)


def test_run_error_may_open_a_stream_and_exempts_open_entities() -> None:
    check([*run_error("boom")]).finish()
    check([*START, text_start("m1"), *step("s")[:1], *run_error("boom")]).finish()


def test_late_run_error_after_finish_is_accepted_by_consumer() -> None:
    check([*START, *FINISH, *run_error("late")])


# -- sequencing --------------------------------------------------------------


def test_first_event_must_be_run_started() -> None:
    error = rejection([text_start("m1")])
    assert error.rule is Rule.FIRST_EVENT
    assert "First event must be 'RUN_STARTED'" in str(error)


def test_nested_run_started() -> None:
    error = rejection([*START, *START])
    assert error.rule is Rule.DUPLICATE_RUN_STARTED
    assert "Cannot send 'RUN_STARTED' while a run is still active" in str(error)


def test_events_after_run_finished() -> None:
    error = rejection([*START, *FINISH, text_start("m")])
    assert error.rule is Rule.RUN_ENDED
    assert "The run has already finished with 'RUN_FINISHED'" in str(error)


def test_events_after_run_error() -> None:
    error = rejection([*START, *run_error(), *run_error()])
    assert error.rule is Rule.RUN_ENDED
    assert "The run has already errored with 'RUN_ERROR'" in str(error)


def test_producer_allows_one_run_and_nothing_after_its_end() -> None:
    assert rejection([*START, *FINISH, *run_error()], "producer").rule is Rule.RUN_ENDED
    assert rejection([*START, *FINISH, *START], "producer").rule is Rule.DUPLICATE_RUN_STARTED
    assert rejection([*run_error(), *START], "producer").rule is Rule.DUPLICATE_RUN_STARTED


# -- open / close ------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "rule", "wording"),
    [
        (
            [text_start("m"), text_start("m")],
            Rule.DUPLICATE_START,
            "A text message with ID 'm' is already in progress",
        ),
        ([text_end("m")], Rule.NOT_OPEN, "No active text message found with ID 'm'"),
        (
            [ToolCallStartEvent(tool_call_id="c", tool_call_name="t")] * 2,
            Rule.DUPLICATE_START,
            "A tool call with ID 'c' is already in progress",
        ),
        (
            [ToolCallArgsEvent(tool_call_id="c", delta="")],
            Rule.NOT_OPEN,
            "No active tool call found with ID 'c'",
        ),
        (
            [ToolCallEndEvent(tool_call_id="c")],
            Rule.NOT_OPEN,
            "No active tool call found with ID 'c'",
        ),
        (
            [ReasoningStartEvent(message_id="r")] * 2,
            Rule.DUPLICATE_START,
            "A reasoning span with ID 'r' is already in progress",
        ),
        (
            [ReasoningMessageStartEvent(message_id="r", role="reasoning")] * 2,
            Rule.DUPLICATE_START,
            "A reasoning message with ID 'r' is already in progress",
        ),
        (
            [ReasoningMessageContentEvent(message_id="r", delta="")],
            Rule.NOT_OPEN,
            "No active reasoning message found with ID 'r'",
        ),
        (
            [ReasoningEndEvent(message_id="r")],
            Rule.NOT_OPEN,
            "No active reasoning span found with ID 'r'",
        ),
        ([StepStartedEvent(step_name="s")] * 2, Rule.DUPLICATE_START, 'Step "s" is already active'),
        ([StepFinishedEvent(step_name="s")], Rule.NOT_OPEN, 'for step "s" that was not started'),
        (
            [SubagentFinishedEvent(subagent_run_id="s")],
            Rule.NOT_OPEN,
            "no active subagent found with ID 's'",
        ),
        (
            [SubagentErrorEvent(subagent_run_id="s", message="x")],
            Rule.NOT_OPEN,
            "no active subagent found with ID 's'",
        ),
        (
            [SubagentStartedEvent(subagent_run_id="s", name="n")] * 2,
            Rule.DUPLICATE_START,
            "subagent 's' is already active",
        ),
        (
            [*subagent("s", "n"), SubagentStartedEvent(subagent_run_id="s", name="n")],
            Rule.DUPLICATE_START,
            "has already finished in this run",
        ),
        (
            [SubagentStartedEvent(subagent_run_id="s", name="n", parent_subagent_run_id="p")],
            Rule.UNKNOWN_ID,
            "parentSubagentRunId 'p' has not been started",
        ),
    ],
)
def test_entity_rules(events: list[BaseEvent], rule: Rule, wording: str) -> None:
    for profile in ("consumer", "producer"):
        error = rejection([*START, *events], profile)
        assert error.rule is rule
        assert wording in str(error)


@pytest.mark.parametrize(
    ("opened", "wording"),
    [
        ([StepStartedEvent(step_name="s")], "while steps are still active: s"),
        (
            [StepStartedEvent(step_name="s", subagent_run_id="a")],
            "while steps are still active: s (subagent 'a')",
        ),
        ([text_start("m1"), text_start("m2")], "while text messages are still active: m1, m2"),
        (
            [ReasoningMessageStartEvent(message_id="r", role="reasoning")],
            "while reasoning messages are still active: r",
        ),
        ([ReasoningStartEvent(message_id="r")], "while reasoning spans are still active: r"),
        (
            [ToolCallStartEvent(tool_call_id="c", tool_call_name="t")],
            "while tool calls are still active: c",
        ),
        (
            [SubagentStartedEvent(subagent_run_id="s", name="n")],
            "while subagents are still active: s",
        ),
    ],
)
def test_open_at_finish(opened: list[BaseEvent], wording: str) -> None:
    error = rejection([*START, *opened, *FINISH])
    assert error.rule is Rule.OPEN_AT_FINISH
    assert f"Cannot send 'RUN_FINISHED' {wording}" in str(error)


def test_steps_are_keyed_by_owner() -> None:
    check(
        [
            *START,
            StepStartedEvent(step_name="tools"),
            StepStartedEvent(step_name="tools", subagent_run_id="s"),
            StepFinishedEvent(step_name="tools", subagent_run_id="s"),
            StepFinishedEvent(step_name="tools"),
            *FINISH,
        ]
    )
    error = rejection(
        [
            *START,
            StepStartedEvent(step_name="tools"),
            StepFinishedEvent(step_name="tools", subagent_run_id="s"),
        ]
    )
    assert error.rule is Rule.OWNER_MISMATCH
    assert "that step is open under the parent agent" in str(error)


# -- ownership ---------------------------------------------------------------


def test_tagged_continuation_must_match_opener() -> None:
    error = rejection([*START, text_start("m", "s1"), content("m", "s2")])
    assert error.rule is Rule.OWNER_MISMATCH
    assert "subagentRunId 's2' does not match the message 'm' opener's subagent 's1'" in str(error)
    error = rejection([*START, text_start("m"), text_end("m", "s2")])
    assert "opener's subagent '(the parent agent)'" in str(error)


def test_untagged_continuation_always_agrees() -> None:
    check([*START, text_start("m", "s1"), content("m"), text_end("m"), *FINISH])


def test_reopen_under_another_owner_is_rejected_untagged_reopen_keeps_owner() -> None:
    error = rejection([*START, *text("m", "a", subagent="s1"), text_start("m", "s2")])
    assert error.rule is Rule.OWNER_MISMATCH
    # An untagged reopen does not hand the message to the parent.
    error = rejection([*START, *text("m", subagent="s1"), text_start("m"), content("m", "s2")])
    assert "opener's subagent 's1'" in str(error)


def test_tool_call_must_agree_with_parent_message() -> None:
    error = rejection(
        [
            *START,
            *text("m", subagent="s1"),
            ToolCallStartEvent(
                tool_call_id="c", tool_call_name="t", parent_message_id="m", subagent_run_id="s2"
            ),
        ]
    )
    assert error.rule is Rule.OWNER_MISMATCH
    assert "does not match its parent message 'm' owner 's1'" in str(error)
    # An untagged call inherits the parent's owner, so a tagged ARGS must match it.
    error = rejection(
        [
            *START,
            *text("m", subagent="s1"),
            ToolCallStartEvent(tool_call_id="c", tool_call_name="t", parent_message_id="m"),
            ToolCallArgsEvent(tool_call_id="c", delta="", subagent_run_id="s2"),
        ]
    )
    assert "tool call 'c' opener's subagent 's1'" in str(error)


def test_untagged_reopen_under_a_differently_owned_parent() -> None:
    events = [
        *START,
        *text("m1", subagent="s1"),
        *text("m2"),
        *tool_call("c", "t", parent_message_id="m1"),
        ToolCallStartEvent(tool_call_id="c", tool_call_name="t", parent_message_id="m2"),
    ]
    error = rejection(events)
    assert "tool call 'c' is owned by 's1' but its parent message 'm2'" in str(error)


def test_snapshot_seeds_owners_authoritatively() -> None:
    snapshot = MessagesSnapshotEvent(
        messages=[
            AssistantMessage(
                id="m",
                subagent_run_id="s1",
                tool_calls=[ToolCall(id="c", function=FunctionCall(name="t", arguments=""))],
            ),
        ]
    )
    error = rejection([*START, *text("m"), snapshot, text_start("m", "s2")])
    assert "opener's subagent 's1'" in str(error)
    error = rejection(
        [
            *START,
            snapshot,
            ToolCallStartEvent(tool_call_id="c", tool_call_name="t", subagent_run_id="s2"),
        ]
    )
    assert "tool call 'c' opener's subagent 's1'" in str(error)


def test_input_echo_seeds_only_unclaimed_ids() -> None:
    echo = RunAgentInput(
        thread_id="t",
        run_id="r",
        messages=[UserMessage(id="u", content="hi", subagent_run_id="s1")],
    )
    events = run_started(input=echo)
    error = rejection([*events, text_start("u", "s2")])
    assert "message 'u' opener's subagent 's1'" in str(error)


def test_tool_result_mints_an_owned_message() -> None:
    events = [
        *START,
        *tool_call("c", "t"),
        ToolCallResultEvent(message_id="tm", tool_call_id="c", content="", subagent_run_id="s1"),
        text_start("tm", "s2"),
    ]
    assert rejection(events).rule is Rule.OWNER_MISMATCH


def test_activity_ownership() -> None:
    snap = ActivitySnapshotEvent(
        message_id="a", activity_type="k", content={}, subagent_run_id="s1"
    )
    delta = ActivityDeltaEvent(message_id="a", activity_type="k", patch=[], subagent_run_id="s2")
    assert rejection([*START, snap, delta]).rule is Rule.OWNER_MISMATCH
    keep = ActivitySnapshotEvent(
        message_id="a", activity_type="k", content={}, subagent_run_id="s2", replace=False
    )
    assert rejection([*START, snap, keep, delta]).rule is Rule.OWNER_MISMATCH
    replace = keep.model_copy(update={"replace": True})
    check([*START, snap, replace, delta, *FINISH])
    # A delta for an activity never created is not a verification matter.
    check([*START, delta, *FINISH])


def test_encrypted_value_checks_the_owner_of_its_entity() -> None:
    def value(subtype: str) -> ReasoningEncryptedValueEvent:
        return ReasoningEncryptedValueEvent(
            subtype=subtype,
            entity_id="x",  # type: ignore[arg-type]
            encrypted_value="e",
            subagent_run_id="s2",
        )

    assert (
        rejection([*START, *tool_call("x", "t", subagent="s1"), value("tool-call")]).rule
        is Rule.OWNER_MISMATCH
    )
    assert (
        rejection([*START, *reasoning("x", subagent="s1"), value("message")]).rule
        is Rule.OWNER_MISMATCH
    )
    check([*START, value("message"), *FINISH])


def test_state_tag_is_provenance_only() -> None:
    check([*START, StateSnapshotEvent(snapshot=1, subagent_run_id="s9"), *FINISH])


def test_attribution_without_lifecycle_is_accepted() -> None:
    check([*START, *tagged(text("m", "a"), "ghost"), *FINISH], "producer")


# -- producer-only rules -----------------------------------------------------


def test_tool_result_for_unknown_call() -> None:
    events = [*START, ToolCallResultEvent(message_id="r", tool_call_id="nope", content="")]
    check(events)  # the 1.0 consumer does not check this
    assert rejection(events, "producer").rule is Rule.UNKNOWN_ID


def test_tool_result_before_end() -> None:
    events = [
        *START,
        ToolCallStartEvent(tool_call_id="c", tool_call_name="t"),
        ToolCallResultEvent(message_id="r", tool_call_id="c", content=""),
    ]
    check(events)
    assert rejection(events, "producer").rule is Rule.OUT_OF_ORDER


def test_producer_accepts_results_for_recorded_calls() -> None:
    snapshot = MessagesSnapshotEvent(
        messages=[
            AssistantMessage(
                id="m", tool_calls=[ToolCall(id="c", function=FunctionCall(name="t", arguments=""))]
            )
        ]
    )
    check(
        [
            *START,
            snapshot,
            ToolCallResultEvent(message_id="r", tool_call_id="c", content=""),
            *FINISH,
        ],
        "producer",
    )


# -- behaviour ---------------------------------------------------------------


def test_state_is_unchanged_after_a_rejection() -> None:
    verifier = check([*START, text_start("m")])
    with pytest.raises(VerificationError):
        verifier.observe(run_finished()[0])
    assert verifier.run_open
    verifier.observe(text_end("m"))
    verifier.observe(run_finished()[0])
    assert not verifier.run_open


def test_unexpanded_chunks_are_pointed_at_expand_chunks() -> None:
    error = rejection([*START, TextMessageChunkEvent(message_id="m", delta="x")])
    assert error.rule is Rule.UNEXPANDED_CHUNK
    assert "ExpandChunks" in str(error)


def test_truncated_at_finish_and_not_before_any_run() -> None:
    Verifier().finish()
    verifier = check([*START])
    with pytest.raises(VerificationError) as info:
        verifier.finish()
    assert info.value.rule is Rule.TRUNCATED
    assert str(info.value).startswith("end of stream breaks rule `truncated`")


@given(
    st.lists(st.sampled_from(["text", "tool", "step", "reasoning", "sub"]), max_size=12),
    st.booleans(),
)
def test_generated_valid_streams_are_accepted(kinds: list[str], error_end: bool) -> None:
    inner: list[BaseEvent] = []
    for i, kind in enumerate(kinds):
        if kind == "text":
            inner += text(f"m{i}", "a", "b")
        elif kind == "tool":
            inner += tool_call(f"c{i}", "t", "{}", result="ok")
        elif kind == "step":
            inner += step(f"s{i}", text(f"sm{i}", "x"))
        elif kind == "reasoning":
            inner += reasoning(f"r{i}", "think")
        else:
            inner += subagent(f"sub{i}", "helper", text(f"subm{i}", "y"))
    events = run_events(inner, error="boom" if error_end else None)
    for profile in ("consumer", "producer"):
        verifier = check(events, profile)
        verifier.finish()
        # Dropping the terminal event always leaves a truncated run.
        truncated = check(events[:-1], profile)
        with pytest.raises(VerificationError):
            truncated.finish()
    if inner and not error_end:
        # Dropping any single closing event before RUN_FINISHED is always caught.
        closers = [
            i
            for i, e in enumerate(events)
            if isinstance(
                e,
                TextMessageEndEvent
                | ToolCallEndEvent
                | StepFinishedEvent
                | ReasoningEndEvent
                | ReasoningMessageEndEvent
                | SubagentFinishedEvent,
            )
        ]
        for index in closers:
            with pytest.raises(VerificationError):
                check(events[:index] + events[index + 1 :])


def test_run_error_event_type_is_accepted_in_the_middle() -> None:
    check([*START, RunErrorEvent(message="x", code="C")]).finish()


def test_protocol_violation_is_one_class_wherever_it_is_imported() -> None:
    import agui_pipes
    from agui_pipes._foundation import errors as _errors

    assert agui_pipes.ProtocolViolation is ProtocolViolation is _errors.ProtocolViolation
    assert issubclass(VerificationError, ProtocolViolation)
    assert issubclass(ProtocolViolation, StreamRejected)


def test_between_runs_follows_the_run() -> None:
    from agui_pipes.testing import run_events, text

    events = run_events(text("m1", "hi"))
    verifier = Verifier()
    assert verifier.between_runs
    verifier.observe(events[0])
    assert not verifier.between_runs
    for event in events[1:]:
        verifier.observe(event)
    assert verifier.between_runs  # RUN_FINISHED: the next event must start a run


def test_open_items_are_the_live_tables_the_deltas_are_checked_against() -> None:
    from ag_ui.core import (
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageStartEvent,
        ToolCallArgsEvent,
        ToolCallStartEvent,
    )

    verifier = Verifier()
    texts = verifier.open_items(TextMessageContentEvent)
    calls = verifier.open_items(ToolCallArgsEvent)
    assert texts is not None and calls is not None
    assert not texts.by_tool_call and calls.by_tool_call
    assert verifier.open_items(TextMessageStartEvent) is None
    verifier.observe(RunStartedEvent(thread_id="t", run_id="r"))
    verifier.observe(TextMessageStartEvent(message_id="m1", role="assistant"))
    verifier.observe(
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="f", subagent_run_id="s1")
    )
    assert "m1" in texts.ids and "c1" in calls.ids  # the same objects, kept current
    assert calls.owners.get("c1") == "s1"


def test_mid_run_check_leaves_run_started_to_observe() -> None:
    from ag_ui.core import RunStartedEvent, TextMessageContentEvent

    verifier = Verifier()
    assert verifier.mid_run_check(RunStartedEvent) is None
    check = verifier.mid_run_check(TextMessageContentEvent)
    assert check is not None
    verifier.observe(RunStartedEvent(thread_id="t", run_id="r"))
    with pytest.raises(VerificationError) as caught:
        check(TextMessageContentEvent(message_id="nope", delta="x"))
    assert caught.value.rule is Rule.NOT_OPEN
