"""Thread history keeps the user's own words: each run's new input messages, recorded once.

Through real servers (the agent endpoint, and a gateway before an endpoint
that does not echo its input), on every store backend: a run POSTed with a
user message comes back from ``GET threads/{threadId}`` starting with that
message (issue 27's "A weekend in Porto"), later runs record only the
messages the thread did not hold, the history's fold equals what the UI
showed, and the reference TypeScript client folds the same thread the same
way. Pages (``?before=&limit=``) split the history by runs, newest first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, CustomEvent, EventType, RunStartedEvent
from starlette.applications import Starlette

from agui_pipes import fold
from agui_pipes._cli import main
from agui_pipes._consumer.history import thread_history
from agui_pipes.codecs import SSEDecoder
from agui_pipes.driver import RunContext
from agui_pipes.server import build_app
from agui_pipes.store import MemoryEventLog
from tests._servers import EVENT, post_run, serve
from tests._store_backends import BACKENDS, redis_url, store_url_for

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

THREAD = "thread-1"
PORTO = "A weekend in Porto"


async def replier(ctx: RunContext[Any]) -> None:
    """Answers the last user message by quoting it."""
    users = [m for m in ctx.messages if m.role == "user"]
    ctx.say(f"About {users[-1].content!s}: yes." if users else "Hello.")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


@pytest.fixture(params=["endpoint", "gateway"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextmanager
def _server(kind: str, store: Any, **options: Any) -> Iterator[str]:
    """The base URL of an endpoint (or of a gateway before a non-echoing endpoint)."""
    if kind == "endpoint":
        app = build_app(agent=replier, path="/agent", keepalive=None, store=store, **options)
        with serve(app) as running:
            yield running.url + "/agent"
        return
    upstream: Starlette = build_app(agent=replier, path="/agent", keepalive=None)
    with serve(upstream) as up:
        gateway = build_app(
            upstream=up.url + "/agent", path="/agent", keepalive=None, store=store, **options
        )
        with serve(gateway) as running:
            yield running.url + "/agent"


def _user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def _body(run_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"threadId": THREAD, "runId": run_id, "messages": messages}


async def _run(
    client: httpx.AsyncClient, url: str, run_id: str, messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """POST the run; the messages the UI shows after it (what it sent, then the events)."""
    response, events = await post_run(client, url, _body(run_id, messages))
    assert response.status_code == 200, response.text
    assert events[-1].type is EventType.RUN_FINISHED, events[-1]
    return fold(events, messages=messages).messages


async def _get(client: httpx.AsyncClient, url: str) -> tuple[int, list[BaseEvent], bytes]:
    response = await client.get(url)
    if response.status_code != 200:
        return response.status_code, [], response.content
    decoder = SSEDecoder()
    events = [EVENT.validate_json(p) for p in decoder.feed(response.content)]
    return 200, events, response.content


async def _history(client: httpx.AsyncClient, url: str, query: str = "") -> list[dict[str, Any]]:
    status, events, raw = await _get(client, f"{url}/threads/{THREAD}{query}")
    assert status == 200, raw
    return fold(events).messages


def _shown(messages: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [(m["id"], m["role"], m.get("content")) for m in messages]


async def test_the_users_words_come_back_from_the_thread_history(kind: str, store_url: str) -> None:
    with _server(kind, store_url) as url:
        async with httpx.AsyncClient(timeout=15) as client:
            porto = _user("u1", PORTO)
            shown = await _run(client, url, "run-1", [porto])
            history = await _history(client, url)
            # Issue 27: it started at the assistant's reply.
            assert history[0] == porto
            assert history == shown
            # The next run repeats the conversation and adds a turn: only the new turn
            # is recorded, by the run it was sent with.
            turn = [*history, _user("u2", "And Lisbon?")]
            shown = await _run(client, url, "run-2", turn)
            history = await _history(client, url)
            assert history == shown
            assert _shown(history)[::2] == [("u1", "user", PORTO), ("u2", "user", "And Lisbon?")]
            status, replay, _ = await _get(client, f"{url}/runs/run-2")
            assert status == 200
            started = replay[0]
            assert isinstance(started, RunStartedEvent) and started.input is not None
            assert [m.id for m in started.input.messages] == ["u2"]
            # A run that adds no turn (the client sends the history back) records none.
            shown = await _run(client, url, "run-3", history)
            status, replay, _ = await _get(client, f"{url}/runs/run-3")
            assert status == 200
            assert isinstance(replay[0], RunStartedEvent) and replay[0].input is None
            assert await _history(client, url) == shown


async def test_an_echoing_agent_keeps_its_echo_and_nothing_is_doubled(tmp_path: Path) -> None:
    with _server("endpoint", f"sqlite:///{tmp_path / 'runs.db'}", echo_input=True) as url:
        async with httpx.AsyncClient(timeout=15) as client:
            first = await _run(client, url, "run-1", [_user("u1", PORTO)])
            second = await _run(client, url, "run-2", [*first, _user("u2", "Two nights")])
            history = await _history(client, url)
    assert history == second
    assert [m["id"] for m in history].count("u1") == 1


async def test_the_ts_client_folds_the_thread_as_the_ui_showed_it(
    kind: str, ts_oracle: Any, tmp_path: Path
) -> None:
    import anyio

    with _server(kind, f"sqlite:///{tmp_path / 'runs.db'}") as url:
        async with httpx.AsyncClient(timeout=15) as client:
            shown = await _run(client, url, "run-1", [_user("u1", PORTO)])
            tool_turn = [*shown, _user("u2", "Where to eat?")]
            shown = await _run(client, url, "run-2", tool_turn)
            shown = await _run(client, url, "run-3", [*shown, _user("u3", "Thanks")])
            runs = []
            for run_id in ("run-1", "run-2", "run-3"):
                _, events, _ = await _get(client, f"{url}/runs/{run_id}")
                runs.append(events)
            history = await _history(client, url)
        cases = [
            {"url": f"{url}/threads/{THREAD}", "method": "GET", "threadId": THREAD},
            {"stream": [e for run in runs for e in run], "threadId": THREAD},
        ]
        results = await anyio.to_thread.run_sync(ts_oracle, cases)
    ours = fold(thread_history(THREAD, runs)).messages
    assert history == ours == shown
    for case, result in zip(cases, results, strict=True):
        assert result["outcome"] == "completed", (case, result["error"])
        assert result["messages"] == shown, case


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_pages_split_the_history_by_runs_newest_first(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with _server("endpoint", store_url_for(backend, request, tmp_path)) as url:
        async with httpx.AsyncClient(timeout=15) as client:
            shown: list[dict[str, Any]] = []
            for n in range(1, 6):
                shown = await _run(client, url, f"run-{n}", [*shown, _user(f"u{n}", f"q{n}")])
            whole = await _history(client, url)
            assert whole == shown
            pages: list[list[dict[str, Any]]] = []
            query = "?limit=2"
            nexts = []
            while True:
                status, events, raw = await _get(client, f"{url}/threads/{THREAD}{query}")
                assert status == 200, raw
                pages.append(fold(events).messages)
                marker = [e for e in events if isinstance(e, CustomEvent)]
                if not marker:
                    break
                assert marker[0].name == "agui_pipes.history_page"
                nexts.append(marker[0].value["next"])
                query = f"?limit=2&before={nexts[-1]}"
            assert nexts == ["run-4", "run-2"]
            # Each run adds its user turn and its reply: pages of two runs, newest first.
            assert pages == [whole[6:10], whole[2:6], whole[0:2]]
            assert [m for page in reversed(pages) for m in page] == whole
            assert [m["content"] for m in pages[0] if m["role"] == "user"] == ["q4", "q5"]
            assert [m["content"] for m in pages[2] if m["role"] == "user"] == ["q1"]
            for query, why in (
                ("?limit=0", "limit is from 1 to 1000"),
                ("?limit=1001", "limit is from 1 to 1000"),
                ("?limit=x", "whole number"),
                ("?before=nope", "not an ended run"),
            ):
                response = await client.get(f"{url}/threads/{THREAD}{query}")
                assert response.status_code == 400, query
                assert response.json()["error"] == "bad_query"
                assert why in response.json()["message"], query


class _CountingLog(MemoryEventLog):
    """An event log that counts the runs whose events are read whole.

    The interrupt check's one-entry reads of a run's terminal event are not
    counted: they are not a fold of the run.
    """

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def read(
        self, run_id: str, after: int = 0, limit: int | None = None, *, scope: str = "default"
    ) -> list[tuple[int, bytes]]:
        if limit != 1:
            self.reads.append(run_id)
        return await super().read(run_id, after, limit, scope=scope)


async def test_the_history_folds_each_run_once() -> None:
    store = _CountingLog()
    async with store:
        with _server("endpoint", store) as url:
            async with httpx.AsyncClient(timeout=15) as client:
                shown = await _run(client, url, "run-1", [_user("u1", PORTO)])
                shown = await _run(client, url, "run-2", [*shown, _user("u2", "more")])
                assert store.reads == ["run-1"]  # folded to tell run-2's new messages
                store.reads.clear()
                assert await _history(client, url) == shown
                assert await _history(client, url) == shown
                assert store.reads == ["run-2"]  # the run that ended since, once


def test_the_history_command_shows_the_users_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import anyio

    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def converse() -> None:
        with _server("endpoint", url) as base:
            async with httpx.AsyncClient(timeout=15) as client:
                await _run(client, base, "run-1", [_user("u1", PORTO)])

    anyio.run(converse)
    assert main(["history", "--store", url, THREAD, "--format", "transcript"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"user: {PORTO}", f"assistant: About {PORTO}: yes."]
    assert main(["history", "--store", url, THREAD]) == 0
    snapshot = json.loads(capsys.readouterr().out.splitlines()[1])
    assert snapshot["messages"][0] == _user("u1", PORTO)
