"""StateFilter under hostile state: its copy of the state stays within Limits, cleanly."""

from __future__ import annotations

import json
from pathlib import Path

from ._harness import assert_clean, run_cli

CHAIN = "transformers:\n  - type: state_filter\n    deny: [/messages/*/secret]\n"


def _lines(*events: object) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


def _stream(*inner: object) -> bytes:
    return _lines(
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        *inner,
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    )


def test_a_delta_of_doubling_copies_is_refused_before_it_allocates(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(CHAIN)
    doubling = [{"op": "copy", "from": "/a", "path": "/a/-"}] * 40  # 2**40 elements if applied
    stdin = _stream(
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": list(range(8))}},
        {"type": "STATE_DELTA", "delta": doubling},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/b", "value": 1}]},
    )
    outcome = run_cli("run", "-c", str(chain), stdin=stdin, memory_mib=1024)
    assert_clean(outcome, exit_code=0, max_rss_mib=200)
    sent = [json.loads(line) for line in outcome.stdout.decode().splitlines()]
    deltas = [e["delta"] for e in sent if e["type"] == "STATE_DELTA"]
    # skipped as a whole (like a delta that does not apply); the next one still applies
    assert deltas == [[], [{"op": "add", "path": "/b", "value": 1}]]


def test_a_snapshot_beyond_the_limits_is_a_clean_rejection(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(CHAIN)
    stdin = _stream({"type": "STATE_SNAPSHOT", "snapshot": {"a": [0] * 1_100_000}})
    outcome = run_cli("run", "-c", str(chain), stdin=stdin, memory_mib=1024)
    assert_clean(
        outcome,
        exit_code=1,
        message="StateFilter: the state is larger than the limits allow (more than 1,000,000",
        max_rss_mib=900,
    )
