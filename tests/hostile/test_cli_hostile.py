"""Hostile and degenerate input to the CLI, in a child process as a user runs it.

Chain files that would recurse PyYAML's composer or take minutes to load,
inputs with nothing in them, byte order marks, rejected streams whose stderr
must be exactly the documented lines, positions in messages, and the
gateway's timeout and malformed-event messages over loopback.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ._harness import assert_clean, run_cli, serve_bytes, serve_gateway

BOM = b"\xef\xbb\xbf"
START = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISH = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
TEXT_START = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
TEXT_CONTENT = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"}
TEXT_END = {"type": "TEXT_MESSAGE_END", "messageId": "m"}
GOOD = [START, TEXT_START, TEXT_CONTENT, TEXT_END, FINISH]
MALFORMED = {**TEXT_CONTENT, "delta": 5}  # a described field of the wrong type
PASS_CHAIN = "version: 1\ntransformers: []\n"
VERIFY_CHAIN = "version: 1\ntransformers:\n  - verify\n"


def ndjson(events: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def array(events: list[dict[str, Any]]) -> bytes:
    return json.dumps(events, indent=1).encode()


def corpus(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"stream": events}).encode()


def parsed(output: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines()]


ENCODINGS = {"ndjson": ndjson, "sse": sse, "json": array, "corpus": corpus}


@pytest.fixture
def chains(tmp_path: Path) -> dict[str, str]:
    paths = {}
    for name, text in (("pass", PASS_CHAIN), ("verify", VERIFY_CHAIN)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        paths[name] = str(path)
    return paths


# -- chain files: caps before PyYAML recurses or crawls -----------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("flow", "transformers: " + "[" * 50_000 + "]" * 50_000 + "\n"),
        ("block", "transformers:\n" + "".join(" " * i + "-\n" for i in range(1, 1200))),
        ("mapping", "".join(" " * i + f"k{i}:\n" for i in range(1200))),
    ],
)
def test_deeply_nested_chain_file_is_a_config_error(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / f"deep-{name}.yaml"
    path.write_text(text)
    outcome = run_cli("check", str(path))
    assert_clean(outcome, exit_code=2, message="MAX_CHAIN_DEPTH")
    assert f"{path}:" in outcome.stderr  # file:line:column
    assert "RecursionError" not in outcome.stderr


def test_a_chain_file_of_half_a_million_stages_is_refused_quickly(tmp_path: Path) -> None:
    # As many stages as fit under the byte cap: refused at stage 1,001, not parsed
    # and built for minutes.
    path = tmp_path / "stages.yaml"
    path.write_text("transformers: [" + ",".join(["x"] * 500_000) + "]\n")
    assert path.stat().st_size < 1024 * 1024
    outcome = run_cli("check", str(path), timeout=60)
    assert_clean(outcome, exit_code=2, message="MAX_CHAIN_STAGES")
    assert "at most 1,000 stages" in outcome.stderr
    assert f"{path}:1:" in outcome.stderr


def test_a_chain_file_over_the_stage_cap_in_block_style(tmp_path: Path) -> None:
    path = tmp_path / "stages.yaml"
    path.write_text("version: 1\ntransformers:\n" + "  - expand_chunks\n" * 1001)
    outcome = run_cli("check", str(path))
    assert_clean(outcome, exit_code=2, message="MAX_CHAIN_STAGES")
    assert f"{path}:1003:" in outcome.stderr  # the 1,001st entry


def test_a_chain_file_with_too_many_values_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    deny = ",".join(["a"] * 200_000)
    path.write_text(f"transformers:\n  - filter_tool_calls:\n      deny: [{deny}]\n")
    outcome = run_cli("check", str(path), timeout=60)
    assert_clean(outcome, exit_code=2, message="MAX_CHAIN_NODES")


@pytest.mark.parametrize("command", ["check", "run"])
def test_an_oversize_chain_file_is_refused_naming_the_cap(tmp_path: Path, command: str) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(PASS_CHAIN + "# " + "x" * (1024 * 1024) + "\n")
    args = [str(path)] if command == "check" else ["--config", str(path), "-"]
    outcome = run_cli(command, *args, stdin=ndjson(GOOD))
    assert_clean(outcome, exit_code=2, message="MAX_CHAIN_BYTES")
    assert "1,048,576-byte limit" in outcome.stderr


def test_an_endless_chain_file_is_refused_without_reading_it_all() -> None:
    outcome = run_cli("check", "/dev/zero", memory_mib=600)
    assert_clean(outcome, exit_code=2, message="MAX_CHAIN_BYTES")


# -- a byte order mark is accepted in every format -----------------------------------


@pytest.mark.parametrize("fmt", sorted(ENCODINGS))
@pytest.mark.parametrize("where", ["file", "stdin"])
def test_a_bom_is_accepted_in_every_format(
    tmp_path: Path, chains: dict[str, str], fmt: str, where: str
) -> None:
    data = BOM + ENCODINGS[fmt](GOOD)
    stdin: bytes | None = None
    if where == "file":
        path = tmp_path / f"bom.{'json' if fmt == 'corpus' else fmt}"
        path.write_bytes(data)
        args = [str(path)]
    else:  # from a pipe, only the content tells: a corpus case is named
        args = ["--input-format", "corpus", "-"] if fmt == "corpus" else ["-"]
        stdin = data
    verified = run_cli("verify", *args, stdin=stdin)
    assert_clean(verified, exit_code=0)
    assert verified.stdout.startswith(b"accepted: 5 events, 1 run, outcome success")
    ran = run_cli("run", "--config", chains["verify"], *args, stdin=stdin)
    assert_clean(ran, exit_code=0)
    assert parsed(ran.stdout) == GOOD


# -- nothing is never a valid stream ---------------------------------------------


EMPTY_CASES = {
    "empty file": (b"", []),
    "comments-only SSE": (b": keep-alive\n\n: another\n\n", []),
    "blank lines": (b"\n\n\r\n", []),
    "empty JSON array": (b"[]", []),
    "BOM only": (BOM, []),
    "NDJSON read as SSE": (ndjson(GOOD), ["--input-format", "sse"]),
}


@pytest.mark.parametrize("case", sorted(EMPTY_CASES))
def test_verify_refuses_an_input_with_no_events(case: str) -> None:
    data, extra = EMPTY_CASES[case]
    outcome = run_cli("verify", *extra, "-", stdin=data)
    assert_clean(outcome, exit_code=2, message="no events")
    assert b"accepted" not in outcome.stdout
    if extra:
        assert "--input-format" in outcome.stderr  # the hint names the likely cause


@pytest.mark.parametrize("case", sorted(EMPTY_CASES))
def test_run_refuses_an_input_with_no_events(chains: dict[str, str], case: str) -> None:
    data, extra = EMPTY_CASES[case]
    outcome = run_cli("run", "--config", chains["pass"], *extra, "-", stdin=data)
    assert_clean(outcome, exit_code=2, message="no events")
    assert outcome.stdout == b""


def test_an_input_of_only_unknown_event_types_has_no_events(chains: dict[str, str]) -> None:
    data = ndjson([{"type": "NOT_A_TYPE"}, {"type": "SOMETHING_ELSE"}])
    for args in (["verify", "-"], ["run", "--config", chains["pass"], "-"]):
        outcome = run_cli(*args, stdin=data)
        assert_clean(outcome, exit_code=2, message="no events")
        assert "unknown event types" in outcome.stderr


# -- a rejection is one documented line, no asyncio noise ----------------------------


@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_a_rejected_verify_prints_exactly_the_rejection(tmp_path: Path, quiet: list[str]) -> None:
    path = tmp_path / "bad.ndjson"
    path.write_bytes(ndjson([START, TEXT_START, MALFORMED, TEXT_END, FINISH]))
    outcome = run_cli("verify", *quiet, str(path))
    assert_clean(outcome, exit_code=1)
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("rejected: TEXT_MESSAGE_CONTENT has a malformed value")
    assert "asynchronous generator" not in outcome.stderr
    assert outcome.stdout == b""


def test_a_rejected_run_prints_exactly_the_rejection(
    tmp_path: Path, chains: dict[str, str]
) -> None:
    path = tmp_path / "bad.ndjson"
    path.write_bytes(ndjson([START, TEXT_START, MALFORMED]))
    outcome = run_cli("run", "--config", chains["verify"], str(path))
    assert_clean(outcome, exit_code=1)
    assert len(outcome.stderr.splitlines()) == 1, outcome.stderr
    assert parsed(outcome.stdout) == [START, TEXT_START]  # the events before it


# -- positions: the event's own, counted from 0; lines from 1 -----------------------


def test_a_truncated_stream_is_reported_after_its_own_count(
    tmp_path: Path, chains: dict[str, str]
) -> None:
    path = tmp_path / "cut.ndjson"
    path.write_bytes(ndjson([START, TEXT_START, TEXT_CONTENT]))
    verified = run_cli("verify", str(path))
    assert_clean(verified, exit_code=1, message="[end of stream after 3 events]")
    ran = run_cli("run", "--config", chains["verify"], str(path))
    assert_clean(ran, exit_code=1, message="end of stream after 3 events]")


@pytest.mark.parametrize(("fmt", "line"), [("ndjson", 3), ("sse", 5), ("json", 12)])
def test_a_malformed_event_mid_stream_is_reported_at_its_position(
    tmp_path: Path, chains: dict[str, str], fmt: str, line: int
) -> None:
    path = tmp_path / f"bad.{fmt}"
    path.write_bytes(ENCODINGS[fmt]([START, TEXT_START, MALFORMED, TEXT_END, FINISH]))
    for args in (["verify"], ["run", "--config", chains["verify"]]):
        outcome = run_cli(*args, str(path))
        assert_clean(outcome, exit_code=1, message=f"[event #2] ({path}:{line})")
        assert "end of stream" not in outcome.stderr


@pytest.mark.parametrize("fmt", ["ndjson", "json"])
def test_run_names_wire_positions_when_unknown_events_were_dropped(
    tmp_path: Path, chains: dict[str, str], fmt: str
) -> None:
    # ndjson runs through the relay, json through chain.apply: the same position.
    stray = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "zz", "delta": "x"}
    path = tmp_path / f"unknown.{fmt}"
    path.write_bytes(ENCODINGS[fmt]([START, {"type": "THINKING_START"}, stray]))
    outcome = run_cli("run", "--config", chains["verify"], str(path))
    line = 3 if fmt == "ndjson" else 10
    where = f"event #2 (TEXT_MESSAGE_CONTENT)] ({path}:{line})"
    assert_clean(outcome, exit_code=1, message=where)


# -- color and log level -------------------------------------------------------------


def test_no_color_wins_over_color_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    outcome = run_cli("demo", "--color", "always", "--pace", "0")
    assert_clean(outcome, exit_code=0)
    assert b"\x1b[" not in outcome.stdout
    monkeypatch.setenv("NO_COLOR", "")  # empty: not set, per no-color.org
    colored = run_cli("demo", "--color", "always", "--pace", "0")
    assert b"\x1b[" in colored.stdout


# -- the gateway over loopback -------------------------------------------------------


@contextmanager
def silent_upstream(head: bytes = b"") -> Iterator[str]:
    """An upstream that accepts each connection, reads the request, sends ``head``, then waits."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.recv(65536)
            if head:
                conn.sendall(head)
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def run_through(url: str) -> list[dict[str, Any]]:
    body = {
        "threadId": "t",
        "runId": "r",
        "messages": [],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    response = httpx.post(url, json=body, timeout=30)
    assert response.status_code == 200
    return [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


def test_gateway_upstream_silent_before_answering_is_not_a_connect_timeout() -> None:
    with silent_upstream() as upstream, serve_gateway(upstream, "--timeout", "0.5") as gateway:
        events = run_through(gateway.url)
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "UPSTREAM_TIMEOUT"
    message = events[-1]["message"]
    assert "connecting" not in message
    assert "accepted the connection but its response did not begin within 0.5s" in message


def test_gateway_upstream_silent_mid_stream_says_how_long_and_after_what() -> None:
    frame = b"data: " + json.dumps(START).encode() + b"\n\n"
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(frame), frame)
    )
    with silent_upstream(head) as upstream, serve_gateway(upstream, "--timeout", "0.5") as gw:
        events = run_through(gw.url)
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    message = events[-1]["message"]
    assert events[-1]["code"] == "UPSTREAM_TIMEOUT"
    assert "sent nothing for 0.5s mid-stream, after 1 event" in message
    assert "waiting for the next event" in message


def test_gateway_malformed_event_is_named_at_its_position() -> None:
    body = sse([START, TEXT_START, MALFORMED, TEXT_END, FINISH])
    with serve_bytes(body) as upstream, serve_gateway(upstream) as gateway:
        events = run_through(gateway.url)
    assert events[-1]["code"] == "UPSTREAM_MALFORMED"
    message = events[-1]["message"]
    assert "invalid event #2" in message
    assert "end of stream" not in message
    assert message.count("#2") == 1


def test_serve_accepts_the_log_level_in_any_case() -> None:
    with serve_bytes(sse(GOOD)) as upstream, serve_gateway(upstream, "--log-level", "INFO") as gw:
        events = run_through(gw.url)
    assert [e["type"] for e in events][-1] == "RUN_FINISHED"
