"""agui_pipes.client against servers that lie, flood, stall and redirect.

Each server here is a raw TCP server on 127.0.0.1 in the test's own event loop
(asyncio or trio), writing the HTTP answer byte by byte as the test scripts it:
frames with a gap, a duplicate or another run's ids after a resume, a stream
without end, a 100 MB frame, a drip of one byte per 100 ms, keep-alive comments
only, a drop after every event, a redirect to another origin, error bodies
that are not JSON. Each must end within a bounded time (``fail_after``) in the
client's named error; the bounds are set small so the cases finish fast (what
the defaults bound memory to is measured in the benchmarks, not here).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream

from agui_pipes.client import (
    BadResponse,
    ByteLimitExceeded,
    Client,
    ClientError,
    ClientLimitExceeded,
    ConnectionFailed,
    CrossOriginRedirect,
    DurationLimitExceeded,
    EventLimitExceeded,
    FrameLimitExceeded,
    IdleLimitExceeded,
    OutOfSequence,
    ReconnectLimitExceeded,
    RedirectLimitExceeded,
    ResumeFailed,
    ServerError,
)

pytestmark = pytest.mark.anyio

RUN_INPUT = {"threadId": "t", "runId": "r", "messages": []}
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: close\r\n\r\n"
)
# Every case must end well within this, limits included.
BOUND = 10.0


@dataclass
class Seen:
    """One request as the server read it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    url: str
    seen: list[Seen] = field(default_factory=list)
    sent: int = 0  # body bytes written, over all connections


Handler = Callable[[int, Seen, SocketStream, Server], Awaitable[None]]


