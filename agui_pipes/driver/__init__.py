"""The run driver: an agent turned into a well-formed AG-UI event stream.

::

    from agui_pipes import RunContext, RunOutcome, run

    async def agent(ctx: RunContext) -> RunOutcome:
        ctx.say("Hello!")
        return RunOutcome.success()

    async with run(agent, {"threadId": "t", "runId": "r"}) as events:
        async for event in events:
            ...

The stream starts with RUN_STARTED and ends with exactly one RUN_FINISHED or
RUN_ERROR, whatever the agent does. See docs/driver.md.
"""

from ._agent import Agent, AgentFunction, AgentLike, AgentObject
from ._cancel import CancelToken
from ._context import Emitter, RunContext, StepHandle, SubagentScope
from ._errors import Error, ErrorCode
from ._handles import MessageHandle, ReasoningHandle, ReasoningMessageHandle, ToolCallHandle
from ._outcome import RunOutcome
from ._run import DEFAULT_BACKPRESSURE, Run, RunEvents, Transformers, run

__all__ = [
    "DEFAULT_BACKPRESSURE",
    "Agent",
    "AgentFunction",
    "AgentLike",
    "AgentObject",
    "CancelToken",
    "Emitter",
    "Error",
    "ErrorCode",
    "MessageHandle",
    "ReasoningHandle",
    "ReasoningMessageHandle",
    "Run",
    "RunContext",
    "RunEvents",
    "RunOutcome",
    "StepHandle",
    "SubagentScope",
    "ToolCallHandle",
    "Transformers",
    "run",
]
