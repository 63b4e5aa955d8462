"""FilterToolCalls leaves no trace of a denied call in activity content.

The recorded shape is Microsoft Agent Framework's workflow ``executor``
activity: ``ACTIVITY_SNAPSHOT{messageId: "executor:<id>", activityType:
"executor", content: {executor_id, status, data}}`` where ``data`` is the
executor's output — the agent's messages, whose contents carry each
``function_call`` (name, ``call_id``, arguments) and ``function_result``
(``call_id``, result). The official client turns the activity into a
``role: activity`` message, so the check covers its fold too.
"""

from __future__ import annotations

import json
from typing import Any

import ag_ui.core as ag
import pytest
from ag_ui.core import BaseEvent

from agui_pipes.testing import run_events, text, tool_call
from agui_pipes.transformers import FilterToolCalls
from tests.transformers._stage_helpers import consumed, through, wire

DENY = FilterToolCalls.deny(["internal_*"])
SECRETS = ("internal_lookup", "call-int", "TOP SECRET", "classified-query")


def _executor(data: Any, executor: str = "handoff_agent") -> ag.ActivitySnapshotEvent:
    return ag.ActivitySnapshotEvent(
        message_id=f"executor:{executor}",
        activity_type="executor",
        content={"executor_id": executor, "status": "completed", "data": data},
    )


HANDOFF_OUTPUT = [
    {
        "role": "assistant",
        "contents": [
            {
                "type": "function_call",
                "call_id": "call-int",
                "name": "internal_lookup",
                "arguments": '{"q": "classified-query"}',
            },
            {
                "type": "function_call",
                "call_id": "call-ok",
                "name": "search",
                "arguments": '{"q": "weather"}',
            },
        ],
    },
    {
        "role": "tool",
        "contents": [
            {"type": "function_result", "call_id": "call-int", "result": "TOP SECRET"},
            {"type": "function_result", "call_id": "call-ok", "result": "sunny"},
        ],
    },
    {"role": "assistant", "contents": [{"type": "text", "text": "It is sunny."}]},
]


def _handoff_run() -> list[BaseEvent]:
    return run_events(
        [
            *tool_call(
                "call-int", "internal_lookup", '{"q": "classified-query"}', result="TOP SECRET"
            ),
            *tool_call("call-ok", "search", '{"q": "weather"}', result="sunny"),
            *text("m1", "It is sunny."),
            _executor(HANDOFF_OUTPUT),
        ]
    )


def test_the_executor_activity_keeps_nothing_of_the_denied_call() -> None:
    out = through(DENY, _handoff_run())
    body = wire(out)
    for secret in SECRETS:
        assert secret not in body, secret
    activity = next(e for e in out if isinstance(e, ag.ActivitySnapshotEvent))
    data = activity.content["data"]
    assert data[0]["contents"] == [HANDOFF_OUTPUT[0]["contents"][1]]
    assert data[1]["contents"] == [HANDOFF_OUTPUT[1]["contents"][1]]
    assert data[2] == HANDOFF_OUTPUT[2]
    result = consumed(out)
    assert "TOP SECRET" not in str(result.messages)
    assert "sunny" in str(result.messages)


def test_a_clean_activity_passes_as_the_same_object() -> None:
    clean = _executor([{"role": "assistant", "contents": [{"type": "text", "text": "hi"}]}])
    out = through(DENY, run_events([clean]))
    assert out[1] is clean


def test_an_id_alone_is_enough_once_the_call_was_removed() -> None:
    late = _executor(
        [
            {"type": "function_result", "call_id": "call-int", "result": "TOP SECRET"},
            {"pending": ["call-int", "call-ok"]},
        ]
    )
    out = through(DENY, run_events([*tool_call("call-int", "internal_lookup", "{}"), late]))
    activity = next(e for e in out if isinstance(e, ag.ActivitySnapshotEvent))
    assert activity.content["data"] == [{"pending": ["call-ok"]}]


def _delta(message_id: str, value: Any, path: str = "/data/-") -> ag.ActivityDeltaEvent:
    return ag.ActivityDeltaEvent(
        message_id=message_id,
        activity_type="executor",
        patch=[{"op": "add", "path": path, "value": value}],
    )


