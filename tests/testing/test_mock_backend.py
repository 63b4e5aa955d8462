"""The mock backend over real HTTP on loopback: each scenario kind, each fault.

What a frontend sees is what is checked: the SSE bytes and events an httpx
client receives, and how ``agui_pipes.client.Client`` (a reconnecting AG-UI
client) fails on each fault.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import BaseEvent, EventType

from agui_pipes.client import Client, ResumeFailed, ServerError
from agui_pipes.codecs import SSEDecoder, decode
from agui_pipes.testing import FAULT_HEADER, MockServer, load_scenarios
from agui_pipes.testing._mock.app import MALFORMED_FRAME
from agui_pipes.testing._mock.faults import BREAKABLE_RULES
from agui_pipes.verify import Profile, VerificationError, Verifier
from tests._mock_scenarios import SCENARIOS

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def mock() -> Iterator[MockServer]:
    with MockServer(SCENARIOS, keepalive=None) as server:
        yield server


def body(
    text: str = "hello", *, run_id: str = "run-1", thread_id: str = "thread-1", **extra: Any
) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": "u1", "role": "user", "content": text}],
        **extra,
    }


class Answer:
    """One response as the client saw it: status, headers, body bytes, frame times."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: httpx.Headers = httpx.Headers()
        self.raw = b""
        self.payloads: list[str] = []
        self.times: list[float] = []
        self.error: Exception | None = None
        self.started = 0.0
        self.first_byte = 0.0

    @property
    def events(self) -> list[BaseEvent]:
        out = []
        for payload in self.payloads:
            event = decode(payload).event
            assert event is not None
            out.append(event)
        return out

    @property
    def types(self) -> list[str]:
        return [e.type.value for e in self.events]


async def post(
    url: str, payload: dict[str, Any], fault: str | None = None, *, limit: int | None = None
) -> Answer:
    """POST a run; read the whole response (or ``limit`` frames), noting when each came."""
    answer = Answer()
    headers = {"accept": "text/event-stream"}
    if fault is not None:
        headers[FAULT_HEADER] = fault
    decoder = SSEDecoder()
    async with httpx.AsyncClient(timeout=30) as http:
        answer.started = anyio.current_time()
        try:
            async with http.stream("POST", url, json=payload, headers=headers) as response:
                answer.first_byte = anyio.current_time()
                answer.status, answer.headers = response.status_code, response.headers
                async for chunk in response.aiter_raw():
                    answer.raw += chunk
                    for frame in decoder.feed(chunk):
                        answer.payloads.append(frame)
                        answer.times.append(anyio.current_time())
                    if limit is not None and answer.raw.count(b"\n\n") >= limit:
                        break
        except httpx.HTTPError as exc:
            answer.error = exc
    return answer


async def client_run(url: str, payload: dict[str, Any], fault: str | None = None) -> Any:
    headers = {FAULT_HEADER: fault} if fault else {}
    async with (
        Client(headers=headers, max_reconnects=0) as client,
        client.run(url, payload) as events,
    ):
        seen = [event async for event in events]
        return seen, events.result()


# -- scenarios ---------------------------------------------------------------------


async def test_text_is_streamed_per_token_at_the_scenario_pace(mock: MockServer) -> None:
    answer = await post(mock.url, body("paced"))
    deltas = [e.delta for e in answer.events if e.type == EventType.TEXT_MESSAGE_CONTENT]
    assert deltas == ["one ", "two ", "three"]
    content = [
        t
        for t, e in zip(answer.times, answer.events, strict=True)
        if e.type.value.endswith("CONTENT")
    ]
    # Two paced gaps of 0.05 s; measured at the client, so allow for delivery jitter.
    assert content[-1] - content[0] >= 0.05


async def test_reasoning_text_and_parallel_backend_and_frontend_tools(mock: MockServer) -> None:
    answer = await post(mock.url, body("What's the weather?"))
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    types = answer.types
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert types.index("REASONING_START") < types.index("TEXT_MESSAGE_START")
    starts = [i for i, t in enumerate(types) if t == "TOOL_CALL_START"]
    assert len(starts) == 2 and starts[1] < types.index("TOOL_CALL_ARGS")  # parallel
    results = [e for e in answer.events if e.type == EventType.TOOL_CALL_RESULT]
    assert [(r.tool_call_id, json.loads(r.content)) for r in results] == [
        ("run-1-call-1", {"temp": 21})
    ]
    finished = answer.events[-1]
    assert finished.outcome.pending_tool_call_ids == ["run-1-call-2"]  # the frontend's tool


