"""The opentelemetry stage (OpenTelemetry): span trees, errors, cancellation, usage and metrics.

Every test reads what the SDK's in-memory exporters caught, through the
stage's public surface (a chain, the run driver, a relay).
"""

from __future__ import annotations

import gc
import random
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    SubagentFinishedEvent,
    TextMessageContentEvent,
    TokenUsage,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import StatusCode

from agui_pipes import TransformerChain
from agui_pipes.codecs import encode_sse
from agui_pipes.config import ConfigError, load_chain
from agui_pipes.demo import DEFAULT_CHAIN, DemoAgent, demo_input
from agui_pipes.driver import Emitter, RunContext, RunOutcome, run
from agui_pipes.relay import Relay
from agui_pipes.testing import (
    reasoning,
    run_error,
    run_events,
    run_finished,
    run_started,
    step,
    subagent,
    text,
    tool_call,
)
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import FilterToolCalls, OpenTelemetry, SubagentVisibility
from tests._otel import Recorder, parent_of

DEMO_TREE = [
    "invoke_agent planner",
    "  step",
    "    execute_tool search_places",
    "  execute_tool ask_local_expert",
    "    invoke_agent local_expert",
    "      invoke_agent weather",
    "        execute_tool get_forecast",
]


async def _demo(recorder: Recorder, **options: Any) -> list[BaseEvent]:
    loaded = load_chain(DEFAULT_CHAIN)

    def chain() -> TransformerChain:
        return loaded() | recorder.stage(agent_name="planner", **options)

    async with run(DemoAgent(), demo_input(), transformers=chain) as events:
        return [event async for event in events]


async def _apply(stages: Sequence[Any], events: Sequence[BaseEvent]) -> list[BaseEvent]:
    async def source() -> AsyncIterator[BaseEvent]:
        for event in events:
            yield event

    return [e async for e in TransformerChain(list(stages)).apply(source())]


@pytest.mark.anyio
async def test_the_demo_run_is_one_trace_of_nested_agents_and_tools() -> None:
    recorder = Recorder()
    await _demo(recorder)

    assert recorder.outline() == DEMO_TREE  # the internal tool is filtered before the stage
    spans = recorder.finished()
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    run_span = recorder.named("invoke_agent planner")
    assert run_span.parent is None
    assert dict(run_span.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "planner",
        "gen_ai.conversation.id": "demo-thread",
        "agui.run.id": "demo-run",
        "agui.run.outcome": "success",
    }
    ask = recorder.named("execute_tool ask_local_expert")
    expert = recorder.named("invoke_agent local_expert")
    weather = recorder.named("invoke_agent weather")
    forecast = recorder.named("execute_tool get_forecast")
    assert parent_of(expert, ask) and parent_of(weather, expert) and parent_of(forecast, weather)
    assert parent_of(ask, run_span)
    assert parent_of(recorder.named("execute_tool search_places"), recorder.named("step"))
    assert dict(ask.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "ask_local_expert",
        "gen_ai.tool.call.id": "demo-run-call-3",
        "gen_ai.tool.type": "function",
    }  # no arguments or result unless captured
    assert dict(expert.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "local_expert",
        "gen_ai.conversation.id": "demo-thread",
        "agui.subagent.run_id": "demo-run-sub-1",
        "agui.subagent.outcome": "success",
    }
    # The tool call lasts until its result, so it encloses the subagent it spawned.
    assert ask.start_time < expert.start_time and expert.end_time <= ask.end_time  # type: ignore[operator]
    # Messages and reasoning are events on their agent's span, with first-token times.
    assert [e.name for e in run_span.events] == ["agui.reasoning", "agui.message", "agui.message"]
    assert [e.name for e in weather.events] == ["agui.message"]
    first = run_span.events[1]
    assert first.attributes is not None
    assert first.attributes["agui.message.role"] == "assistant"
    assert (
        0
        < first.attributes["agui.message.first_token_ms"]
        < first.attributes["agui.message.duration_ms"]
    )
    assert "agui.message.length" not in first.attributes  # only with delta_stats


