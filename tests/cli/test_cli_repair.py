"""`agui-pipes repair` and `agui-pipes verify --explain`: output, report, exit codes.

The broken stream is a real one: pydantic-ai's parallel tool calls, recorded in
tests/data/producers/ (``TOOL_CALL_ARGS`` of a call after its ``TOOL_CALL_END``).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agui_pipes import Consumer, decode
from agui_pipes._cli import main
from agui_pipes.codecs import SSEDecoder

DATA = Path(__file__).parents[1] / "data" / "producers"
PARALLEL = DATA / "pydantic-ai-parallel-tools.sse"
CLEAN = DATA / "pydantic-ai-text.sse"

INTENDED_ARGS = {
    "call-internal-1": '{"key": "SECRET-ARG-7f3a"}',
    "call-weather-1": '{"city": "Paris"}',
}
"""What pydantic-ai meant each call's arguments to be: every delta of the call, in order."""

GOOD = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]

SECOND_TERMINAL = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "RUN_ERROR", "message": "the model failed"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]
"""ag-ui #1892: RUN_FINISHED after RUN_ERROR; Repair drops the second terminal event."""


def ndjson(events: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    def call(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = main(argv)
        out, err = capsys.readouterr()
        return code, out, err

    return call


def sse_events(body: bytes) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    return [json.loads(p) for p in decoder.feed_bytes(body) + decoder.close_bytes()]


def folded_args(events: list[dict[str, Any]]) -> dict[str, str]:
    """Each tool call's arguments as a consumer folds them (the stream must verify)."""
    consumer = Consumer()
    for event in events:
        consumer.push(event)
    result = consumer.finish()
    return {call["id"]: call["arguments"] for call in result.tool_calls}


def test_pydantic_ai_parallel_calls_repaired_to_the_intended_arguments(
    cli: Any, tmp_path: Path
) -> None:
    out_path = tmp_path / "repaired.sse"
    code, out, err = cli(["repair", str(PARALLEL), "-o", str(out_path)])
    assert code == 0, err
    assert out == ""
    lines = err.splitlines()
    fixes = [line for line in lines if line.startswith("fix: ")]
    assert fixes, err
    # Each fix names its input event and the file line of that event.
    assert all(f"({PARALLEL}:" in line for line in fixes), fixes
    assert lines[-1].startswith("repaired: ")
    assert "the repaired stream verifies" in lines[-1]
    body = out_path.read_bytes()
    assert body.startswith(b"data: {")  # SSE in, SSE out
    assert folded_args(sse_events(body)) == INTENDED_ARGS
    # And the command that judges streams agrees.
    assert cli(["verify", "-q", str(out_path)])[0] == 0


def test_a_valid_stream_passes_unchanged(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "good.ndjson"
    path.write_text(ndjson(GOOD))
    code, out, err = cli(["repair", str(path)])
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == GOOD
    assert (
        err == "clean: no fix needed; the repaired stream verifies: 5 events, 1 run, "
        "outcome success\n"
    )
    code, out, _ = cli(["repair", str(CLEAN)])
    assert code == 0
    assert out.encode() == CLEAN.read_bytes()


def test_output_format_follows_the_input_unless_given(cli: Any, tmp_path: Path) -> None:
    array = tmp_path / "broken.json"
    array.write_text(json.dumps(SECOND_TERMINAL))
    code, out, err = cli(["repair", str(array)])
    assert code == 0, err
    assert json.loads(out) == SECOND_TERMINAL[:2]
    code, out, _ = cli(["repair", str(array), "--format", "sse"])
    assert code == 0
    assert sse_events(out.encode()) == SECOND_TERMINAL[:2]
    code, out, _ = cli(
        ["repair", "--input-format", "ndjson", "-"], stdin=ndjson(SECOND_TERMINAL).encode()
    )
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == SECOND_TERMINAL[:2]


def test_report_json_gives_rules_positions_and_verdict(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "broken.ndjson"
    # An unknown event first: the fix's wire position counts it, Repair's index does not.
    path.write_text(ndjson([{"type": "FUTURE_EVENT"}, *SECOND_TERMINAL]))
    code, _, err = cli(["repair", str(path), "--report-json"])
    assert code == 0
    document = json.loads(err)
    assert document["accepted"] is True
    assert document["rejection"] is None
    report = document["report"]
    assert report["count"] == 1
    assert report["counts"] == {"second-terminal": 1}
    (fix,) = report["fixes"]
    assert fix["rule"] == "second-terminal"
    assert fix["action"] == "dropped"
    assert (fix["index"], fix["wireIndex"]) == (2, 3)


def test_emit_writes_one_custom_event_per_fix(cli: Any, tmp_path: Path) -> None:
    code, out, err = cli(["repair", str(PARALLEL), "--emit", "-q", "--format", "ndjson"])
    assert code == 0
    assert err == ""
    events = [json.loads(line) for line in out.splitlines()]
    customs = [e for e in events if e["type"] == "CUSTOM"]
    assert customs
    assert {c["name"] for c in customs} == {"agui_pipes.repair"}
    assert {c["value"]["rule"] for c in customs} == {"content-after-end"}
    # Inside the run they concern: the stream still verifies with them.
    assert folded_args(events) == INTENDED_ARGS
    code, out, _ = cli(["repair", str(PARALLEL), "-q", "--format", "ndjson"])
    assert len(out.splitlines()) == len(events) - len(customs)


def test_past_max_fixes_the_stream_is_rejected(cli: Any, tmp_path: Path) -> None:
    out_path = tmp_path / "out.sse"
    code, _, err = cli(["repair", str(PARALLEL), "--max-fixes", "0", "-o", str(out_path)])
    assert code == 1
    assert err.splitlines()[-1].startswith("rejected: ")
    assert "repair-limit" in err or "max_fixes" in err or "fixes" in err
    # The events before the rejection were still written, as `run` does.
    assert sse_events(out_path.read_bytes())[0]["type"] == "RUN_STARTED"
    assert cli(["repair", str(PARALLEL), "--max-fixes", "none", "-q", "-o", str(out_path)])[0] == 0


def test_bad_max_fixes_is_a_usage_error(cli: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        cli(["repair", str(PARALLEL), "--max-fixes", "-1"])
    assert exited.value.code == 2


def test_a_malformed_event_is_rejected_not_repaired(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "malformed.ndjson"
    path.write_text(ndjson([GOOD[0], {"type": "TEXT_MESSAGE_START", "messageId": 7}, *GOOD[1:]]))
    code, out, err = cli(["repair", str(path)])
    assert code == 1
    assert err.startswith("rejected: ")
    assert f"({path}:2)" in err
    assert [json.loads(line) for line in out.splitlines()] == GOOD[:1]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty"),
        (b"hello world\n", "is not an AG-UI event stream"),
        (b'{"type": "FUTURE_EVENT"}\n', "dropped as an unknown event type"),
    ],
)
def test_no_stream_is_a_usage_error(cli: Any, tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "input.ndjson"
    path.write_bytes(content)
    code, out, err = cli(["repair", str(path)])
    assert code == 2
    assert err.splitlines()[-1].startswith("agui-pipes repair: ")
    assert message in err
    assert out == ""


def test_missing_input_and_unwritable_output(cli: Any, tmp_path: Path) -> None:
    code, _, err = cli(["repair", str(tmp_path / "nope.sse")])
    assert code == 2
    assert "cannot open input" in err
    code, _, err = cli(["repair", str(PARALLEL), "-o", str(tmp_path / "no" / "dir.sse")])
    assert code == 2
    assert "cannot write" in err


def test_content_of_a_message_never_started_gets_its_start(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "orphan.ndjson"
    events = [GOOD[0], {"type": "TEXT_MESSAGE_CONTENT", "messageId": "x", "delta": "?"}, GOOD[-1]]
    path.write_text(ndjson(events))
    code, out, err = cli(["repair", str(path)])
    assert code == 0, err
    assert err.splitlines()[0].startswith(f"fix: event #1 ({path}:2): content-not-started")
    consumer = Consumer()
    for line in out.splitlines():
        consumer.push(line)
    assert consumer.finish().messages == [{"id": "x", "role": "assistant", "content": "?"}]


def test_a_truncated_run_is_closed_at_the_end_of_stream(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "cut.ndjson"
    path.write_text(ndjson(GOOD[:3]))
    code, out, err = cli(["repair", str(path)])
    assert code == 0, err
    assert err.startswith("fix: end of stream (after 3 events): truncated — synthesized: ")
    assert json.loads(out.splitlines()[-1])["type"] == "RUN_ERROR"


def test_a_repaired_stream_still_invalid_is_rejected(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command checks Repair's output itself: a case Repair missed is not a success."""
    from agui_pipes._cli import repair as command
    from agui_pipes.transformers import Repair

    class Blind(Repair):
        """A Repair that misses everything (what a case it does not cover looks like)."""

        def transform(self, event: Any) -> Any:
            return (event,)

        def finish(self) -> Any:
            return ()

    monkeypatch.setattr(command, "new_repair", lambda args: Blind())
    path = tmp_path / "broken.ndjson"
    path.write_text(ndjson(SECOND_TERMINAL))
    code, out, err = cli(["repair", str(path)])
    assert code == 1
    assert err.splitlines()[-1].startswith("rejected: the repaired stream is still invalid: ")
    assert [json.loads(line) for line in out.splitlines()] == SECOND_TERMINAL
    code, _, err = cli(["repair", str(path), "--report-json"])
    assert code == 1
    document = json.loads(err)
    assert document["accepted"] is False
    assert document["rejection"].startswith("the repaired stream is still invalid: ")


# -- verify --explain ------------------------------------------------------------


def test_explain_shows_the_fixes_and_the_repaired_verdict(cli: Any) -> None:
    code, out, err = cli(["verify", "--explain", str(PARALLEL)])
    assert code == 1  # the verdict is still on the stream as given
    assert err.startswith("rejected: ")
    lines = out.splitlines()
    assert lines
    assert all(line.startswith("explain: ") for line in lines)
    assert any(line.startswith("explain: fix: event #") for line in lines)
    assert lines[-1].startswith("explain: repaired: ")
    assert "the repaired stream verifies: " in lines[-1]


def test_explain_on_a_valid_stream(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "good.ndjson"
    path.write_text(ndjson(GOOD))
    code, out, err = cli(["verify", "--explain", str(path)])
    assert code == 0
    assert out.splitlines() == [
        "accepted: 5 events, 1 run, outcome success (consumer profile)",
        "explain: clean: no fix needed; the repaired stream verifies: 5 events, 1 run, "
        "outcome success",
    ]
    assert err == ""


def test_explain_keeps_result_json_alone_on_stdout(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "broken.ndjson"
    path.write_text(ndjson([*GOOD[:-1], SECOND_TERMINAL[1], GOOD[-1]]))
    code, out, err = cli(["verify", "--explain", "--result", str(path)])
    assert code == 1
    assert out == ""
    assert err.startswith("rejected: ")
    assert "explain: fix: event #5 " in err
    assert "second-terminal — dropped" in err
    path.write_text(ndjson(GOOD))
    code, out, err = cli(["verify", "--explain", "--result", str(path)])
    assert code == 0
    assert json.loads(out)["outcome"] == "success"
    assert err.startswith("explain: clean: ")


def test_explain_on_a_malformed_stream(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "malformed.ndjson"
    path.write_text(ndjson([GOOD[0], {"type": "TEXT_MESSAGE_START", "messageId": 7}]))
    code, out, _ = cli(["verify", "--explain", str(path)])
    assert code == 1
    assert out.startswith("explain: repair cannot make this stream valid: ")


def test_decode_of_the_repaired_output_is_lossless(cli: Any, tmp_path: Path) -> None:
    """Every event the command writes decodes back without a warning."""
    out_path = tmp_path / "repaired.ndjson"
    code, _, _ = cli(["repair", str(PARALLEL), "--format", "ndjson", "-o", str(out_path)])
    assert code == 0
    for index, line in enumerate(out_path.read_text().splitlines()):
        decoded = decode(line, index=index)
        assert decoded.event is not None
        assert not decoded.warnings


@pytest.mark.parametrize("fmt", ["json", "sse", "ndjson"])
def test_every_fix_is_named_at_its_own_line(cli: Any, tmp_path: Path, fmt: str) -> None:
    """Many fixes, one read of the file for their lines: each line is its event's."""
    events = [*SECOND_TERMINAL, SECOND_TERMINAL[-1], SECOND_TERMINAL[-1]]
    path = tmp_path / f"broken.{fmt}"
    if fmt == "json":
        # Elements of 5 lines (3 fields) but RUN_ERROR's 4: "{" of #2 is on line 11.
        path.write_text(json.dumps(events, indent=2))
        expected = [11, 16, 21]
    elif fmt == "sse":
        path.write_text("".join(f": comment\ndata: {json.dumps(e)}\n\n" for e in events))
        expected = [2 + 3 * i for i in (2, 3, 4)]
    else:
        path.write_text("\n".join(json.dumps(e) + "\n" for e in events))  # a blank line each
        expected = [1 + 2 * i for i in (2, 3, 4)]
    code, _, err = cli(["repair", str(path)])
    assert code == 0, err
    fixes = [line for line in err.splitlines() if line.startswith("fix: ")]
    assert [line.split(": second-terminal")[0] for line in fixes] == [
        f"fix: event #{i} ({path}:{line})" for i, line in zip((2, 3, 4), expected, strict=True)
    ]
