"""The client's bounds on one run: what it will accept from a server before it stops.

A server can send anything: frames without end, a frame of 100 MB, one byte
every 100 ms, keep-alive comments forever, a drop after every event. Each of
those ends in a bounded time and memory with its own error, naming the option
that raises the bound. The defaults are far above what a real run needs and
low enough that a broken or hostile server cannot take the process down.

Time is bounded twice, because one clock is not enough: ``max_idle`` is the
longest wait for the next *event* (bytes that are not a whole frame, and
keep-alive comments, do not reset it — a server that only keeps the
connection alive is idle), and ``max_duration`` is the run's whole life, so
a server that sends an event just often enough still ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from ..codecs import DEFAULT_MAX_FRAME_BYTES
from .errors import (
    ByteLimitExceeded,
    ClientLimitExceeded,
    DurationLimitExceeded,
    EventLimitExceeded,
    FrameLimitExceeded,
    IdleLimitExceeded,
    ReconnectLimitExceeded,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DURATION",
    "DEFAULT_MAX_EVENTS",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_MAX_IDLE",
    "DEFAULT_MAX_RECONNECTS",
    "DEFAULT_MAX_REDIRECTS",
    "Bounds",
    "RunBudget",
]

DEFAULT_MAX_EVENTS = 250_000
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
DEFAULT_MAX_IDLE = 300.0
DEFAULT_MAX_DURATION = 3600.0
DEFAULT_MAX_RECONNECTS = 10
DEFAULT_MAX_REDIRECTS = 5


@dataclass(frozen=True, slots=True)
class Bounds:
    """The client's bounds (each a ``Client`` keyword of the same name)."""

    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_events: int = DEFAULT_MAX_EVENTS
    max_bytes: int = DEFAULT_MAX_BYTES
    max_idle: float = DEFAULT_MAX_IDLE
    max_duration: float = DEFAULT_MAX_DURATION
    max_reconnects: int = DEFAULT_MAX_RECONNECTS
    max_redirects: int = DEFAULT_MAX_REDIRECTS

    def __post_init__(self) -> None:
        for name in ("max_frame_bytes", "max_events", "max_bytes", "max_idle", "max_duration"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        for name in ("max_reconnects", "max_redirects"):
            value = getattr(self, name)
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")


def _raise_it(limit: str) -> str:
    return f"if the server is trusted and this is expected, raise it: Client({limit}=...)"


@dataclass(slots=True)
class RunBudget:
    """What one run (or one history stream) has used of the bounds, and its deadlines."""

    bounds: Bounds
    what: str  # "run 'r1' at http://..." for messages
    started: float = field(default_factory=anyio.current_time)
    last_event: float = 0.0
    events: int = 0
    bytes: int = 0
    reconnects: int = 0

    def __post_init__(self) -> None:
        self.last_event = self.started

    def deadline(self) -> tuple[float, str]:
        """When the current wait must end, and which bound ends it."""
        idle = self.last_event + self.bounds.max_idle
        total = self.started + self.bounds.max_duration
        return (idle, "max_idle") if idle < total else (total, "max_duration")

    def expired(self, limit: str) -> ClientLimitExceeded:
        """The error of the deadline ``limit`` that ended a wait."""
        if limit == "max_idle":
            idle = self.bounds.max_idle
            return IdleLimitExceeded(
                f"{self.what}: no event for max_idle={idle:g} s (keep-alive comments and "
                f"partial frames do not count); {_raise_it('max_idle')}",
                "max_idle",
                idle,
            )
        total = self.bounds.max_duration
        return DurationLimitExceeded(
            f"{self.what}: not ended within max_duration={total:g} s; {_raise_it('max_duration')}",
            "max_duration",
            total,
        )

    def received(self, size: int) -> None:
        self.bytes += size
        if self.bytes > self.bounds.max_bytes:
            cap = self.bounds.max_bytes
            raise ByteLimitExceeded(
                f"{self.what}: more than max_bytes={cap} bytes received; {_raise_it('max_bytes')}",
                "max_bytes",
                cap,
            )

    def frame(self) -> None:
        self.events += 1
        if self.events > self.bounds.max_events:
            cap = self.bounds.max_events
            raise EventLimitExceeded(
                f"{self.what}: more than max_events={cap} events; {_raise_it('max_events')}",
                "max_events",
                cap,
            )

    def delivered(self) -> None:
        """The caller is done with the events of a chunk: the idle clock starts again."""
        self.last_event = anyio.current_time()

    def reconnect(self, drop: str) -> None:
        self.reconnects += 1
        if self.reconnects > self.bounds.max_reconnects:
            cap = self.bounds.max_reconnects
            raise ReconnectLimitExceeded(
                f"{self.what}: the connection dropped again ({drop}) after max_reconnects="
                f"{cap} resumes; giving up ({_raise_it('max_reconnects')})",
                "max_reconnects",
                cap,
            )

    def frame_too_large(self) -> FrameLimitExceeded:
        cap = self.bounds.max_frame_bytes
        return FrameLimitExceeded(
            f"{self.what}: one SSE frame exceeds max_frame_bytes={cap} bytes (refused "
            f"unread); {_raise_it('max_frame_bytes')}",
            "max_frame_bytes",
            cap,
        )
