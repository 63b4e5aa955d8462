"""JSON Patch amplification and deep state, through the CLI and the gateway, in child processes.

After ``STATE_SNAPSHOT {"a": ["x"]}``, one 1.2 KB STATE_DELTA of repeated
``{"op": "copy", "from": "/a", "path": "/a/-"}`` doubles ``/a`` per operation:
22 of them took a minute and 530 MB, 40 never finished. Every way a user
meets a state patch must now end the documented way within a few hundred MiB:
the consumer warns and keeps the previous state, the producer profile rejects
(rule ``limit-exceeded``), stages skip the delta as the client does, and the
gateway relays the run to its end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from ._harness import assert_clean, run_cli, serve_bytes, serve_gateway

MAX_RSS_MIB = 400
COPY = {"op": "copy", "from": "/a", "path": "/a/-"}


def _stream(copies: int) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": ["x"]}},
        {"type": "STATE_DELTA", "delta": [COPY] * copies},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]


def _ndjson(events: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


def _write(tmp_path: Path, name: str, data: bytes | str) -> str:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(path)


@pytest.mark.parametrize("copies", [22, 40])
def test_verify_warns_names_the_limit_and_keeps_the_state(tmp_path: Path, copies: int) -> None:
    assert len(json.dumps({"delta": [COPY] * 22})) < 1300  # the reported 1.2 KB delta
    stream = _write(tmp_path, "amp.ndjson", _ndjson(_stream(copies)))
    outcome = run_cli("verify", "--result", stream)
    assert_clean(
        outcome, exit_code=0, message="Limits.max_nodes = 1,000,000", max_rss_mib=MAX_RSS_MIB
    )
    assert "warning: STATE_DELTA did not apply and was skipped" in outcome.stderr
    assert json.loads(outcome.stdout)["state"] == {"a": ["x"]}


def test_verify_producer_profile_rejects_with_the_rule() -> None:
    # Piped: a rejection while a *file* is still open also prints the reader's
    # async-generator shutdown noise, a separate CLI issue fixed on its own branch.
    outcome = run_cli("verify", "--profile", "producer", "-", stdin=_ndjson(_stream(40)))
    assert_clean(
        outcome,
        exit_code=1,
        message="rejected: STATE_DELTA breaks rule `limit-exceeded`",
        max_rss_mib=MAX_RSS_MIB,
    )
    assert "Limits.max_nodes = 1,000,000" in outcome.stderr


def test_verify_deep_state_is_folded_and_nesting_past_the_limit_is_refused(
    tmp_path: Path,
) -> None:
    # 1001 levels parse (orjson reads 1024) but used to blow the fold's recursive copy
    # (RecursionError at ~500 levels); a copy to the innermost array would reach 2002.
    deep = "[" * 1000 + "]" * 1000
    inner = "/a" + "/0" * 999 + "/-"
    lines = [
        json.dumps({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        '{"type": "STATE_SNAPSHOT", "snapshot": {"a": ' + deep + "}}",
        json.dumps({"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "/a", "path": inner}]}),
        json.dumps({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/b", "value": 1}]}),
        json.dumps({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
    ]
    stream = _write(tmp_path, "deep.ndjson", "\n".join(lines) + "\n")
    outcome = run_cli("verify", stream)
    assert_clean(outcome, exit_code=0, message="Limits.max_depth = 1,024", max_rss_mib=MAX_RSS_MIB)
    assert "RecursionError" not in outcome.stderr
    assert outcome.stderr.count("warning:") == 1
    assert "accepted: 5 events" in outcome.stdout.decode()


CHAINS = {
    "state_diff": "version: 1\ntransformers:\n  - type: state_diff\n",
    "tool_result_to_state": (
        "version: 1\ntransformers:\n  - type: tool_result_to_state\n    tool: search\n"
        "    mode: at\n    pointer: /results\n"
    ),
}


@pytest.mark.parametrize("stage", sorted(CHAINS))
def test_run_with_a_state_following_stage_skips_the_delta(tmp_path: Path, stage: str) -> None:
    chain = _write(tmp_path, "chain.yaml", CHAINS[stage])
    stream = _write(tmp_path, "amp.ndjson", _ndjson(_stream(40)))
    outcome = run_cli("run", "--config", chain, stream)
    assert_clean(
        outcome, exit_code=0, message="Limits.max_nodes = 1,000,000", max_rss_mib=MAX_RSS_MIB
    )
    out = [json.loads(line) for line in outcome.stdout.splitlines()]
    assert [e["type"] for e in out] == [e["type"] for e in _stream(40)]
    assert out[2]["delta"] == [COPY] * 40  # passed on unchanged: the client decides


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc status")  # pragma: no cover - Linux only


@pytest.mark.parametrize("stage", sorted(CHAINS))
def test_the_gateway_relays_the_run_to_its_end_within_memory(tmp_path: Path, stage: str) -> None:
    chain = _write(tmp_path, "chain.yaml", CHAINS[stage])
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in _stream(40)).encode()
    run_input = {
        "threadId": "t",
        "runId": "r",
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with serve_bytes(body) as upstream, serve_gateway(upstream, "--config", chain) as gateway:
        response = httpx.post(gateway.url, json=run_input, timeout=120)
        peak = _peak_rss_mib(gateway.process.pid)
    assert response.status_code == 200
    events = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    assert [e["type"] for e in events] == [e["type"] for e in _stream(40)]
    assert peak < MAX_RSS_MIB, f"gateway peak RSS {peak:.0f} MiB"


@pytest.mark.parametrize(
    ("flags", "second"), [((), "STATE_DELTA"), (("--max-state-nodes", "5"), "STATE_SNAPSHOT")]
)
def test_serve_passes_its_state_limits_to_the_chain(
    tmp_path: Path, flags: tuple[str, ...], second: str
) -> None:
    # StateDiff turns the second snapshot into a delta only when the first one fits
    # its limits and so became the baseline.
    chain = _write(tmp_path, "chain.yaml", CHAINS["state_diff"])
    first = {"items": list(range(10)), "notes": "x" * 100}
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STATE_SNAPSHOT", "snapshot": first},
        {"type": "STATE_SNAPSHOT", "snapshot": {**first, "done": True}},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    run_input = {
        "threadId": "t",
        "runId": "r",
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with (
        serve_bytes(body) as upstream,
        serve_gateway(upstream, "--config", chain, *flags) as gateway,
    ):
        response = httpx.post(gateway.url, json=run_input, timeout=60)
    types = [
        json.loads(line[len("data: ") :])["type"]
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    assert types == ["RUN_STARTED", "STATE_SNAPSHOT", second, "RUN_FINISHED"]
