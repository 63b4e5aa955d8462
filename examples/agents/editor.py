"""An agent with typed state: a step, visible reasoning, a streamed message, a state update.

    python examples/agents/editor.py [--backend trio]

Prints the run as SSE frames, the way an HTTP endpoint would send it.
"""

from __future__ import annotations

import argparse
import sys

import anyio
from pydantic import BaseModel

from agui_pipes import RunContext, RunOutcome, run
from agui_pipes.codecs import encode_sse
from agui_pipes.driver import Agent


class Draft(BaseModel):
    """State the client mirrors and the agent updates."""

    revision: int = 0
    title: str = ""


class Editor(Agent[Draft]):
    """Names the draft. ``Agent[Draft]`` tells the driver to decode input state as a Draft."""

    async def run(self, ctx: RunContext[Draft]) -> RunOutcome:
        # A step brackets a phase; STEP_FINISHED goes out when the block is left,
        # even if something inside raises.
        with ctx.step("draft") as step:
            step.think("The user wants a title.")

            with step.assistant_message() as message:
                for token in ("Naming ", "it ", '"Q3 plan".'):
                    message.delta(token)
                    await anyio.sleep(0.05)  # standing in for a model streaming tokens

            def retitle(draft: Draft) -> None:
                draft.revision += 1
                draft.title = "Q3 plan"

            # The first publish is a STATE_SNAPSHOT; later ones are JSON-patch
            # deltas whenever that is smaller.
            step.update_state(retitle)
        return RunOutcome.success()


async def main() -> None:
    run_input = {"threadId": "thread-1", "runId": "run-1", "state": {"revision": 3}}
    async with run(Editor(), run_input) as events:
        async for event in events:
            sys.stdout.buffer.write(encode_sse(event))
            sys.stdout.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    anyio.run(main, backend=parser.parse_args().backend)
