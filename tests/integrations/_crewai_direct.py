"""Checks of ``crewai_producer`` itself, run in the CrewAI venv by test_crewai.py.

    python -m tests.integrations._crewai_direct

Calls the producer directly (no server) for two principals using one thread id, and
the registry with a flow and with another object; prints one JSON line for the test
to assert on: the flow state ids CrewAI ran with, the thread ids each client got,
what the registry answered, and the error for an object that is not a flow.
"""

from __future__ import annotations

import os

# No network (as tests/integrations/_crewai_app.py): set before LiteLLM is imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

import asyncio
import json
from typing import Any

from ag_ui.core import RunAgentInput
from ag_ui_crewai import CopilotKitState
from crewai.flow.flow import Flow, start

from agui_pipes.integrations import producer_for
from agui_pipes.integrations.crewai import crewai_producer
from agui_pipes.server.auth import Principal
from tests.integrations import _crewai_app

SEEN: list[str] = []


class IdFlow(Flow[CopilotKitState]):  # type: ignore[misc]
    """Records the flow state's id (ag-ui-crewai sets it to the thread id it was given)."""

    @start()  # type: ignore[misc]
    async def record(self) -> None:
        SEEN.append(self.state.id)


async def main() -> dict[str, Any]:
    produce = crewai_producer(IdFlow())
    run_input = RunAgentInput.model_validate(
        {
            "threadId": "t-1",
            "runId": "r-1",
            "messages": [{"id": "u-1", "role": "user", "content": "hi"}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    )
    client_ids = []
    for scope in ("alice", "bob"):
        got = [event async for event in produce(run_input, Principal(scope))]
        client_ids.append([e.thread_id for e in got if e.type in ("RUN_STARTED", "RUN_FINISHED")])
    try:
        crewai_producer(object())
        refused = ""
    except TypeError as exc:
        refused = str(exc)
    return {
        "flow_ids": SEEN,
        "client_thread_ids": client_ids,
        "registry": {
            "flow": producer_for(_crewai_app.flow) is not None,
            "other": producer_for(_crewai_app.ScriptedModel(None, None, 1)) is not None,
        },
        "not_a_flow": refused,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
