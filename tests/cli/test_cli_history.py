"""``agui-pipes history``: a thread's history read straight from a SQLite event log."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from agui_pipes import Consumer
from agui_pipes._cli import main
from agui_pipes.codecs import SSEDecoder, encode_json
from agui_pipes.store import RunStatus, open_store


def _runs() -> list[tuple[str, list[BaseEvent], RunStatus]]:
    first = [
        RunStartedEvent(thread_id="t1", run_id="r1"),
        TextMessageStartEvent(message_id="m1", role="assistant"),
        TextMessageContentEvent(message_id="m1", delta="Hello\nthere"),
        TextMessageEndEvent(message_id="m1"),
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="lookup", parent_message_id="m1"),
        ToolCallArgsEvent(tool_call_id="c1", delta='{"q":"x"}'),
        ToolCallEndEvent(tool_call_id="c1"),
        ToolCallResultEvent(message_id="m2", tool_call_id="c1", content="found"),
        StateSnapshotEvent(snapshot={"n": 1}),
        RunFinishedEvent(thread_id="t1", run_id="r1"),
    ]
    live = [RunStartedEvent(thread_id="t1", run_id="r2")]
    return [("r1", first, RunStatus.FINISHED), ("r2", live, RunStatus.LIVE)]


def _store(path: Path) -> str:
    url = f"sqlite:///{path}"

    async def write() -> None:
        async with open_store(url) as store:
            for run_id, events, status in _runs():
                await store.append("t1", run_id, [encode_json(e) for e in events])
                if status is not RunStatus.LIVE:
                    await store.end_run(run_id, status)

    anyio.run(write)
    return url


def test_ndjson_is_the_history_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path / "runs.db")
    assert main(["history", "--store", url, "t1"]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [e["type"] for e in lines] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert lines[0]["runId"] == "history:r1"
    consumer = Consumer()
    consumer.push_many(out.splitlines())
    result = consumer.finish()
    assert result.state == {"n": 1}
    assert [m["role"] for m in result.messages] == ["assistant", "tool"]
    assert "'r2' is still live" in err


def test_sse_gives_the_same_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path / "runs.db")
    assert main(["history", "--store", url, "t1"]) == 0
    ndjson = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["history", "--store", url, "t1", "--format", "sse"]) == 0
    payloads = SSEDecoder().feed(capsys.readouterr().out.encode())
    assert [json.loads(p) for p in payloads] == ndjson


def test_transcript_reads_as_a_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _store(tmp_path / "runs.db")
    assert main(["history", "--store", url, "t1", "--format", "transcript"]) == 0
    assert capsys.readouterr().out == (
        "assistant: Hello\n  there\n"
        'assistant calls lookup({"q":"x"})\n'
        "tool (c1): found\n"
        'state: {"n": 1}\n'
    )


def test_unknown_thread_and_bad_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _store(tmp_path / "runs.db")
    assert main(["history", "--store", url, "nope"]) == 2
    assert "no thread 'nope' in the event log" in capsys.readouterr().err
    assert main(["history", "--store", "postgres://x", "t1"]) == 2
    assert "postgres://x" in capsys.readouterr().err
