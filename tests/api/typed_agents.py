"""The documented agent forms, as user code checked by ``mypy --strict`` (tests/api/test_typing.py).

Never imported by the tests: mypy reads it. Every form the docs show must
pass; every misuse below must be refused, and is marked with the exact
``# type: ignore[code]`` mypy should need — with ``warn_unused_ignores`` (on
under ``--strict``), a misuse mypy stops refusing fails the check.
"""

from __future__ import annotations

import functools
from typing import Any

from ag_ui.core import BaseEvent, CustomEvent, RunAgentInput
from pydantic import BaseModel
from typing_extensions import assert_type

from agui_pipes import RunContext, RunOutcome, run
from agui_pipes.driver import Agent, AgentLike
from agui_pipes.server import AgentEndpoint, agent_route, build_app
from agui_pipes.testing import collect

INPUT = {"threadId": "t", "runId": "r"}


# -- accepted --------------------------------------------------------------------------


async def hello(ctx: RunContext) -> RunOutcome:
    """docs/driver.md's first agent: a bare RunContext, no state model."""
    ctx.say("Hello!")
    assert_type(ctx.state, Any)
    return RunOutcome.success()


async def quiet(ctx: RunContext) -> None:
    """Returning None counts as success."""
    with ctx.step("think") as step:
        step.say("...")


class Draft(BaseModel):
    text: str = ""


async def typed(ctx: RunContext[Draft]) -> RunOutcome:
    assert_type(ctx.state, Draft)
    ctx.update_state(lambda draft: draft.model_copy(update={"text": "hi"}))
    return RunOutcome.success()


class Editor(Agent[Draft]):
    async def run(self, ctx: RunContext[Draft]) -> RunOutcome:
        ctx.set_state(Draft(text=ctx.state.text.upper()))
        return RunOutcome.success()


class Plain:
    """Any object with ``async def run(self, ctx)``."""

    async def run(self, ctx: RunContext) -> RunOutcome | None:
        ctx.say("plain")
        return None


class Callable_:
    """Any object with ``async def __call__(self, ctx)``."""

    async def __call__(self, ctx: RunContext) -> RunOutcome:
        return RunOutcome.success()


async def greeter(ctx: RunContext, greeting: str) -> None:
    ctx.say(greeting)


def agent_for(run_input: RunAgentInput) -> AgentLike:
    return Editor() if run_input.state else hello


async def main() -> None:
    async with run(hello, INPUT) as events:
        async for event in events:
            assert_type(event, BaseEvent)
    for agent in (hello, quiet, typed, Editor(), Plain(), Callable_()):
        assert_type(await collect(agent, INPUT), list[BaseEvent])
    await collect(functools.partial(greeter, greeting="hi"), INPUT)
    await collect(
        hello,
        RunAgentInput(
            thread_id="t",
            run_id="r",
            state=None,
            messages=[],
            tools=[],
            context=[],
            forwarded_props=None,
        ),
    )
    await collect(hello, INPUT, verify=False, echo_input=True, event_buffer=8, backpressure=None)


endpoint = AgentEndpoint(hello)
per_request = AgentEndpoint(agent_factory=agent_for)
route = agent_route("/agent", hello)
app = build_app(agent=hello)


# -- refused ---------------------------------------------------------------------------


def sync_agent(ctx: RunContext) -> RunOutcome:
    ctx.say("too early")
    return RunOutcome.success()


class SyncRun:
    def run(self, ctx: RunContext) -> RunOutcome:
        return RunOutcome.success()


async def returns_text(ctx: RunContext) -> str:
    return "done"


async def misuse() -> None:
    await collect(sync_agent, INPUT)  # type: ignore[arg-type]
    await collect(SyncRun(), INPUT)  # type: ignore[arg-type]
    await collect(returns_text, INPUT)  # type: ignore[arg-type]
    await collect(hello, INPUT, buffer=8)  # type: ignore[call-arg]
    await collect(hello, INPUT, verify="yes")  # type: ignore[arg-type]
    async with run(sync_agent, INPUT) as events:  # type: ignore[arg-type]
        del events
    AgentEndpoint(sync_agent)  # type: ignore[arg-type]
    agent_route("/agent", sync_agent)  # type: ignore[arg-type]
    build_app(agent=sync_agent)  # type: ignore[arg-type]


async def awaited_emits(ctx: RunContext) -> None:
    await ctx.say("hi")  # type: ignore[misc]
    await ctx.emit(CustomEvent(name="n", value=1))  # type: ignore[func-returns-value,misc]
    async with ctx.step("s"):  # type: ignore[attr-defined]
        pass
