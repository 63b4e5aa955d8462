"""Subagents: a supervisor delegates to a planner, which delegates to an estimator.

    python examples/agents/supervisor.py [--backend trio]

Everything emitted through a subagent scope carries its ``subagentRunId``;
the nested scope records ``parentSubagentRunId``. Every scope ends explicitly
(``finish``, ``finish_with``, ``fail`` or ``suspend``).
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio

from agui_pipes import RunContext, RunOutcome, run


class Supervisor:
    """Plans through two levels of subagents, then reports."""

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        with ctx.subagent("planner", description="splits the work") as planner:
            planner.say("Two tasks: scope, then risks.")
            with planner.subagent("estimator") as estimator:
                call = estimator.tool_call("estimate")
                call.args_json({"tasks": ["scope", "risks"]})
                call.result_json({"days": [1, 1]})
                estimator.say("About a day each.")
                estimator.finish()
            planner.finish_with({"tasks": 2})

        ctx.say("Plan ready.")  # the parent's own message: untagged
        return RunOutcome.success()


async def main() -> None:
    async with run(Supervisor(), {"threadId": "t", "runId": "r"}) as events:
        async for event in events:
            tag = getattr(event, "subagent_run_id", None)
            print(f"{event.type.value:<22} {tag or ''}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    arguments = parser.parse_args()
    anyio.run(main, backend=arguments.backend)