async def _read_request(stream: SocketStream) -> Seen:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        body += await stream.receive()
    return Seen(method, path, headers, body)


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[Server]:
    """A loopback HTTP/1.1 server whose every answer ``handler`` writes itself."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    server = Server(f"http://127.0.0.1:{listener.extra(SocketAttribute.local_port)}")

    async def serve_one(stream: SocketStream) -> None:
        async with stream:
            try:
                request = await _read_request(stream)
                server.seen.append(request)
                await handler(len(server.seen) - 1, request, stream, server)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                pass  # the client hung up: what a refusal looks like from here

    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, serve_one)
        yield server
        group.cancel_scope.cancel()


async def send(stream: SocketStream, server: Server, data: bytes) -> None:
    server.sent += len(data)
    await stream.send(data)


def frame(seq: int | None, event: dict[str, Any], run: str = "r", epoch: str = "e1") -> bytes:
    data = b"data: " + json.dumps(event).encode() + b"\n\n"
    return data if seq is None else f"id: {epoch}:{run}:{seq}\n".encode() + data


STARTED = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
MESSAGE = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
END = {"type": "TEXT_MESSAGE_END", "messageId": "m"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def delta(text: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": text}


# The run every lying server starts: three frames, then the connection drops.
HEAD_FRAMES = [frame(1, STARTED), frame(2, MESSAGE), frame(3, delta("Hello "))]


def _client(**options: Any) -> Client:
    return Client(backoff=0.01, timeout=BOUND, **options)


async def _drain(client: Client, url: str) -> list[Any]:
    async with client.run(f"{url}/agent", RUN_INPUT) as events:
        return [event async for event in events]


def resumed_with(tail: list[bytes]) -> Handler:
    """The first answer is ``HEAD_FRAMES`` then a drop; a resume answers ``tail``."""

    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD)
        for data in HEAD_FRAMES if index == 0 else tail:
            await send(stream, server, data)

    return handler


@pytest.mark.parametrize(
    ("tail", "expected", "got", "why"),
    [
        ([frame(5, delta("!")), frame(6, END)], "e1:r:4", "e1:r:5", "a gap, 1 event"),
        ([frame(3, delta("Hello ")), frame(4, delta("world"))], "e1:r:4", "e1:r:3", "duplicate"),
        ([frame(4, delta("OTHER RUN"), run="other")], "e1:r:4", "e1:other:4", "another run"),
        ([frame(4, delta("x"), epoch="e2")], "e1:r:4", "e2:r:4", "another store epoch"),
        ([frame(None, delta("world"))], "e1:r:4", "", "has no id"),
        ([b"id: 4\ndata: " + json.dumps(delta("w")).encode() + b"\n\n"], "e1:r:4", "4", "unpars"),
    ],
    ids=["gap", "duplicate", "foreign-run", "foreign-epoch", "no-id", "bad-id"],
)
async def test_a_resume_that_does_not_continue_the_run_is_refused(
    tail: list[bytes], expected: str, got: str, why: str
) -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(resumed_with(tail)) as server, _client() as client:
            with pytest.raises(OutOfSequence, match=why) as caught:
                await _drain(client, server.url)
    assert isinstance(caught.value, ResumeFailed)
    assert (caught.value.expected, caught.value.got) == (expected, got)
    assert repr(expected) in str(caught.value) and repr(got) in str(caught.value)
    resume = server.seen[1]
    assert (resume.method, resume.path) == ("GET", "/agent/runs/r")
    assert resume.headers["last-event-id"] == "e1:r:3"


async def test_ids_out_of_order_within_one_connection_are_refused_too() -> None:
    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD + frame(1, STARTED) + frame(3, MESSAGE))

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client() as client:
            with pytest.raises(OutOfSequence, match="a gap"):
                await _drain(client, server.url)
    assert len(server.seen) == 1


async def test_a_first_frame_of_another_run_is_refused() -> None:
    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD + frame(1, STARTED, run="other"))

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client() as client:
            with pytest.raises(OutOfSequence, match="another run's id"):
                await _drain(client, server.url)


async def test_an_honest_resume_still_gives_one_unbroken_run() -> None:
    tail = [frame(4, delta("world")), frame(5, END), frame(6, FINISHED)]
    with anyio.fail_after(BOUND):
        async with raw_server(resumed_with(tail)) as server, _client() as client:
            async with client.run(f"{server.url}/agent", RUN_INPUT) as events:
                [_ async for _ in events]
                result = events.result()
            assert events.reconnects == 1 and events.last_event_id == "e1:r:6"
    assert result.outcome == "success"
    assert result.messages[-1]["content"] == "Hello world"


async def _endless(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
    await send(stream, server, SSE_HEAD + frame(1, STARTED) + frame(2, MESSAGE))
    seq = 3
    while True:
        await send(stream, server, b"".join(frame(seq + n, delta("tick ")) for n in range(50)))
        seq += 50


async def test_an_endless_stream_ends_at_max_events() -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(_endless) as server, _client(max_events=2000) as client:
            with pytest.raises(EventLimitExceeded, match=r"max_events=2000.*Client\(max_events="):
                await _drain(client, server.url)


async def test_an_endless_stream_ends_at_max_bytes() -> None:
    with anyio.fail_after(BOUND):
        async with raw_server(_endless) as server, _client(max_bytes=200_000) as client:
            with pytest.raises(ByteLimitExceeded, match="max_bytes=200000") as caught:
                await _drain(client, server.url)
    assert caught.value.limit == "max_bytes" and caught.value.value == 200_000
    assert isinstance(caught.value, ClientLimitExceeded)


async def test_a_100_mb_frame_is_refused_at_the_frame_cap() -> None:
    piece = b"x" * 65536

    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD + frame(1, STARTED))
        await send(stream, server, b'id: e1:r:2\ndata: {"type":"CUSTOM","name":"n","value":"')
        for _ in range(100 * 1024 * 1024 // len(piece)):
            await send(stream, server, piece)

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client(max_frame_bytes=256 * 1024) as client:
            with pytest.raises(FrameLimitExceeded, match="max_frame_bytes=262144"):
                await _drain(client, server.url)
    # Refused at the cap, not after the whole frame: the server was cut off early.
    assert server.sent < 50 * 1024 * 1024


async def test_a_slow_drip_ends_at_max_idle() -> None:
    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD + frame(1, STARTED))
        for byte in frame(2, MESSAGE) * 1000:
            await send(stream, server, bytes([byte]))
            await anyio.sleep(0.1)

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client(max_idle=0.6) as client:
            with pytest.raises(IdleLimitExceeded, match=r"no event for max_idle=0.6 s"):
                await _drain(client, server.url)


async def test_keepalives_alone_end_at_max_idle() -> None:
    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD + frame(1, STARTED))
        while True:
            await send(stream, server, b": keep-alive\n\n")
            await anyio.sleep(0.05)

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client(max_idle=0.5) as client:
            with pytest.raises(IdleLimitExceeded, match="keep-alive comments"):
                await _drain(client, server.url)


async def test_events_just_often_enough_end_at_max_duration() -> None:
    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD + frame(1, STARTED) + frame(2, MESSAGE))
        seq = 3
        while True:
            await anyio.sleep(0.1)
            await send(stream, server, frame(seq, delta(".")))
            seq += 1

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client(max_idle=1.0, max_duration=0.8) as client:
            with pytest.raises(DurationLimitExceeded, match=r"max_duration=0.8 s"):
                await _drain(client, server.url)


async def test_a_drop_after_every_event_ends_at_max_reconnects() -> None:
    events = [STARTED, MESSAGE, *(delta(f"w{n} ") for n in range(100))]

    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        # An honest log, one event per connection: every resume makes progress.
        await send(stream, server, SSE_HEAD + frame(index + 1, events[index]))

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client(max_reconnects=3) as client:
            with pytest.raises(ReconnectLimitExceeded, match="max_reconnects=3") as caught:
                await _drain(client, server.url)
    assert isinstance(caught.value, ResumeFailed)
    assert len(server.seen) == 4  # the POST and three resumes
    assert [seen.headers.get("last-event-id") for seen in server.seen] == [
        None,
        "e1:r:1",
        "e1:r:2",
        "e1:r:3",
    ]


async def test_a_redirect_to_another_origin_is_never_followed() -> None:
    async def elsewhere(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD + frame(1, STARTED) + frame(2, FINISHED))

    async with raw_server(elsewhere) as other:

        async def redirect(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
            if index == 0:  # the POST: a first frame, then a drop
                await send(stream, server, SSE_HEAD + frame(1, STARTED))
                return
            location = f"{other.url}/agent/runs/r"
            await send(
                stream,
                server,
                f"HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\n"
                "content-length: 0\r\nconnection: close\r\n\r\n".encode(),
            )

        with anyio.fail_after(BOUND):
            async with (
                raw_server(redirect) as server,
                _client(headers={"authorization": "Bearer secret"}) as client,
            ):
                with pytest.raises(CrossOriginRedirect) as caught:
                    await _drain(client, server.url)
        message = str(caught.value)
        assert other.url in message and server.url in message
        assert caught.value.status == 307
        assert other.seen == []  # not one request (nor its credentials) reached it


async def test_a_same_origin_redirect_is_followed_and_a_loop_is_bounded() -> None:
    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        if request.path == "/agent":
            target = "/v2/agent"
        elif request.path.startswith("/loop"):
            target = f"/loop{index}"
        else:
            await send(stream, server, SSE_HEAD + frame(1, STARTED) + frame(2, FINISHED))
            return
        await send(
            stream,
            server,
            f"HTTP/1.1 308 Permanent Redirect\r\nlocation: {target}\r\ncontent-length: 0\r\n"
            "connection: close\r\n\r\n".encode(),
        )

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client(max_redirects=3) as client:
            got = await _drain(client, server.url)
            assert [event.type.value for event in got] == ["RUN_STARTED", "RUN_FINISHED"]
            assert server.seen[1].method == "POST" and server.seen[1].body == server.seen[0].body
            with pytest.raises(RedirectLimitExceeded, match="max_redirects=3"):
                await _drain(client, f"{server.url}/loop")
        async with raw_server(handler) as server, _client(follow_redirects=False) as client:
            with pytest.raises(ServerError) as caught:
                await _drain(client, server.url)
            assert caught.value.status == 308


def _answer(status: str, content_type: str, body: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


async def test_error_bodies_that_are_not_json_become_server_errors() -> None:
    page = b"<html><body>502 Bad Gateway: upstream gone</body></html>"
    huge = b"<html>" + b"x" * (8 * 1024 * 1024) + b"</html>"

    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        if request.path == "/agent":
            await send(stream, server, _answer("502 Bad Gateway", "text/html", page))
        elif request.path.startswith("/huge"):
            await send(stream, server, _answer("500 Internal Server Error", "text/html", huge))
        elif request.path.startswith("/html"):  # a 200 that is no event stream
            await send(stream, server, _answer("200 OK", "text/html", page))
        elif request.path == "/agent/runs/r/stop":
            await send(stream, server, _answer("500 Internal Server Error", "text/plain", page))
        elif request.path == "/plain/runs/r/stop":
            await send(stream, server, _answer("200 OK", "text/plain", b"stopped, I think"))
        else:  # JSON, but not the object the stop route answers with
            await send(stream, server, _answer("200 OK", "application/json", b"[1, 2]"))

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client() as client:
            with pytest.raises(ServerError) as caught:
                await _drain(client, server.url)
            assert caught.value.status == 502 and caught.value.code is None
            assert "upstream gone" in caught.value.message
            with pytest.raises(ServerError) as caught:
                await _drain(client, f"{server.url}/huge")
            assert caught.value.status == 500 and len(str(caught.value)) < 1000
            with pytest.raises(BadResponse, match="text/html"):
                await _drain(client, f"{server.url}/html")
            with pytest.raises(ServerError, match="upstream gone") as caught:
                await client.stop(f"{server.url}/agent", "r")
            assert caught.value.status == 500
            with pytest.raises(BadResponse, match="not a JSON object: stopped, I think"):
                await client.stop(f"{server.url}/plain", "r")
            with pytest.raises(BadResponse, match=r"not a JSON object: \[1, 2\]"):
                await client.stop(f"{server.url}/json", "r")


async def test_history_is_bounded_and_its_errors_are_client_errors() -> None:
    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        if request.path.endswith("/cut"):  # ends in the middle of a frame
            await send(stream, server, SSE_HEAD + frame(None, STARTED)[:20])
        else:
            await _endless(index, request, stream, server)

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client(max_events=500) as client:
            with pytest.raises(EventLimitExceeded):
                await client.history(f"{server.url}/agent", "t")
            with pytest.raises(ClientError, match="middle of a frame"):
                await client.history(f"{server.url}/agent", "cut")
        async with _client() as client:
            with pytest.raises(ConnectionFailed):  # nothing listens there
                await client.history(f"{server.url}/agent", "t")


async def test_a_live_run_after_the_history_has_its_ids_checked() -> None:
    history = [
        frame(None, {"type": "RUN_STARTED", "threadId": "t", "runId": "history:r0"}),
        frame(None, {"type": "RUN_FINISHED", "threadId": "t", "runId": "history:r0"}),
    ]
    live = [frame(1, STARTED), frame(2, MESSAGE), frame(4, delta("!"))]

    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD + b"".join(history + live))

    with anyio.fail_after(BOUND):
        async with raw_server(handler) as server, _client() as client:
            with pytest.raises(OutOfSequence, match="a gap") as caught:
                await client.history(f"{server.url}/agent", "t")
    assert (caught.value.expected, caught.value.got) == ("e1:r:3", "e1:r:4")


async def test_a_server_that_is_not_there_fails_at_once() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)
    await listener.aclose()  # a port nothing listens on
    with anyio.fail_after(BOUND):
        async with _client() as client:
            with pytest.raises(ConnectionFailed, match="POST"):
                await _drain(client, f"http://127.0.0.1:{port}")
            with pytest.raises(ConnectionFailed, match="stop"):
                await client.stop(f"http://127.0.0.1:{port}/agent", "r")


async def test_bounds_are_checked_when_the_client_is_made() -> None:
    for name in ("max_frame_bytes", "max_events", "max_bytes", "max_idle", "max_duration"):
        with pytest.raises(ValueError, match=name):
            Client(**{name: 0})
    with pytest.raises(ValueError, match="max_reconnects"):
        Client(max_reconnects=-1)


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
async def test_frames_cut_anywhere_keep_their_own_ids(line_end: bytes) -> None:
    events = [STARTED, MESSAGE, *(delta(f"w{n} ") for n in range(30)), END, FINISHED]
    body = b"".join(frame(n + 1, event) + b": note\n\n" for n, event in enumerate(events))
    body = body.replace(b"\n", line_end)

    async def handler(index: int, request: Seen, stream: SocketStream, server: Server) -> None:
        await send(stream, server, SSE_HEAD)
        for at in range(0, len(body), 7):  # small writes: frames split at every offset
            await send(stream, server, body[at : at + 7])
            await anyio.sleep(0.0005)  # so the client reads them apart

    with anyio.fail_after(BOUND):
        async with (
            raw_server(handler) as server,
            _client() as client,
            client.run(f"{server.url}/agent", RUN_INPUT) as run,
        ):
            got = [event async for event in run]
            result = run.result()
    assert len(got) == len(events) and run.last_event_id == f"e1:r:{len(events)}"
    assert result.messages[-1]["content"] == "".join(f"w{n} " for n in range(30))


def test_the_errors_survive_a_pickle() -> None:
    errors = [
        ServerError("GET", "http://h/agent", 502, None, "<html>"),
        CrossOriginRedirect("GET", "http://h/agent", 307, None, "to http://e:80"),
        OutOfSequence("a gap", "e1:r:4", "e1:r:5"),
        ReconnectLimitExceeded("giving up", "max_reconnects", 3),
        IdleLimitExceeded("no event", "max_idle", 0.5),
    ]
    for error in errors:
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert vars(again) == vars(error)
