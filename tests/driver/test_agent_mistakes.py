"""Common agent mistakes end the run with an error that names the fix."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.core import CustomEvent, EventType, RunErrorEvent

from agui_pipes import RunContext, RunOutcome, run
from agui_pipes.testing import collect

from ._agents import INPUT

pytestmark = pytest.mark.anyio


async def error_of(agent: Any) -> RunErrorEvent:
    events = await collect(agent, INPUT)
    assert events[0].type is EventType.RUN_STARTED
    last = events[-1]
    assert isinstance(last, RunErrorEvent), last
    assert last.code == "AGENT_ERROR"
    return last


async def test_awaiting_say_names_the_call_and_the_fix() -> None:
    async def agent(ctx: RunContext) -> RunOutcome:
        await ctx.say("hi")  # type: ignore[misc]
        return RunOutcome.success()

    error = await error_of(agent)
    assert "`ctx.say(...)` is not async: call it without `await`" in error.message
    assert 'await ctx.say("hi")' in error.message  # the offending line, to find it
    assert "test_agent_mistakes.py:" in error.message
    assert "can't be used in 'await'" not in error.message


@pytest.mark.parametrize(
    "mistake",
    [
        "emit",
        "set_state",
        "publish_state",
        "step",
        "tool_call",
        "think",
        "check_cancelled",
    ],
)
async def test_every_synchronous_context_method_awaited_says_so(mistake: str) -> None:
    async def agent(ctx: RunContext) -> RunOutcome:
        if mistake == "emit":
            await ctx.emit(CustomEvent(name="n", value=1))  # type: ignore[func-returns-value,misc]
        elif mistake == "set_state":
            await ctx.set_state({"a": 1})  # type: ignore[func-returns-value,misc]
        elif mistake == "publish_state":
            await ctx.publish_state()  # type: ignore[func-returns-value,misc]
        elif mistake == "step":
            await ctx.step("s")  # type: ignore[misc]
        elif mistake == "tool_call":
            await ctx.tool_call("lookup")  # type: ignore[misc]
        elif mistake == "think":
            await ctx.think("hmm")  # type: ignore[misc]
        else:
            await ctx.check_cancelled()  # type: ignore[func-returns-value,misc]
        return RunOutcome.success()

    error = await error_of(agent)
    assert f"`ctx.{mistake}(...)` is not async: call it without `await`" in error.message


async def test_awaiting_a_handle_or_a_step_method_says_so() -> None:
    async def agent(ctx: RunContext) -> RunOutcome:
        with ctx.step("look up") as step, step.tool_call("weather") as call:
            await call.args_json({"city": "Lisbon"})  # type: ignore[func-returns-value,misc]
        return RunOutcome.success()

    error = await error_of(agent)
    assert "`call.args_json(...)` is not async: call it without `await`" in error.message


@pytest.mark.parametrize("opener", ["step", "tool_call", "subagent", "reasoning"])
async def test_async_with_on_a_handle_says_to_use_with(opener: str) -> None:
    async def agent(ctx: RunContext) -> RunOutcome:
        if opener == "step":
            async with ctx.step("s"):  # type: ignore[attr-defined]
                pass
        elif opener == "tool_call":
            async with ctx.tool_call("lookup"):  # type: ignore[attr-defined]
                pass
        elif opener == "subagent":
            async with ctx.subagent("helper"):  # type: ignore[attr-defined]
                pass
        else:
            async with ctx.reasoning():  # type: ignore[attr-defined]
                pass
        return RunOutcome.success()

    error = await error_of(agent)
    assert (
        f"`ctx.{opener}(...)` is a plain context manager: write `with ctx.{opener}(...)`, "
        "not `async with`"
    ) in error.message


async def test_async_with_on_a_handle_off_the_line_still_names_its_type() -> None:
    async def agent(ctx: RunContext) -> RunOutcome:
        step = ctx.step("s")
        async with step:  # type: ignore[attr-defined]
            pass
        return RunOutcome.success()

    error = await error_of(agent)
    assert "a StepHandle is a plain context manager: write `with`, not `async with`" in (
        error.message
    )


async def test_async_with_on_something_else_keeps_pythons_message() -> None:
    async def agent(ctx: RunContext) -> RunOutcome:
        async with open(__file__):  # type: ignore[attr-defined]  # noqa: ASYNC230
            pass
        return RunOutcome.success()

    error = await error_of(agent)
    assert "plain context manager" not in error.message
    assert "asynchronous context manager" in error.message or "__aenter__" in error.message


async def test_awaiting_a_sync_method_in_a_helper_is_found_there() -> None:
    async def greet(ctx: RunContext) -> None:
        await ctx.say("hello")  # type: ignore[misc]

    async def agent(ctx: RunContext) -> RunOutcome:
        await greet(ctx)
        return RunOutcome.success()

    error = await error_of(agent)
    assert "`ctx.say(...)` is not async" in error.message
    assert 'await ctx.say("hello")' in error.message


async def test_other_bad_awaits_keep_pythons_own_message() -> None:
    def answer() -> int:
        return 42

    async def agent(ctx: RunContext) -> RunOutcome:
        await answer()  # type: ignore[misc]
        return RunOutcome.success()

    error = await error_of(agent)
    assert error.message == "agent error: object int can't be used in 'await' expression" or (
        "'int' object can't be awaited" in error.message  # Python 3.14's wording
    )


async def test_awaiting_none_from_an_unknown_call_hints_at_the_emitters() -> None:
    def log(ctx: RunContext) -> None:
        ctx.say("logged")

    async def agent(ctx: RunContext) -> RunOutcome:
        await log(ctx)  # type: ignore[func-returns-value,misc]
        return RunOutcome.success()

    error = await error_of(agent)
    assert "the agent awaited a NoneType, which is not awaitable" in error.message
    assert "await log(ctx)" in error.message
    assert "call it without `await`" in error.message


async def test_a_synchronous_agent_object_is_named_with_the_fix() -> None:
    class Greeter:
        def run(self, ctx: RunContext) -> RunOutcome:
            ctx.say("hi")
            return RunOutcome.success()

    error = await error_of(Greeter())
    assert "Greeter.run is not async" in error.message
    assert "returned a RunOutcome, not an awaitable" in error.message
    assert "make it `async def`" in error.message


async def test_a_synchronous_callable_object_is_named_with_the_fix() -> None:
    class Greeter:
        def __call__(self, ctx: RunContext) -> None:
            ctx.say("hi")

    error = await error_of(Greeter())
    assert "is not async: calling it returned a NoneType" in error.message
    assert "make it `async def`" in error.message


async def test_an_async_generator_agent_is_refused_before_the_run_starts() -> None:
    async def agent(ctx: RunContext) -> AsyncIterator[str]:
        yield "hi"

    with pytest.raises(TypeError, match=r"<locals>\.agent is a generator .*uses `yield`"):
        run(agent, INPUT)  # type: ignore[arg-type]


async def test_an_async_generator_callable_object_is_an_agent_error() -> None:
    class Streamer:
        async def __call__(self, ctx: RunContext) -> AsyncIterator[str]:
            yield "hi"

    error = await error_of(Streamer())
    assert "is a generator (it uses `yield`)" in error.message
    assert "replace each `yield` with an emit" in error.message


async def test_an_agent_typed_with_a_bare_run_context_runs() -> None:
    async def agent(ctx: RunContext) -> None:
        ctx.say("hi")

    events = await collect(agent, INPUT)
    assert events[-1].type is EventType.RUN_FINISHED
