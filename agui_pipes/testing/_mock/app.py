"""The mock backend as an ASGI app: pick the answer to a request, plant faults, stream SSE.

Per POSTed ``RunAgentInput`` (read and validated by the serving layer's own
intake, ``agui_pipes.server._http.accept_run_input``, so a bad body is the
same 422 a real endpoint gives):

1. the answer: the first scenario that matches (a scripted run through the
   run driver, or its ``replay:`` file), else the next recording given with
   ``replay=``, else a run that ends in RUN_ERROR ``MOCK_NO_MATCH`` naming the
   scenarios — a frontend developer sees why in their own UI;
2. the faults: the scenario's, with those of the ``x-agui-mock-fault``
   header on top (``_mock_faults`` has the syntax);
3. the response: SSE with the serving layer's headers (``SSE_HEADERS``) and
   frames (``codecs.encode_sse``), a keep-alive comment after ``keepalive``
   seconds of silence, and the frame- and HTTP-level faults applied here.

In record mode (``recorder=``) every request is relayed to the upstream
instead, and saved (``_mock_record``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import anyio
from ag_ui.core import BaseEvent, RunAgentInput

from ...codecs import encode_sse, sse_comment
from ...driver import RunContext, RunError, run
from ...server._http import BadRequest, accept_run_input, send_json_error
from ...server._streaming import SSE_HEADERS, Receive, Scope, Send
from ...store import StoreError
from .durable import EventSource, FrameSource, MockRuns
from .faults import FAULT_HEADER, FaultPlan, MockDrop, mutate, parse_faults
from .replay import Recording, ReplayBook, paced, read_recordings
from .scenarios import Scenario, ScenarioFile
from .script import ScriptAgent, select

if TYPE_CHECKING:
    from .record import Recorder

__all__ = ["MALFORMED_FRAME", "MockApp"]

_log = logging.getLogger("agui_pipes.testing.mock")

MALFORMED_FRAME = b'data: {"type": "TEXT_MESSAGE_CONTENT", "messageId": \n\n'
"""The frame ``malformed=N`` sends: an SSE frame whose data is not JSON."""

_KEEPALIVE = sse_comment("keep-alive")


class _Truncate(Exception):
    """End the body here, cleanly (the ``truncate-after`` fault)."""


class MockApp:
    """The ASGI callable answering runs at one path (see the module docstring)."""

    def __init__(
        self,
        scenarios: ScenarioFile,
        *,
        replay: Sequence[Recording] = (),
        speed: float = 1.0,
        seed: int | None = None,
        keepalive: float | None = 15.0,
        recorder: Recorder | None = None,
        max_body_bytes: int = 10 * 1024 * 1024,
        durable: bool = False,
    ) -> None:
        self.scenarios = ScenarioFile(())
        self._files: dict[str, Recording] = {}
        self.use(scenarios)
        self.book = ReplayBook(replay)
        self.speed = speed
        self._seed = seed
        self.keepalive = keepalive
        self.recorder = recorder
        self.max_body_bytes = max_body_bytes
        self.requests: list[RunAgentInput] = []
        """Every valid request received, in order (what a test asserts the frontend sent)."""
        self.runs = MockRuns() if durable else None
        """The durable runs (``durable=True``): ids, resume and join (``durable.py``)."""

    @property
    def seed(self) -> int:
        """The seed of the interrupt ids and the jitter: the one given, else the file's."""
        return self.scenarios.seed if self._seed is None else self._seed

    def use(self, scenarios: ScenarioFile) -> None:
        """Answer from ``scenarios`` from now on (their ``replay:`` files read here, once,
        so an unreadable one is a ``ReplayError`` now rather than a failed request)."""
        files = {
            str(s.replay): self._files.get(str(s.replay)) or read_recordings([s.replay])[0]
            for s in scenarios.scenarios
            if s.replay is not None
        }
        self._files, self.scenarios = files, scenarios

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        accepted = await accept_run_input(
            scope, receive, send, app="the mock backend", max_body=self.max_body_bytes, log=_log
        )
        if accepted is None:
            return
        body, request = accepted
        self.requests.append(request)
        if self.recorder is not None:
            await self.recorder.relay(scope, receive, send, body, request)
            return
        scenario = select(self.scenarios.scenarios, request)
        plan = scenario.faults if scenario is not None and scenario.faults else FaultPlan()
        header = _header(scope, FAULT_HEADER)
        if header is not None:
            try:
                plan = plan.over(parse_faults(header))
            except ValueError as exc:
                await send_json_error(
                    send, BadRequest(400, "invalid_fault", f"{FAULT_HEADER}: {exc}")
                )
                return
        events = _mutated(self._source(scenario, request), plan)
        if self.runs is None:
            await self._respond(plan, _encoded(events), receive, send)
            return
        if plan.status is None:  # a run answered with an HTTP error never starts
            await self.runs.start(request, events)
        await self._respond(plan, self.runs.frames(request.run_id), receive, send)

    async def resume(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``GET {path}runs/{runId}``: the rest of a durable run after ``Last-Event-ID``.

        Without the header (or ``?after=``) the run from its first event: a join.
        The request's ``x-agui-mock-fault`` frame- and HTTP-level faults apply.
        """
        assert self.runs is not None, "the resume route is served for durable=True only"
        run_id = str(scope.get("path_params", {}).get("run_id", ""))
        last_event_id = _header(scope, "last-event-id")
        if last_event_id is None:
            after = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after")
            last_event_id = after[-1] if after else None
        try:
            plan = parse_faults(_header(scope, FAULT_HEADER) or "")
        except ValueError as exc:
            await send_json_error(send, BadRequest(400, "invalid_fault", f"{FAULT_HEADER}: {exc}"))
            return
        try:
            start = await self.runs.resume_after(run_id, last_event_id)
        except StoreError as exc:
            await send_json_error(send, BadRequest(exc.http_status, "resume_failed", str(exc)))
            return
        await self._respond(plan, self.runs.frames(run_id, start), receive, send)

    def _source(self, scenario: Scenario | None, request: RunAgentInput) -> EventSource:
        if scenario is not None and scenario.replay is not None:
            recording = self._files[str(scenario.replay)]
            return _replayed(recording, scenario.speed or self.speed)
        if scenario is not None:
            agent = ScriptAgent(scenario, self.seed)
            return lambda: run(agent, request)
        if self.book:
            return _replayed(self.book.pick(request), self.speed)
        names = ", ".join(s.name for s in self.scenarios.scenarios) or "(none)"

        async def unmatched(ctx: RunContext) -> None:
            raise RunError(
                "MOCK_NO_MATCH",
                f"no mock scenario matches this request (scenarios: {names})",
            )

        return lambda: run(unmatched, request)

    async def _respond(
        self, plan: FaultPlan, frames: FrameSource, receive: Receive, send: Send
    ) -> None:
        if plan.first_byte:
            await anyio.sleep(plan.first_byte)
        if plan.status is not None:
            await _send_status(send, plan)
            return
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        writer = _Writer(send, self.keepalive)
        dropped: MockDrop | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(_watch_disconnect, receive, group.cancel_scope)
            group.start_soon(writer.tick)
            try:
                await _stream(plan, frames, writer)
            except _Truncate:
                pass
            except MockDrop as exc:
                dropped = exc
            group.cancel_scope.cancel()
        if dropped is not None:
            raise dropped  # outside the task group: the server sees this one exception
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _stream(plan: FaultPlan, frames: FrameSource, writer: _Writer) -> None:
    sent = 0
    async with frames() as stream:
        async for frame in stream:
            await _planted_at(sent, plan, writer)
            await writer.write(frame)
            sent += 1
    await _planted_at(sent, plan, writer)


def _mutated(source: EventSource, plan: FaultPlan) -> EventSource:
    """``source`` with the plan's event-level faults applied."""

    @asynccontextmanager
    async def opened() -> AsyncIterator[AsyncIterator[BaseEvent]]:
        async with source() as events:
            yield mutate(events, plan)

    return opened


def _encoded(source: EventSource) -> FrameSource:
    """``source``'s events as SSE frames (``codecs.encode_sse``)."""

    @asynccontextmanager
    async def opened() -> AsyncIterator[AsyncIterator[bytes]]:
        async with source() as events:
            yield (encode_sse(event) async for event in events)

    return opened


def _header(scope: Scope, name: str) -> str | None:
    wanted = name.encode()
    for key, value in scope.get("headers", ()):
        if key.lower() == wanted:
            return bytes(value).decode("latin-1")
    return None


@asynccontextmanager
async def _paced(recording: Recording, speed: float) -> AsyncIterator[AsyncIterator[BaseEvent]]:
    yield paced(recording, speed)


def _replayed(recording: Recording, speed: float) -> EventSource:
    return lambda: _paced(recording, speed)


async def _send_status(send: Send, plan: FaultPlan) -> None:
    status = plan.status or 500
    body = json.dumps(
        {"error": "mock_fault", "message": f"the mock answered {status} (planted fault)"}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if plan.retry_after is not None:
        headers.append((b"retry-after", f"{plan.retry_after:g}".encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _planted_at(sent: int, plan: FaultPlan, writer: _Writer) -> None:
    """The faults due once ``sent`` events went out, in the order the table lists them."""
    for after, seconds in plan.stalls:
        if after == sent:
            with writer.silent():
                await anyio.sleep(seconds)
    if plan.malformed_after == sent:
        await writer.write(MALFORMED_FRAME)
    if plan.keepalive is not None and plan.keepalive[0] == sent:
        interval = plan.keepalive[1]
        with writer.silent():
            while True:
                await anyio.sleep(interval)
                await writer.write(_KEEPALIVE)
    if plan.truncate_after == sent:
        raise _Truncate
    if plan.drop_after == sent:
        raise MockDrop(f"drop-after={sent}: connection cut by a planted fault")


class _Writer:
    """Sends frames, and a keep-alive comment after ``keepalive`` seconds of silence."""

    def __init__(self, send: Send, keepalive: float | None) -> None:
        self._send = send
        self._keepalive = keepalive
        self._last = anyio.current_time()
        self._quiet = 0

    async def write(self, frame: bytes) -> None:
        self._last = anyio.current_time()
        await self._send({"type": "http.response.body", "body": frame, "more_body": True})

    def silent(self) -> _Silence:
        """No automatic keep-alives while the block runs (a stall is silence)."""
        return _Silence(self)

    async def tick(self) -> None:
        interval = self._keepalive
        if interval is None:
            return
        while True:
            await anyio.sleep(max(0.0, self._last + interval - anyio.current_time()))
            if not self._quiet and anyio.current_time() - self._last >= interval:
                await self.write(_KEEPALIVE)
            elif self._quiet:
                self._last = anyio.current_time()


class _Silence:
    def __init__(self, writer: _Writer) -> None:
        self._writer = writer

    def __enter__(self) -> None:
        self._writer._quiet += 1

    def __exit__(self, *exc: object) -> None:
        self._writer._quiet -= 1
        self._writer._last = anyio.current_time()
