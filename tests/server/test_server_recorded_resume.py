"""A recorded run's input echo holds the answers it was sent — cancel mode's included.

Under ``interrupts="cancel"`` a run that leaves open interrupts unanswered is
sent them answered ``cancelled``; the agent (endpoint) or the upstream
(gateway) reads them. The run's recorded ``RUN_STARTED.input`` held only its
new messages, so the log — a replay, a join, the inspector — never showed
that the run cancelled them. Now the echo's ``resume`` is what the run was
actually sent: the client's answers and the cancellations added for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agui_pipes.server import Gateway, agent_route
from tests._servers import serve
from tests._store_backends import redis_url, store_url_for
from tests.server.test_server_interrupt_cancel import USER, Recorder
from tests.server.test_server_interrupts import _app, _body, _post

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

CANCELLED = [{"interruptId": "approve-1", "status": "cancelled"}]
APPROVED = [{"interruptId": "approve-1", "status": "resolved", "payload": {"approved": True}}]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


@contextmanager
def _served(kind: str, agent: Recorder, store_url: str, **options: Any) -> Iterator[str]:
    """The endpoint serving ``agent``, or a gateway in front of it: the URL to POST runs to."""
    if kind == "endpoint":
        with serve(_app(agent.run, store_url, **options)) as server:
            yield f"{server.url}/agent"
        return
    upstream_app = Starlette(routes=[agent_route("/agent", agent.run, keepalive=None)])
    with serve(upstream_app) as upstream:
        gateway = Gateway(f"{upstream.url}/agent", store=store_url, keepalive=None, **options)
        app = Starlette(routes=gateway.routes("/chat"), lifespan=gateway.lifespan)
        with serve(app) as server:
            yield f"{server.url}/chat"


def _started(text: str) -> dict[str, Any]:
    """The RUN_STARTED of an SSE body."""
    for line in text.splitlines():
        if line.startswith("data: ") and '"RUN_STARTED"' in line:
            event: dict[str, Any] = json.loads(line.removeprefix("data: "))
            return event
    raise AssertionError(f"no RUN_STARTED in {text!r}")


@pytest.mark.parametrize("kind", ["endpoint", "gateway"])
async def test_the_cancellations_are_in_the_recorded_input(kind: str, store_url: str) -> None:
    agent = Recorder()
    with _served(kind, agent, store_url, interrupts="cancel") as url:
        async with httpx.AsyncClient(timeout=20) as client:
            assert (await _post(client, url, _body("r-1"))).status_code == 200
            typed = await _post(client, url, _body("r-2", messages=[USER]))
            assert typed.status_code == 200, typed.text
            assert agent.resumes["r-2"] == CANCELLED  # what was sent on
            # Live, replayed and joined: the run says it cancelled approve-1.
            replayed = (await client.get(f"{url}/runs/r-2")).text
            joined = (await client.get(f"{url}/runs/r-2?join=1")).text
            for text in (typed.text, replayed, joined):
                echo = _started(text)["input"]
                assert echo["resume"] == CANCELLED, text
                assert echo["messages"] == [USER]
            assert replayed == typed.text  # the log holds what the client was sent
            # The run that asked was sent no answers (nor messages): it records no input.
            asked = (await client.get(f"{url}/runs/r-1")).text
            assert "input" not in _started(asked)


@pytest.mark.parametrize("kind", ["endpoint", "gateway"])
async def test_the_clients_own_answers_are_recorded_as_sent(kind: str, store_url: str) -> None:
    agent = Recorder()
    with _served(kind, agent, store_url) as url:
        async with httpx.AsyncClient(timeout=20) as client:
            await _post(client, url, _body("r-1"))
            answered = await _post(client, url, _body("r-2", APPROVED))
            assert answered.status_code == 200, answered.text
            replayed = (await client.get(f"{url}/runs/r-2")).text
    assert agent.resumes["r-2"] == APPROVED
    assert _started(replayed)["input"] == {
        "threadId": "t-1",
        "runId": "r-2",
        "messages": [],
        "resume": APPROVED,
    }


class _AnswersInForwardedProps:
    """A dialect's request half: the answers go upstream in ``forwardedProps``, not ``resume``."""

    def __call__(self) -> Any:
        from agui_pipes import StreamTransformer

        class Dialect(StreamTransformer):
            def rewrite_request(self, request: dict[str, Any]) -> dict[str, Any]:
                answers = request.pop("resume", None)
                return {**request, "forwardedProps": {"answers": answers}}

        return Dialect()


async def test_an_upstream_echo_gets_the_answers_it_lacks(store_url: str) -> None:
    agent = Recorder()
    upstream_app = Starlette(
        routes=[agent_route("/agent", agent.run, keepalive=None, echo_input=True)]
    )
    with serve(upstream_app) as upstream:
        gateway = Gateway(
            f"{upstream.url}/agent",
            chain=_AnswersInForwardedProps(),
            store=store_url,
            keepalive=None,
            interrupts="cancel",
        )
        app = Starlette(routes=gateway.routes("/chat"), lifespan=gateway.lifespan)
        with serve(app) as server:
            url = f"{server.url}/chat"
            async with httpx.AsyncClient(timeout=20) as client:
                await _post(client, url, _body("r-1"))
                typed = await _post(client, url, _body("r-2", messages=[USER]))
                replayed = (await client.get(f"{url}/runs/r-2")).text
    assert agent.resumes["r-2"] == []  # the upstream read its answers elsewhere
    echo = _started(replayed)["input"]
    # The upstream's own echo is kept (its forwardedProps), with the canonical answers added.
    assert echo["forwardedProps"] == {"answers": CANCELLED}
    assert echo["resume"] == CANCELLED
    assert _started(typed.text)["input"] == echo
