"""``collect(agent, input)``: run an agent to completion and return every event it produced."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput

from ..driver import run as _run


async def collect(
    agent: object, input: RunAgentInput | Mapping[str, Any], **options: Any
) -> list[BaseEvent]:
    """All events of one run of ``agent`` on ``input`` (``options`` are ``run()``'s keywords).

    The driver guarantees the list starts with RUN_STARTED and ends with one
    RUN_FINISHED or RUN_ERROR, so a test asserts on the outcome directly::

        events = await collect(Flaky(), {"threadId": "t", "runId": "r"})
        assert events[-1].code == "AGENT_ERROR"
    """
    async with _run(agent, input, **options) as events:
        return [event async for event in events]
