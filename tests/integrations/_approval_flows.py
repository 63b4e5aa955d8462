"""The approval flow every framework passes across two ``agui-pipes serve`` processes.

Two real ``agui-pipes serve --agent ...`` processes share one store (SQLite or
Redis) and the framework's own session store (where the paused framework
keeps its state): the official TypeScript client runs the first run on
process A (it ends with the interrupt); on B, new input while it is pending
is 409 ``interrupt_pending`` and an answer to a wrong id 422
``unknown_interrupt``; the client's resume is answered by B (the framework
resumes there and the model's reply says what it received); a second answer,
on A, is 409 ``interrupt_answered`` naming the run that answered it; nothing
is recorded for a refused request. A thread whose interrupt expired (the
chain's ``PastExpiry``) has a ``resolved`` answer refused 409
``interrupt_expired`` on B, and a ``cancelled`` one moves it on.

Also here, for each framework's tests: :func:`typed_instead_of_answering`
(new input while an interrupt is pending, under ``interrupts="cancel"``) and
:func:`answered_elsewhere` (an interrupt asked through one server and
answered through another, raw HTTP).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.cli.test_cli_serve import start, stop

USER = {"id": "u-1", "role": "user", "content": "Send Bob $5"}


@dataclass(frozen=True)
class Flow:
    """One framework's approval flow, as the shared check drives it."""

    agent: str
    """``serve --agent``'s target."""
    chain: str
    """The chain file's text (``--config``, with ``--allow-imports``)."""
    env: dict[str, str]
    """The servers' environment (where the framework's sessions live)."""
    approved: str
    """What the resumed run's last assistant message says once approved."""
    cancelled: str
    """What it says once the interrupt is answered ``cancelled``."""
    tools: Sequence[dict[str, Any]] = ()
    """The client's frontend tools."""


@contextmanager
def two_servers(
    flow: Flow, store: str, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, str]]:
    """Two ``agui-pipes serve`` processes of ``flow`` on ``store``: their agent URLs.

    ``folder`` holds the chain file; the environment (``flow.env``) is set for both.
    """
    for key, value in flow.env.items():
        monkeypatch.setenv(key, value)
    chain = folder / "chain.yaml"
    chain.write_text(flow.chain)
    args = ("--agent", flow.agent, "--config", str(chain), "--allow-imports")
    args += ("--store", store, "--path", "/agent", "--keepalive", "0")
    one = start(*args)
    try:
        two = start(*args)
        try:
            yield f"{one.url}/agent", f"{two.url}/agent"
        finally:
            code, err = stop(two)
            assert code == 0, err
    finally:
        code, err = stop(one)
        assert code == 0, err


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    response = await client.post(
        url, content=json.dumps(body), headers={"accept": "text/event-stream"}
    )
    await response.aread()
    return response


