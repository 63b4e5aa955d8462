"""`agui-pipes run` on standard input, whichever path runs the chain.

The input is opened with blocking reads and its format sniffed from the first
chunk before the command knows whether it needs an event loop; a chain with an
async stage (or a JSON-shaped input) then goes on reading the same input in
one. These tests pin that hand-over: nothing read for sniffing is lost or read
twice, and a sync chain over NDJSON/SSE never starts an event loop.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agui_pipes.codecs import encode_ndjson
from agui_pipes.testing import run_events, text, tool_call

ROOT = Path(__file__).resolve().parents[2]  # where `tests._cli_stages` imports from
EVENTS = run_events(text("m1", "hello ", "world") + tool_call("c1", "search", '{"q": 1}'))
EXPECTED = b"".join(encode_ndjson(event) for event in EVENTS)
SYNC_CHAIN = "transformers:\n  - expand_chunks\n"
ASYNC_CHAIN = SYNC_CHAIN + "  - type: tests._cli_stages:AsyncPass\n"


def _wire(fmt: str) -> bytes:
    lines = [
        json.dumps(event.model_dump(by_alias=True, exclude_none=True, mode="json"))
        for event in EVENTS
    ]
    if fmt == "ndjson":
        return "".join(f"{line}\n" for line in lines).encode()
    if fmt == "sse":
        return "".join(f"data: {line}\n\n" for line in lines).encode()
    return f"[{','.join(lines)}]".encode()


def _run(tmp_path: Path, chain: str, data: bytes, *, trace: bool = False) -> tuple[int, bytes]:
    path = tmp_path / "chain.yaml"
    path.write_text(chain)
    prologue = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom agui_pipes._cli import main\n"
    if trace:
        # Report on stderr whether an event loop module was ever imported.
        prologue += (
            "import atexit\n"
            "atexit.register(lambda: print('loop:', 'asyncio' in sys.modules, file=sys.stderr))\n"
        )
    code = prologue + (
        f"sys.exit(main(['run', '-q', '--allow-imports', '-c', {str(path)!r}, '-']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=data, capture_output=True, check=False
    )
    if trace:
        assert b"loop: " in done.stderr, done.stderr
        return done.returncode, done.stdout + done.stderr[done.stderr.index(b"loop: ") :]
    assert done.returncode == 0, done.stderr.decode()
    return done.returncode, done.stdout


@pytest.mark.parametrize("fmt", ["ndjson", "sse", "json"])
@pytest.mark.parametrize("chain", [SYNC_CHAIN, ASYNC_CHAIN], ids=["sync", "async"])
def test_standard_input_goes_through_whole_whichever_path(
    tmp_path: Path, fmt: str, chain: str
) -> None:
    code, out = _run(tmp_path, chain, _wire(fmt))
    assert (code, out) == (0, EXPECTED)


def test_a_sync_chain_over_ndjson_starts_no_event_loop(tmp_path: Path) -> None:
    _, out = _run(tmp_path, SYNC_CHAIN, _wire("ndjson"), trace=True)
    assert out == EXPECTED + b"loop: False\n"
    _, out = _run(tmp_path, ASYNC_CHAIN, _wire("ndjson"), trace=True)
    assert out == EXPECTED + b"loop: True\n"
