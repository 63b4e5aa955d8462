"""`agui-pipes run`: input formats, output formats, exit codes, warnings, progress."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agui_pipes._cli import main

DATA = Path(__file__).parents[1] / "data"
RECORDED = DATA / "demo-run.ndjson"
CORPUS = Path(__file__).parents[1] / "conformance" / "streams"


@pytest.fixture
def identity(tmp_path: Path) -> Path:
    path = tmp_path / "identity.yaml"
    path.write_text("version: 1\ntransformers: []\n")
    return path


def lines_of(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_identity_chain_round_trips_ndjson(
    identity: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert main(["run", "--config", str(identity), str(RECORDED)]) == 0
    out = capsysbinary.readouterr().out
    assert out == RECORDED.read_bytes()


@pytest.mark.parametrize("shape", ["sse", "json", "corpus", "sse-no-suffix"])
def test_input_formats(
    shape: str, identity: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    lines = RECORDED.read_text().splitlines()
    if shape.startswith("sse"):
        body = "".join(f"data: {line}\n\n" for line in lines)
        path = tmp_path / ("stream.sse" if shape == "sse" else "stream.txt")
    elif shape == "json":
        body = "[" + ",\n".join(lines) + "]"
        path = tmp_path / "stream.json"
    else:
        body = json.dumps({"name": "x", "stream": [json.loads(line) for line in lines]})
        path = tmp_path / "case.json"
    path.write_text(body)
    assert main(["run", "-c", str(identity), str(path)]) == 0
    assert capsysbinary.readouterr().out == RECORDED.read_bytes()


def test_stdin_and_sse_output_to_a_file(identity: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.sse"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agui_pipes",
            "run",
            "-c",
            str(identity),
            "-",
            "--format",
            "sse",
            "--output",
            str(target),
        ],
        input=RECORDED.read_bytes(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert done.stderr == b""  # no progress line without a terminal
    frames = target.read_text().split("\n\n")
    assert frames[-1] == ""
    assert [f.removeprefix("data: ") for f in frames[:-1]] == RECORDED.read_text().splitlines()


def test_rejection_by_a_stage_exits_1_after_the_good_events(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    chain = tmp_path / "strict.yaml"
    chain.write_text("transformers:\n  - verify: {profile: producer}\n")
    truncated = tmp_path / "truncated.ndjson"
    truncated.write_text("".join(RECORDED.read_text().splitlines(keepends=True)[:10]))
    assert main(["run", "-c", str(chain), str(truncated)]) == 1
    captured = capsysbinary.readouterr()
    assert len(captured.out.splitlines()) == 10
    err = captured.err.decode()
    assert err.startswith("agui-pipes: stream rejected:")
    assert "stage Verify" in err


def test_malformed_event_is_a_rejection(
    identity: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    path = tmp_path / "bad.ndjson"
    path.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        '{"type":"TEXT_MESSAGE_START","messageId":7}\n'
    )
    assert main(["run", "-c", str(identity), str(path)]) == 1
    captured = capsysbinary.readouterr()
    assert len(captured.out.splitlines()) == 1
    assert b"stream rejected" in captured.err
    assert b"messageId" in captured.err


def test_unknown_event_types_are_dropped_with_a_warning(
    identity: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    path = tmp_path / "future.ndjson"
    path.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        '{"type":"FUTURE_THING","x":1}\n'
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n'
    )
    assert main(["run", "-c", str(identity), str(path)]) == 0
    captured = capsysbinary.readouterr()
    assert [e["type"] for e in lines_of(captured.out.decode())] == ["RUN_STARTED", "RUN_FINISHED"]
    assert b"agui-pipes: warning: event #1" in captured.err
    assert main(["run", "-q", "-c", str(identity), str(path)]) == 0
    assert capsysbinary.readouterr().err == b""


def test_io_and_config_errors_exit_2(
    identity: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "-c", str(identity), str(tmp_path / "missing.ndjson")]) == 2
    assert "cannot open input" in capsys.readouterr().err
    assert main(["run", "-c", str(tmp_path / "missing.yaml"), str(RECORDED)]) == 2
    assert "config file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("transformers:\n  - filter_tool_calls: {allow: [a], deny: [b]}\n")
    assert main(["run", "-c", str(bad), str(RECORDED)]) == 2
    assert f"{bad}:2:5:" in capsys.readouterr().err
    assert (
        main(
            [
                "run",
                "-c",
                str(identity),
                str(RECORDED),
                "-o",
                str(tmp_path / "no" / "such" / "dir.ndjson"),
            ]
        )
        == 2
    )
    assert "cannot write" in capsys.readouterr().err
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    assert main(["run", "-c", str(identity), str(garbage)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", str(RECORDED)])  # --config is required
    assert info.value.code == 2


def test_progress_line_only_on_a_terminal(
    identity: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Terminal()
    monkeypatch.setattr(sys, "stderr", fake)
    assert main(["run", "-c", str(identity), str(RECORDED)]) == 0
    shown = fake.getvalue()
    assert "events" in shown
    assert "ev/s" in shown
    assert "%" in shown
    assert shown.endswith("\r\x1b[2K")  # cleared at the end
