"""The Postgres event log's one listening connection: ``LISTEN`` wake-ups for every follower.

Why one connection, not one per follower: a ``LISTEN`` needs a session of its
own, outside the pool, and a server may have thousands of followers; so each
store object (one per process) keeps a single listening connection, opened
when the first follower waits, and turns each notification into an
in-process wake-up (``ChangeSignals``) of the followers of that run.

Writers send ``pg_notify(channel, key)`` in the transaction that appends
(ends, breaks, prunes) the run, so a notification arrives only once what
it announces is committed and readable. The key names the run by scope and
id (``payload_for``); a key too long for a notification (8000 bytes) is
sent as ``*``, which wakes every follower of the process.

Notifications sent while nobody listened are lost, so whenever the listener
(re)connects it wakes every follower once: each re-reads the log, and none
waits on a notification it missed. Followers also re-read on their own every
``poll`` seconds, the safety net if the connection silently dies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["ALL", "listen", "payload_for", "run_key"]

ALL = "*"
"""The payload that wakes every follower (a key too long to send)."""

_MAX_PAYLOAD = 7999
"""PostgreSQL's limit on a notification's payload is 8000 bytes."""

_RETRY = 0.5
"""Seconds between attempts to reconnect a lost listening connection."""


def payload_for(scope: str, run_id: str) -> str:
    """The notification naming the run: ``{len(scope)}:{scope}{run_id}``, unambiguous."""
    payload = f"{len(scope)}:{scope}{run_id}"
    return payload if len(payload.encode()) <= _MAX_PAYLOAD else ALL


def run_key(payload: str) -> tuple[str, str] | None:
    """The (scope, run id) a notification names, or None for ``ALL`` (or a foreign payload)."""
    size, colon, rest = payload.partition(":")
    if not colon or not size.isdigit() or int(size) > len(rest):
        return None
    return rest[: int(size)], rest[int(size) :]


async def listen(
    connect: Callable[[], Any],
    channel: str,
    wake: Callable[[tuple[str, str] | None], None],
) -> None:
    """``LISTEN`` on ``channel`` until cancelled, waking ``wake(key)`` per notification.

    ``wake(None)`` wakes every follower: sent after each (re)connection.
    ``connect()`` returns an awaitable autocommit ``psycopg.AsyncConnection``.
    Runs in the asyncio loop psycopg runs in; connection failures are retried
    every half second (the followers poll meanwhile).
    """
    import psycopg

    quoted = '"' + channel.replace('"', '""') + '"'
    while True:
        try:
            conn = await connect()
            async with conn:
                await conn.execute(f"LISTEN {quoted}")
                wake(None)
                async for note in conn.notifies():
                    wake(run_key(note.payload))
        except psycopg.Error:
            pass  # lost: reconnect below, and wake everyone once listening again
        await asyncio.sleep(_RETRY)
