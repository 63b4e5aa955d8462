"""Real producers' streams, replayed: pydantic-ai and ag-ui-langgraph recordings.

tests/data/producers/ holds SSE bodies recorded from the producers' own AG-UI
endpoints by tests/producers/record.py (scripted models, no network). Replaying
them needs only agui_pipes (and node for the reference client):

* every recording decodes; its decode warnings are the ones listed here;
* our consumer verdict, ``agui-pipes verify FILE``'s exit code and the official
  TypeScript client's verdict (``HttpAgent`` reading the same bytes over HTTP)
  agree, and where both accept, the folded messages, state and delivered event
  types are equal;
* with the producer packages installed, a fresh recording has the same
  event-type sequence as the stored one (skipped, loudly, without them);
* ``secrets_of`` lists what a deny of ``internal_*`` must hide in each
  recording, and ``strip_raw_events | filter_tool_calls(deny, state_messages)``
  leaves none of it in the output bytes, in process and through the gateway
  command, while the output stays a valid stream.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent

from agui_pipes import Consumer, ProtocolViolation, decode
from agui_pipes.codecs import DecodeWarning, SSEDecoder, encode_sse
from agui_pipes.transformers import FilterToolCalls, StripRawEvents

from tests.hostile._harness import assert_clean, run_cli, serve_gateway  # isort: skip

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

DATA = Path(__file__).resolve().parents[1] / "data" / "producers"
DENIED = "internal_*"


@dataclass(frozen=True)
class Recording:
    stem: str
    body: bytes
    meta: dict[str, Any]

    @property
    def path(self) -> Path:
        return DATA / f"{self.stem}.sse"

    @property
    def request(self) -> dict[str, Any]:
        request: dict[str, Any] = self.meta["request"]
        return request


def _recordings() -> list[Recording]:
    found = []
    for sse in sorted(DATA.glob("*.sse")):
        meta = json.loads(sse.with_suffix(".json").read_text(encoding="utf-8"))
        found.append(Recording(sse.stem, sse.read_bytes(), meta))
    return found


RECORDINGS = _recordings()
BY_STEM = {r.stem: r for r in RECORDINGS}
STEMS = [r.stem for r in RECORDINGS]


def payloads(body: bytes) -> list[bytes]:
    """The ``data:`` payloads of an SSE body, read with agui_pipes' decoder."""
    decoder = SSEDecoder()
    return decoder.feed_bytes(body) + decoder.close_bytes()


def test_every_scenario_of_the_brief_is_recorded() -> None:
    assert set(STEMS) == {
        "pydantic-ai-text",
        "pydantic-ai-parallel-tools",
        "pydantic-ai-retried-tool",
        "pydantic-ai-reasoning",
        "pydantic-ai-failing-tool",
        "langgraph-text",
        "langgraph-tool-call",
        "langgraph-subagent",
    }
    for recording in RECORDINGS:
        assert recording.meta["bytes"] == len(recording.body), recording.stem
        assert recording.meta["packages"], recording.stem


# -- (1) decoding ---------------------------------------------------------------

EXPECTED_DECODE_WARNINGS: dict[str, set[str]] = {stem: set() for stem in STEMS}
"""Decode warning codes per recording. Both producers emit only 1.0 event types and
described properties today, so none; a producer that starts sending a new field
or event type shows up here first."""


@pytest.mark.parametrize("stem", STEMS)
def test_recording_decodes_with_the_expected_warnings(stem: str) -> None:
    recording = BY_STEM[stem]
    warnings: list[DecodeWarning] = []
    events: list[BaseEvent] = []
    for index, payload in enumerate(payloads(recording.body)):
        decoded = decode(payload, index=index)
        warnings.extend(decoded.warnings)
        if decoded.event is not None:
            events.append(decoded.event)
    assert len(events) == recording.meta["event_count"]
    assert [e.type.value for e in events] == recording.meta["event_types"]
    assert {w.code for w in warnings} == EXPECTED_DECODE_WARNINGS[stem], [str(w) for w in warnings]


# -- (2) verdicts against the TypeScript client ---------------------------------


def ours(recording: Recording) -> dict[str, Any]:
    """Our consumer over the recorded payloads, seeded like the TS client's HttpAgent."""
    consumer = Consumer(allow_truncated=True, messages=recording.request["messages"])
    delivered: list[str] = []
    try:
        for payload in payloads(recording.body):
            delivered.extend(event.type.value for event in consumer.push(payload))
        truncated = consumer.verifier.run_open
        result = consumer.finish()
    except ProtocolViolation as error:
        return {"outcome": "failed", "error": str(error)}
    return {
        "outcome": "completed",
        "truncated": truncated,
        "messages": result.messages,
        "state": result.state,
        "delivered": delivered,
        "warnings": [str(w) for w in result.warnings],
    }


