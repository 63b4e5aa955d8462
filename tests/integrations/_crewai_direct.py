"""Checks of ``crewai_producer`` itself, run in the CrewAI venv by test_crewai.py.

    python -m tests.integrations._crewai_direct

Calls the producer directly (no server) for two principals using one thread id, for
a ``@CrewBase``-like crew (ag-ui-crewai's crew endpoint: its ``ChatWithCrewFlow``), and
the registry with a flow and with another object; prints one JSON line for the test
to assert on: the flow state ids CrewAI ran with, the thread ids each client got, the
crew's run, what the registry answered, and the error for an object that is not one.
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
from crewai import Agent, Crew, Task
from crewai.flow.flow import Flow, start
from crewai.llms.base_llm import BaseLLM

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


class FixedLLM(BaseLLM):  # type: ignore[misc]
    """The crew's chat LLM for crewai's own calls (describing the crew and its inputs);
    ag-ui-crewai's chat turn calls LiteLLM with its model name, the scripted provider."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        return "Plans a trip."


class TripCrew:
    """What add_crewai_crew_fastapi_endpoint takes: a ``crew()`` factory and a name."""

    name = "TripCrew"

    def crew(self) -> Crew:
        llm = FixedLLM(model="scripted/crew")
        agent = Agent(role="planner", goal="Plan trips", backstory="A planner.", llm=llm)
        task = Task(description="Plan a trip to {city}", expected_output="A plan", agent=agent)
        return Crew(agents=[agent], tasks=[task], chat_llm=llm)


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
    crew_events = [
        (event.type.value, getattr(event, "tool_call_name", None))
        async for event in crewai_producer(TripCrew())(run_input, Principal("alice"))
    ]
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
        "crew": [kind for kind, _ in crew_events],
        "crew_tool_calls": [name for kind, name in crew_events if kind == "TOOL_CALL_START"],
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
