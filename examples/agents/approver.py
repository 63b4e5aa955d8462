"""Human in the loop: interrupt to ask, then act on the answer in the resuming run.

    python examples/agents/approver.py [--answer resolved|cancelled] [--backend trio]

Runs twice on one thread: the first run ends with an interrupt outcome, the
second carries the client's answer in ``input.resume``.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
from ag_ui.core import Interrupt, RunFinishedEvent

from agui_pipes import RunContext, RunOutcome
from agui_pipes.testing import collect

APPROVAL = "delete-everything"


class Approver:
    """Deletes everything — but only once someone said yes."""

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        answer = ctx.resume_for(APPROVAL)
        if answer is None:
            return RunOutcome.interrupt(
                [Interrupt(id=APPROVAL, reason="tool_approval", message="Delete everything?")]
            )
        if answer.status == "resolved":
            ctx.say("Done.")
        else:
            ctx.say("Cancelled.")
        return RunOutcome.success()


async def main(answer: str) -> None:
    first = await collect(Approver(), {"threadId": "t", "runId": "run-1"})
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent)
    print("run-1 ended with", finished.model_dump_json(by_alias=True, exclude_none=True))

    resume = [{"interruptId": APPROVAL, "status": answer}]
    second = await collect(Approver(), {"threadId": "t", "runId": "run-2", "resume": resume})
    for event in second:
        print("run-2:", event.model_dump_json(by_alias=True, exclude_none=True))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answer", choices=["resolved", "cancelled"], default="resolved")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    arguments = parser.parse_args()
    anyio.run(main, arguments.answer, backend=arguments.backend)
