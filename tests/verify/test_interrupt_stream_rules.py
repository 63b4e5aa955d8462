"""The verifier's stream-side interrupt rules (producer profile): docs/interrupts.md.

AG-UI 1.0 (the schema's ``RunFinishedInterruptOutcome``, ``Interrupt`` and
``SubagentFinishedSuspendedOutcome``): an interrupt outcome carries at least
one interrupt, each with an ``id`` and a ``reason``; ``toolCallId`` is the tool
call the interrupt concerns; a suspended subagent's ``interruptIds`` are the
run-level interrupts it raised. A run's snapshots come before its
RUN_FINISHED (nothing but a new run follows it). The consumer profile follows
the reference client, which checks none of the interrupt rules, so only the
producer profile refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from ag_ui.core import (
    BaseEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes.verify import Rule, VerificationError, Verifier

START = RunStartedEvent(thread_id="t", run_id="r")


def call(call_id: str, sub: str | None = None) -> list[BaseEvent]:
    return [
        ToolCallStartEvent(tool_call_id=call_id, tool_call_name="delete", subagent_run_id=sub),
        ToolCallEndEvent(tool_call_id=call_id, subagent_run_id=sub),
    ]


def interrupted(*interrupts: Interrupt) -> RunFinishedEvent:
    return RunFinishedEvent(
        thread_id="t",
        run_id="r",
        outcome=RunFinishedInterruptOutcome(type="interrupt", interrupts=list(interrupts)),
    )


def suspended(sub: str, *ids: str) -> list[BaseEvent]:
    return [
        SubagentStartedEvent(subagent_run_id=sub, name="helper"),
        SubagentFinishedEvent(
            subagent_run_id=sub,
            outcome=SubagentFinishedSuspendedOutcome(type="suspended", interrupt_ids=list(ids)),
        ),
    ]


def ask(interrupt_id: str, **fields: object) -> Interrupt:
    return Interrupt.model_validate({"id": interrupt_id, "reason": "tool_approval", **fields})


def verdict(events: list[BaseEvent], profile: str = "producer") -> VerificationError | None:
    verifier = Verifier(profile)  # type: ignore[arg-type]
    try:
        verifier.observe_all(events)
        verifier.finish()
    except VerificationError as error:
        return error
    return None


# -- positive -----------------------------------------------------------------


def test_a_well_formed_interrupt_run_is_accepted_by_both_profiles() -> None:
    events = [
        START,
        *call("c1"),
        *suspended("s1", "sub-ask"),
        StateSnapshotEvent(snapshot={"step": "waiting"}),
        interrupted(
            ask("approve-1", toolCallId="c1", expiresAt="2030-01-01T00:00:00Z"),
            ask("sub-ask", subagentRunId="s1"),
        ),
    ]
    assert verdict(events) is None
    assert verdict(events, "consumer") is None


def test_a_tool_call_of_the_runs_input_or_a_snapshot_counts_as_the_runs() -> None:
    from ag_ui.core import AssistantMessage, FunctionCall, RunAgentInput, ToolCall

    old = AssistantMessage(
        id="a0",
        role="assistant",
        tool_calls=[
            ToolCall(id="old", type="function", function=FunctionCall(name="f", arguments="{}"))
        ],
    )
    echo = RunStartedEvent(
        thread_id="t",
        run_id="r",
        input=RunAgentInput(
            thread_id="t",
            run_id="r",
            messages=[old],
            state={},
            tools=[],
            context=[],
            forwarded_props={},
        ),
    )
    assert verdict([echo, interrupted(ask("i", toolCallId="old"))]) is None
    snap = MessagesSnapshotEvent(messages=[old])
    assert verdict([START, snap, interrupted(ask("i", toolCallId="old"))]) is None


def test_a_subagent_suspended_for_a_descendant_names_no_interrupt() -> None:
    # "May be empty or absent": a subagent suspended because a descendant interrupted.
    events = [START, *suspended("outer"), *suspended("inner", "x"), interrupted(ask("x"))]
    assert verdict(events) is None


# -- negative -----------------------------------------------------------------


def test_an_interrupt_outcome_with_no_interrupt_is_refused() -> None:
    empty = RunFinishedEvent(
        thread_id="t",
        run_id="r",
        outcome=RunFinishedInterruptOutcome.model_construct(type="interrupt", interrupts=[]),
    )
    error = verdict([START, empty])
    assert error is not None and error.rule is Rule.INTERRUPT_SHAPE
    assert "at least one interrupt" in str(error)
    assert verdict([START, empty], "consumer") is None


@pytest.mark.parametrize(
    ("interrupts", "wording"),
    [
        ([ask("")], "non-empty string id"),
        ([Interrupt(id="i", reason="")], "has no reason"),
        ([ask("i"), ask("i")], "named twice"),
        ([ask("i", toolCallId="nope")], "tool call 'nope'"),
    ],
)
def test_a_broken_interrupt_is_refused_with_what_to_fix(
    interrupts: list[Interrupt], wording: str
) -> None:
    events = [START, *call("c1"), interrupted(*interrupts)]
    error = verdict(events)
    assert error is not None and error.rule is Rule.INTERRUPT_SHAPE
    assert wording in error.detail
    assert verdict(events, "consumer") is None


def test_a_suspended_subagents_interrupt_missing_from_the_outcome_is_refused() -> None:
    error = verdict([START, *suspended("s1", "a", "b"), interrupted(ask("a"))])
    assert error is not None and error.rule is Rule.SUSPENDED_INTERRUPTS
    assert "'b'" in error.detail and "s1" in error.detail


def test_a_suspended_subagent_on_a_run_that_is_not_interrupted_is_refused() -> None:
    finished = RunFinishedEvent(thread_id="t", run_id="r")
    error = verdict([START, *suspended("s1", "a"), finished])
    assert error is not None and error.rule is Rule.SUSPENDED_INTERRUPTS
    assert "does not end with an interrupt outcome" in error.detail


def test_a_subagent_claiming_another_subagents_interrupt_is_refused() -> None:
    events = [
        START,
        *suspended("s1", "a"),
        SubagentStartedEvent(subagent_run_id="s2", name="other"),
        SubagentFinishedEvent(subagent_run_id="s2"),
        interrupted(ask("a", subagentRunId="s2")),
    ]
    error = verdict(events)
    assert error is not None and error.rule is Rule.SUSPENDED_INTERRUPTS
    assert "attributed to subagent 's2'" in error.detail


def test_a_snapshot_after_the_interrupt_outcome_is_refused_by_both_profiles() -> None:
    events = [START, interrupted(ask("i")), StateSnapshotEvent(snapshot={"late": True})]
    for profile in ("producer", "consumer"):
        error = verdict(events, profile)
        assert error is not None and error.rule is Rule.RUN_ENDED


def test_a_refused_outcome_leaves_the_run_open() -> None:
    # The driver relies on it: a refused RUN_FINISHED can still be replaced by RUN_ERROR.
    verifier = Verifier("producer")
    verifier.observe(START)
    with pytest.raises(VerificationError):
        verifier.observe(interrupted(ask("i"), ask("i")))
    assert verifier.run_open


def test_the_rules_reset_with_each_run() -> None:
    verifier = Verifier("consumer")
    verifier.observe_all([START, *suspended("s1", "a"), interrupted(ask("a"))])
    # Run two: s1's claim is the first run's; a plain success is fine now.
    verifier.observe_all([RunStartedEvent(thread_id="t", run_id="r2")])
    verifier.observe(RunFinishedEvent(thread_id="t", run_id="r2"))


# -- property -----------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A generated interrupted run: tool calls, suspended subagents, the interrupts."""

    calls: tuple[str, ...]
    # (interrupt id, tool call index or None, owning subagent or None)
    interrupts: tuple[tuple[str, int | None, str | None], ...]
    snapshot_at: int

    def events(self) -> list[BaseEvent]:
        body: list[BaseEvent] = [e for c in self.calls for e in call(c)]
        owners: dict[str, list[str]] = {}
        for interrupt_id, _, owner in self.interrupts:
            if owner is not None:
                owners.setdefault(owner, []).append(interrupt_id)
        for owner, ids in owners.items():
            body.extend(suspended(owner, *ids))
        body.insert(min(self.snapshot_at, len(body)), StateSnapshotEvent(snapshot={"n": 1}))
        return [START, *body, interrupted(*self.made())]

    def made(self) -> list[Interrupt]:
        made = []
        for interrupt_id, index, owner in self.interrupts:
            fields: dict[str, object] = {}
            if index is not None:
                fields["toolCallId"] = self.calls[index]
            if owner is not None:
                fields["subagentRunId"] = owner
            made.append(ask(interrupt_id, **fields))
        return made


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    calls = tuple(f"c{i}" for i in range(draw(st.integers(0, 3))))
    count = draw(st.integers(1, 4))
    interrupts = tuple(
        (
            f"i{n}",
            draw(st.none() | st.integers(0, len(calls) - 1)) if calls else None,
            draw(st.sampled_from([None, "s1", "s2"])),
        )
        for n in range(count)
    )
    return Plan(calls, interrupts, draw(st.integers(0, 12)))


