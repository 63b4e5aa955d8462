"""``collect(agent, input)``: run an agent to completion and return every event it produced."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput

from .._foundation.limits import Limits
from ..driver import DEFAULT_BACKPRESSURE, AgentLike, CancelToken, Transformers
from ..driver import run as _run


async def collect(
    agent: AgentLike,
    input: RunAgentInput | Mapping[str, Any],
    *,
    transformers: Transformers = None,
    verify: bool = True,
    echo_input: bool = False,
    event_buffer: int | None = None,
    backpressure: int | None = DEFAULT_BACKPRESSURE,
    cancel_token: CancelToken | None = None,
    limits: Limits | None = None,
) -> list[BaseEvent]:
    """All events of one run of ``agent`` on ``input``; the keywords are ``run()``'s.

    The driver guarantees the list starts with RUN_STARTED and ends with one
    RUN_FINISHED or RUN_ERROR, so a test asserts on the outcome directly::

        events = await collect(Flaky(), {"threadId": "t", "runId": "r"})
        assert events[-1].code == "AGENT_ERROR"
    """
    async with _run(
        agent,
        input,
        transformers=transformers,
        verify=verify,
        echo_input=echo_input,
        event_buffer=event_buffer,
        backpressure=backpressure,
        cancel_token=cancel_token,
        limits=limits,
    ) as events:
        return [event async for event in events]
