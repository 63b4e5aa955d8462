"""``send_to=SendTarget(url)``: a target whose stream breaks off, or is not AG-UI framing.

Targets served for real (uvicorn on a free port) that misbehave: one that stops in
the middle of its stream leaves a run marked ``disconnected`` with the events it got
and a 502 saying so; one that answers an event stream that is not SSE-framed
properly is a 502 naming that, never a 500.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import TestClient

from agui_pipes.inspector import RecentRuns, SendTarget, inspector_app
from tests._servers import serve, wait_until

SAME_ORIGIN = {"origin": "http://testserver", "content-type": "application/json"}
RUN = {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [], "state": {}}
FRAMES = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "half a sent"},
]


class _BreaksOff:
    """Streams three frames, then fails: the connection is cut without the stream's end.

    It fails only once the inspector has recorded the three frames: a server that
    crashes right after writing may reset the connection before the client has read
    what was already sent (a reset discards the client's unread bytes), and this test
    is about the inspector's side, not about that race.
    """

    def __init__(self, runs: RecentRuns) -> None:
        self._runs = runs

    def _all_recorded(self) -> bool:
        return any(len(run) == len(FRAMES) for run in list(self._runs.newest_first()))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for frame in FRAMES:
            body = b"data: " + json.dumps(frame).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await wait_until(self._all_recorded, 15, "the inspector recorded the three frames")
        raise RuntimeError("the agent crashed mid-stream")


class _Unframed:
    """Claims an event stream, then sends one frame past the decoder's frame cap."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await send({"type": "http.response.body", "body": b"data: " + b"x" * (17 * 1024 * 1024)})


def test_a_stream_that_breaks_off_is_a_disconnected_run_and_a_502() -> None:
    runs = RecentRuns()
    with serve(_BreaksOff(runs)) as target:
        client = TestClient(inspector_app(runs, send_to=SendTarget(f"{target.url}/agent")))
        answer = client.post("/api/send", content=json.dumps(RUN), headers=SAME_ORIGIN)
    assert answer.status_code == 502, answer.text
    assert "the target's stream broke off after 3 events" in answer.json()["error"]
    (run,) = runs.newest_first()
    assert run.outcome == "disconnected" and len(run) == 3
    assert run.request is not None and run.request["threadId"] == "t"


def test_a_stream_past_the_frame_cap_is_a_502_not_a_500() -> None:
    runs = RecentRuns()
    with serve(_Unframed()) as target:
        client = TestClient(inspector_app(runs, send_to=SendTarget(f"{target.url}/agent")))
        answer = client.post("/api/send", content=json.dumps(RUN), headers=SAME_ORIGIN)
    assert answer.status_code == 502, answer.text
    assert "malformed" in answer.json()["error"]
    # Nothing was framed: a stream with no event at all, rejected as such.
    assert [run.outcome for run in runs.newest_first()] == ["rejected"]


def test_a_target_is_shown_without_its_headers() -> None:
    target = SendTarget("https://agent.example/run", {"Authorization": "Bearer secret"})
    assert "secret" not in repr(target)
