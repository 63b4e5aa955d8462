"""A store that cannot serve, as a server answers it: a 503 before a run, ``/healthz``.

Why one place: the claim of a new run, the trust checks that read the
thread's history and the resume routes all meet the store's failures before
a response starts, and must answer them alike — 503 ``store_unavailable``
with a ``retry-after``, a message naming the reason in words a client may
read (``StoreUnavailable.reason``: no path, no driver text) — while the log
keeps the detail. ``store_health`` is the probe ``/healthz`` runs, bounded by
its own deadline so that a store which does not bound its calls cannot hang
the health check.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from ..store import StoreError, StoreUnavailable
from ._http import BadRequest

if TYPE_CHECKING:
    from ._durable import DurableRuns

__all__ = ["HEALTH_TIMEOUT", "store_health", "store_unavailable"]

HEALTH_TIMEOUT = 10.0
"""Seconds ``/healthz`` waits for the store's own health check (which bounds itself, 5 s
for SQLite) before it answers unavailable."""


def store_unavailable(
    exc: StoreError, log: logging.Logger | None = None, what: str = "the event log failed"
) -> BadRequest:
    """The 503 ``store_unavailable`` answer to ``exc``, logged (one line, no traceback)."""
    if log is not None:
        log.error("%s: %s", what, exc)
    if isinstance(exc, StoreUnavailable):
        reason, retry = exc.reason, exc.retry_after
    else:
        reason, retry = "it failed a request", 5
    return BadRequest(
        503,
        "store_unavailable",
        f"the event log is unavailable: {reason}; retry in {retry} s",
        headers=((b"retry-after", str(retry).encode()),),
    )


async def store_health(durable: DurableRuns) -> str | None:
    """None when the server's store can take writes, else why not (for ``/healthz``)."""
    with anyio.move_on_after(HEALTH_TIMEOUT):
        try:
            store = await durable.store()
            return await store.health()
        except StoreUnavailable as exc:
            return exc.reason
        except StoreError:
            return "the event log failed to open"
    return f"the event log's health check did not answer within {HEALTH_TIMEOUT:g} s"
