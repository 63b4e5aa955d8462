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
    # What type checkers see; `_EXPORTS` below is what runs (a test keeps them equal).
    from ._agent import Agent as Agent
    from ._agent import AgentFunction as AgentFunction
    from ._agent import AgentLike as AgentLike
    from ._agent import AgentObject as AgentObject
    from ._cancel import CancelToken as CancelToken
    from ._context import Emitter as Emitter
    from ._context import RunContext as RunContext
    from ._context import StepHandle as StepHandle
    from ._context import SubagentScope as SubagentScope
    from ._errors import ErrorCode as ErrorCode
    from ._errors import RunError as RunError
    from ._handles import MessageHandle as MessageHandle
    from ._handles import ReasoningHandle as ReasoningHandle
    from ._handles import ReasoningMessageHandle as ReasoningMessageHandle
    from ._handles import ToolCallHandle as ToolCallHandle
    from ._outcome import RunOutcome as RunOutcome
    from ._run import DEFAULT_BACKPRESSURE as DEFAULT_BACKPRESSURE
    from ._run import Run as Run
    from ._run import RunEvents as RunEvents
    from ._run import Transformers as Transformers
    from ._run import run as run
else:
    from .._lazy import attach as _attach

    _EXPORTS = {
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
    }
    __getattr__, __dir__ = _attach(__name__, _EXPORTS)
    __all__ = [*_EXPORTS]