MUTATIONS = ("duplicate", "unknown_call", "dropped", "late_snapshot", "no_reason")


def mutate(plan: Plan, how: str) -> tuple[list[BaseEvent], Rule]:
    events = plan.events()
    made = plan.made()
    if how == "duplicate":
        return [*events[:-1], interrupted(*made, made[0])], Rule.INTERRUPT_SHAPE
    if how == "unknown_call":
        wrong = made[0].model_copy(update={"tool_call_id": "never-made"})
        return [*events[:-1], interrupted(wrong, *made[1:])], Rule.INTERRUPT_SHAPE
    if how == "no_reason":
        blank = made[-1].model_copy(update={"reason": ""})
        return [*events[:-1], interrupted(*made[:-1], blank)], Rule.INTERRUPT_SHAPE
    if how == "dropped":
        # A subagent claims an interrupt the outcome lost.
        owned = [i for i, (_, _, owner) in enumerate(plan.interrupts) if owner is not None]
        if not owned or len(made) < 2:
            claim = [*events[:-1], *suspended("s9", "lost"), events[-1]]
            return claim, Rule.SUSPENDED_INTERRUPTS
        kept = [m for i, m in enumerate(made) if i != owned[0]]
        return [*events[:-1], interrupted(*kept)], Rule.SUSPENDED_INTERRUPTS
    assert how == "late_snapshot"
    return [*events, StateSnapshotEvent(snapshot={"late": True})], Rule.RUN_ENDED


@settings(max_examples=150, deadline=None)
@given(plan=plans(), how=st.sampled_from(MUTATIONS))
def test_well_formed_runs_pass_and_every_mutation_is_refused(plan: Plan, how: str) -> None:
    assert verdict(plan.events()) is None
    assert verdict(plan.events(), "consumer") is None
    mutated, rule = mutate(replace(plan), how)
    error = verdict(mutated)
    assert error is not None, how
    assert error.rule is rule, (how, str(error))
