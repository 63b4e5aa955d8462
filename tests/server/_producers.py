"""Producers for the producer-path tests: one that answers, one that goes silent.

Module attributes, so ``agui-pipes serve --agent tests.server._producers:silent``
can serve them too. Each records how its run ended (thread-safe: the server runs
in another thread or process).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
from ag_ui.core import RunAgentInput

from agui_pipes.server.auth import Principal


class Silent:
    """Starts its run and a message, then awaits forever; records what ended it."""

    def __init__(self) -> None:
        self.calls = 0
        self.ended_by: str | None = None
        self.ended = threading.Event()

    async def __call__(
        self, run_input: RunAgentInput, principal: Principal
    ) -> AsyncIterator[dict[str, Any]]:
        self.calls += 1
        try:
            yield {
                "type": "RUN_STARTED",
                "threadId": run_input.thread_id,
                "runId": run_input.run_id,
            }
            yield {"type": "TEXT_MESSAGE_START", "messageId": "m-1", "role": "assistant"}
            yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-1", "delta": "thinking"}
            await anyio.sleep_forever()
        except BaseException as exc:
            self.ended_by = type(exc).__name__
            raise
        finally:
            self.ended.set()


silent = Silent()