async def test_the_second_turn_answers_the_tool_result(mock: MockServer) -> None:
    first = await post(mock.url, body("weather please"))
    call = [e for e in first.events if e.type == EventType.TOOL_CALL_START][1]
    second = body("weather please", run_id="run-2")
    second["messages"] += [
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": call.tool_call_id,
                    "type": "function",
                    "function": {"name": "show_weather", "arguments": '{"temp": 21}'},
                }
            ],
        },
        {"id": "t1", "role": "tool", "toolCallId": call.tool_call_id, "content": "21 degrees"},
    ]
    seen, result = await client_run(mock.url, second)
    said = "".join(e.delta for e in seen if e.type == EventType.TEXT_MESSAGE_CONTENT)
    assert said == "The card says 21 degrees."
    assert result.outcome == "success"


async def test_state_snapshots_deltas_and_custom_events(mock: MockServer) -> None:
    seen, result = await client_run(mock.url, body("state"))
    assert result.state == {"city": "Lisbon", "days": 3}
    assert [e.type.value for e in seen][1:-1] == ["STATE_SNAPSHOT", "STATE_DELTA", "CUSTOM"]


async def test_subagents_inside_a_step(mock: MockServer) -> None:
    answer = await post(mock.url, body("delegate"))
    events = answer.events
    started = [e for e in events if e.type == EventType.SUBAGENT_STARTED]
    assert [(s.name, s.description) for s in started] == [
        ("expert", "knows the city"),
        ("flaky", None),
    ]
    text = [e for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT]
    assert [(t.delta, t.subagent_run_id) for t in text] == [("Sunny.", "run-1-sub-1")]
    ends = [e for e in events if e.type.value in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR")]
    assert [(e.type.value, getattr(e, "result", None)) for e in ends] == [
        ("SUBAGENT_FINISHED", {"sunny": True}),
        ("SUBAGENT_ERROR", None),
    ]
    assert answer.types[1] == "STEP_STARTED" and answer.types[-2] == "STEP_FINISHED"


async def test_an_interrupt_outcome_and_the_resumed_turn(mock: MockServer) -> None:
    answer = await post(mock.url, body("delete everything"))
    outcome = answer.events[-1].outcome
    assert outcome.type == "interrupt"
    (interrupt,) = outcome.interrupts
    assert interrupt.reason == "tool_approval" and interrupt.message == "Delete /tmp?"
    assert interrupt.tool_call_id == "run-1-call-1"
    again = await post(mock.url, body("delete everything"))
    assert again.raw == answer.raw  # the same request, the same bytes (ids included)
    resumed = body(
        "delete everything",
        run_id="run-2",
        resume=[{"interruptId": interrupt.id, "status": "resolved"}],
    )
    seen, _ = await client_run(mock.url, resumed)
    assert "".join(e.delta for e in seen if e.type == EventType.TEXT_MESSAGE_CONTENT) == (
        "Approved, going ahead."
    )


async def test_interrupt_ids_derive_from_the_seed_and_the_request() -> None:
    def interrupt_id(answer: Answer) -> str:
        return str(answer.events[-1].outcome.interrupts[0].id)

    with MockServer(SCENARIOS, seed=8) as other:
        reseeded = interrupt_id(await post(other.url, body("delete")))
        same_seed_other_run = interrupt_id(await post(other.url, body("delete", run_id="run-9")))
    with MockServer(SCENARIOS) as seeded:
        file_seed = interrupt_id(await post(seeded.url, body("delete")))
        file_seed_again = interrupt_id(await post(seeded.url, body("delete")))
    assert file_seed == file_seed_again
    assert len({file_seed, reseeded, same_seed_other_run}) == 3


async def test_an_error_outcome_is_a_run_error_with_its_code(mock: MockServer) -> None:
    answer = await post(mock.url, body("boom"))
    assert answer.types == ["RUN_STARTED", "RUN_ERROR"]
    assert (answer.events[-1].code, answer.events[-1].message) == (
        "MODEL_DOWN",
        "the model is down",
    )


async def test_thread_and_forwarded_props_match(mock: MockServer) -> None:
    vip = await post(
        mock.url, body("hi", thread_id="vip-1", forwardedProps={"tier": "gold", "x": 1})
    )
    said = "".join(e.delta for e in vip.events if e.type == EventType.TEXT_MESSAGE_CONTENT)
    assert said == "Welcome back."
    other = await post(mock.url, body("hi", thread_id="vip-1", forwardedProps={"tier": "tin"}))
    assert other.events[-1].code == "MOCK_NO_MATCH"
    assert "scenarios: weather-shown, weather," in other.events[-1].message


async def test_requests_are_kept_for_the_test_to_read(mock: MockServer) -> None:
    await post(mock.url, body("boom", run_id="kept"))
    assert mock.requests[-1].run_id == "kept"


async def test_a_bad_body_is_the_serving_layers_422(mock: MockServer) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(mock.url, content=b"{}")
        health = await http.get(mock.url.rstrip("/") + "/healthz")
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_run_input"
    assert health.text == "ok"


# -- faults ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 429, 500, 503])
async def test_http_status_faults(mock: MockServer, status: int) -> None:
    answer = await post(mock.url, body("long"), f"status={status}; retry-after=2")
    assert answer.status == status
    assert answer.headers["retry-after"] == "2"
    assert json.loads(answer.raw)["error"] == "mock_fault"
    with pytest.raises(ServerError) as info:
        await client_run(mock.url, body("long"), f"status={status}")
    assert info.value.status == status


async def test_slow_first_byte(mock: MockServer) -> None:
    answer = await post(mock.url, body("long"), "first-byte=0.3")
    assert answer.first_byte - answer.started >= 0.3
    assert answer.types[-1] == "RUN_FINISHED"


async def test_stall_after_n_events(mock: MockServer) -> None:
    answer = await post(mock.url, body("long"), "stall=0.3@2")
    assert answer.times[2] - answer.times[1] >= 0.25  # 0.3 s, less delivery jitter
    assert answer.types[-1] == "RUN_FINISHED"


async def test_drop_the_connection_after_n_events(mock: MockServer) -> None:
    answer = await post(mock.url, body("long"), "drop-after=3")
    assert isinstance(answer.error, httpx.RemoteProtocolError)  # the body never ended
    assert answer.types == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    with pytest.raises(ResumeFailed, match="sent no SSE ids"):
        await client_run(mock.url, body("long"), "drop-after=3")


async def test_truncate_without_a_terminal_event(mock: MockServer) -> None:
    answer = await post(mock.url, body("long"), "truncate-after=4")
    assert answer.error is None  # a clean end of body...
    assert len(answer.types) == 4 and "RUN_FINISHED" not in answer.types  # ...but no end of run
    with pytest.raises(ResumeFailed, match="closed the stream before the run ended"):
        await client_run(mock.url, body("long"), "truncate-after=4")


async def test_a_malformed_frame(mock: MockServer) -> None:
    answer = await post(mock.url, body("long"), "malformed=2")
    assert MALFORMED_FRAME in answer.raw
    assert answer.raw.index(MALFORMED_FRAME) > answer.raw.index(b"TEXT_MESSAGE_START")
    with pytest.raises(ValueError):
        json.loads(answer.payloads[2])
    with pytest.raises(Exception, match="JSON"):
        await client_run(mock.url, body("long"), "malformed=2")


async def test_duplicate_and_reorder(mock: MockServer) -> None:
    plain = (await post(mock.url, body("long"))).payloads
    duplicated = (await post(mock.url, body("long"), "duplicate=2")).payloads
    assert duplicated == [plain[0], plain[1], plain[1], *plain[2:]]
    reordered = (await post(mock.url, body("long"), "reorder=2")).payloads
    assert reordered == [plain[0], plain[2], plain[1], *plain[3:]]


async def test_a_scenarios_fault_and_the_header_on_top(mock: MockServer) -> None:
    planted = (await post(mock.url, body("planted"))).types
    assert planted[1:3] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_START"]
    both = await post(mock.url, body("planted"), "status=503")
    assert both.status == 503


@pytest.mark.parametrize("rule", BREAKABLE_RULES, ids=lambda r: r.value)
async def test_break_a_rule_of_the_verifier(mock: MockServer, rule: Any) -> None:
    # The producer profile is the strict 1.0 view (the consumer one tolerates two rules).
    profile: Profile = "producer" if rule.value in ("unknown-id", "out-of-order") else "consumer"
    for text in ("long", "weather", "delete", "boom"):
        if rule.value == "open-at-finish" and text == "boom":
            continue  # a run that errors may leave things open: no rule to break
        answer = await post(mock.url, body(text), f"break={rule.value}")
        verifier = Verifier(profile)
        with pytest.raises(VerificationError) as info:
            verifier.observe_all(answer.events)
            verifier.finish()
        assert info.value.rule is rule, (text, str(info.value))


async def test_never_ending_keepalives(mock: MockServer) -> None:
    answer = await post(mock.url, body("long"), "keepalive=0.02@1", limit=5)
    assert answer.types == ["RUN_STARTED"]
    assert answer.raw.count(b": keep-alive\n\n") == 4


async def test_a_bad_fault_header_is_a_400_naming_the_problem(mock: MockServer) -> None:
    answer = await post(mock.url, body("long"), "stall=soon")
    assert answer.status == 400
    assert json.loads(answer.raw)["message"] == (
        "x-agui-mock-fault: fault `stall` takes a number of seconds, got 'soon'"
    )


def test_the_scenario_file_and_the_fault_syntax_are_checked_at_load() -> None:
    from agui_pipes.config import ConfigError

    with pytest.raises(ConfigError) as info:
        load_scenarios(
            "scenarios:\n  - name: a\n    fault: drop-after=x\n    script: [{text: hi}]\n"
        )
    assert str(info.value) == (
        "<string>:3:12: scenarios[0].fault: fault `drop-after` takes a whole number >= 0, got 'x'"
    )


# -- durable runs: ids, resume, join --------------------------------------------------


@pytest.fixture(scope="module")
def durable() -> Iterator[MockServer]:
    with MockServer(SCENARIOS, keepalive=None, durable=True) as server:
        yield server


async def test_durable_frames_carry_ids_and_a_cut_run_is_resumed(
    durable: MockServer, mock: MockServer
) -> None:
    plain = (await post(mock.url, body("long", run_id="cut"))).events
    answer = await post(durable.url, body("long", run_id="cut-1"))
    ids = [line for line in answer.raw.split(b"\n") if line.startswith(b"id: ")]
    assert [i.rsplit(b":", 1)[1] for i in ids] == [str(n).encode() for n in range(1, 11)]
    assert answer.events == (await post(mock.url, body("long", run_id="cut-1"))).events
    # Every request of this client (the resumes too) is cut after three frames; the
    # client resumes after the last id it got and still sees each event exactly once.
    headers = {FAULT_HEADER: "drop-after=3"}
    async with (
        Client(headers=headers, backoff=0.01) as client,
        client.run(durable.url, body("long", run_id="cut")) as events,
    ):
        seen = [event async for event in events]
    assert seen == plain
    assert events.reconnects == 3


async def test_resume_after_an_id_and_join_from_the_start(durable: MockServer) -> None:
    first = await post(durable.url, body("long", run_id="join"))
    second_id = first.raw.split(b"\n")[3].removeprefix(b"id: ").decode()
    async with httpx.AsyncClient() as http:
        rest = await http.get(durable.url + "runs/join", headers={"last-event-id": second_id})
        joined = await http.get(durable.url + "runs/join")
        unknown = await http.get(durable.url + "runs/nobody")
        refused = await http.get(durable.url + "runs/join", headers={"last-event-id": "x"})
    assert rest.content == first.raw.split(b"\n\n", 2)[2]
    assert joined.content == first.raw
    assert (unknown.status_code, unknown.json()["error"]) == (404, "resume_failed")
    assert refused.status_code == 400


async def test_keepalives_fill_silence_but_not_a_stall() -> None:
    scenarios = {
        "scenarios": [
            {"name": "slow", "match": {"user": "slow"}, "script": [{"sleep": 0.4}]},
            {"name": "quick", "script": [{"text": "done"}]},
        ]
    }
    with MockServer(scenarios, keepalive=0.05) as server:
        slow = await post(server.url, body("slow"))
        stalled = await post(server.url, body("quick"), "stall=0.4@1")
    assert slow.raw.count(b": keep-alive\n\n") >= 2
    assert stalled.types[-1] == "RUN_FINISHED"
    during_stall = stalled.raw.split(b"RUN_STARTED", 1)[1].split(b"TEXT_MESSAGE_START", 1)[0]
    assert b"keep-alive" not in during_stall  # a stall is silence


async def test_a_bad_resume_id_is_the_stores_400(durable: MockServer) -> None:
    await post(durable.url, body("long", run_id="bad-id"))
    async with httpx.AsyncClient() as http:
        refused = await http.get(durable.url + "runs/bad-id", headers={"last-event-id": "x"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "resume_failed"
    assert "unparsable event id 'x'" in refused.json()["message"]


async def test_a_durable_run_answered_with_an_http_error_never_starts(
    durable: MockServer,
) -> None:
    answer = await post(durable.url, body("long", run_id="never"), "status=503")
    assert answer.status == 503
    async with httpx.AsyncClient() as http:
        response = await http.get(durable.url + "runs/never")
    assert response.status_code == 404
