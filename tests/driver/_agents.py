"""Agents shared by the driver tests (the seeds' examples, ported)."""

from __future__ import annotations

from typing import Any

from ag_ui.core import Interrupt
from pydantic import BaseModel

from agui_pipes import RunContext, RunError, RunOutcome
from agui_pipes.driver import Agent

INPUT: dict[str, Any] = {"threadId": "t", "runId": "r"}


class Flaky:
    """Says something, then its service fails."""

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        ctx.say("Looking that up.")
        raise RunError.agent("the weather service is down")


class Chatty:
    """Cancels itself between two messages, standing in for a transport noticing a hang-up."""

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        ctx.say("one")
        ctx.cancel_token.cancel()
        ctx.say("two")  # fails, and the exception unwinds the agent
        ctx.say("three")
        return RunOutcome.success()


class Draft(BaseModel):
    """State the client mirrors and the agent updates."""

    revision: int = 0
    title: str = ""


class Editor(Agent[Draft]):
    """A step with reasoning, a streamed message and a state update."""

    async def run(self, ctx: RunContext[Draft]) -> RunOutcome:
        with ctx.step("draft") as step:
            step.think("The user wants a title.")
            with step.assistant_message() as message:
                message.delta("Naming it ")
                message.delta('"Q3 plan".')

            def retitle(draft: Draft) -> None:
                draft.revision += 1
                draft.title = "Q3 plan"

            step.update_state(retitle)
        return RunOutcome.success()


class Approver:
    """Asks before deleting everything; acts on the answer when resumed."""

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        answer = ctx.resume_for("delete-everything")
        if answer is None:
            return RunOutcome.interrupt([Interrupt(id="delete-everything", reason="tool_approval")])
        if answer.status == "resolved":
            ctx.say("Done.")
        else:
            ctx.say("Cancelled.")
        return RunOutcome.success()


class Supervisor:
    """Delegates to a planner, which delegates to an estimator (nested subagents)."""

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        with ctx.subagent("planner") as planner:
            planner.say("Two tasks: scope, then risks.")
            with planner.subagent("estimator") as estimator:
                estimator.say("About a day each.")
                estimator.finish()
            planner.finish_with({"tasks": 2})
        ctx.say("Plan ready.")
        return RunOutcome.success()
