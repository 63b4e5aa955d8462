"""The integrations registry ``serve --agent`` reads: each framework's object finds its producer.

An object is offered only to the integrations whose packages its classes come
from; anything else finds none (and ``serve --agent`` says what is accepted).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agui_pipes.integrations import accepted_kinds, producer_for
from agui_pipes.integrations._registry import served_by
from agui_pipes.server import build_app
from tests._servers import serve

pytestmark = pytest.mark.anyio


def _strands() -> Any:
    from tests.integrations.test_strands import _agent

    return _agent()


def _agno() -> Any:
    from tests.integrations.test_agno import _agent

    return _agent()


def _llamaindex() -> Any:
    from tests.integrations.test_llamaindex import _workflow

    return _workflow()


def _adk() -> Any:
    from tests.integrations._adk_targets import agent

    return agent


def _adk_agent() -> Any:
    from ag_ui_adk import ADKAgent
    from google.adk.sessions import InMemorySessionService

    return ADKAgent(adk_agent=_adk(), session_service=InMemorySessionService())


@pytest.mark.parametrize(
    "make",
    [_strands, _agno, _llamaindex, _adk, _adk_agent],
    ids=["strands", "agno", "llamaindex", "adk", "adk-ADKAgent"],
)
def test_each_framework_s_object_finds_its_producer(make: Any) -> None:
    assert callable(producer_for(make()))


@pytest.mark.parametrize("obj", [object(), "agent", httpx.Client])
def test_anything_else_finds_none(obj: object) -> None:
    assert producer_for(obj) is None


def test_the_usage_message_names_every_framework() -> None:
    kinds = " | ".join(accepted_kinds())
    for name in (
        "pydantic-ai",
        "LangGraph",
        "Strands",
        "LlamaIndex",
        "Agno",
        "ADK",
        "Agent Framework",
    ):
        assert name in kinds


async def test_a_strands_agent_found_by_the_registry_is_served() -> None:
    producer = producer_for(_strands())
    assert producer is not None
    app = build_app(producer=producer, keepalive=None)
    with serve(app) as server:
        async with httpx.AsyncClient(timeout=60) as client:
            body = {"threadId": "t-1", "runId": "r-1", "messages": []}
            body["messages"] = [{"id": "u-1", "role": "user", "content": "weather in Porto?"}]
            response = await client.post(f"{server.url}/", json=body)
    assert response.status_code == 200
    assert '"type":"RUN_FINISHED"' in response.text


def test_an_adk_agent_gets_the_integrations_defaults_and_its_chain() -> None:
    from agui_pipes.integrations.adk import ADKProducer, adk_chain

    served = served_by(_adk())
    assert served is not None and served.integration.name == "adk"
    assert isinstance(served.producer, ADKProducer)
    assert served.chain is adk_chain


def test_a_producer_an_integration_built_is_served_as_it_is() -> None:
    from tests.integrations._adk_targets import trips

    served = served_by(trips)
    assert served is not None and served.producer is trips
    assert served.chain is not None and served.integration.name == "adk"
    # Any other integration's producer is a plain producer: not the registry's business.
    from agui_pipes.integrations.strands import strands_producer

    assert served_by(strands_producer(_strands())) is None


def test_another_google_package_s_object_is_not_offered_to_adk() -> None:
    from google.genai import types

    assert producer_for(types.Part(text="hi")) is None
