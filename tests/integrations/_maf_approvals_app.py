"""A Microsoft Agent Framework agent whose tool needs approval, served in the framework's venv.

Run by tests/integrations/test_agent_framework_approvals.py with that venv's python
(tests/_framework_venv.py)::

    python -m tests.integrations._maf_approvals_app --store URL --observed FILE [--expired]

It serves ``build_app(producer=agent_framework_producer(agent), store=URL)`` at
``/agent`` and prints ``PORT <n>`` once it listens. The scripted chat client (no
provider, no network) calls ``book_flight`` — a tool declared with
``approval_mode="always_require"``, so MAF pauses the run with an approval
interrupt instead of running it — and, once the conversation holds the tool's
result, says what it got. ``--observed`` gets one JSON line per model call:
the function results the client was given (what the approval decided).
``--expired`` puts the ``expire_approvals`` stage in the chain: the deployment's
approval window, here already closed (MAF's interrupts carry no ``expiresAt``
of their own).
"""

from __future__ import annotations

import argparse
import json
import socket
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from ag_ui.core import BaseEvent, EventType, RunFinishedEvent, RunFinishedInterruptOutcome
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
    tool,
)

from agui_pipes import StreamTransformer

PAST = "2020-01-01T00:00:00Z"
"""The ``expiresAt`` ``--expired`` gives every interrupt."""


class ScriptedClient(FunctionInvocationLayer, ChatMiddlewareLayer, BaseChatClient):  # type: ignore[misc]
    """Calls ``book_flight`` first; given its result, answers with it."""

    def __init__(self, observed: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._observed = observed

    def _inner_get_response(
        self,
        *,
        messages: Sequence[Message],
        stream: bool = False,
        options: Mapping[str, Any],
        **kwargs: Any,
    ) -> Any:
        results = [
            content.result
            for message in messages
            for content in message.contents
            if content.type == "function_result"
        ]
        with self._observed.open("a") as out:
            out.write(json.dumps({"results": [str(r) for r in results]}) + "\n")

        async def updates() -> AsyncIterator[ChatResponseUpdate]:
            if not results:
                call = Content.from_function_call(
                    call_id="call-1", name="book_flight", arguments=json.dumps({"city": "Lisbon"})
                )
                yield ChatResponseUpdate(role="assistant", contents=[call])
                return
            said = f"Result: {results[-1]}"
            yield ChatResponseUpdate(
                role="assistant", contents=[Content.from_text(said)], message_id="a-1"
            )

        if stream:
            return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

        async def whole() -> ChatResponse:
            return ChatResponse.from_updates([u async for u in updates()])

        return whole()


@tool(approval_mode="always_require")
def book_flight(city: str) -> str:
    """Book a flight to a city."""
    return f"booked {city}"


class ExpireApprovals(StreamTransformer):
    """Gives every interrupt of the run's outcome ``expiresAt`` = ``PAST``."""

    event_types = (EventType.RUN_FINISHED,)

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, RunFinishedEvent) and isinstance(
            event.outcome, RunFinishedInterruptOutcome
        ):
            interrupts = [
                i.model_copy(update={"expires_at": PAST}) for i in event.outcome.interrupts
            ]
            outcome = event.outcome.model_copy(update={"interrupts": interrupts})
            return (event.model_copy(update={"outcome": outcome}),)
        return (event,)


def app(options: argparse.Namespace) -> Any:
    from agui_pipes.integrations.agent_framework import agent_framework_producer
    from agui_pipes.server import build_app

    agent = Agent(name="booker", client=ScriptedClient(options.observed), tools=[book_flight])
    return build_app(
        producer=agent_framework_producer(agent),
        chain=ExpireApprovals if options.expired else None,
        store=options.store,
        path="/agent",
        keepalive=None,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--observed", type=Path, required=True)
    parser.add_argument("--expired", action="store_true")
    options = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    config = uvicorn.Config(app(options), log_level="warning", loop="asyncio", http="h11")
    server = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
