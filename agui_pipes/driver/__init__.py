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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._agent import Agent, AgentFunction, AgentLike, AgentObject
    from ._cancel import CancelToken
    from ._context import Emitter, RunContext, StepHandle, SubagentScope
    from ._errors import ErrorCode, RunError
    from ._handles import MessageHandle, ReasoningHandle, ReasoningMessageHandle, ToolCallHandle
    from ._outcome import RunOutcome
    from ._run import DEFAULT_BACKPRESSURE, Run, RunEvents, Transformers, run

    Error = RunError
    """Deprecated: the 0.1 name of ``RunError``."""
else:
    from .._lazy import attach

    __getattr__, __dir__ = attach(
        __name__,
        {
            "Agent": "._agent",
            "AgentFunction": "._agent",
            "AgentLike": "._agent",
            "AgentObject": "._agent",
            "CancelToken": "._cancel",
            "Emitter": "._context",
            "RunContext": "._context",
            "StepHandle": "._context",
            "SubagentScope": "._context",
            "ErrorCode": "._errors",
            "RunError": "._errors",
            "MessageHandle": "._handles",
            "ReasoningHandle": "._handles",
            "ReasoningMessageHandle": "._handles",
            "ToolCallHandle": "._handles",
            "RunOutcome": "._outcome",
            "DEFAULT_BACKPRESSURE": "._run",
            "Run": "._run",
            "RunEvents": "._run",
            "Transformers": "._run",
            "run": "._run",
        },
        deprecated={"Error": "RunError"},
    )

__all__ = [
    "DEFAULT_BACKPRESSURE",
    "Agent",
    "AgentFunction",
    "AgentLike",
    "AgentObject",
    "CancelToken",
    "Emitter",
    "ErrorCode",
    "MessageHandle",
    "ReasoningHandle",
    "ReasoningMessageHandle",
    "Run",
    "RunContext",
    "RunError",
    "RunEvents",
    "RunOutcome",
    "StepHandle",
    "SubagentScope",
    "ToolCallHandle",
    "Transformers",
    "run",
]
