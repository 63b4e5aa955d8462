"""``ctx.interrupt(...)`` and the validated ``ctx.resume_for(...)`` (docs/interrupts.md)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from ag_ui.core import EventType, Interrupt, RunErrorEvent, RunFinishedEvent

from agui_pipes import RunContext, RunError, RunOutcome
from agui_pipes.testing import collect

pytestmark = pytest.mark.anyio

APPROVAL = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


def ask(ctx: RunContext[Any]) -> Interrupt:
    """The approval the agent asks for, rebuilt the same on the resuming run."""
    return ctx.interrupt("approve-1", "tool_approval", response_schema=APPROVAL)


def resuming(*answers: dict[str, Any]) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r2", "resume": list(answers)}


async def approver(ctx: RunContext[Any]) -> RunOutcome:
    if not ctx.is_resume:
        with ctx.tool_call("delete_file") as call:
            call.args('{"path": "a.txt"}')
        return RunOutcome.interrupt(
            [
                ctx.interrupt(
                    "approve-1",
                    "tool_approval",
                    message="Delete a.txt?",
                    tool_call_id=call,
                    response_schema=APPROVAL,
                    expires_in=600,
                )
            ]
        )
    answer = ctx.resume_for(ask(ctx), required=True)
    assert answer is not None
    approved = answer.status == "resolved" and answer.payload["approved"]
    ctx.say("deleted" if approved else "kept")
    return RunOutcome.success()


async def test_the_interrupt_carries_the_call_the_schema_and_an_expiry() -> None:
    before = time.time()
    events = await collect(approver, {"threadId": "t", "runId": "r"})
    after = time.time()
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent), events[-1]
    wire = finished.model_dump(by_alias=True, exclude_none=True)["outcome"]
    [interrupt] = wire["interrupts"]
    call_id = next(e.tool_call_id for e in events if e.type is EventType.TOOL_CALL_START)
    assert interrupt["toolCallId"] == call_id
    assert interrupt["responseSchema"] == APPROVAL
    assert interrupt["message"] == "Delete a.txt?"
    expires = datetime.fromisoformat(interrupt["expiresAt"].replace("Z", "+00:00"))
    assert interrupt["expiresAt"].endswith("Z")
    assert before + 600 - 0.001 <= expires.timestamp() <= after + 600 + 0.001


async def test_a_matching_answer_resumes_and_a_cancelled_one_is_not_checked() -> None:
    approved = resuming(
        {"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}
    )
    events = await collect(approver, approved)
    assert [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT] == ["deleted"]
    cancelled = resuming({"interruptId": "approve-1", "status": "cancelled"})
    events = await collect(approver, cancelled)
    assert [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT] == ["kept"]


@pytest.mark.parametrize(
    ("answers", "wording"),
    [
        (
            [{"interruptId": "approve-1", "status": "resolved", "payload": {"approved": "yes"}}],
            "does not match its responseSchema at approved: 'yes' is not of type 'boolean'",
        ),
        (
            [{"interruptId": "approve-1", "status": "resolved"}],
            "at (the payload itself)",
        ),
        ([{"interruptId": "other", "status": "resolved"}], "no answer to interrupt 'approve-1'"),
    ],
)
async def test_a_wrong_answer_ends_the_run_invalid_resume_before_the_agent_acts(
    answers: list[dict[str, Any]], wording: str
) -> None:
    events = await collect(approver, resuming(*answers))
    error = events[-1]
    assert isinstance(error, RunErrorEvent)
    assert error.code == "INVALID_RESUME"
    assert wording in error.message
    assert not any(e.type is EventType.TEXT_MESSAGE_START for e in events)


async def test_resume_for_takes_an_id_with_or_without_a_schema() -> None:
    seen: dict[str, Any] = {}

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        seen["plain"] = ctx.resume_for("approve-1")
        seen["missing"] = ctx.resume_for("nope")
        try:
            ctx.resume_for("approve-1", schema={"type": "string"})
        except RunError as error:
            seen["error"] = error
        return RunOutcome.success()

    await collect(agent, resuming({"interruptId": "approve-1", "status": "resolved", "payload": 1}))
    assert seen["plain"].payload == 1
    assert seen["missing"] is None
    assert seen["error"].code == "INVALID_RESUME"


async def test_an_interrupt_in_a_subagent_scope_is_attributed_to_it() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.subagent("reviewer") as sub:
            asked = sub.interrupt("review-1", "review")
            sub.suspend([asked.id])
        return RunOutcome.interrupt([asked])

    events = await collect(agent, {"threadId": "t", "runId": "r"})
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent), finished
    assert finished.outcome is not None
    [interrupt] = finished.outcome.interrupts  # type: ignore[union-attr]
    assert interrupt.subagent_run_id == "r-sub-1"


async def test_an_interrupt_naming_no_call_of_the_run_is_a_protocol_violation() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        return RunOutcome.interrupt([ctx.interrupt("a", "tool_approval", tool_call_id="ghost")])

    events = await collect(agent, {"threadId": "t", "runId": "r"})
    error = events[-1]
    assert isinstance(error, RunErrorEvent)
    assert error.code == "PROTOCOL_VIOLATION"
    assert "interrupt-shape" in error.message and "'ghost'" in error.message


@pytest.mark.parametrize(
    ("options", "wording"),
    [
        ({"expires_in": 5, "expires_at": "2030-01-01T00:00:00Z"}, "not both"),
        ({"expires_in": 0}, "positive number of seconds"),
        ({"expires_in": timedelta(seconds=-1)}, "positive number of seconds"),
        ({"expires_at": "tomorrow"}, "not an ISO 8601 date-time"),
        ({"expires_at": "2030-01-01T00:00:00"}, "has no timezone"),
        ({"expires_at": datetime(2030, 1, 1)}, "naive datetime"),
        ({"response_schema": {"type": "no-such-type"}}, "not a valid JSON Schema"),
        ({"response_schema": ["not", "a", "mapping"]}, "must be a JSON Schema object"),
    ],
)
async def test_a_bad_interrupt_fails_at_the_line_that_builds_it(
    options: dict[str, Any], wording: str
) -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        return RunOutcome.interrupt([ctx.interrupt("a", "tool_approval", **options)])

    events = await collect(agent, {"threadId": "t", "runId": "r"})
    error = events[-1]
    assert isinstance(error, RunErrorEvent)
    assert error.code == "PROTOCOL"
    assert wording in error.message


async def test_an_aware_datetime_is_written_in_utc() -> None:
    seen: dict[str, Any] = {}

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        east = timezone(timedelta(hours=2))
        seen["i"] = ctx.interrupt("a", "r", expires_at=datetime(2030, 1, 1, 12, tzinfo=east))
        with pytest.raises(RunError, match="non-empty reason"):
            ctx.interrupt("b", "")
        with pytest.raises(RunError, match="non-empty string id"):
            ctx.interrupt("", "r")
        return RunOutcome.success()

    await collect(agent, {"threadId": "t", "runId": "r"})
    assert seen["i"].expires_at == "2030-01-01T10:00:00.000Z"
