"""The handles' assembled deltas are the events pydantic would build, byte for byte.

``message.delta(text)``, a reasoning message's ``delta`` and ``call.args``
build their event without validation when ``text`` is exactly a ``str``, and
the driver's verifier accepts a delta of an open item without calling the
verifier. These tests hold both to the reference: the same model (fields,
fields-set, extras, field order), the same bytes on the wire, and the same
errors for what the reference rejects.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    ReasoningMessageContentEvent,
    TextMessageContentEvent,
    ToolCallArgsEvent,
)
from pydantic import ValidationError

from agui_pipes import RunContext, RunError, RunOutcome
from agui_pipes.codecs import encode_json, encode_sse
from agui_pipes.driver import CancelToken
from agui_pipes.testing import collect

from ._agents import INPUT

pytestmark = pytest.mark.anyio

TEXTS = ["x", "", "héllo wörld 🚀", 'a "quoted"\nline\t\\', "\u2028\x00", "y" * 5000]
DELTA_TYPES = (
    EventType.TEXT_MESSAGE_CONTENT,
    EventType.REASONING_MESSAGE_CONTENT,
    EventType.TOOL_CALL_ARGS,
)


class Shouty(str):
    """A ``str`` subclass: takes pydantic's path, which stores a plain ``str``."""


def _reference(event: BaseEvent) -> BaseEvent:
    """The event rebuilt the validated way, from the fields the driver set."""
    fields = {name: getattr(event, name) for name in event.model_fields_set}
    return type(event)(**fields)


def _assert_same(event: BaseEvent, reference: BaseEvent) -> None:
    assert type(event) is type(reference)
    assert event == reference
    assert list(event.__dict__.items()) == list(reference.__dict__.items())
    assert event.model_fields_set == reference.model_fields_set
    assert event.__pydantic_extra__ == reference.__pydantic_extra__
    assert event.__pydantic_private__ == reference.__pydantic_private__
    assert encode_sse(event) == encode_sse(reference)
    assert encode_sse(event, fast_path=False) == encode_sse(reference, fast_path=False)
    assert encode_json(event) == encode_json(reference)
    assert event.model_dump_json(by_alias=True, exclude_unset=True) == reference.model_dump_json(
        by_alias=True, exclude_unset=True
    )
    assert event.model_dump(exclude_none=True) == reference.model_dump(exclude_none=True)
    # The fields-set is the instance's own: changing one event's leaves others alone.
    event.model_fields_set.add("timestamp")
    assert "timestamp" not in reference.model_fields_set


def _streamer(texts: list[Any]) -> Any:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        for emitter in (ctx, ctx.subagent("helper")):
            with emitter.assistant_message() as message:
                for text in texts:
                    message.delta(text)
            with emitter.reasoning() as span, span.message() as thought:
                for text in texts:
                    thought.delta(text)
            with emitter.tool_call("search") as call:
                for text in texts:
                    call.args(text)
            if emitter is not ctx:
                emitter.finish()
        return RunOutcome.success()

    return agent


@pytest.mark.parametrize("verify", [True, False])
async def test_deltas_equal_the_validated_events_byte_for_byte(verify: bool) -> None:
    texts: list[Any] = [*TEXTS, Shouty("loud")]
    events = await collect(_streamer(texts), INPUT, verify=verify)
    assert events[-1].type is EventType.RUN_FINISHED
    deltas = [event for event in events if event.type in DELTA_TYPES]
    assert len(deltas) == 2 * 3 * len(texts)
    for event in deltas:
        _assert_same(event, _reference(event))
    tagged = [event for event in deltas if event.subagent_run_id is not None]
    assert len(tagged) == 3 * len(texts)
    assert {event.subagent_run_id for event in tagged} == {"r-sub-1"}
    assert all("subagent_run_id" in event.model_fields_set for event in tagged)
    # A str subclass goes through pydantic, which stores a plain str.
    assert {type(event.delta) for event in deltas} == {str}


