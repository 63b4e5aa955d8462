"""`agui-pipes verify`: formats, options, output channels and exit codes."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agui_pipes._cli import main

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

CORPUS = Path(__file__).parents[1] / "conformance" / "streams"

GOOD = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]


def run_cli(
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stdin: bytes | None = None,
) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def ndjson(events: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    def call(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
        return run_cli(argv, capsys, monkeypatch, stdin)

    return call


def test_ndjson_file_accepted(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.ndjson"
    path.write_text(ndjson(GOOD))
    code, out, err = cli([str(path)])
    assert code == 0
    assert out.startswith("accepted: 6 events, 1 run, outcome success")
    assert err == ""


def test_result_is_one_json_object_in_wire_shape(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.ndjson"
    path.write_text(ndjson(GOOD))
    code, out, _ = cli([str(path), "--result"])
    assert code == 0
    result = json.loads(out)
    assert set(result) == {"outcome", "messages", "state", "interrupts", "runError", "usage"}
    assert result["messages"] == [{"id": "m", "role": "assistant", "content": "Hi"}]
    assert result["state"] == {"n": 1}
    assert result["outcome"] == "success"
    assert result["runError"] is None


def test_sse_with_crlf_comments_and_multiline_data(cli: Any) -> None:
    frames = [": keep-alive\r\n"]
    for event in GOOD:
        text = json.dumps(event, indent=1)
        frames.append("".join(f"data: {line}\r\n" for line in text.splitlines()) + "\r\n")
    code, out, _ = cli(["-"], stdin="".join(frames).encode())
    assert code == 0
    assert "accepted: 6 events" in out


def test_json_array_and_corpus_case(cli: Any, tmp_path: Path) -> None:
    array = tmp_path / "array.json"
    array.write_text(json.dumps(GOOD))
    assert cli([str(array)])[0] == 0
    assert cli([str(CORPUS / "triad-assembles-message.json")])[0] == 0


def test_rejected_stream_exit_1_with_reference_wording(cli: Any) -> None:
    code, out, err = cli([str(CORPUS / "content-without-start-fatal.json")])
    assert code == 1
    assert out == ""
    assert err.startswith("rejected: ")
    assert "No active text message found with ID 'orphan-content-m1'" in err


def test_malformed_field_is_a_rejection(cli: Any) -> None:
    code, _, err = cli([str(CORPUS / "malformed-known-field-fatal.json")])
    assert code == 1
    assert err.startswith("rejected: TEXT_MESSAGE_CONTENT has a malformed value at `delta`")


def test_truncated_run_rejected_unless_allowed(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "cut.ndjson"
    path.write_text(ndjson(GOOD[:-1]))
    code, _, err = cli([str(path)])
    assert code == 1
    assert "rule `truncated`" in err
    code, out, _ = cli([str(path), "--allow-truncated", "--result"])
    assert code == 0
    assert json.loads(out)["outcome"] == "truncated"


def test_warnings_go_to_stderr_and_quiet_silences_them(cli: Any) -> None:
    path = str(CORPUS / "unknown-event-dropped.json")
    code, out, err = cli([path])
    assert code == 0
    lines = err.splitlines()
    assert lines
    assert all(line.startswith("warning: ") for line in lines)
    assert "FUTURE_EVENT" in err
    code, out, err = cli([path, "--quiet"])
    assert (code, out, err) == (0, "", "")


def test_producer_profile_is_stricter(cli: Any, tmp_path: Path) -> None:
    events = [
        *GOOD[:-1],
        {"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "never", "content": ""},
        GOOD[-1],
    ]
    path = tmp_path / "result.ndjson"
    path.write_text(ndjson(events))
    assert cli([str(path)])[0] == 0
    code, _, err = cli([str(path), "--profile", "producer"])
    assert code == 1
    assert "rule `unknown-id`" in err


def test_missing_file_is_exit_2(cli: Any, tmp_path: Path) -> None:
    code, out, err = cli([str(tmp_path / "missing.ndjson")])
    assert code == 2
    assert out == ""
    assert "cannot open input" in err


def test_input_in_no_format_is_exit_2(cli: Any, tmp_path: Path) -> None:
    assert cli(["-"], stdin=b"this is not a stream\n")[0] == 2
    path = tmp_path / "object.json"
    path.write_text('{"events": []}')
    code, _, err = cli([str(path)])
    assert code == 2
    assert "corpus case" in err


def test_bad_json_after_good_events_is_a_rejection(cli: Any) -> None:
    code, _, err = cli(["-"], stdin=(ndjson(GOOD[:2]) + "{oops\n").encode())
    assert code == 1
    assert "not valid JSON" in err


def test_usage_errors_exit_2(cli: Any) -> None:
    with pytest.raises(SystemExit) as info:
        cli(["--profile", "lenient"])
    assert info.value.code == 2


def test_empty_input_is_not_a_valid_stream(cli: Any) -> None:
    # An empty body must fail a CI check (exit 2), never read as "accepted".
    code, out, err = cli(["-"], stdin=b"")
    assert code == 2
    assert "no events" in err
    assert "accepted" not in out


def _frames(newline: str) -> str:
    bad = {**GOOD[2], "delta": 5}
    return newline.join(
        [
            ": a comment frame dispatches nothing",
            "",  # lines 1-2
            f"data: {json.dumps(GOOD[0])}",
            "",  # 3-4
            "event: message",
            f"data: {json.dumps(GOOD[1])}",
            "",  # 5-7
            "id: 7",
            f"data: {json.dumps(bad)}",
            "data: ",
            "",  # 8-11: event #2
            "",
        ]
    )


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        ("lf.sse", _frames("\n"), 9),
        ("crlf.sse", _frames("\r\n"), 9),
        ("cr.sse", _frames("\r"), 9),
        (
            "bom.ndjson",
            "\ufeff" + ndjson(GOOD[:2]) + "\n  \n" + json.dumps({**GOOD[2], "delta": 5}) + "\n",
            5,
        ),
        ("one-line.json", json.dumps([*GOOD[:2], {**GOOD[2], "delta": 5}]), 1),
    ],
)
def test_a_rejection_names_the_line_of_the_event_in_a_file(
    cli: Any, tmp_path: Path, name: str, content: str, line: int
) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode())
    code, _, err = cli(["--quiet", str(path)])
    assert code == 1
    assert err.rstrip("\n").endswith(f"[event #2] ({path}:{line})"), err


def test_from_standard_input_a_rejection_names_the_event_only(cli: Any) -> None:
    code, _, err = cli(["-"], stdin=ndjson([*GOOD[:2], {**GOOD[2], "delta": 5}]).encode())
    assert code == 1
    assert err.rstrip("\n").endswith("[event #2]")
