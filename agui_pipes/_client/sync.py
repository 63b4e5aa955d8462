"""``SyncClient``: the client for code without an event loop (scripts, notebooks' cells, CLIs).

It runs an ordinary async ``Client`` on an event loop of its own, in a thread
started on first use (an anyio blocking portal), and hands each call over to
it; so the sync and async clients are one implementation, with the same
checks, bounds and errors. Called from inside a running event loop, a
blocking call would freeze that loop (and every other task on it), so it is
refused with a ``RuntimeError`` saying to use ``Client`` there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent, RunAgentInput

    from .._consumer.consume import RunResult
    from ..client import Client, History, RemoteRunEvents, ThreadPage

__all__ = ["SyncClient", "SyncRunEvents"]


def _refuse_inside_a_loop(method: str) -> None:
    try:
        anyio.get_current_task()
    except RuntimeError:  # no event loop in this thread: what a sync client is for
        return
    raise RuntimeError(
        f"SyncClient.{method}() was called from inside a running event loop, which it would "
        "block until the run ends; in async code use `async with Client() as client` instead"
    )


class SyncRunEvents:
    """``RemoteRunEvents`` for sync code: iterate it for the events, then ``result()``."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, events: RemoteRunEvents) -> None:
        self._portal = portal
        self._events = events
        self._iterator: AsyncIterator[BaseEvent] = events.__aiter__()

    def __iter__(self) -> Iterator[BaseEvent]:
        return self

    def __next__(self) -> BaseEvent:
        _refuse_inside_a_loop("run")
        try:
            return self._portal.call(self._iterator.__anext__)
        except StopAsyncIteration:
            raise StopIteration from None

    @property
    def reconnects(self) -> int:
        return self._events.reconnects

    @property
    def last_event_id(self) -> str:
        return self._events.last_event_id

    def result(self) -> RunResult:
        """The fold of the run (``RemoteRunEvents.result``)."""
        return self._events.result()


class SyncClient:
    """``Client`` with blocking methods: ``run``, ``resume``, ``history``, ``threads``, ``stop``.

    Takes ``Client``'s keywords (``headers``, the bounds, ...; ``http`` is an
    ``httpx.AsyncClient``, used on the client's own loop). ``backend`` is the
    loop it runs on (``"asyncio"`` or ``"trio"``). Use it as a context manager,
    or call ``close()``: that stops the loop's thread::

        with SyncClient() as client:
            with client.run(url, run_input) as events:
                for event in events:
                    ...
                result = events.result()
    """

    def __init__(self, *, backend: str = "asyncio", **client_options: Any) -> None:
        self._backend = backend
        self._options = client_options
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._client: Client | None = None

    def __enter__(self) -> SyncClient:
        self._start("__enter__")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _start(self, method: str) -> tuple[anyio.from_thread.BlockingPortal, Client]:
        _refuse_inside_a_loop(method)
        if self._portal is None or self._client is None:
            portal_cm = anyio.from_thread.start_blocking_portal(self._backend)
            portal = portal_cm.__enter__()
            try:
                self._client = portal.call(self._make)
            except BaseException:
                portal_cm.__exit__(None, None, None)
                raise
            self._portal_cm, self._portal = portal_cm, portal
        return self._portal, self._client

    async def _make(self) -> Client:
        from ..client import Client

        return Client(**self._options)

    def close(self) -> None:
        """Close the client (and its httpx client, if it made it) and stop the loop's thread."""
        portal, client, portal_cm = self._portal, self._client, self._portal_cm
        self._portal = self._client = self._portal_cm = None
        if portal is None or portal_cm is None:
            return
        try:
            if client is not None:
                portal.call(client.aclose)
        finally:
            portal_cm.__exit__(None, None, None)

    @contextmanager
    def run(
        self, url: str, run_input: RunAgentInput | Mapping[str, Any], **options: Any
    ) -> Iterator[SyncRunEvents]:
        """``Client.run``: the block gets the run's events as a sync iterator."""
        portal, client = self._start("run")
        with portal.wrap_async_context_manager(client.run(url, run_input, **options)) as events:
            yield SyncRunEvents(portal, events)

    @contextmanager
    def resume(self, url: str, run_id: str, **options: Any) -> Iterator[SyncRunEvents]:
        """``Client.resume``: a run picked up by id (``last_event_id=`` to skip what you had)."""
        portal, client = self._start("resume")
        with portal.wrap_async_context_manager(client.resume(url, run_id, **options)) as events:
            yield SyncRunEvents(portal, events)

    def history(
        self,
        url: str,
        thread_id: str,
        *,
        verify: bool = True,
        before: str | None = None,
        limit: int | None = None,
    ) -> History:
        """``Client.history``."""
        portal, client = self._start("history")
        return portal.call(
            partial(client.history, url, thread_id, verify=verify, before=before, limit=limit)
        )

    def threads(
        self, url: str, *, limit: int | None = None, before: str | None = None
    ) -> ThreadPage:
        """``Client.threads``."""
        portal, client = self._start("threads")
        return portal.call(partial(client.threads, url, limit=limit, before=before))

    def stop(self, url: str, run_id: str) -> dict[str, Any]:
        """``Client.stop``."""
        portal, client = self._start("stop")
        return portal.call(client.stop, url, run_id)