def _refusal(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


def _events(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")
    ]


def _finished(text: str) -> dict[str, Any]:
    finished = [event for event in _events(text) if event["type"] == "RUN_FINISHED"]
    assert finished, text
    return finished[-1]


def _said(text: str) -> str:
    return "".join(e["delta"] for e in _events(text) if e["type"] == "TEXT_MESSAGE_CONTENT")


async def across_two_processes(flow: Flow, one: str, two: str, ts_oracle: Any) -> None:
    """The module doc's flow, on the servers ``one`` (A) and ``two`` (B)."""
    tools = list(flow.tools)
    first = {"url": one, "threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}
    (asked,) = await anyio.to_thread.run_sync(ts_oracle, [{**first, "tools": tools}])
    assert asked["outcome"] == "completed", (asked["error"], asked["events"])
    finished = [e for e in asked["events"] if e["type"] == "RUN_FINISHED"][-1]
    [interrupt] = finished["outcome"]["interrupts"]
    approve = [
        {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    ]
    history = asked["messages"]
    async with httpx.AsyncClient(timeout=60) as client:
        typed = {"id": "u-2", "role": "user", "content": "Never mind."}
        body = {"threadId": "t-1", "runId": "r-x", "messages": [*history, typed], "tools": tools}
        assert _refusal(await _post(client, two, body)) == (409, "interrupt_pending")
        wrong = {**body, "messages": history, "resume": [{**approve[0], "interruptId": "x"}]}
        assert _refusal(await _post(client, two, wrong)) == (422, "unknown_interrupt")
    # The other process answers: the framework resumes there, from the shared sessions.
    answer = {**first, "url": two, "runId": "r-2", "initialMessages": history, "resume": approve}
    (resumed,) = await anyio.to_thread.run_sync(ts_oracle, [{**answer, "tools": tools}])
    assert resumed["outcome"] == "completed", (resumed["error"], resumed["events"])
    assert resumed["messages"][-1]["content"] == flow.approved
    async with httpx.AsyncClient(timeout=60) as client:
        again = {"threadId": "t-1", "runId": "r-3", "messages": history, "resume": approve}
        refused = await _post(client, one, {**again, "tools": tools})
        assert _refusal(refused) == (409, "interrupt_answered")
        assert "'r-2'" in refused.json()["message"]
        for run_id in ("r-x", "r-3"):  # nothing was recorded for the refused requests
            assert (await client.get(f"{one}/runs/{run_id}")).status_code == 404

        # An expired interrupt: resolving it is refused, cancelling it moves the thread on.
        late_first = {"threadId": "expired-1", "runId": "e-1", "messages": [USER], "tools": tools}
        asked_late = await _post(client, one, late_first)
        assert asked_late.status_code == 200, asked_late.text
        [late] = _finished(asked_late.text)["outcome"]["interrupts"]
        resolved = [
            {"interruptId": late["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        too_late = {**late_first, "runId": "e-2", "resume": resolved}
        assert _refusal(await _post(client, two, too_late)) == (409, "interrupt_expired")
        cancelled = [{"interruptId": late["id"], "status": "cancelled"}]
        moved = await _post(client, two, {**too_late, "resume": cancelled})
        assert moved.status_code == 200, moved.text
        assert _said(moved.text) == flow.cancelled


LATER = {"id": "u-2", "role": "user", "content": "Never mind, what time is it?"}


async def typed_instead_of_answering(url: str, ts_oracle: Any, tools: Sequence[Any] = ()) -> str:
    """Under ``interrupts="cancel"``: the TS client's run asks, the next one sends ``LATER``.

    The second run is admitted with the open interrupt answered ``cancelled`` for
    it; returns what that run said.
    """
    first = {"url": url, "threadId": "t-c", "runId": "c-1", "initialMessages": [USER]}
    (asked,) = await anyio.to_thread.run_sync(ts_oracle, [{**first, "tools": list(tools)}])
    assert asked["outcome"] == "completed", (asked["error"], asked["events"])
    finished = [e for e in asked["events"] if e["type"] == "RUN_FINISHED"][-1]
    assert finished["outcome"]["type"] == "interrupt"
    body = {"threadId": "t-c", "runId": "c-2", "messages": [*asked["messages"], LATER]}
    async with httpx.AsyncClient(timeout=60) as client:
        moved = await _post(client, url, {**body, "tools": list(tools)})
    assert moved.status_code == 200, moved.text
    return _said(moved.text)


@dataclass(frozen=True)
class Answered:
    """An interrupt asked through one server and answered through another."""

    interrupt_id: str
    answer: dict[str, Any]
    """The answering request's body."""
    events: list[dict[str, Any]]
    """The answering run's events (none when it was refused)."""
    status: tuple[int, str] | None = None
    """A refused answer's status and error code."""
    message: str = ""
    """A refused answer's message."""


async def answered_elsewhere(
    one: str,
    two: str,
    tools: Sequence[Any] = (),
    *,
    payload: Any = None,
    admitted: bool = True,
) -> Answered:
    """Ask through ``one``, answer through ``two`` (``{"approved": true}`` unless ``payload``).

    The answer carries the history a client holds (the user's turn and the
    assistant's tool calls), as the TS client would send it. ``admitted``:
    the thread check admits it (else its refusal is returned).
    """
    async with httpx.AsyncClient(timeout=60) as client:
        body = {"threadId": "t-e", "runId": "s-1", "messages": [USER], "tools": list(tools)}
        asked = await _post(client, one, body)
        calls = [e for e in _events(asked.text) if e["type"] == "TOOL_CALL_START"]
        said = {
            "id": "a-1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": call["toolCallId"],
                    "type": "function",
                    "function": {"name": call["toolCallName"], "arguments": '{"amount": 5}'},
                }
                for call in calls
            ],
        }
        [interrupt] = _finished(asked.text)["outcome"]["interrupts"]
        given = {"approved": True} if payload is None else payload
        approve = {"interruptId": interrupt["id"], "status": "resolved", "payload": given}
        answer = {**body, "runId": "s-2", "messages": [USER, said], "resume": [approve]}
        answered = await _post(client, two, answer)
    if not admitted:
        error = answered.json()
        return Answered(interrupt["id"], answer, [], _refusal(answered), error["message"])
    assert answered.status_code == 200, answered.text
    return Answered(interrupt["id"], answer, _events(answered.text))


async def refusal(url: str, body: dict[str, Any]) -> tuple[int, str]:
    """The status and error code ``url`` refuses ``body`` with."""
    async with httpx.AsyncClient(timeout=60) as client:
        return _refusal(await _post(client, url, body))