EXPECTED_VERDICTS = {stem: "completed" for stem in STEMS} | {
    # pydantic-ai closes a parallel call with TOOL_CALL_END when the next call starts,
    # then keeps streaming TOOL_CALL_ARGS for it: both clients reject the stream there.
    "pydantic-ai-parallel-tools": "failed",
}


@contextmanager
def serve_recordings() -> Iterator[str]:
    """A loopback server answering ``POST /<stem>`` with that recording's bytes verbatim."""
    bodies = {f"/{r.stem}": r.body for r in RECORDINGS}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = bodies.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@pytest.fixture(scope="module")
def theirs(ts_oracle: Callable[..., list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The TS client's result per recording: HttpAgent POSTs and parses the SSE itself."""
    with serve_recordings() as base:
        cases = [
            {
                "url": f"{base}/{r.stem}",
                "threadId": r.request["threadId"],
                "runId": r.request["runId"],
                "initialMessages": r.request["messages"],
            }
            for r in RECORDINGS
        ]
        results = ts_oracle(cases)
    return {r.stem: dict(result) for r, result in zip(RECORDINGS, results, strict=True)}


@pytest.mark.parametrize("stem", STEMS)
def test_verdict_matches_the_typescript_client(
    stem: str, theirs: dict[str, dict[str, Any]]
) -> None:
    recording, reference = BY_STEM[stem], theirs[stem]
    mine = ours(recording)
    assert mine["outcome"] == reference["outcome"] == EXPECTED_VERDICTS[stem], (
        f"ours: {mine.get('error')}\ntheirs: {reference['error']}"
    )
    if mine["outcome"] == "failed":
        # Same reason: our message carries the reference client's.
        assert reference["error"] in mine["error"], (mine["error"], reference["error"])
        return
    assert not mine["truncated"]
    assert _json(mine["messages"]) == _json(reference["messages"])
    assert _json(mine["state"]) == _json(reference["state"])
    assert mine["delivered"] == [e["type"] for e in reference["events"]]
    # Neither client had anything to say about these streams.
    assert mine["warnings"] == reference["warnings"] == []


@pytest.mark.parametrize("stem", STEMS)
def test_cli_verify_exit_code_matches_the_verdict(stem: str) -> None:
    recording = BY_STEM[stem]
    outcome = run_cli("verify", str(recording.path))
    if EXPECTED_VERDICTS[stem] == "completed":
        assert_clean(outcome, exit_code=0)
        assert outcome.stdout.startswith(b"accepted: "), outcome.describe()
    else:
        assert_clean(outcome, exit_code=1, message="rejected:")
        assert ours(recording)["error"] in outcome.stderr


# -- (3) the stored recordings still describe the producers ---------------------


def _producer_of(stem: str) -> str:
    return str(BY_STEM[stem].meta["producer"])


_IMPORTS = {"pydantic-ai": "pydantic_ai.ui.ag_ui", "langgraph": "ag_ui_langgraph"}


def _installed(producer: str) -> bool:
    module = _IMPORTS[producer]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("stem", STEMS)
def test_a_fresh_recording_has_the_stored_event_types(stem: str) -> None:
    producer = _producer_of(stem)
    if not _installed(producer):
        pytest.skip(
            f"LIVE RE-RECORDING SKIPPED: {producer} is not installed "
            "(pip install -e '.[producers]' to check the stored recordings against it)"
        )
    from tests.producers import record

    scenario = next(s for s in record.scenarios(producer) if s.stem == stem)
    body = record.record(scenario)
    assert record.event_types(body) == BY_STEM[stem].meta["event_types"], (
        f"{stem}: the producer now sends a different event sequence; re-record with "
        "python tests/producers/record.py and review the diff"
    )
    if record.versions(producer) != BY_STEM[stem].meta["packages"]:
        # Same sequence from other versions: worth knowing, not a failure.
        print(
            f"{stem}: recorded with {BY_STEM[stem].meta['packages']}, "
            f"installed {record.versions(producer)}",
            file=sys.stderr,
        )


# -- (4) what a deny of internal_* must hide ------------------------------------


@dataclass
class Secrets:
    """Everything of the denied tool's calls that a recording carries."""

    names: set[str] = field(default_factory=set)
    call_ids: set[str] = field(default_factory=set)
    arguments: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)
    result_message_ids: set[str] = field(default_factory=set)

    def all(self) -> set[str]:
        return self.names | self.call_ids | self.arguments | self.results | self.result_message_ids


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)


def _matches(name: str) -> bool:
    return name.startswith(DENIED.rstrip("*"))


