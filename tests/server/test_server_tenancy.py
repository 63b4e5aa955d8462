"""Two users on one server: every cross-user read, stop, resume and injection refused.

Real servers over loopback HTTP (uvicorn), real stores (memory, SQLite, a real
Redis), and the built-in ``TokenFile`` authenticator with two users' tokens.
For the agent endpoint and the gateway (whose durable routes are served from
the store, so must authorize like its POST): another user's run or thread is
answered exactly as one that does not exist; a run id another user took names
a new run; a thread is its creator's; each user's own runs, resumes and
history work; no credentials is 401 with a challenge; ids that no store
should see are 422 ``bad_id``; a broken hook is 500 ``authorization_failed``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import EventType, TextMessageContentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, Gateway, build_app
from agui_pipes.server.auth import Forbidden, Principal, TokenFile, current_principal
from tests._durable_http import HEADERS, Frames, get_frames, read_frames, seqs
from tests._durable_http import events as frame_events
from tests._servers import run_input, serve
from tests._store_backends import BACKENDS, redis_url, store_url_for

pytestmark = pytest.mark.anyio

__all__ = ["redis_url"]  # the session fixture, used through store_url_for

ALICE = {"authorization": "Bearer alice-token-0123456789"}
BOB = {"authorization": "Bearer bob-token-9876543210"}


class Greeter:
    """Says whose run it is (``ctx.principal``), then waits for its gate, then finishes."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.ran: list[tuple[str, str]] = []

    def gate(self, run_id: str) -> threading.Event:
        return self.gates.setdefault(run_id, threading.Event())

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        self.ran.append((ctx.principal.scope, ctx.run_id))
        gate = self.gate(ctx.run_id)
        with ctx.message() as message:
            message.delta(f"hello {ctx.principal.scope}")
            while not gate.is_set():  # noqa: ASYNC110 - set from the test's thread
                await anyio.sleep(0.005)
            message.delta(" bye")
        return RunOutcome.success()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url_for(str(request.param), request, tmp_path)


@pytest.fixture
def tokens(tmp_path: Path) -> TokenFile:
    path = tmp_path / "tokens"
    path.write_text(
        "# two users\nalice-token-0123456789 alice\nbob-token-9876543210 bob\n", encoding="utf-8"
    )
    return TokenFile(path)


def _texts(frames: Frames) -> str:
    return "".join(
        event.delta for event in frame_events(frames) if isinstance(event, TextMessageContentEvent)
    )


async def _post(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    cut: int | None = None,
) -> tuple[int, Frames, bytes]:
    content = json.dumps(body)
    async with client.stream(
        "POST", path, content=content, headers={**HEADERS, **headers}
    ) as response:
        if response.status_code != 200:
            return response.status_code, [], await response.aread()
        return 200, await read_frames(response, cut), b""


async def _get(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], last_id: str | None = None
) -> tuple[int, Frames, bytes]:
    client.headers.clear()
    client.headers.update(headers)
    try:
        return await get_frames(client, url, last_id)
    finally:
        client.headers.clear()


async def _json(
    client: httpx.AsyncClient, method: str, url: str, headers: dict[str, str]
) -> tuple[int, Any, httpx.Headers]:
    response = await client.request(method, url, headers=headers)
    return response.status_code, response.json(), response.headers


