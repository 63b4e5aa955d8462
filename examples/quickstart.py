"""Uppercase an assistant's text and drop RAW events, over an async event source."""

from collections.abc import AsyncIterator

import anyio
from ag_ui.core import BaseEvent, EventType, TextMessageContentEvent

from agui_pipes import FunctionTransformer, StreamTransformer
from agui_pipes.testing import run_events, text, tool_call


class Shout(StreamTransformer):
    def transform(self, event: BaseEvent) -> list[BaseEvent]:
        if isinstance(event, TextMessageContentEvent):
            return [event.model_copy(update={"delta": event.delta.upper()})]
        return [event]


no_raw = FunctionTransformer(lambda e: None if e.type is EventType.RAW else e, name="no_raw")


async def main() -> None:
    async def agent_events() -> AsyncIterator[BaseEvent]:  # any async iterable of events
        events = run_events(text("m1", "hello ", "world") + tool_call("c1", "search", {"q": "x"}))
        for event in events:
            yield event

    chain = Shout() | no_raw
    async for event in chain.apply(agent_events()):
        print(event.model_dump_json(by_alias=True))


anyio.run(main)
