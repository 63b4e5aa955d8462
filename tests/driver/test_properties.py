"""Property: whatever an agent does, the stream is one our consumer verifier accepts."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from ag_ui.core import EventType, Interrupt, TextMessageContentEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes import RunContext, RunError, RunOutcome
from agui_pipes.driver import Emitter
from agui_pipes.testing import collect
from agui_pipes.verify import Verifier

from ._agents import INPUT

TERMINAL = (EventType.RUN_FINISHED, EventType.RUN_ERROR)

words = st.text(alphabet="abc xyz", max_size=6)
leaf = st.one_of(
    st.tuples(st.just("say"), words),
    st.tuples(st.just("message"), st.lists(words, max_size=3), st.booleans()),
    st.tuples(st.just("think"), words),
    st.tuples(st.just("tool"), st.lists(words, max_size=2), st.one_of(st.none(), words)),
    st.tuples(st.just("state"), st.dictionaries(st.sampled_from("abc"), st.integers(0, 3))),
    st.tuples(st.just("await")),
    st.tuples(st.just("raise"), st.sampled_from(["agent", "foreign", "cancel", "protocol"])),
    st.tuples(st.just("raw_bad")),
    st.tuples(st.just("leak")),
)
actions = st.recursive(
    st.lists(leaf, max_size=4),
    lambda inner: st.lists(
        st.one_of(
            leaf,
            st.tuples(st.just("step"), st.sampled_from(["plan", "act"]), inner),
            st.tuples(
                st.just("subagent"),
                inner,
                st.sampled_from(["finish", "finish_with", "fail", "suspend", "none"]),
            ),
        ),
        max_size=4,
    ),
    max_leaves=12,
)
endings = st.sampled_from(["success", "interrupt", "cancelled", "empty-interrupt", "none"])


async def perform(emitter: Emitter[Any], script: list[Any]) -> None:
    for action in script:
        kind = action[0]
        if kind == "say":
            emitter.say(action[1])
        elif kind == "message":
            message = emitter.assistant_message()
            for delta in action[1]:
                message.delta(delta)
            if action[2]:
                message.end()
            else:
                with message:
                    pass
        elif kind == "think":
            emitter.think(action[1])
        elif kind == "tool":
            with emitter.tool_call("search") as call:
                for fragment in action[1]:
                    call.args(fragment)
            if action[2] is not None:
                call.result(action[2])
        elif kind == "state":
            emitter.set_state(action[1])
        elif kind == "await":
            await anyio.lowlevel.checkpoint()
        elif kind == "raise":
            if action[1] == "agent":
                raise RunError.agent("scripted failure")
            if action[1] == "foreign":
                raise RuntimeError("scripted bug")
            if action[1] == "cancel":
                emitter.cancel_token.cancel()
            else:
                raise RunError.protocol("scripted protocol error")
        elif kind == "raw_bad":
            emitter.emit(TextMessageContentEvent(message_id="nobody-opened-this", delta="x"))
        elif kind == "leak":
            emitter.assistant_message().delta("never ended")
        elif kind == "step":
            with emitter.step(action[1]) as step:
                await perform(step, action[2])
        elif kind == "subagent":
            with emitter.subagent("helper") as scope:
                await perform(scope, action[1])
                ending = action[2]
                if ending == "finish":
                    scope.finish()
                elif ending == "finish_with":
                    scope.finish_with({"ok": True})
                elif ending == "fail":
                    scope.fail("helper failed")
                elif ending == "suspend":
                    scope.suspend(["ask-1"])


def scripted(script: list[Any], ending: str) -> Any:
    async def agent(ctx: RunContext[Any]) -> Any:
        await perform(ctx, script)
        if ending == "success":
            return RunOutcome.success()
        if ending == "interrupt":
            return RunOutcome.interrupt([Interrupt(id="ask-1", reason="approval")])
        if ending == "cancelled":
            return RunOutcome.cancelled()
        if ending == "empty-interrupt":
            return RunOutcome.interrupt([])
        return None

    return agent


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=actions, ending=endings, buffer=st.sampled_from([None, None, 3]))
def test_any_agent_script_yields_a_stream_the_consumer_verifier_accepts(
    backend: str, script: list[Any], ending: str, buffer: int | None
) -> None:
    async def main() -> list[Any]:
        return await collect(scripted(script, ending), INPUT, event_buffer=buffer)

    events = anyio.run(main, backend=backend)

    assert events[0].type is EventType.RUN_STARTED
    assert events[-1].type in TERMINAL
    assert sum(e.type in TERMINAL for e in events) == 1
    verifier = Verifier(profile="consumer")
    verifier.observe_all(events)
    verifier.finish()


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(alphabet="ab", max_size=3)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c/d", "e~f"]), inner, max_size=4),
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(json_values, min_size=1, max_size=6), padded=st.booleans())
def test_published_state_events_reproduce_every_state(values: list[Any], padded: bool) -> None:
    """Folding the snapshots and deltas a client receives yields each state in turn."""
    import json

    import jsonpatch

    # A large constant part makes deltas pay off, so both kinds get exercised.
    states = [{"pad": "x" * 200, "value": v} for v in values] if padded else values

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        for state in states:
            ctx.set_state(state)
        return RunOutcome.success()

    events = anyio.run(collect, agent, INPUT)

    published = [e for e in events if e.type in (EventType.STATE_SNAPSHOT, EventType.STATE_DELTA)]
    client: Any = None
    seen: list[str] = []
    for event in published:
        if event.type is EventType.STATE_SNAPSHOT:
            client = event.snapshot  # type: ignore[attr-defined]
        else:
            operations = [
                op.model_dump(mode="json", exclude_unset=True)
                for op in event.delta  # type: ignore[attr-defined]
            ]
            client = jsonpatch.apply_patch(client, operations)
        seen.append(json.dumps(client, sort_keys=True))
    # Every distinct consecutive state was published once, and nothing else was.
    expected: list[str] = []
    for state in states:
        encoded = json.dumps(state, sort_keys=True)
        if not expected or expected[-1] != encoded:
            expected.append(encoded)
    assert seen == expected
