"""The consumer's compatibility boundary is on by default, as the reference client's is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agui_pipes import Consumer, consume
from agui_pipes._cli import main
from agui_pipes._consumer.findings import FindingCollector

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "streams"
CASE = CORPUS / "era-0-0-45-thinking-translated.json"
STREAM = json.loads(CASE.read_text())["stream"]

MIDWAY = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "before"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "THINKING_TEXT_MESSAGE_START"},
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "hmm"},
    {"type": "THINKING_TEXT_MESSAGE_END"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
]


def _roles(messages: list[dict[str, object]]) -> list[object]:
    return [message["role"] for message in messages]


@pytest.mark.anyio
async def test_thinking_events_become_reasoning_with_no_configuration() -> None:
    result = await consume(STREAM)
    assert "reasoning" in _roles(result.messages)
    assert any(w.code == "compat" for w in result.warnings)
    assert not any(w.code == "unknown-event-type" for w in result.warnings)


@pytest.mark.anyio
async def test_compat_false_is_the_strict_view() -> None:
    result = await consume(STREAM, compat=False)
    assert "reasoning" not in _roles(result.messages)
    assert [w.code for w in result.warnings].count("unknown-event-type") == 5


def test_the_boundary_engages_at_the_first_legacy_event() -> None:
    consumer = Consumer()
    for item in MIDWAY:
        consumer.push(item)
    result = consumer.finish()
    assert _roles(result.messages) == ["assistant", "reasoning"]
    assert result.messages[0]["content"] == "before"
    strict = Consumer(compat=False)
    for item in MIDWAY:
        strict.push(item)
    assert _roles(strict.finish().messages) == ["assistant"]


def test_the_finding_collector_translates_too() -> None:
    collector = FindingCollector()
    for item in STREAM:
        collector.push(item)
    codes = {finding.rule for finding in collector.finish()}
    assert "compat" in codes and "unknown-event-type" not in codes
    strict = FindingCollector(compat=False)
    for item in STREAM:
        strict.push(item)
    assert {finding.rule for finding in strict.finish()} == {"unknown-event-type"}


def test_verify_translates_unless_told_not_to(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--result", str(CASE)]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["verify", "--result", "--no-compat", str(CASE)]) == 0
    strict = json.loads(capsys.readouterr().out)
    assert "reasoning" in _roles(default["messages"])
    assert "reasoning" not in _roles(strict["messages"])
