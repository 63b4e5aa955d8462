"""A stage that returns the wrong thing gets an error that says the fix, never corrupt output.

Regression: a ``transform()`` returning one bare event (instead of ``(event,)``)
in a single-stage chain came out of ``apply_sync`` as pydantic's ``(field,
value)`` tuples, silently; ``None`` said only "'NoneType' object is not
iterable"; ``chain.apply([...])`` said "'list' object has no attribute
'__aiter__'".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from ag_ui.core import BaseEvent

from agui_pipes import AsyncStreamTransformer, StageError, StreamTransformer, TransformerChain
from agui_pipes.testing import run_events, text
from agui_pipes.transformers import StripRawEvents

EVENTS = run_events(text("m1", "hi"))
FIX = "`(event,)` to pass it, `()` to drop it"


class _Returns(StreamTransformer):
    def __init__(self, make: Any) -> None:
        self._make = make

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        return self._make(event)  # type: ignore[no-any-return]


class _AsyncReturns(AsyncStreamTransformer):
    def __init__(self, make: Any) -> None:
        self._make = make

    async def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        return self._make(event)  # type: ignore[no-any-return]


class _FinishNone(StreamTransformer):
    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        return (event,)

    def finish(self) -> Iterable[BaseEvent]:
        return None  # type: ignore[return-value]


MISTAKES = {
    "bare event": (lambda e: e, "returned a bare RUN_STARTED event"),
    "None": (lambda e: None, "returned None"),
    "a str among events": (lambda e: [e, "oops"], "returned a str as output item #1"),
    "a dict": (lambda e: e.model_dump(), "returned a dict"),
}


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "in-a-chain"])
@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_sync_stage_returning_the_wrong_thing_is_told_the_fix(mistake: str, alone: bool) -> None:
    make, said = MISTAKES[mistake]
    stage = _Returns(make)
    chain = TransformerChain([stage]) if alone else StripRawEvents() | stage | StripRawEvents()
    with pytest.raises(StageError) as caught:
        chain.apply_sync(EVENTS)
    assert said in str(caught.value) and FIX in str(caught.value)
    assert caught.value.stage == stage.name


@pytest.mark.parametrize("mistake", MISTAKES)
def test_an_async_stage_returning_the_wrong_thing_is_told_the_fix(mistake: str) -> None:
    make, said = MISTAKES[mistake]
    with pytest.raises(StageError, match="returned") as caught:
        TransformerChain([_AsyncReturns(make)]).apply_sync(EVENTS)
    assert said in str(caught.value) and FIX in str(caught.value)


def test_finish_returning_none_is_told_the_fix() -> None:
    with pytest.raises(StageError) as caught:
        TransformerChain([_FinishNone()]).apply_sync(EVENTS)
    assert "finish() returned None" in str(caught.value) and FIX in str(caught.value)


def test_apply_on_a_list_points_to_apply_sync() -> None:
    chain = TransformerChain([StripRawEvents()])
    with pytest.raises(TypeError, match=r"got a list; for a list of events use apply_sync"):
        chain.apply(EVENTS)  # type: ignore[arg-type]
    # The refusal did not use the chain up: it still runs once, as documented.
    assert chain.apply_sync(EVENTS) == EVENTS
