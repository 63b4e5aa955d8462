"""A Microsoft Agent Framework tool approval end to end, on SQLite and Redis, two processes.

MAF's tool declared ``approval_mode="always_require"`` (tests/integrations/
_maf_approvals_app.py, in the framework's own venv) pauses the run with a
canonical interrupt outcome: id ``af-call-…``, ``toolCallId`` the model's call,
a ``responseSchema`` taking ``approved`` or its legacy alias ``accepted``. The
official TypeScript client runs it, resumes it, and the scripted chat client
observes the decision (the tool's result, or MAF's rejection).

agent-framework-ag-ui 1.7.0 keeps its approval state in the process
(``AgentFrameworkAgent`` builds its own ``InMemoryAGUIApprovalStateStore``; no
option replaces it), so an approval is answered by the process that asked: a
second process sharing the store refuses, by the thread's log alone, what the
contract refuses (new input while pending, a wrong id, a second answer, an
expired interrupt), and an answer that reaches it ends in MAF's own
``RUN_ERROR`` ``APPROVAL_RESUME_NOT_FOUND`` without running the tool.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._framework_venv import framework_python, framework_server
from tests._store_backends import redis_url, store_url_for
from tests.integrations._maf_pins import EXTRAS, NO_DEPS, REQUIREMENTS

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

APP = "tests.integrations._maf_approvals_app"
USER = {"id": "u-1", "role": "user", "content": "Book me a flight to Lisbon."}
REJECTED = "Error: Tool call invocation was rejected by user."
"""What MAF gives the model for a denied call, instead of the tool's result."""


@pytest.fixture(scope="module")
def maf_python() -> Path:
    return framework_python("agent-framework", REQUIREMENTS, NO_DEPS, EXTRAS)


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


@contextlib.contextmanager
def two_processes(
    maf_python: Path, store_url: str, tmp_path: Path, *extra: str
) -> Iterator[tuple[str, str]]:
    """Two MAF servers on one store: their endpoints' URLs (observations in tmp_path)."""
    with (
        framework_server(
            maf_python, APP, "--store", store_url, "--observed", str(tmp_path / "one"), *extra
        ) as one,
        framework_server(
            maf_python, APP, "--store", store_url, "--observed", str(tmp_path / "two"), *extra
        ) as two,
    ):
        yield f"{one.url}/agent", f"{two.url}/agent"


def _observed(tmp_path: Path, process: str) -> list[list[str]]:
    """The function results the scripted client was given, per model call, in ``process``."""
    path = tmp_path / process
    if not path.exists():
        return []
    return [json.loads(line)["results"] for line in path.read_text().splitlines()]