def secrets_of_recording(recording: Recording) -> Secrets:
    """The denied (``internal_*``) calls' names, ids, argument and result strings.

    Read from the stream's own events: each TOOL_CALL_START naming a denied tool
    gives its call id; its TOOL_CALL_ARGS deltas, joined and parsed, give the
    argument strings; its TOOL_CALL_RESULT the result text (and the result's
    messageId, which pydantic-ai's REASONING_ENCRYPTED_VALUE points at).
    """
    found = Secrets()
    args: dict[str, list[str]] = {}
    events = [json.loads(p) for p in payloads(recording.body)]
    for event in events:
        if event["type"] == "TOOL_CALL_START" and _matches(event["toolCallName"]):
            found.names.add(event["toolCallName"])
            found.call_ids.add(event["toolCallId"])
            args[event["toolCallId"]] = []
    for event in events:
        call = event.get("toolCallId")
        if call not in found.call_ids:
            continue
        if event["type"] == "TOOL_CALL_ARGS":
            args[call].append(event["delta"])
        elif event["type"] == "TOOL_CALL_RESULT":
            found.results.add(event["content"])
            found.result_message_ids.add(event["messageId"])
    for deltas in args.values():
        found.arguments.update(s for s in _string_leaves(json.loads("".join(deltas))) if s)
    return found


def secrets_of(recording: Recording) -> set[str]:
    """The strings a deny of ``internal_*`` must keep out of the output bytes."""
    return secrets_of_recording(recording).all()


DENYING = [r.stem for r in RECORDINGS if secrets_of(r)]


def test_secrets_are_found_where_the_scenarios_put_them() -> None:
    assert set(DENYING) == {
        "pydantic-ai-parallel-tools",
        "pydantic-ai-retried-tool",
        "langgraph-tool-call",
        "langgraph-subagent",
    }
    for stem in DENYING:
        secrets = secrets_of_recording(BY_STEM[stem])
        assert secrets.names == {"internal_lookup"}, stem
        assert "SECRET-ARG-7f3a" in secrets.arguments, stem
        assert "SECRET-RESULT-9b1c" in secrets.results, stem
        assert secrets.call_ids, stem
    retried = secrets_of_recording(BY_STEM["pydantic-ai-retried-tool"])
    assert retried.call_ids == {"call-internal-1", "call-internal-2"}
    assert any(r.startswith("SECRET-RETRY-2d4e") for r in retried.results)


NO_TRACE_CHAIN = """\
version: 1
transformers:
  - strip_raw_events
  - filter_tool_calls:
      deny: ["internal_*"]
      state_messages: ["/messages"]
"""


def _no_trace_chain() -> Any:
    return StripRawEvents() | FilterToolCalls.deny([DENIED], state_messages=["/messages"])


def filtered(recording: Recording) -> bytes:
    """The no-trace chain over the recording, in process: the SSE bytes it writes."""
    chain = _no_trace_chain()
    out = bytearray()
    for index, payload in enumerate(payloads(recording.body)):
        event = decode(payload, index=index).event
        if event is not None:
            for produced in chain.transform(event):
                out += encode_sse(produced)
    for produced in chain.finish():
        out += encode_sse(produced)
    return bytes(out)


def leaked(recording: Recording, output: bytes) -> dict[str, list[str]]:
    """secret -> the event types of ``output`` that still carry it."""
    found: dict[str, list[str]] = {}
    for payload in payloads(output):
        for secret in secrets_of(recording):
            if secret.encode() in payload or json.dumps(secret)[1:-1].encode() in payload:
                found.setdefault(secret, []).append(json.loads(payload)["type"])
    return found


@pytest.mark.parametrize("stem", DENYING)
def test_no_trace_of_a_denied_tool_and_the_output_stays_valid(stem: str) -> None:
    """strip_raw_events | filter_tool_calls(deny internal_*, state_messages) over real
    producers: the denied tool's name, call ids, arguments, result text and result
    message ids are nowhere in the bytes; the output is a stream the consumer accepts
    (pydantic-ai's late arguments belonged to the denied call, so the filtered
    interleaving is valid), with no assistant message left empty by the removal."""
    recording = BY_STEM[stem]
    output = filtered(recording)
    assert leaked(recording, output) == {}
    verdict = ours(Recording(stem, output, recording.meta))
    assert verdict["outcome"] == "completed", verdict
    assert not [
        m["id"]
        for m in verdict["messages"]
        if m["role"] == "assistant" and not m.get("content") and not m.get("toolCalls")
    ]


@pytest.mark.parametrize("stem", DENYING)
def test_no_trace_through_the_gateway_command(stem: str, tmp_path: Path) -> None:
    """The same chain as a user deploys it: ``agui-pipes serve --upstream --config``
    in front of the recorded producer, over loopback HTTP."""
    recording = BY_STEM[stem]
    chain = tmp_path / "no-trace.yaml"
    chain.write_text(NO_TRACE_CHAIN, encoding="utf-8")
    with (
        serve_recordings() as base,
        serve_gateway(f"{base}/{stem}", "--config", str(chain)) as gateway,
    ):
        response = httpx.post(gateway.url, json=recording.request, timeout=60)
    assert response.status_code == 200
    assert leaked(recording, response.content) == {}
    events = [json.loads(p) for p in payloads(response.content)]
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    # What a user deploys gives exactly what the chain gives in process.
    assert events == [json.loads(p) for p in payloads(filtered(recording))]
