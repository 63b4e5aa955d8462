"""The Postgres event log's connections: a bounded pool, the listener, the loop psycopg runs in.

``PostgresConnection`` is the part of ``PostgresEventLog`` that talks to the
server without knowing runs: opening the pool (at most ``pool`` connections;
a call waits at most ``pool_timeout`` seconds for one, then fails with
:class:`StoreError`), creating the tables and reading the epoch
(``_postgres_schema``), starting the one listening connection when the first
follower waits (``_postgres_listener``), running each psycopg coroutine, and
raising psycopg's errors as :class:`StoreError`. The queries (``postgres.py``,
``_postgres_claims.py``) build on it.

psycopg's async connections and pool run on asyncio only. Under trio the store
runs them in an asyncio loop of its own, in a thread (the ``Bridge`` the Redis
log uses), and awaits each call through a worker thread: the same behaviour,
at the cost of a thread hop per call; the listener, in that loop, wakes trio's
followers through trio's thread-safe token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio

from ._base import ChangeSignals, EventLog
from ._errors import StoreError
from ._postgres_listener import listen
from ._postgres_schema import channel_for, create_tables
from ._redis_bridge import Bridge
from ._retention import Retention

__all__ = ["DEFAULT_POLL", "DEFAULT_POOL", "DEFAULT_POOL_TIMEOUT", "PostgresConnection"]

_T = TypeVar("_T")

DEFAULT_POOL = 10
"""Connections the pool holds at most (the ``pool`` option); the listener is one more."""

DEFAULT_POOL_TIMEOUT = 10.0
"""Seconds a call waits for a free pooled connection before failing (``pool_timeout``)."""

DEFAULT_POLL = 5.0
"""Seconds a follower waits for a notification before re-reading anyway (``poll``)."""


class PostgresConnection(EventLog):
    """The pool, the listener and the loop of one Postgres event log (module doc)."""

    def __init__(
        self,
        conninfo: str,
        retention: Retention | None = None,
        *,
        schema: str = "agui_pipes",
        pool: int = DEFAULT_POOL,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        poll: float = DEFAULT_POLL,
    ) -> None:
        super().__init__(retention)
        for name, value in (("pool_timeout", pool_timeout), ("poll", poll)):
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if not (isinstance(pool, int) and pool >= 1):
            raise ValueError(f"pool must be an int of at least 1 connection, got {pool!r}")
        self.conninfo = conninfo
        self.schema = schema
        self.pool_size = pool
        self.pool_timeout = pool_timeout
        self.poll = poll
        self.channel = channel_for(schema)
        self._pool: Any = None
        self._bridge: Bridge | None = None
        self._trio_token: Any = None
        self._signals = ChangeSignals()
        self._listening = False
        self._listener_task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        parts = urlsplit(self.conninfo)
        where = f"{parts.scheme}://{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path}"
        return f"PostgresEventLog({where!r}, schema={self.schema!r})"  # never the password

    # -- running psycopg -------------------------------------------------------

    def _connections(self) -> Any:
        if self._pool is None:
            raise self._not_open()
        return self._pool.connection()

    async def _io(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run a psycopg coroutine (here on asyncio, in the bridge loop elsewhere);
        psycopg's errors (connection lost, pool exhausted, server errors) as StoreError."""
        import psycopg

        try:
            bridge = self._bridge
            if bridge is None:
                return await coro
            return await bridge.run(coro)
        except psycopg.Error as exc:
            raise StoreError(
                f"the Postgres event log {self!r} failed: {type(exc).__name__}: {exc}"
            ) from exc

    # -- lifecycle -------------------------------------------------------------

    async def _open(self) -> str:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "the Postgres event log needs psycopg 3 and psycopg_pool: "
                "pip install 'agui-pipes[postgres]'"
            ) from exc
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # trio: psycopg's async side runs in a bridge loop
            import trio

            self._trio_token = trio.lowlevel.current_trio_token()
            self._bridge = Bridge()

        async def start() -> str:
            # One direct connection first: it fails at once, with the server's own
            # reason (refused, authentication, no such database), where a pool
            # would retry until its timeout.
            first = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
            async with first:
                epoch = await create_tables(first, self.schema)
            pool = psycopg_pool.AsyncConnectionPool(
                self.conninfo,
                min_size=1,
                max_size=self.pool_size,
                timeout=self.pool_timeout,
                kwargs={"autocommit": True},
                open=False,
                name=f"agui_pipes.{self.schema}",
            )
            self._pool = pool
            await pool.open(wait=False)
            return epoch

        try:
            return await self._io(start())
        except StoreError as exc:
            await self._close()
            raise StoreError(
                f"cannot open the Postgres event log at {self!r}: {exc.__cause__ or exc}"
            ) from exc
        except BaseException:
            await self._close()
            raise

    async def _close(self) -> None:
        pool, self._pool = self._pool, None
        bridge, self._bridge = self._bridge, None
        self._signals.changed_all()
        self._listening = False

        async def stop() -> None:
            listener, self._listener_task = self._listener_task, None
            if listener is not None:
                listener.cancel()
                await asyncio.wait({listener}, timeout=5)
            if pool is not None:
                await pool.close(timeout=5)
            if bridge is not None:
                # The bridge loop is the store's own: let the calls cancelled there (a
                # follower given up mid-query) finish before the loop stops.
                others = asyncio.all_tasks() - {asyncio.current_task()}
                if others:
                    await asyncio.wait(others, timeout=5)

        with anyio.CancelScope(shield=True):
            try:
                if bridge is None:
                    await stop()
                else:
                    await bridge.run(stop())
            finally:
                if bridge is not None:
                    await bridge.stop()

    # -- followers' wake-ups ---------------------------------------------------

    def _change(self, scope: str, run_id: str) -> object:
        if not self._listening and self._pool is not None:
            self._listening = True
            bridge = self._bridge
            if bridge is None:
                self._start_listener()
            else:
                bridge.loop.call_soon_threadsafe(self._start_listener)
        return self._signals.token((scope, run_id))

    async def _wait(self, change: object) -> None:
        assert isinstance(change, anyio.Event)
        with anyio.move_on_after(self.poll):
            await change.wait()

    def _start_listener(self) -> None:
        """Start the listening task (in the loop psycopg runs in)."""
        import psycopg

        async def connect() -> Any:
            return await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)

        self._listener_task = asyncio.get_running_loop().create_task(
            listen(connect, self.channel, self._waker())
        )

    def _waker(self) -> Callable[[tuple[str, str] | None], None]:
        """What the listener calls per notification: wakes the run's followers (None: all)."""

        def wake(key: tuple[str, str] | None) -> None:
            if key is None:
                self._signals.changed_all()
            else:
                self._signals.changed(key)

        token = self._trio_token
        if token is None:
            return wake

        def wake_in_trio(key: tuple[str, str] | None) -> None:
            import trio

            try:
                token.run_sync_soon(wake, key)
            except trio.RunFinishedError:
                pass  # the store's trio run is over: no follower is left to wake

        return wake_in_trio