@pytest.mark.anyio
async def test_the_demo_run_metrics() -> None:
    recorder = Recorder()
    await _demo(recorder)
    agent = ("gen_ai.agent.name", "planner")
    assert recorder.metric("agui.runs.started") == {frozenset({agent}): 1}
    assert recorder.metric("agui.runs.finished") == {
        frozenset({agent, ("agui.run.outcome", "success")}): 1
    }
    assert recorder.metric("agui.tool_calls") == {
        frozenset({agent, ("gen_ai.tool.name", name)}): 1
        for name in ("search_places", "ask_local_expert", "get_forecast")
    }
    events = {dict(k)["agui.event.type"]: v for k, v in recorder.metric("agui.events").items()}
    assert events["TEXT_MESSAGE_START"] == 4 and events["SUBAGENT_STARTED"] == 2
    assert events["RUN_STARTED"] == events["RUN_FINISHED"] == 1
    assert "TEXT_MESSAGE_CONTENT" not in events  # deltas are counted only with delta_stats
    assert recorder.metric("agui.run.duration") == {
        frozenset({agent, ("agui.run.outcome", "success")}): 1
    }
    assert recorder.metric("agui.run.time_to_first_event") == {frozenset({agent}): 1}


@pytest.mark.anyio
async def test_delta_stats_measure_messages_and_count_deltas() -> None:
    recorder = Recorder()
    await _demo(recorder, delta_stats=True)
    weather = recorder.named("invoke_agent weather")
    (message,) = weather.events
    assert message.attributes is not None
    assert message.attributes["agui.message.length"] == len(
        "Saturday looks sunny; expect showers on Sunday."
    )
    assert message.attributes["agui.message.deltas"] == 7
    events = {dict(k)["agui.event.type"]: v for k, v in recorder.metric("agui.events").items()}
    assert events["TEXT_MESSAGE_CONTENT"] > 4


class _Failing:
    """Starts a tool call and a subagent, then raises."""

    async def __call__(self, ctx: RunContext[Any]) -> RunOutcome:
        call = ctx.tool_call("lookup")
        call.args_json({"q": 1})
        call.end()
        with ctx.subagent("helper", parent_tool_call_id=call.id) as helper:
            await self._stall(helper)
        return RunOutcome.success()

    async def _stall(self, helper: Emitter[Any]) -> None:
        helper.tool_call("fetch").args_json({})
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("the model provider is down")


@pytest.mark.anyio
async def test_an_erroring_run_is_an_error_span_and_closes_what_was_open() -> None:
    recorder = Recorder()
    async with run(
        _Failing(), demo_input(run_id="r-err"), transformers=lambda: recorder.stage()
    ) as events:
        out = [e async for e in events]
    assert out[-1].type.value == "RUN_ERROR"
    code = out[-1].code  # type: ignore[attr-defined]

    run_span = recorder.named("invoke_agent")
    assert run_span.status.status_code is StatusCode.ERROR
    assert run_span.attributes is not None
    assert run_span.attributes["error.type"] == (code or "_OTHER")
    assert run_span.attributes["agui.run.outcome"] == "error"
    for name in ("execute_tool lookup", "invoke_agent helper"):
        assert dict(recorder.named(name).attributes or {})["agui.closed_by"] == "RUN_ERROR"
    assert recorder.metric("agui.runs.errored") == {frozenset({("error.type", code)}): 1}


def test_run_error_with_a_code_and_a_subagent_error() -> None:
    recorder = Recorder()
    events = [
        *run_started(),
        *subagent("s1", "scraper", tool_call("c1", "fetch"), error="blocked by robots.txt"),
        *run_error("quota"),
    ]
    out = TransformerChain([recorder.stage()]).apply_sync(events)
    assert out[-1].type.value == "RUN_ERROR"
    sub = recorder.named("invoke_agent scraper")
    assert sub.status.status_code is StatusCode.ERROR
    assert sub.status.description is None  # free text: only with capture_content
    assert dict(sub.attributes or {})["error.type"] == "_OTHER"
    assert dict(recorder.named("execute_tool fetch").attributes or {})["agui.closed_by"] == (
        "SUBAGENT_ERROR"
    )
    assert recorder.named("invoke_agent").status.description is None