def test_deltas_that_carry_a_removed_call_go_and_the_activity_waits_for_a_snapshot() -> None:
    leaking = _delta("executor:a", {"type": "function_call", "call_id": "x", "name": "internal_x"})
    after = _delta("executor:a", {"type": "text", "text": "later"})
    other = _delta("executor:b", {"type": "text", "text": "unrelated"})
    by_path = _delta("executor:c", "y", path="/calls/call-int/status")
    events = run_events(
        [
            *tool_call("call-int", "internal_lookup", "{}"),
            _executor([], "a"),
            _executor([], "b"),
            _executor([], "c"),
            leaking,
            after,
            other,
            by_path,
            _executor([{"type": "text", "text": "fresh"}], "a"),
            _delta("executor:a", {"type": "text", "text": "resumed"}),
        ]
    )
    out = through(DENY, events)
    deltas = [e for e in out if isinstance(e, ag.ActivityDeltaEvent)]
    assert [d.patch[0].value for d in deltas] == [  # type: ignore[union-attr]
        {"type": "text", "text": "unrelated"},
        {"type": "text", "text": "resumed"},
    ]
    assert "internal_x" not in wire(out) and "call-int" not in wire(out)
    consumed(out)


def test_a_deep_activity_is_scrubbed_without_recursion() -> None:
    node: Any = {"type": "function_call", "call_id": "deep", "name": "internal_deep"}
    for _ in range(5000):
        node = {"wrap": [node, "keep"]}
    out = through(DENY, run_events([_executor(node)]))
    activity = next(e for e in out if isinstance(e, ag.ActivitySnapshotEvent))
    inner = activity.content["data"]
    depth = 0
    while isinstance(inner, dict):
        inner = inner["wrap"][0] if len(inner["wrap"]) == 2 else inner["wrap"]
        depth += 1
    assert inner == ["keep"] and depth == 5000


def test_allow_mode_matches_names_only_under_name_keys() -> None:
    stage = FilterToolCalls.allow(["search"])
    activity = _executor(
        [
            {"note": "words are not tools"},
            {"type": "function_call", "call_id": "c9", "name": "delete_all"},
        ]
    )
    out = through(stage, run_events([activity]))
    kept = next(e for e in out if isinstance(e, ag.ActivitySnapshotEvent))
    assert kept.content["data"] == [{"note": "words are not tools"}]


@pytest.mark.node
def test_the_official_client_folds_no_trace_of_it(ts_oracle: Any) -> None:
    out = through(DENY, _handoff_run())
    theirs = ts_oracle([{"stream": out}])[0]
    assert theirs["outcome"] == "completed", theirs["error"]
    folded = str(theirs["messages"])
    assert "activity" in folded and "sunny" in folded
    for secret in SECRETS:
        assert secret not in folded, secret


# -- through a real gateway: no byte of the denied call on the wire ----------------------


@pytest.mark.parametrize("apply_path", [False, True], ids=["relay", "apply"])
def test_a_gateway_denying_internal_tools_sends_no_byte_of_the_call(
    apply_path: bool, ts_oracle: Any
) -> None:
    import httpx
    from starlette.applications import Starlette
    from starlette.routing import Route

    from agui_pipes import AsyncStreamTransformer, TransformerChain
    from agui_pipes.codecs import encode_sse
    from agui_pipes.server import Gateway
    from tests._servers import RecordedUpstream, run_input, serve

    body = b"".join(encode_sse(event) for event in _handoff_run())
    stages = (
        (lambda: TransformerChain([DENY.fresh(), AsyncStreamTransformer()]))
        if apply_path
        else (lambda: TransformerChain([DENY.fresh()]))
    )
    with serve(Starlette(routes=[Route("/agent", RecordedUpstream(body), methods=["POST"])])) as up:
        gateway = Gateway(up.url + "/agent", chain=stages)
        with serve(Starlette(routes=[Route("/", gateway, methods=["POST"])])) as server:
            answer = httpx.post(server.url + "/", json=run_input("run-1"), timeout=30)
    assert answer.status_code == 200
    for secret in SECRETS:
        assert secret.encode() not in answer.content, secret
    assert b"executor:handoff_agent" in answer.content and b"sunny" in answer.content
    events = [
        json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")
    ]
    theirs = ts_oracle([{"stream": events}])[0]
    assert theirs["outcome"] == "completed", theirs["error"]
    for secret in SECRETS:
        assert secret not in str(theirs["messages"]), secret