def _post(client: httpx.Client, url: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(url, content=json.dumps(body), headers={"accept": "text/event-stream"})


def _refusal(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


def _interrupt_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    finished = [e for e in events if e["type"] == "RUN_FINISHED"][-1]
    [interrupt] = finished["outcome"]["interrupts"]
    assert isinstance(interrupt, dict)
    return interrupt


@pytest.mark.parametrize(
    ("payload", "result"),
    [
        ({"approved": True}, "booked Lisbon"),
        ({"accepted": True}, "booked Lisbon"),
        ({"approved": False}, REJECTED),
    ],
    ids=["approved", "accepted", "denied"],
)
def test_a_maf_approval_through_the_ts_client(
    maf_python: Path,
    store_url: str,
    tmp_path: Path,
    ts_oracle: Any,
    payload: dict[str, Any],
    result: str,
) -> None:
    with two_processes(maf_python, store_url, tmp_path) as (one, two):
        (asked,) = ts_oracle(
            [{"url": one, "threadId": "t-1", "runId": "r-1", "initialMessages": [USER]}]
        )
        assert asked["outcome"] == "completed", asked["error"]
        interrupt = _interrupt_of(asked["events"])
        assert interrupt["id"].startswith("af-call-")
        assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_call", "call-1")
        assert interrupt["responseSchema"]["anyOf"] == [
            {"required": ["approved"]},
            {"required": ["accepted"]},
        ]
        answer = [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]
        history = asked["messages"]
        with httpx.Client(timeout=60) as client:
            # The other process refuses from the shared log, before MAF is called.
            typed = {"id": "u-2", "role": "user", "content": "Never mind."}
            body = {"threadId": "t-1", "runId": "r-x", "messages": [*history, typed]}
            assert _refusal(_post(client, two, body)) == (409, "interrupt_pending")
            wrong = {**body, "messages": history, "resume": [{**answer[0], "interruptId": "x"}]}
            assert _refusal(_post(client, two, wrong)) == (422, "unknown_interrupt")
        (resumed,) = ts_oracle(
            [
                {
                    "url": one,
                    "threadId": "t-1",
                    "runId": "r-2",
                    "initialMessages": history,
                    "resume": answer,
                }
            ]
        )
        assert resumed["outcome"] == "completed", resumed["error"]
        said = [m for m in resumed["messages"] if m["role"] == "assistant"][-1]["content"]
        with httpx.Client(timeout=60) as client:
            again = {"threadId": "t-1", "runId": "r-3", "messages": history, "resume": answer}
            refused = _post(client, two, again)
            assert _refusal(refused) == (409, "interrupt_answered")
            assert "'r-2'" in refused.json()["message"]
            for run_id in ("r-x", "r-3"):  # nothing was written for the refused requests
                assert client.get(f"{two}/runs/{run_id}").status_code == 404
    # The chat client saw the decision: the tool's result, or MAF's rejection in its place.
    assert _observed(tmp_path, "one") == [[], [result]]
    assert said == f"Result: {result}"
    assert _observed(tmp_path, "two") == []


def test_an_expired_maf_approval_is_refused_and_cancelling_moves_on(
    maf_python: Path, store_url: str, tmp_path: Path
) -> None:
    with (
        two_processes(maf_python, store_url, tmp_path, "--expired") as (one, two),
        httpx.Client(timeout=60) as client,
    ):
        first = {"threadId": "t-1", "runId": "r-1", "messages": [USER]}
        asked = _post(client, one, first)
        assert asked.status_code == 200, asked.text
        interrupt = _interrupt_of(_events(asked))
        assert interrupt["expiresAt"] == "2020-01-01T00:00:00Z"
        late = {
            **first,
            "runId": "r-2",
            "resume": [
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": True},
                }
            ],
        }
        assert _refusal(_post(client, two, late)) == (409, "interrupt_expired")
        cancelled = [{"interruptId": interrupt["id"], "status": "cancelled"}]
        moved = _post(client, one, {**late, "resume": cancelled})
        assert moved.status_code == 200, moved.text
        # MAF ends a cancelled approval's run at once: the tool and the model are not called.
        assert [e["type"] for e in _events(moved)] == ["RUN_STARTED", "RUN_FINISHED"]
        # Nothing is pending any more: new input is a new run (which asks again).
        typed = {"id": "u-2", "role": "user", "content": "Book Porto then."}
        again = _post(client, two, {"threadId": "t-1", "runId": "r-3", "messages": [USER, typed]})
        assert again.status_code == 200, again.text
        assert _interrupt_of(_events(again))["toolCallId"] == "call-1"
    assert _observed(tmp_path, "one") == [[]]


def test_an_answer_reaching_the_other_process_does_not_run_the_tool(
    maf_python: Path, store_url: str, tmp_path: Path
) -> None:
    with (
        two_processes(maf_python, store_url, tmp_path) as (one, two),
        httpx.Client(timeout=60) as client,
    ):
        first = {"threadId": "t-1", "runId": "r-1", "messages": [USER]}
        interrupt = _interrupt_of(_events(_post(client, one, first)))
        answer = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"approved": True},
        }
        elsewhere = _events(_post(client, two, {**first, "runId": "r-2", "resume": [answer]}))
        # The run was admitted with the answer: the thread holds it answered, by that run.
        late = _post(client, one, {**first, "runId": "r-3", "resume": [answer]})
        assert _refusal(late) == (409, "interrupt_answered")
        assert "'r-2'" in late.json()["message"]
    assert elsewhere[-1]["type"] == "RUN_ERROR"
    assert elsewhere[-1]["code"] == "APPROVAL_RESUME_NOT_FOUND"
    assert _observed(tmp_path, "two") == []  # MAF in process two never called the model
    assert _observed(tmp_path, "one") == [[]]  # and process one only asked