async def _attack_and_check(
    client: httpx.AsyncClient,
    base: str,
    agent_gate: Callable[[str], threading.Event],
    post: str | None = None,
) -> None:
    """What both servers must do for two users (``base``: the routes' folder and, unless
    ``post`` is given, the POST path)."""
    post = base if post is None else post
    # Alice starts a run and leaves after its first three frames: it goes on, detached.
    status, first, _ = await _post(client, post, run_input("r1", threadId="t-alice"), ALICE, cut=3)
    assert status == 200 and "hello alice" in _texts(first)

    # -- no credentials: 401 with a challenge, on every route ----------------------------
    for method, url in [
        ("POST", post),
        ("GET", f"{base}/runs/r1"),
        ("POST", f"{base}/runs/r1/stop"),
        ("GET", f"{base}/threads/t-alice"),
        ("GET", f"{base}/threads"),
    ]:
        code, body, headers = await _json(client, method, url, {})
        assert code == 401, (method, url)
        assert body["error"] == "unauthorized"
        assert headers["www-authenticate"].startswith('Bearer realm="agui-pipes"')
    code, body, headers = await _json(
        client, "GET", f"{base}/runs/r1", {"authorization": "Bearer nobody"}
    )
    assert code == 401 and 'error="invalid_token"' in headers["www-authenticate"]

    # -- Bob cannot read, resume, stop or list Alice's run or thread -----------------------
    never_run = await _json(client, "GET", f"{base}/runs/zz-none", BOB)
    never_thread = await _json(client, "GET", f"{base}/threads/zz-none", BOB)
    for url, never in [(f"{base}/runs/r1", never_run), (f"{base}/threads/t-alice", never_thread)]:
        code, body, _ = await _json(client, "GET", url, BOB)
        assert code == never[0] == 404
        word = "r1" if "runs" in url else "t-alice"
        assert body == json.loads(json.dumps(never[1]).replace("zz-none", word))
    code, _, _ = await _json(
        client, "GET", f"{base}/runs/r1", {**BOB, "last-event-id": first[1][0] or ""}
    )
    assert code == 404
    code, body, _ = await _json(client, "POST", f"{base}/runs/r1/stop", BOB)
    assert code == 404 and body["error"] == "not_found"
    code, page, _ = await _json(client, "GET", f"{base}/threads", BOB)
    assert code == 200 and page == {"threads": [], "next": None}

    # -- Bob cannot inject a run into Alice's thread ---------------------------------------
    status, _, answer = await _post(client, post, run_input("inject", threadId="t-alice"), BOB)
    assert status == 404
    assert json.loads(answer) == json.loads(
        json.dumps(never_thread[1]).replace("zz-none", "t-alice")
    )

    # -- a run id Alice used is a new run of Bob's -----------------------------------------
    agent_gate("r1").set()  # both runs named r1 may finish now
    status, bobs, _ = await _post(client, post, run_input("r1", threadId="t-bob"), BOB)
    assert status == 200 and _texts(bobs) == "hello bob bye"
    assert frame_events(bobs)[-1].type is EventType.RUN_FINISHED

    # -- Alice's own run: resumed from her last id, whole, untouched by Bob ----------------
    status, rest, _ = await _get(client, f"{base}/runs/r1", ALICE, first[-1][0])
    assert status == 200
    assert seqs(first) + seqs(rest) == list(range(1, len(first) + len(rest) + 1))
    assert _texts(first + rest) == "hello alice bye"
    assert frame_events(rest)[-1].type is EventType.RUN_FINISHED
    status, again, _ = await _get(client, f"{base}/runs/r1", BOB)
    assert status == 200 and _texts(again) == "hello bob bye"  # Bob's r1 is his own

    # -- history and listings, each user's own -----------------------------------------------
    status, history, _ = await _get(client, f"{base}/threads/t-alice", ALICE)
    wire = b"".join(data for _, data in history)
    assert status == 200 and b'"content":"hello alice bye"' in wire
    assert b"bob" not in wire
    code, page, _ = await _json(client, "GET", f"{base}/threads", ALICE)
    assert code == 200 and [t["threadId"] for t in page["threads"]] == ["t-alice"]
    code, page, _ = await _json(client, "GET", f"{base}/threads", BOB)
    assert code == 200 and [t["threadId"] for t in page["threads"]] == ["t-bob"]
    code, body, _ = await _json(client, "POST", f"{base}/runs/r1/stop", ALICE)
    assert code == 409 and body["error"] == "run_ended"


async def test_two_users_on_the_agent_endpoint(store_url: str, tokens: TokenFile) -> None:
    agent = Greeter()
    app = build_app(agent=agent, path="/agent", store=store_url, authorize=tokens)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            await _attack_and_check(client, "/agent", agent.gate)
    assert ("bob", "inject") not in agent.ran  # the refused injection never ran the agent
    assert sorted(agent.ran) == [("alice", "r1"), ("bob", "r1")]


