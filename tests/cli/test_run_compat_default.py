"""``agui-pipes run`` reads a stream as ``verify`` does: with the always-on compat boundary.

Both of run's paths are checked: NDJSON through the relay, a corpus case (JSON) through
``chain.apply``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agui_pipes import Consumer
from agui_pipes._cli import main

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "conformance" / "streams"
ERA = CORPUS / "era-0-0-45-thinking-translated.json"
NON_ERA = sorted(p for p in CORPUS.glob("*.json") if not p.stem.startswith("era-"))
CONVERTING = "warning: converting the pre-1.0 THINKING_START to REASONING_START"


def _chain(tmp_path: Path, *stages: str) -> str:
    path = tmp_path / "chain.yaml"
    path.write_text("version: 1\ntransformers:\n" + "".join(f"  - {s}\n" for s in stages))
    return str(path)


def _inputs(tmp_path: Path, case: Path) -> list[Path]:
    """The case itself (run's chain.apply path) and its stream as NDJSON (the relay's)."""
    ndjson = tmp_path / f"{case.stem}.ndjson"
    stream = json.loads(case.read_text())["stream"]
    ndjson.write_text("".join(json.dumps(item) + "\n" for item in stream))
    return [case, ndjson]


def _run(argv: list[str], capsysbinary: pytest.CaptureFixture[bytes]) -> tuple[int, bytes, str]:
    code = main(["run", *argv])
    captured = capsysbinary.readouterr()
    return code, captured.out, captured.err.decode()


def _folded(out: bytes) -> list[tuple[Any, Any]]:
    consumer = Consumer(compat=False)
    for line in out.splitlines():
        consumer.push(line)
    return [(m["role"], m.get("content")) for m in consumer.finish().messages]


def test_thinking_events_come_out_as_reasoning_with_the_reference_warning(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    chain = _chain(tmp_path, "expand_chunks", "verify")
    expected = json.loads(ERA.read_text())["expect"]["messages"]
    for path in _inputs(tmp_path, ERA):
        code, out, err = _run(["-c", chain, str(path)], capsysbinary)
        assert code == 0, err
        types = [json.loads(line)["type"] for line in out.splitlines()]
        assert types[1:6] == [
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
        ], path.suffix
        # What run writes folds (strictly: 1.0 only) to what the case expects.
        assert _folded(out) == [(m["role"], m["content"]) for m in expected]
        assert CONVERTING in err
        assert "unrecognised type" not in err
        code, _, err = _run(["-q", "-c", chain, str(path)], capsysbinary)
        assert code == 0 and err == ""


def test_no_compat_is_the_strict_view(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    chain = _chain(tmp_path, "verify")
    for path in _inputs(tmp_path, ERA):
        code, out, err = _run(["--no-compat", "-c", chain, str(path)], capsysbinary)
        assert code == 0, err
        assert "REASONING_START" not in out.decode()
        assert err.count("dropped an event of unrecognised type 'THINKING_") == 5
        assert CONVERTING not in err


def test_a_chain_s_own_compat_stage_is_the_one_that_runs(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    # A pre-subagent producer named in the chain: its era rules apply, once.
    chain = _chain(tmp_path, "{type: compat, peer: 0.0.57}", "verify")
    stream = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "helper"},
        {"type": "THINKING_START"},
        {"type": "THINKING_END"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "s"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    path = tmp_path / "old.ndjson"
    path.write_text("".join(json.dumps(item) + "\n" for item in stream))
    code, out, err = _run(["-c", chain, str(path)], capsysbinary)
    assert code == 0, err
    types = [json.loads(line)["type"] for line in out.splitlines()]
    assert types == ["RUN_STARTED", "REASONING_START", "REASONING_END", "RUN_FINISHED"]
    assert err.count("warning: converting the pre-1.0 THINKING_START") == 1
    assert err.count("predates subagent support") == 2


@pytest.mark.parametrize("case", NON_ERA, ids=lambda p: p.stem)
def test_a_1_0_stream_comes_out_byte_for_byte_as_without_the_boundary(
    case: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    chain = _chain(tmp_path, "expand_chunks")
    for path in _inputs(tmp_path, case):
        default = _run(["-c", chain, str(path)], capsysbinary)
        strict = _run(["--no-compat", "-c", chain, str(path)], capsysbinary)
        assert default == strict, path.suffix
