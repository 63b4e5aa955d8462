"""Timestamp: stamp events that lack ``timestamp`` with the current time in milliseconds.

Producers often leave ``timestamp`` out; recordings, latency dashboards and
replay tools want it. A stamp never changes behaviour (arrival order is the
order, PROTOCOL.md §1), and an event that already carries one keeps it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ag_ui.core import BaseEvent

from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer
from .._protocol.construct import replace

__all__ = ["Timestamp"]
__dir__ = public_dir(__all__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Timestamp(StreamTransformer):
    """Stamp every event that has no ``timestamp`` with the current time (milliseconds).

    ``clock`` returns the time in integer milliseconds since the epoch (default
    wall-clock time); pass one to make recordings deterministic.
    """

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or _now_ms

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.timestamp is not None:
            return (event,)
        return (replace(event, "timestamp", int(self._clock())),)