async def test_two_users_through_the_gateway(store_url: str, tokens: TokenFile) -> None:
    agent = Greeter()
    seen: list[str | None] = []

    def upstream_auth(request: Request) -> str:
        # The gateway forwards the principal; the upstream runs everyone as it says.
        header = request.headers.get("x-agui-principal")
        seen.append(header)
        return json.loads(header)["scope"] if header else "nobody"

    upstream = build_app(agent=agent, path="/agent", authorize=upstream_auth)
    with serve(upstream) as up:
        gateway = build_app(
            upstream=f"{up.url}/agent",
            path="/chat",
            store=store_url,
            authorize=tokens,
            forward_principal_header="x-agui-principal",
        )
        with serve(gateway) as server:
            async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
                await _attack_and_check(client, "/chat", agent.gate)
    assert sorted(agent.ran) == [("alice", "r1"), ("bob", "r1")]
    assert json.loads(str(seen[0])) == {"scope": "alice", "subject": "token:tokens:2"}


# An endpoint or gateway served as an ASGI app of its own (``uvicorn module:endpoint``)
# or mounted (FastAPI's ``app.mount``) answers its durable routes itself, with the same
# authorization as the routes ``build_app`` lists.


async def test_two_users_on_the_agent_endpoint_served_alone(
    store_url: str, tokens: TokenFile
) -> None:
    agent = Greeter()
    endpoint = AgentEndpoint(agent.run, store=store_url, authorize=tokens)
    with serve(endpoint) as server:  # its own lifespan opens and closes the store
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            await _attack_and_check(client, "", agent.gate, post="/")
    assert ("bob", "inject") not in agent.ran
    assert sorted(agent.ran) == [("alice", "r1"), ("bob", "r1")]


async def test_two_users_on_a_mounted_agent_endpoint(store_url: str, tokens: TokenFile) -> None:
    agent = Greeter()
    endpoint = AgentEndpoint(agent.run, store=store_url, authorize=tokens)
    app = Starlette(routes=[Mount("/agent", app=endpoint)], lifespan=endpoint.lifespan)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            await _attack_and_check(client, "/agent", agent.gate, post="/agent/")
    assert sorted(agent.ran) == [("alice", "r1"), ("bob", "r1")]


async def test_two_users_through_a_gateway_served_alone(store_url: str, tokens: TokenFile) -> None:
    agent = Greeter()

    def upstream_auth(request: Request) -> str:
        header = request.headers.get("x-agui-principal")
        return json.loads(header)["scope"] if header else "nobody"

    upstream = build_app(agent=agent, path="/agent", authorize=upstream_auth)
    with serve(upstream) as up:
        gateway = Gateway(
            f"{up.url}/agent",
            store=store_url,
            authorize=tokens,
            forward_principal_header="x-agui-principal",
        )
        with serve(gateway) as server:
            async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
                await _attack_and_check(client, "", agent.gate, post="/")
    assert sorted(agent.ran) == [("alice", "r1"), ("bob", "r1")]


async def test_ids_no_store_should_see_are_422(tokens: TokenFile) -> None:
    agent = Greeter()
    app = build_app(agent=agent, path="/agent", store="memory:", authorize=tokens)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            for body in [run_input("r" * 257), run_input("ok", threadId="t\x01")]:
                status, _, answer = await _post(client, "/agent", body, ALICE)
                assert status == 422 and json.loads(answer)["error"] == "bad_id"
            code, body, _ = await _json(client, "GET", f"/agent/runs/{'r' * 257}", ALICE)
            assert code == 422 and body["error"] == "bad_id"
            code, body, _ = await _json(client, "GET", "/agent/threads/t%7F", ALICE)
            assert code == 422 and body["error"] == "bad_id"
            status, _, _ = await _post(client, "/agent", run_input("r" * 256), ALICE, cut=1)
            assert status == 200  # 256 characters are fine
            agent.gate("r" * 256).set()
    assert agent.ran == [("alice", "r" * 256)]


