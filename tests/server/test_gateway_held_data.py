"""What a stage holds reaches the client before the gateway's own RUN_ERROR (issue 27).

``redact`` holds back the end of each streamed message (a secret may continue
in the next delta). An upstream that stops mid-run used to lose that text:
the client got TEXT_MESSAGE_START, then RUN_ERROR UPSTREAM_TRUNCATED, while
``agui-pipes run`` over the same events released it. Now every way a
gateway run ends early — the upstream cut off, its connection broken, a
malformed frame, a stage raising — releases what the stages hold, redacted,
through the stages after them, and only then writes the RUN_ERROR.

Real loopback HTTP, both gateway paths (the relay of a sync chain, and
``chain.apply`` for a chain with an async stage), both wire paths.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent
from starlette.applications import Starlette
from starlette.routing import Route

from agui_pipes import AsyncStreamTransformer, StreamTransformer, TransformerChain
from agui_pipes.codecs import SSEDecoder
from agui_pipes.server import Gateway
from agui_pipes.transformers import Redact
from tests._servers import EVENT, RecordedUpstream, post_run, run_input, serve

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = [pytest.mark.anyio, pytest.mark.wire]

SECRET = "sk-ABCDEFGHIJKLMNOPQRSTUVWX"


def _frames(*events: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


STARTED = {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"}
OPENED = {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}
CONTENT = [
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Your key is "},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": SECRET[:10]},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": SECRET[10:] + ", keep it."},
]
CUT_MID_RUN = _frames(STARTED, OPENED, *CONTENT)


class Shout(StreamTransformer):
    """A stage after Redact: what Redact releases must pass through it too."""

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        delta = getattr(event, "delta", None)
        if isinstance(delta, str):
            return (event.model_copy(update={"delta": delta.upper()}),)
        return (event,)


class AsyncPass(AsyncStreamTransformer):
    """Makes the chain async: the gateway then runs it through ``chain.apply``."""

    async def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        return (event,)


def _chain(kind: str) -> TransformerChain:
    stages: list[Any] = [Redact(patterns=[r"sk-[A-Za-z0-9]{20,}"], replacement="[KEY]"), Shout()]
    if kind == "apply":
        stages.append(AsyncPass())
    return TransformerChain(stages)


async def _gateway_run(body: bytes, chain: TransformerChain) -> list[BaseEvent]:
    upstream_app = Starlette(routes=[Route("/", RecordedUpstream(body), methods=["POST"])])
    with serve(upstream_app) as upstream:
        gateway = Gateway(upstream.url + "/", chain=chain)
        app = Starlette(routes=gateway.routes("/"), lifespan=gateway.lifespan)
        with serve(app) as served:
            async with httpx.AsyncClient(timeout=30) as client:
                response, events = await post_run(client, served.url + "/", run_input())
    assert response.status_code == 200
    return events


def _text(events: Sequence[BaseEvent]) -> str:
    return "".join(e.delta for e in events if e.type.value == "TEXT_MESSAGE_CONTENT")  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["relay", "apply"])
async def test_redacted_text_held_at_a_cut_reaches_the_client_before_the_run_error(
    kind: str,
) -> None:
    events = await _gateway_run(CUT_MID_RUN, _chain(kind))
    types = [e.type.value for e in events]
    assert types[:2] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    assert types[-1] == "RUN_ERROR"
    assert events[-1].code == "UPSTREAM_TRUNCATED"  # type: ignore[attr-defined]
    # All of it, redacted, and through the stage after Redact; never the key itself.
    assert _text(events) == "YOUR KEY IS [KEY], KEEP IT."
    assert SECRET not in json.dumps([e.model_dump(mode="json") for e in events])
    assert "RUN_ERROR" not in types[:-1]


@pytest.mark.parametrize("kind", ["relay", "apply"])
async def test_held_text_comes_before_the_error_of_a_malformed_frame(kind: str) -> None:
    body = CUT_MID_RUN + b"data: {not json\n\n"
    events = await _gateway_run(body, _chain(kind))
    assert events[-1].code == "UPSTREAM_MALFORMED"  # type: ignore[attr-defined]
    assert _text(events) == "YOUR KEY IS [KEY], KEEP IT."


@pytest.mark.parametrize("kind", ["relay", "apply"])
async def test_held_text_comes_before_the_error_of_a_frame_cut_in_half(kind: str) -> None:
    body = CUT_MID_RUN + b'data: {"type": "TEXT_MESSAGE_CONT'
    events = await _gateway_run(body, _chain(kind))
    assert events[-1].code == "UPSTREAM_TRUNCATED"  # type: ignore[attr-defined]
    assert _text(events) == "YOUR KEY IS [KEY], KEEP IT."


class FailsOnEnd(StreamTransformer):
    """A stage that raises on the first TEXT_MESSAGE_END it sees (a bug)."""

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.type.value == "TEXT_MESSAGE_END":
            raise RuntimeError("boom")
        return (event,)


class Hold(StreamTransformer):
    """Holds every TEXT_MESSAGE_CONTENT until the end of the stream (a holding stage)."""

    def __init__(self) -> None:
        self.held: list[BaseEvent] = []

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.type.value == "TEXT_MESSAGE_CONTENT":
            self.held.append(event)
            return ()
        return (event,)

    def finish(self) -> Sequence[BaseEvent]:
        held, self.held = self.held, []
        return held


async def test_a_failing_stage_keeps_the_held_data_before_it_and_releases_what_is_after_it() -> (
    None
):
    """The rule for a stage failure: nothing passes through the stage that raised.

    ``Hold`` before the failing stage: its text would have to pass the failed
    stage, so it is not sent. ``Redact`` after it: what it holds came through
    the failing stage while it worked, and is released.
    """
    body = _frames(
        STARTED,
        OPENED,
        *CONTENT,
        {"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "second"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"},
    )

    class HoldSecond(Hold):
        def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
            if getattr(event, "message_id", None) == "m2" and event.type.value.endswith("CONTENT"):
                self.held.append(event)
                return ()
            return (event,)

    chain = TransformerChain(
        [HoldSecond(), FailsOnEnd(), Redact(patterns=[r"sk-[A-Za-z0-9]{20,}"], replacement="[K]")]
    )
    events = await _gateway_run(body, chain)
    assert events[-1].code == "STAGE_ERROR"  # type: ignore[attr-defined]
    assert _text(events) == "Your key is [K], keep it."  # m1 only: m2's text stays held


class SilentAfter:
    """An upstream that sends ``body``, then nothing more (until the gateway gives up)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body", False):
            pass
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass


