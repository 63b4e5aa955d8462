"""examples/fastapi_app.py served by uvicorn: the agent route next to FastAPI routes."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from ag_ui.core import EventType, TextMessageContentEvent, ToolCallArgsEvent

from tests._servers import Running, post_run, run_input, serve

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).parents[2] / "examples" / "fastapi_app.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_app_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server() -> Iterator[Running]:
    with serve(load_example().app) as running:
        yield running


async def test_agent_route_streams_through_the_chain(server: Running) -> None:
    body = run_input(messages=[{"id": "u1", "role": "user", "content": "weather in Porto?"}])
    async with httpx.AsyncClient() as client:
        response, events = await post_run(client, server.url + "/agent", body)
    assert response.headers["content-type"] == "text/event-stream"
    assert events[0].type is EventType.RUN_STARTED
    assert events[-1].type is EventType.RUN_FINISHED
    args = "".join(e.delta for e in events if isinstance(e, ToolCallArgsEvent))
    assert args == '{"city":"Porto"}'
    text = "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent))
    assert "24 °C in Porto" in text
    assert "[email]" in text and "@" not in text  # the chain masked the address


async def test_fastapi_routes_still_work(server: Running) -> None:
    async with httpx.AsyncClient() as client:
        assert (await client.get(server.url + "/health")).json() == {"status": "ok"}
        bad = await client.post(server.url + "/agent", json={"threadId": "t"})
    assert bad.status_code == 422
    assert bad.json()["error"] == "invalid_run_input"
