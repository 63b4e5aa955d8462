"""One HTTP exchange with a live endpoint, recorded for ``verify URL``'s checks.

What the checks need is more than the events: the status and headers, every
SSE frame with the ``id:`` it carried, and the timing — the longest wait
between two received bytes (keep-alive comments count: they are bytes), from
the response headers to the end of the body. Everything is bounded: a deadline
(the command's ``--timeout``, shared by every exchange), the bytes of one
response (``--max-bytes``) and the size of one frame.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

import anyio

from .._client.frames import FrameReader
from ..codecs import DEFAULT_MAX_FRAME_BYTES, CodecError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ERROR_BODY_BYTES",
    "Exchange",
    "ExchangeFailed",
    "Frame",
    "TooLarge",
    "exchange",
    "remaining",
]

ERROR_BODY_BYTES: Final = 64 * 1024
"""How much of a response that is not a 200 event stream is kept (for its message)."""

Read = Literal["stream", "first", "answer", "head"]
"""How far to read: the whole stream; up to its first frame, then hang up; the body only
of an answer that is not a 200 (a 200's headers say enough); the headers only."""


class ExchangeFailed(Exception):
    """No response at all: the connection failed, or no headers came before the deadline."""


class TooLarge(Exception):
    """A response passed ``--max-bytes``."""


@dataclass(frozen=True)
class Frame:
    """One SSE frame: its ``id:`` (None when it had none) and its ``data`` payload."""

    event_id: str | None
    payload: bytes


@dataclass
class Exchange:
    """A response as the checks see it (see the module doc)."""

    status: int
    headers: Mapping[str, str]
    frames: list[Frame] = field(default_factory=list)
    body: bytes = b""
    """The first bytes of a response that is not a 200 event stream (nothing otherwise)."""
    largest_gap: float = 0.0
    """The longest wait, in seconds, between two received bytes (the headers first)."""
    frames_before_gap: int = 0
    duration: float = 0.0
    """Seconds from the headers to the end of the body (or to where reading stopped)."""
    complete: bool = False
    """The server ended the body; False when it was cut, or reading stopped first."""
    timed_out: bool = False
    cut: str | None = None
    """Why the body stopped early: a read error (the connection dropped)."""
    broken: CodecError | None = None
    """Bad framing (a frame over the cap, a frame left unfinished), after the frames before it."""

    @property
    def media_type(self) -> str:
        """The content type without its parameters, lowercased ('' when absent)."""
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def is_event_stream(self) -> bool:
        return self.status == 200 and self.media_type == "text/event-stream"


async def exchange(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    deadline: float,
    max_bytes: int,
    content: bytes | None = None,
    read: Read = "stream",
) -> Exchange:
    """Send one request and record its answer, within ``deadline`` (``anyio.current_time()``).

    A 200 answer's body is read as SSE frames, whatever its content type (the
    reference client parses any type but its protobuf one as SSE); any other
    answer keeps its first ``ERROR_BODY_BYTES``. Raises :class:`ExchangeFailed`
    when no headers arrive and :class:`TooLarge` past ``max_bytes``.
    """
    import httpx

    recorded: Exchange | None = None
    with anyio.move_on_at(deadline) as scope:
        try:
            async with client.stream(method, url, headers=headers, content=content) as response:
                recorded = Exchange(response.status_code, response.headers)
                if read != "head" and not (read == "answer" and response.status_code == 200):
                    await _read_body(response, recorded, read, max_bytes)
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            if recorded is None:
                raise ExchangeFailed(_describe(error)) from None
            recorded.cut = _describe(error)
    if recorded is None:
        assert scope.cancelled_caught
        raise ExchangeFailed("no response before the deadline (--timeout)")
    if scope.cancelled_caught:
        recorded.timed_out = True
        recorded.complete = False
    return recorded


async def _read_body(response: httpx.Response, recorded: Exchange, read: Read, cap: int) -> None:
    started = last = anyio.current_time()
    total = 0
    stream = recorded.status == 200
    reader = FrameReader(DEFAULT_MAX_FRAME_BYTES) if stream else None
    body = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            now = anyio.current_time()
            if now - last > recorded.largest_gap:
                recorded.largest_gap = now - last
                recorded.frames_before_gap = len(recorded.frames)
            last = now
            recorded.duration = now - started
            total += len(chunk)
            if total > cap:
                raise TooLarge(f"the response passed --max-bytes {cap:,} bytes")
            if reader is None:
                body += chunk[: max(ERROR_BODY_BYTES - len(body), 0)]
                continue
            try:
                frames = reader.feed(chunk)
            except CodecError as error:
                recorded.broken = error
                return
            recorded.frames.extend(Frame(event_id or None, payload) for event_id, payload in frames)
            if read == "first" and recorded.frames:
                return
        if reader is not None:
            try:
                reader.close()
            except CodecError as error:
                recorded.broken = error
        recorded.complete = True
    finally:
        # The silence since the last byte counts too when reading stopped early
        # (the deadline): a stream that went quiet and never ended.
        end = anyio.current_time()
        if not recorded.complete and end - last > recorded.largest_gap:
            recorded.largest_gap = end - last
            recorded.frames_before_gap = len(recorded.frames)
        recorded.duration = max(recorded.duration, end - started)
        recorded.body = bytes(body)


def _describe(error: Exception) -> str:
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if text != type(error).__name__ else text


def remaining(deadline: float) -> float:
    """Seconds left before ``deadline`` (never negative; inf stays inf)."""
    if math.isinf(deadline):
        return deadline
    return max(deadline - anyio.current_time(), 0.0)