@pytest.mark.parametrize("kind", ["relay", "apply"])
async def test_held_text_comes_before_the_error_of_an_upstream_gone_silent(kind: str) -> None:
    upstream_app = Starlette(routes=[Route("/", SilentAfter(CUT_MID_RUN), methods=["POST"])])
    with serve(upstream_app) as upstream:
        timeout = httpx.Timeout(5.0, read=0.5)
        gateway = Gateway(upstream.url + "/", chain=_chain(kind), timeout=timeout)
        app = Starlette(routes=gateway.routes("/"), lifespan=gateway.lifespan)
        with serve(app) as served:
            async with httpx.AsyncClient(timeout=30) as client:
                _, events = await post_run(client, served.url + "/", run_input())
    assert events[-1].code == "UPSTREAM_TIMEOUT"  # type: ignore[attr-defined]
    assert _text(events) == "YOUR KEY IS [KEY], KEEP IT."


@pytest.mark.parametrize("kind", ["relay", "apply"])
async def test_a_recorded_run_logs_the_held_text_before_its_run_error(
    kind: str, tmp_path: Path
) -> None:
    upstream_app = Starlette(routes=[Route("/", RecordedUpstream(CUT_MID_RUN), methods=["POST"])])
    with serve(upstream_app) as upstream:
        store = f"sqlite:///{tmp_path / 'runs.db'}"
        gateway = Gateway(upstream.url + "/", chain=_chain(kind), store=store, keepalive=None)
        app = Starlette(routes=gateway.routes("/chat"), lifespan=gateway.lifespan)
        with serve(app) as served:
            async with httpx.AsyncClient(timeout=30) as client:
                _, events = await post_run(client, served.url + "/chat", run_input())
                replay = await client.get(served.url + "/chat/runs/run-1")
    assert events[-1].code == "UPSTREAM_TRUNCATED"  # type: ignore[attr-defined]
    assert _text(events) == "YOUR KEY IS [KEY], KEEP IT."
    logged = [EVENT.validate_json(p) for p in SSEDecoder().feed_bytes(replay.content)]
    assert logged == events  # the log holds what the client got, in the same order
