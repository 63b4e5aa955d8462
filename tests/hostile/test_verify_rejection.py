"""`agui-pipes verify FILE` on a stream it rejects: the verdict and nothing else.

Regression: a rejection in the middle of a file left the nested input
generators to the garbage collector, whose late ``aclose`` printed
"an error occurred during closing of asynchronous generator" and a traceback
after the verdict (found replaying pydantic-ai's parallel tool calls,
tests/data/producers/pydantic-ai-parallel-tools.sse).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._harness import assert_clean, run_cli

_STREAM = [
    '{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
    '{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"lookup"}',
    '{"type":"TOOL_CALL_END","toolCallId":"c1"}',
    '{"type":"TOOL_CALL_ARGS","toolCallId":"c1","delta":"{}"}',
    '{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
]


@pytest.mark.parametrize(
    ("suffix", "body"),
    [
        (".sse", "".join(f"data: {line}\n\n" for line in _STREAM)),
        (".ndjson", "".join(f"{line}\n" for line in _STREAM)),
    ],
)
def test_a_rejected_file_ends_with_the_verdict_and_no_traceback(
    tmp_path: Path, suffix: str, body: str
) -> None:
    path = tmp_path / f"late-args{suffix}"
    path.write_text(body, encoding="utf-8")
    outcome = run_cli("verify", str(path))
    assert_clean(outcome, exit_code=1, message="No active tool call found with ID 'c1'")
    assert "asynchronous generator" not in outcome.stderr, outcome.describe()
    assert outcome.stderr.count("\n") == 1, outcome.describe()