def test_a_run_that_fails_before_starting_still_has_a_span() -> None:
    recorder = Recorder()
    TransformerChain([recorder.stage(agent_name="a")]).apply_sync(run_error("no key", "AUTH"))
    span = recorder.named("invoke_agent a")
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "AUTH"


def test_a_cancelled_outcome_is_marked() -> None:
    recorder = Recorder()
    TransformerChain([recorder.stage()]).apply_sync(
        run_events(text("m1", "hi"), outcome={"type": "cancelled"})
    )
    span = recorder.named("invoke_agent")
    assert dict(span.attributes or {})["agui.run.outcome"] == "cancelled"
    assert span.status.status_code is StatusCode.UNSET
    assert recorder.metric("agui.runs.finished") == {
        frozenset({("agui.run.outcome", "cancelled")}): 1
    }


@pytest.mark.anyio
async def test_an_abandoned_stream_closes_its_spans_as_abandoned() -> None:
    """A consumer that stops mid-run (client gone, cancel): spans still end and export."""
    recorder = Recorder()
    events = run_events([*text("m1", "a", "b"), *tool_call("c1", "slow", "{}")])
    chain = TransformerChain([recorder.stage()])

    async def source() -> AsyncIterator[BaseEvent]:
        for event in events:
            yield event

    stream = chain.apply(source())
    async for event in stream:
        if event.type.value == "TOOL_CALL_END":
            break
    await stream.aclose()
    assert recorder.finished() == []  # still open: nothing is exported yet
    del stream, chain, event
    gc.collect()
    assert recorder.outline() == ["invoke_agent", "  execute_tool slow"]
    run_span = recorder.named("invoke_agent")
    assert dict(run_span.attributes or {})["agui.run.outcome"] == "abandoned"
    assert dict(recorder.named("execute_tool slow").attributes or {})["agui.closed_by"] == (
        "abandoned"
    )
    assert recorder.metric("agui.runs.incomplete") == {
        frozenset({("agui.run.outcome", "abandoned")}): 1
    }


@pytest.mark.anyio
async def test_a_cancelled_driver_run_is_traced() -> None:
    """Cancelling the agent mid-run ends the run (the driver's cancellation) and its span."""
    recorder = Recorder()

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        ctx.tool_call("wait_for_user").args_json({})
        await ctx.until_cancelled(anyio.sleep_forever())
        ctx.check_cancelled()
        return RunOutcome.success()

    from agui_pipes.driver import CancelToken

    token = CancelToken()
    async with run(
        agent, demo_input(run_id="r-c"), transformers=lambda: recorder.stage(), cancel_token=token
    ) as events:
        out = []
        async for event in events:
            out.append(event)
            if event.type.value == "TOOL_CALL_ARGS":
                token.cancel()
    assert out[-1].type.value == "RUN_ERROR" and out[-1].code == "CANCELLED"  # type: ignore[attr-defined]
    run_span = recorder.named("invoke_agent")
    assert dict(run_span.attributes or {})["error.type"] == "CANCELLED"
    assert recorder.outline() == ["invoke_agent", "  execute_tool wait_for_user"]
    tool = recorder.named("execute_tool wait_for_user")
    assert dict(tool.attributes or {})["agui.closed_by"] == "RUN_ERROR"


def test_a_truncated_stream_is_an_error() -> None:
    recorder = Recorder()
    TransformerChain([recorder.stage()]).apply_sync([*run_started(), *text("m1", "x")])
    span = recorder.named("invoke_agent")
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["agui.run.outcome"] == "truncated"