async def test_a_forbidden_caller_gets_403_for_actions_and_404_for_reads() -> None:
    def only_reads_refused(request: Request) -> Principal:
        if request.headers.get("x-role") != "member":
            raise Forbidden("members only")
        return Principal("team")

    app = build_app(agent=Greeter(), path="/agent", store="memory:", authorize=only_reads_refused)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            status, _, answer = await _post(client, "/agent", run_input("r"), {})
            assert status == 403 and json.loads(answer)["error"] == "forbidden"
            code, _body, _ = await _json(client, "POST", "/agent/runs/r/stop", {})
            assert code == 403
            refused = await _json(client, "GET", "/agent/runs/r", {})
            missing = await _json(client, "GET", "/agent/runs/r", {"x-role": "member"})
            assert refused[0] == missing[0] == 404 and refused[1] == missing[1]
            refused = await _json(client, "GET", "/agent/threads/t", {})
            missing = await _json(client, "GET", "/agent/threads/t", {"x-role": "member"})
            assert refused[0] == missing[0] == 404 and refused[1] == missing[1]


async def test_a_broken_hook_is_500_logged_once_never_a_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(request: Request) -> str:
        raise KeyError("the session table")

    app = build_app(agent=Greeter(), path="/agent", store="memory:", authorize=broken)
    with caplog.at_level(logging.ERROR, logger="agui_pipes.server"), serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            status, _, answer = await _post(client, "/agent", run_input("r"), {})
            code, body, headers = await _json(client, "GET", "/agent/threads", {})
    assert status == code == 500
    assert json.loads(answer)["error"] == body["error"] == "authorization_failed"
    assert headers["content-type"] == "application/json"
    failures = [r for r in caplog.records if "authorize hook raised KeyError" in r.getMessage()]
    assert len(failures) == 2  # one line per request
    assert all(r.exc_info is not None and r.exc_info[0] is KeyError for r in failures)


async def test_the_chain_factory_sees_the_principal(tokens: TokenFile) -> None:
    built_for: list[str] = []

    def chain() -> Any:
        from agui_pipes import TransformerChain

        built_for.append(current_principal().scope)
        return TransformerChain([])

    agent = Greeter()
    app = build_app(agent=agent, chain=chain, path="/agent", authorize=tokens)
    with serve(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            agent.gate("r").set()
            status, frames, _ = await _post(client, "/agent", run_input("r"), BOB)
    assert status == 200 and _texts(frames) == "hello bob bye"
    assert built_for == ["bob"]
    assert current_principal().scope == "default"  # outside a request


async def test_the_inspector_authorizes_every_request_and_shows_each_user_their_runs(
    tokens: TokenFile,
) -> None:
    from agui_pipes import TransformerChain
    from agui_pipes.inspector import RecentRuns, inspector_app, with_inspector

    runs = RecentRuns()
    recorder = runs.recorder()
    agent = Greeter()
    app = build_app(
        agent=agent,
        path="/agent",
        authorize=tokens,
        chain=lambda: TransformerChain([recorder.fresh()]),
    )
    served = with_inspector(app, inspector_app(runs, authorize=tokens))
    with serve(served) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as client:
            for run_id in ("a", "b"):
                agent.gate(run_id).set()
            assert (await _post(client, "/agent", run_input("a", threadId="ta"), ALICE))[0] == 200
            assert (await _post(client, "/agent", run_input("b", threadId="tb"), BOB))[0] == 200
            for url in ("/inspect/", "/inspect/api/runs", "/inspect/static/app.js"):
                response = await client.get(url)
                assert response.status_code == 401, url
                assert response.headers["www-authenticate"].startswith("Bearer")
            code, listed, _ = await _json(client, "GET", "/inspect/api/runs", ALICE)
            assert code == 200 and [run["label"] for run in listed["runs"]] == ["ta / a"]
            alices = listed["runs"][0]["id"]
            code, listed, _ = await _json(client, "GET", "/inspect/api/runs", BOB)
            assert code == 200 and [run["label"] for run in listed["runs"]] == ["tb / b"]
            bobs = listed["runs"][0]["id"]
            code, body, _ = await _json(client, "GET", f"/inspect/api/runs/{bobs}/summary", ALICE)
            assert code == 404 and f"known runs: {alices} " in body["error"]
            code, _, _ = await _json(client, "GET", f"/inspect/api/runs/{bobs}/events", BOB)
            assert code == 200
            page = await client.get("/inspect/", headers=ALICE)
            assert page.status_code == 200
