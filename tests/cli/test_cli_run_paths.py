"""`agui-pipes run`: the Relay path (sync chains, NDJSON/SSE input) writes what
the event-by-event ``chain.apply`` path writes — byte for byte, errors included.

The ``apply`` variant of each chain is the same chain with an async pass-through
stage appended (``tests/_cli_stages.py``), which is what makes the CLI take
``chain.apply``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from ag_ui.core import BaseEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_pipes._cli import _input, main
from agui_pipes.codecs import decode, encode_ndjson, encode_sse
from agui_pipes.config import load_chain
from agui_pipes.testing import event_lines
from agui_pipes.testing.strategies import streams

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

BUILTIN = """\
version: 1
transformers:
  - expand_chunks
  - verify
  - filter_tool_calls: {deny: ["internal_*"]}
  - strip_raw_events
  - type: redact
    patterns: ["[0-9]{3,}"]
    replacement: "#"
  - type: coalesce_deltas
    max_chars: 12
  - subagent_visibility: {mode: inline}
  - state_diff
"""
ASYNC_TAIL = "  - type: tests._cli_stages:AsyncPass\n"


def payloads(events: list[BaseEvent], style: str) -> list[str]:
    if style == "canonical":  # the encoder's own bytes: the relay passes them through
        return [encode_ndjson(e).decode().rstrip("\n") for e in events]
    return event_lines(events)  # sorted keys: re-encoded


def wire(texts: list[str], fmt: str) -> bytes:
    if fmt == "ndjson":
        return "".join(f"{t}\n" for t in texts).encode()
    return "".join(f"data: {t}\n\n" for t in texts).encode()


def run_both(
    tmp: Path, chain_yaml: str, data: bytes, suffix: str, *options: str
) -> tuple[tuple[int, bytes], tuple[int, bytes]]:
    """(exit status, output file) through the relay path and through the apply path."""
    source = tmp / f"input{suffix}"
    source.write_bytes(data)
    results = []
    for name, text in (("relay", chain_yaml), ("apply", chain_yaml + ASYNC_TAIL)):
        chain = tmp / f"{name}.yaml"
        chain.write_text(text)
        target = tmp / f"{name}.out"
        code = main(
            [
                "run",
                "-q",
                "--allow-imports",
                "-c",
                str(chain),
                str(source),
                "-o",
                str(target),
                *options,
            ]
        )
        results.append((code, target.read_bytes()))
    return results[0], results[1]


@settings(max_examples=60, deadline=None)
@given(
    events=streams(max_runs=2, tool_names=["search", "internal_debug", "update_items"]),
    style=st.sampled_from(["canonical", "sorted"]),
    in_format=st.sampled_from(["ndjson", "sse"]),
    out_format=st.sampled_from(["ndjson", "sse"]),
    chunk=st.sampled_from([7, 100, 4096, 64 * 1024]),
)
def test_both_paths_write_the_same_bytes(
    events: list[BaseEvent], style: str, in_format: str, out_format: str, chunk: int
) -> None:
    texts = payloads(events, style)
    # The read size only decides how the input is cut into batches.
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(_input, "_CHUNK", chunk):
        relayed, applied = run_both(
            Path(tmp), BUILTIN, wire(texts, in_format), f".{in_format}", "--format", out_format
        )
        expected_chain = load_chain(Path(tmp) / "relay.yaml")()
    assert relayed == applied
    assert relayed[0] == 0
    encode = encode_sse if out_format == "sse" else encode_ndjson
    decoded = [d.event for d in (decode(t) for t in texts) if d.event is not None]
    assert relayed[1] == b"".join(encode(e) for e in expected_chain.apply_sync(decoded))


GOOD = [
    '{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
    '{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}',
    '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello"}',
]
END = [
    '{"type":"TEXT_MESSAGE_END","messageId":"m1"}',
    '{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
]


@pytest.mark.parametrize(
    ("case", "lines", "in_format", "status", "message"),
    [
        (
            "malformed",
            [*GOOD, '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":5}', *END],
            "ndjson",
            1,
            "stream rejected",
        ),
        (
            "violation",
            [*GOOD, '{"type":"TEXT_MESSAGE_CONTENT","messageId":"zz","delta":"x"}', *END],
            "sse",
            1,
            "stream rejected",
        ),
        (
            "stage bug",
            [*GOOD, '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"boom"}', *END],
            "ndjson",
            1,
            "a stage failed",
        ),
        ("truncated", [*GOOD, *END[:1]], "ndjson", 1, "stream rejected"),
        ("not json", [*GOOD, "hello", *END], "sse", 1, "stream rejected"),
        ("unknown type", [*GOOD, '{"type":"FUTURE_THING"}', *END], "sse", 0, "warning: event #3"),
        # After a dropped event both paths name wire positions (apply used to count
        # only the decoded events: #3 where the relay said #4).
        (
            "stage bug after a dropped event",
            [
                *GOOD,
                '{"type":"FUTURE_THING"}',
                '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"boom"}',
                *END,
            ],
            "ndjson",
            1,
            "event #4 (TEXT_MESSAGE_CONTENT)",
        ),
        (
            "violation after a dropped event",
            [
                *GOOD,
                '{"type":"FUTURE_THING"}',
                '{"type":"TEXT_MESSAGE_CONTENT","messageId":"zz","delta":"x"}',
                *END,
            ],
            "sse",
            1,
            "event #4 (TEXT_MESSAGE_CONTENT)]",
        ),
        (
            "truncated after a dropped event",
            [*GOOD, '{"type":"FUTURE_THING"}'],
            "ndjson",
            1,
            "end of stream after 4 events]",
        ),
    ],
)
def test_failures_mid_chunk_write_the_events_before_them(
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
    case: str,
    lines: list[str],
    in_format: str,
    status: int,
    message: str,
) -> None:
    chain = (
        "version: 1\ntransformers:\n  - type: tests._cli_stages:Boom\n"
        "  - verify: {profile: producer}\n"
    )
    source = tmp_path / f"input.{in_format}"
    source.write_bytes(wire(lines, in_format))  # far below one read: a single batch
    outcomes = []
    for name, text in (("relay", chain), ("apply", chain + ASYNC_TAIL)):
        chain_file = tmp_path / f"{name}.yaml"
        chain_file.write_text(text)
        code = main(["run", "--allow-imports", "-c", str(chain_file), str(source)])
        captured = capsysbinary.readouterr()
        outcomes.append((code, captured.out, captured.err))
    assert outcomes[0] == outcomes[1], case
    code, out, err = outcomes[0]
    assert code == status
    assert message in err.decode()
    # Nothing before the failing event is lost.
    written = [json.loads(line)["type"] for line in out.decode().splitlines()]
    assert written[:3] == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]


def test_invalid_framing_is_the_same_on_both_paths(tmp_path: Path) -> None:
    bad_utf8 = wire(GOOD, "ndjson") + b'{"type":"RUN_FINISHED","threadId":"\xff"}\n'
    relayed, applied = run_both(tmp_path, BUILTIN, bad_utf8, ".ndjson")
    assert relayed == applied
    assert relayed[0] == 1
    cut = wire(GOOD, "sse") + b'data: {"type":"TEXT_MESS'
    relayed, applied = run_both(tmp_path, BUILTIN, cut, ".sse")
    assert relayed == applied
    assert relayed[0] == 1
    assert relayed[1].startswith(b'{"type":"RUN_STARTED"')  # written before the error