def _hidden_and_filtered() -> list[BaseEvent]:
    return run_events(
        [
            *tool_call("c1", "internal_lookup", "{}", result="secret"),
            *tool_call("c2", "search", "{}", result="[]"),
            *subagent("s1", "auditor", text("m1", "private notes")),
        ]
    )


@pytest.mark.parametrize("trace_last", [True, False], ids=["after", "before"])
def test_what_the_client_must_not_see_gets_no_span(trace_last: bool) -> None:
    recorder = Recorder()
    filters = [FilterToolCalls.deny(["internal_*"]), SubagentVisibility.hidden()]
    stages = [*filters, recorder.stage()] if trace_last else [recorder.stage(), *filters]
    TransformerChain(stages).apply_sync(_hidden_and_filtered())
    names = {s.name for s in recorder.finished()}
    if trace_last:
        assert names == {"invoke_agent", "execute_tool search"}
    else:  # before the filters, the stage traces what the agent did
        assert names == {
            "invoke_agent",
            "execute_tool internal_lookup",
            "execute_tool search",
            "invoke_agent auditor",
        }


@pytest.mark.anyio
async def test_concurrent_runs_never_mix_spans() -> None:
    recorder = Recorder()

    async def one(index: int) -> None:
        stage = recorder.stage()

        async def source() -> AsyncIterator[BaseEvent]:
            calls = [
                e
                for k in range(3)
                for e in tool_call(f"c{index}-{k}", f"tool{index}", "{}", result="ok")
            ]
            events = run_events(calls, thread_id=f"t{index}", run_id=f"r{index}")
            for event in events:
                await anyio.lowlevel.checkpoint()
                yield event

        async with TransformerChain([stage]).apply(source()) as stream:
            async for _ in stream:
                pass

    async with anyio.create_task_group() as group:
        for index in range(2):
            group.start_soon(one, index)

    spans = recorder.finished()
    runs = [s for s in spans if s.name == "invoke_agent"]
    assert len(runs) == 2
    for run_span in runs:
        assert run_span.context is not None
        index = dict(run_span.attributes or {})["agui.run.id"][1:]
        mine = [s for s in spans if s.context and s.context.trace_id == run_span.context.trace_id]
        assert sorted(s.name for s in mine) == ["execute_tool tool" + index] * 3 + ["invoke_agent"]
        assert all(parent_of(s, run_span) for s in mine if s is not run_span)
    assert runs[0].context.trace_id != runs[1].context.trace_id  # type: ignore[union-attr]


def _usage(**counts: Any) -> TokenUsage:
    return TokenUsage.model_validate(counts)


