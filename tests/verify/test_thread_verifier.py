"""The interrupt contract across runs of a thread: ThreadVerifier's verdicts.

Properties over generated threads: every well-formed answer sequence is
accepted, and every mutation of one — an answer dropped, duplicated, aimed at
a wrong id, given after expiry, or given when nothing is open — is refused
with its code.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from ag_ui.core import (
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    UserMessage,
)
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes.verify import InterruptRefused, ThreadVerifier

NOW = 1_800_000_000.0
LATER = "2030-01-01T00:00:00Z"  # after NOW
EARLIER = "2020-01-01T00:00:00Z"  # before NOW


def _interrupted(run_id: str, *interrupts: Interrupt) -> RunFinishedEvent:
    return RunFinishedEvent(
        thread_id="t",
        run_id=run_id,
        outcome=RunFinishedInterruptOutcome(type="interrupt", interrupts=list(interrupts)),
    )


def _input(run_id: str, *answers: tuple[str, str], **extra: Any) -> RunAgentInput:
    resume = [ResumeEntry(interrupt_id=i, status=s) for i, s in answers]  # type: ignore[arg-type]
    return RunAgentInput(
        thread_id="t",
        run_id=run_id,
        messages=extra.pop("messages", []),
        state={},
        tools=[],
        context=[],
        forwarded_props={},
        resume=resume or None,
        **extra,
    )


def _verifier(**options: Any) -> ThreadVerifier:
    return ThreadVerifier(now=lambda: NOW, **options)


def _refused(verifier: ThreadVerifier, run_input: RunAgentInput, **kw: Any) -> InterruptRefused:
    with pytest.raises(InterruptRefused) as caught:
        verifier.check(run_input, **kw)
    return caught.value


def test_an_interrupted_run_must_be_answered_once_and_only_once() -> None:
    verifier = _verifier()
    verifier.observe("r1", _interrupted("r1", Interrupt(id="i1", reason="approval")))
    assert [i.id for i in verifier.open_interrupts] == ["i1"]
    pending = _refused(verifier, _input("r2"))
    assert (pending.code, pending.http_status, pending.interrupt_ids) == (
        "interrupt_pending",
        409,
        ["i1"],
    )
    answers = verifier.check(_input("r2", ("i1", "resolved")))
    verifier.accept("r2", answers)
    assert verifier.open_interrupts == []
    again = _refused(verifier, _input("r3", ("i1", "resolved")))
    assert (again.code, again.http_status) == ("interrupt_answered", 409)
    assert "'r2'" in again.message


def test_each_bad_answer_has_its_code() -> None:
    verifier = _verifier()
    verifier.observe(
        "r1",
        _interrupted(
            "r1",
            Interrupt(id="i1", reason="approval", expires_at=EARLIER),
            Interrupt(id="i2", reason="approval", expires_at=LATER),
        ),
    )
    assert _refused(verifier, _input("r2", ("i2", "resolved"), ("i2", "resolved"))).code == (
        "duplicate_answer"
    )
    unknown = _refused(verifier, _input("r2", ("i1", "cancelled"), ("nope", "resolved")))
    assert (unknown.code, unknown.http_status, unknown.interrupt_ids) == (
        "unknown_interrupt",
        422,
        ["nope"],
    )
    late = _refused(verifier, _input("r2", ("i1", "resolved"), ("i2", "resolved")))
    assert (late.code, late.interrupt_ids) == ("interrupt_expired", ["i1"])
    # An expired interrupt may still be cancelled.
    assert [
        a.interrupt_id
        for a in verifier.check(_input("r2", ("i1", "cancelled"), ("i2", "resolved")))
    ] == ["i1", "i2"]


def test_a_resume_with_nothing_open_is_refused() -> None:
    refused = _refused(_verifier(), _input("r1", ("i1", "resolved")))
    assert (refused.code, refused.http_status) == ("no_pending_interrupts", 409)


def test_new_user_input_while_pending_is_refused_or_cancels_by_option() -> None:
    message = UserMessage(id="u-new", role="user", content="never mind, go to Lisbon")
    refuse = _verifier()
    refuse.observe("r1", _interrupted("r1", Interrupt(id="i1", reason="approval")))
    refused = _refused(refuse, _input("r2", messages=[message]), known_message_ids={"u-old"})
    assert refused.code == "interrupt_pending"
    assert refused.message.startswith("new input while interrupts are pending")
    cancel = _verifier(new_input="cancel")
    cancel.observe("r1", _interrupted("r1", Interrupt(id="i1", reason="approval")))
    answers = cancel.check(_input("r2", messages=[message]), known_message_ids={"u-old"})
    assert [(a.interrupt_id, a.status) for a in answers] == [("i1", "cancelled")]


def test_payloads_are_checked_against_the_response_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}},
        "required": ["approved"],
    }
    verifier = _verifier()
    verifier.observe(
        "r1", _interrupted("r1", Interrupt(id="i1", reason="approval", response_schema=schema))
    )
    bad = _input("r2")
    bad.resume = [ResumeEntry(interrupt_id="i1", status="resolved", payload={"approved": "yes"})]
    refused = _refused(verifier, bad)
    assert (refused.code, refused.http_status) == ("invalid_payload", 422)
    assert "approved" in refused.message
    good = _input("r2")
    good.resume = [ResumeEntry(interrupt_id="i1", status="resolved", payload={"approved": True})]
    assert len(verifier.check(good)) == 1
    # A cancelled answer carries no payload to check.
    assert len(verifier.check(_input("r2", ("i1", "cancelled")))) == 1


def test_the_refusal_survives_a_pickle() -> None:
    error = InterruptRefused("interrupt_pending", 409, "m", ["i1"])
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.http_status, copy.message, copy.interrupt_ids) == (
        "interrupt_pending",
        409,
        "m",
        ["i1"],
    )


def test_a_stored_thread_rebuilds_the_open_and_answered_interrupts() -> None:
    runs = [
        [
            RunStartedEvent(thread_id="t", run_id="r1"),
            _interrupted("r1", Interrupt(id="i1", reason="a")),
        ],
        [
            RunStartedEvent(thread_id="t", run_id="r2"),
            _interrupted("r2", Interrupt(id="i2", reason="b")),
        ],
    ]
    verifier = ThreadVerifier.from_runs(runs, now=lambda: NOW)
    assert [i.id for i in verifier.open_interrupts] == ["i2"]
    assert _refused(verifier, _input("r3", ("i1", "resolved"))).code == "interrupt_answered"


# -- properties -------------------------------------------------------------------

_ids = st.text("abcdefgh", min_size=1, max_size=3)


@st.composite
def _threads(draw: st.DrawFn) -> list[tuple[list[Interrupt], list[tuple[str, str]]]]:
    """Runs: each raises some interrupts (fresh ids) and the next answers them all."""
    count = draw(st.integers(1, 5))
    used: set[str] = set()
    runs = []
    for n in range(count):
        ids = draw(
            st.lists(_ids.filter(lambda i: i not in used), min_size=0, max_size=3, unique=True)
        )
        used.update(ids)
        interrupts = [
            Interrupt(
                id=f"{n}-{i}", reason="approval", expires_at=draw(st.sampled_from([None, LATER]))
            )
            for i in ids
        ]
        answers = [(it.id, draw(st.sampled_from(["resolved", "cancelled"]))) for it in interrupts]
        runs.append((interrupts, draw(st.permutations(answers)) if answers else []))
    return runs


def _play(runs: list[tuple[list[Interrupt], list[tuple[str, str]]]], mutate: Any = None) -> None:
    verifier = _verifier()
    previous: list[tuple[str, str]] = []
    for n, (interrupts, answers) in enumerate(runs):
        run_id = f"r{n}"
        sent = previous if mutate is None or n != mutate[0] else mutate[1](previous)
        admitted = verifier.check(_input(run_id, *sent))
        verifier.accept(run_id, admitted)
        verifier.observe(
            run_id,
            _interrupted(run_id, *interrupts)
            if interrupts
            else RunFinishedEvent(thread_id="t", run_id=run_id),
        )
        previous = list(answers)


@given(runs=_threads())
def test_every_well_formed_answer_sequence_is_accepted(runs: Any) -> None:
    _play(runs)


@given(runs=_threads(), data=st.data())
def test_every_mutated_answer_sequence_is_refused(runs: Any, data: st.DataObject) -> None:
    answerable = [n for n in range(1, len(runs)) if runs[n - 1][1]]
    kinds = ["nothing-open-answer"]
    if answerable:
        kinds += ["drop", "duplicate", "wrong-id", "expired", "answered-again"]
    kind = data.draw(st.sampled_from(kinds), label="mutation")
    if kind == "nothing-open-answer":
        quiet = [n for n in range(len(runs)) if n == 0 or not runs[n - 1][1]]
        at = data.draw(st.sampled_from(quiet))
        expected = "no_pending_interrupts"
        mutation: Any = lambda answers: [("ghost", "resolved")]  # noqa: E731
    else:
        at = data.draw(st.sampled_from(answerable))
        victim = data.draw(st.integers(0, len(runs[at - 1][1]) - 1))
        expected, mutation = {
            "drop": ("interrupt_pending", lambda a: a[:victim] + a[victim + 1 :]),
            "duplicate": ("duplicate_answer", lambda a: [*a, a[victim]]),
            "wrong-id": ("unknown_interrupt", lambda a: [*a, ("ghost", "resolved")]),
            "expired": ("interrupt_expired", None),
            "answered-again": ("interrupt_answered", None),
        }[kind]
        if kind == "expired":
            interrupts, answers = runs[at - 1]
            target = answers[victim][0]
            runs[at - 1] = (
                [
                    it.model_copy(update={"expires_at": EARLIER}) if it.id == target else it
                    for it in interrupts
                ],
                [(i, "resolved" if i == target else s) for i, s in answers],
            )
            mutation = lambda a: a  # noqa: E731
        elif kind == "answered-again":
            old = runs[at - 1][1][victim]
            runs = [*runs[: at + 1], ([], [])]  # one run more, after the one that answered
            at, mutation = at + 1, lambda a, old=old: [old]
    with pytest.raises(InterruptRefused) as caught:
        _play(runs, (at, mutation))
    assert caught.value.code == expected, caught.value.message