def _validation_message(cls: type[BaseEvent], id_field: str, value: Any) -> str:
    try:
        cls(**{id_field: "r-msg-1", "delta": value})
    except ValidationError as exc:
        return str(exc.errors()[0]["msg"])
    raise AssertionError(f"{cls.__name__} accepted delta={value!r}")


@pytest.mark.parametrize("value", [5, None, ["x"], b"\xff"])
@pytest.mark.parametrize(
    ("kind", "cls", "id_field"),
    [
        ("message", TextMessageContentEvent, "message_id"),
        ("reasoning", ReasoningMessageContentEvent, "message_id"),
        ("args", ToolCallArgsEvent, "tool_call_id"),
    ],
)
async def test_a_delta_that_is_not_a_string_fails_as_before(
    value: Any, kind: str, cls: type[BaseEvent], id_field: str
) -> None:
    caught: list[RunError] = []

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        if kind == "message":
            with ctx.assistant_message() as message:
                send = message.delta
                try:
                    send(value)
                except RunError as error:
                    caught.append(error)
        elif kind == "reasoning":
            with ctx.reasoning() as span, span.message() as thought:
                try:
                    thought.delta(value)
                except RunError as error:
                    caught.append(error)
        else:
            with ctx.tool_call("search") as call:
                try:
                    call.args(value)
                except RunError as error:
                    caught.append(error)
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    [error] = caught
    assert error.code == "PROTOCOL"
    assert f"{cls.__name__} rejected delta={value!r}: " in error.message
    assert error.message.endswith(_validation_message(cls, id_field, value))
    assert not [event for event in events if event.type in DELTA_TYPES]
    assert events[-1].type is EventType.RUN_FINISHED


async def test_an_ended_message_refuses_a_delta_of_any_type() -> None:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        message = ctx.assistant_message()
        message.end()
        call = ctx.tool_call("search")
        call.end()
        for bad in ("late", 5):
            with pytest.raises(
                RunError,
                match=r"message 'r-msg-1' already ended, so it cannot "
                r"take more content; open a new one",
            ):
                message.delta(bad)
            with pytest.raises(
                RunError,
                match=r"tool call 'r-call-1' already ended, so it "
                r"cannot take more arguments",
            ):
                call.args(bad)
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    assert events[-1].type is EventType.RUN_FINISHED


async def test_a_delta_after_cancellation_raises_cancelled() -> None:
    token = CancelToken()
    caught: list[RunError] = []

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.assistant_message() as message:
            message.delta("before")
            token.cancel()
            try:
                message.delta("after")
            except RunError as error:
                caught.append(error)
                raise
        return RunOutcome.success()

    events = await collect(agent, INPUT, cancel_token=token)
    [error] = caught
    assert error.code == "CANCELLED"
    assert [event.delta for event in events if event.type is EventType.TEXT_MESSAGE_CONTENT] == [
        "before"
    ]
    assert events[-1].type is EventType.RUN_ERROR


async def test_a_delta_after_the_run_ended_is_refused_by_the_verifier() -> None:
    """A handle kept past its run: the verifier (not the fast check) says the run ended."""
    kept: list[Any] = []

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        message = ctx.assistant_message()
        kept.append(message)
        message.end()
        kept.append(ctx.assistant_message())  # left open on purpose
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    assert events[-1].type is EventType.RUN_ERROR  # the open message: open-at-finish
    with pytest.raises(RunError) as caught:
        kept[1].delta("too late")
    assert "Cannot send event type 'TEXT_MESSAGE_CONTENT'" in caught.value.message
    assert caught.value.verification is not None
    assert caught.value.verification.rule.value == "run-ended"


async def test_a_tagged_delta_of_another_owner_is_still_refused() -> None:
    """A delta tagged by a subagent that does not own the message takes the full check."""

    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        scope = ctx.subagent("helper")
        with ctx.assistant_message() as message:
            message.delta("mine")
            scope.emit(TextMessageContentEvent(message_id=message.id, delta="theirs"))
        scope.finish()
        return RunOutcome.success()

    events = await collect(agent, INPUT)
    assert events[-1].type is EventType.RUN_ERROR
    assert "does not match" in events[-1].message