def test_usage_becomes_attributes_and_token_metrics() -> None:
    recorder = Recorder()
    usage = [
        _usage(
            provider="openai", model="gpt-x", inputTokens=100, outputTokens=20, cachedInputTokens=60
        ),
        _usage(provider="openai", model="gpt-x-mini", inputTokens=10, outputTokens=5),
    ]
    TransformerChain([recorder.stage()]).apply_sync(run_events(usage=usage))
    attributes = dict(recorder.named("invoke_agent").attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == 110
    assert attributes["gen_ai.usage.output_tokens"] == 25
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 60
    assert attributes["gen_ai.provider.name"] == "openai"
    assert "gen_ai.response.model" not in attributes  # two models: no single one to name
    tokens = recorder.metric("agui.tokens")
    key = frozenset(
        {
            ("gen_ai.provider.name", "openai"),
            ("gen_ai.response.model", "gpt-x"),
            ("gen_ai.token.type", "cache_read"),
        }
    )
    assert tokens[key] == 60


def _subagent_usage_stream() -> list[BaseEvent]:
    def finished(sub: str, **counts: Any) -> SubagentFinishedEvent:
        return SubagentFinishedEvent(
            subagent_run_id=sub,
            metadata={"usage": [{"provider": "p", "model": "m", **counts}]},
        )

    inner = [
        *subagent("s1", "outer", text("m1", "a"))[:-1],
        *subagent("s2", "inner", (), parent="s1")[:-1],
        finished("s2", inputTokens=5, outputTokens=1),
        finished("s1", inputTokens=7, outputTokens=2, reasoningTokens=1),
    ]
    own = [
        _usage(provider="p", model="m", inputTokens=100, outputTokens=10),
        _usage(provider="q", model="n", inputTokens=1),
    ]
    return [*run_started(), *inner, *run_finished(usage=own)]


def test_usage_roll_up_sums_subagents_into_the_run_terminal() -> None:
    recorder = Recorder()
    out = TransformerChain([recorder.stage(roll_up_usage=True)]).apply_sync(
        _subagent_usage_stream()
    )
    final = out[-1]
    assert isinstance(final, RunFinishedEvent)
    assert final.model_dump(by_alias=True, exclude_none=True)["usage"] == [
        {
            "provider": "p",
            "model": "m",
            "inputTokens": 112,
            "outputTokens": 13,
            "reasoningTokens": 1,
        },
        {"provider": "q", "model": "n", "inputTokens": 1},
    ]
    assert (
        dict(recorder.named("invoke_agent inner").attributes or {})["gen_ai.usage.input_tokens"]
        == 5
    )
    assert dict(recorder.named("invoke_agent").attributes or {})["gen_ai.usage.input_tokens"] == 113


def test_without_roll_up_the_terminal_usage_is_untouched() -> None:
    recorder = Recorder()
    events = _subagent_usage_stream()
    out = TransformerChain([recorder.stage()]).apply_sync(events)
    assert out[-1] is events[-1]


def test_capture_content_records_arguments_and_results() -> None:
    recorder = Recorder()
    TransformerChain([recorder.stage(capture_content=True)]).apply_sync(
        run_events(tool_call("c1", "search", '{"q":', '"x"}', result="[1]"))
    )
    attributes = dict(recorder.named("execute_tool search").attributes or {})
    assert attributes["gen_ai.tool.call.arguments"] == '{"q":"x"}'
    assert attributes["gen_ai.tool.call.result"] == "[1]"


def test_event_timestamps_are_the_span_times() -> None:
    recorder = Recorder()
    events = [
        *run_started(timestamp=1_000),
        *[
            e.model_copy(update={"timestamp": 1_000 + i})
            for i, e in enumerate(step("plan", reasoning("r1", "hm")), start=1)
        ],
        *run_finished(timestamp=2_000),
    ]
    TransformerChain([recorder.stage()]).apply_sync(events)
    run_span = recorder.named("invoke_agent")
    assert (run_span.start_time, run_span.end_time) == (1_000_000_000, 2_000_000_000)
    plan = recorder.named("step")
    assert (plan.start_time, plan.end_time) == (1_001_000_000, 1_007_000_000)


def test_several_runs_on_one_stream_are_several_traces() -> None:
    recorder = Recorder()
    TransformerChain([recorder.stage()]).apply_sync(
        [*run_events(run_id="r1"), *run_events(run_id="r2")]
    )
    runs = [s for s in recorder.finished() if s.name == "invoke_agent"]
    assert [dict(s.attributes or {})["agui.run.id"] for s in runs] == ["r1", "r2"]
    assert all(s.parent is None for s in runs)


@pytest.mark.wire
def test_a_relay_forwards_deltas_after_the_first_unbuilt() -> None:
    """The promise holds: same spans and bytes, and most deltas never reach the stage."""
    events = run_events([*text("m1", "a", "b", "c", "d"), *reasoning("r1", "x", "y", "z")])
    payloads = [encode_sse(e)[len(b"data: ") : -2] for e in events]

    via_chain, via_relay = Recorder(), Recorder()
    expected = TransformerChain([via_chain.stage()]).apply_sync(events)
    relay = Relay(TransformerChain([via_relay.stage()]), fast_path=True)
    out = relay.feed(payloads) + relay.finish()
    assert out == b"".join(encode_sse(e) for e in expected)
    assert relay.events_forwarded == 3 + 2  # all deltas but each message's first
    assert via_relay.outline() == via_chain.outline() == ["invoke_agent"]
    assert [e.name for e in via_relay.named("invoke_agent").events] == [
        "agui.message",
        "agui.reasoning",
    ]


def test_with_delta_stats_the_stage_makes_no_promise() -> None:
    stage = Recorder().stage(delta_stats=True)
    assert stage.passes(TextMessageContentEvent, frozenset({"message_id", "delta"})) is None


def test_fresh_shares_the_providers_and_starts_clean() -> None:
    recorder = Recorder()
    stage = recorder.stage(agent_name="x", capture_content=True)
    left = stage.fresh()
    left.transform(RunStartedEvent(thread_id="t", run_id="left-open"))
    TransformerChain([stage.fresh()]).apply_sync(run_events(run_id="done"))
    assert [dict(s.attributes or {})["agui.run.id"] for s in recorder.finished()] == ["done"]
    del left
    gc.collect()
    outcomes = {
        dict(s.attributes or {})["agui.run.id"]: dict(s.attributes or {})["agui.run.outcome"]
        for s in recorder.finished()
    }
    assert outcomes == {"left-open": "abandoned", "done": "success"}
    assert {s.name for s in recorder.finished()} == {"invoke_agent x"}
    assert "capture_content=True" in repr(stage.fresh())


def test_yaml_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="agent_name: string should have at least 1"):
        load_chain("transformers:\n  - type: opentelemetry\n    agent_name: ''\n")
    with pytest.raises(ConfigError, match="unknown option `sample`"):
        load_chain("transformers:\n  - type: opentelemetry\n    sample: 1\n")


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    with pytest.raises(ImportError, match=r"pip install 'agui-pipes\[otel\]'"):
        OpenTelemetry()
    with pytest.raises(ConfigError, match=r"agui-pipes\[otel\]"):
        load_chain("transformers:\n  - type: opentelemetry\n")


def test_attribution_without_lifecycle_events_falls_back_to_the_run() -> None:
    """A tag with no SUBAGENT_STARTED is legal: the call is the run's child, tagged work."""
    recorder = Recorder()
    TransformerChain([recorder.stage()]).apply_sync(
        run_events(tool_call("c1", "fetch", "{}", result="ok", subagent="ghost"))
    )
    assert recorder.outline() == ["invoke_agent", "  execute_tool fetch"]


def test_a_suspended_subagent_and_an_interrupted_run() -> None:
    recorder = Recorder()
    events = [
        *run_started(),
        *subagent("s1", "approver")[:-1],
        SubagentFinishedEvent(subagent_run_id="s1", outcome={"type": "suspended"}),
        *run_finished(
            outcome={"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]}
        ),
    ]
    TransformerChain([recorder.stage()]).apply_sync(events)
    assert (
        dict(recorder.named("invoke_agent approver").attributes or {})["agui.subagent.outcome"]
        == "suspended"
    )
    assert dict(recorder.named("invoke_agent").attributes or {})["agui.run.outcome"] == (
        "interrupt"
    )


def test_a_timestamp_no_span_can_hold_falls_back_to_arrival_time() -> None:
    recorder = Recorder()
    events = [
        *run_started(timestamp=-5),
        *run_finished(timestamp=9_007_199_254_740_991),  # the largest the protocol allows
    ]
    TransformerChain([recorder.stage()]).apply_sync(events)
    span = recorder.named("invoke_agent")
    assert span.start_time is not None and span.end_time is not None
    assert 1_700_000_000_000_000_000 <= span.start_time < span.end_time < 2**63


_PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(streams())
def test_any_valid_stream_passes_unchanged_and_every_span_ends(
    events: list[BaseEvent],
) -> None:
    recorder = Recorder()
    out = TransformerChain([recorder.stage()]).apply_sync(events)
    assert len(out) == len(events) and all(a is b for a, b in zip(out, events, strict=True))
    runs = [s for s in recorder.finished() if s.name == "invoke_agent"]
    starts = sum(isinstance(e, RunStartedEvent) for e in events)
    assert starts <= len(runs) <= starts + sum(e.type.value == "RUN_ERROR" for e in events)
    ids = {s.context.span_id for s in recorder.finished() if s.context is not None}
    for span in recorder.finished():
        # Every span is a run (a root here) or hangs under a span of the same stream.
        assert span.parent is None or span.parent.span_id in ids


@_PROPERTY
@given(streams(), st.randoms(use_true_random=False), st.booleans())
def test_a_shuffled_stream_never_crashes_the_stage(
    events: list[BaseEvent], rng: random.Random, every_option: bool
) -> None:
    """Out-of-order and unmatched events are bad input: traced as far as they make sense."""
    shuffled = list(events)
    rng.shuffle(shuffled)
    options = (
        {"capture_content": True, "delta_stats": True, "roll_up_usage": True}
        if every_option
        else {}
    )
    recorder = Recorder()
    out = TransformerChain([recorder.stage(**options)]).apply_sync(shuffled)
    assert [e.type for e in out] == [e.type for e in shuffled]


# -- no free text without capture_content, and every size bounded (issue 26) -----------


def _described(events: list[BaseEvent], description: str) -> list[BaseEvent]:
    return [events[0].model_copy(update={"description": description}), *events[1:]]


def test_without_capture_no_free_text_leaves_in_spans() -> None:
    events = [
        *run_started(),
        *step(
            "SECRET-STEP-NAME",
            tool_call("c1", "fetch", '{"q": "SECRET-ARGS"}', result="SECRET-RESULT"),
        ),
        *_described(
            subagent("s1", "helper", tool_call("c2", "look"), error="SECRET-ERROR"),
            "SECRET-DESCRIPTION",
        ),
        *run_finished(),
    ]

    def exported(recorder: Recorder) -> str:
        return repr(
            [
                (
                    s.name,
                    dict(s.attributes or {}),
                    s.status.description,
                    [(e.name, dict(e.attributes or {})) for e in s.events],
                )
                for s in recorder.finished()
            ]
        )

    plain = Recorder()
    TransformerChain([plain.stage()]).apply_sync(events)
    assert "SECRET" not in exported(plain)
    captured = Recorder()
    TransformerChain([captured.stage(capture_content=True)]).apply_sync(events)
    kept = exported(captured)
    for secret in (
        "SECRET-STEP-NAME",
        "SECRET-ARGS",
        "SECRET-RESULT",
        "SECRET-DESCRIPTION",
        "SECRET-ERROR",
    ):
        assert secret in kept, secret


def test_attributes_are_bounded_and_spans_per_run_capped() -> None:
    recorder = Recorder()
    events = [
        *run_started(),
        *tool_call("c0", "fetch_long", "x" * 10_000, result="y" * 10_000),
        *[event for i in range(1, 30) for event in tool_call(f"c{i}", "fetch")],
        *run_finished(),
    ]
    stage = recorder.stage(capture_content=True, max_attribute_chars=100, max_spans_per_run=10)
    TransformerChain([stage]).apply_sync(events)
    spans = recorder.finished()
    assert len(spans) == 10  # the run span and 9 tool spans
    for span in spans:
        for value in dict(span.attributes or {}).values():
            assert not isinstance(value, str) or len(value) <= 100
    first = dict(recorder.named("execute_tool fetch_long").attributes or {})
    assert first["gen_ai.tool.call.arguments"] == "x" * 100
    assert first["gen_ai.tool.call.result"] == "y" * 100
    run_span = recorder.named("invoke_agent")
    assert dict(run_span.attributes or {})["agui.spans.dropped"] == 21


@pytest.mark.parametrize("option", ["max_attribute_chars", "max_spans_per_run"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_bounds_are_positive_whole_numbers(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=option):
        Recorder().stage(**{option: value})
