"""The routes of durable runs: resume a run, stop it, read a thread's history.

Under a server's path (``{path}/...``), served by ``DurableRoutes``:

* ``GET runs/{runId}`` — the run's events after the client's id
  (``Last-Event-ID`` or ``?after=``), then its live tail;
* ``POST runs/{runId}/stop`` — cancel the run now (200 once it ended, 202 if
  slow), here or, through a stop request in the store, on the process that
  serves it;
* ``GET threads/{threadId}`` — the thread's ended runs folded into one run,
  then the run still live;
* ``GET threads`` — the caller's threads, newest first, by pages
  (``?limit=``, default 50, at most 500; ``?before=`` the previous page's
  ``next``), as JSON.

Each route runs the server's ``authorize=`` hook before anything else and is
served in the principal's scope: another scope's run or thread is answered
as one that does not exist (``_access``).

A reader of a run that another process serves marks itself in the store, so
that process's grace check holds the run while someone follows it. Store
errors are answered with their own status (``StoreError.http_status``) and an
``error`` code from one table.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import anyio

from .._consumer.history import thread_history
from .._foundation.principal import Principal
from ..codecs import encode_sse
from ..store import (
    EventLog,
    RunBroken,
    RunLost,
    RunStatus,
    StoreError,
    UnknownRun,
    format_event_id,
    sse_frame,
)
from ..store._base import MAX_THREADS_PAGE
from ._access import NotFound, bad_id
from ._failures import RunFailure
from ._http import BadRequest, send_json, send_json_error
from ._options import streaming
from ._stats import RunStats
from ._streaming import Receive, Scope, Send, SSERun

if TYPE_CHECKING:
    from starlette.routing import Route

    from ._durable import DurableRuns

__all__ = ["DurableRoutes"]


class DurableRoutes:
    """The resume, stop and thread routes of one ``DurableRuns`` (module doc)."""

    def __init__(self, durable: DurableRuns) -> None:
        self._durable = durable
        self._log = durable.log
        self._streaming = streaming(durable.options, durable.log)

    def routes(self, base: str) -> list[Route]:
        """Routes at ``{base}runs/{runId}``, ``.../stop`` and ``{base}threads/{threadId}``."""
        from starlette.routing import Route

        if not base.endswith("/"):
            base += "/"
        return [
            Route(f"{base}runs/{{run_id:path}}/stop", self._handler(self.stop), methods=["POST"]),
            Route(
                f"{base}runs/{{run_id:path}}",
                self._handler(self.resume, _run_gone),
                methods=["GET"],
            ),
            Route(f"{base}threads", self._handler(self.threads, what=None), methods=["GET"]),
            Route(
                f"{base}threads/{{thread_id:path}}",
                self._handler(self.thread, _thread_gone, "thread id"),
                methods=["GET"],
            ),
        ]

    def _handler(
        self,
        handler: Handler,
        not_found: Callable[[str], BadRequest] | None = None,
        what: str | None = "run id",
    ) -> _Handler:
        return _Handler(self._durable, handler, not_found, what)

    async def threads(
        self, scope: Scope, receive: Receive, send: Send, _: str, principal: Principal
    ) -> None:
        """``GET threads``: the principal's threads, newest first, a page at a time."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        try:
            limit = _int_param(query, "limit", 50)
            before = _int_param(query, "before", None)
            if not 1 <= limit <= MAX_THREADS_PAGE:
                raise ValueError(f"limit is from 1 to {MAX_THREADS_PAGE}, got {limit}")
        except ValueError as exc:
            await send_json_error(send, BadRequest(400, "bad_query", str(exc)))
            return
        try:
            store = await self._durable.store()
            found = await store.threads(scope=principal.scope, limit=limit, before=before)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        page = {
            "threads": [
                {"threadId": thread.thread_id, "created": thread.created} for thread in found
            ],
            "next": str(found[-1].cursor) if len(found) == limit else None,
        }
        await send_json(send, 200, page)

    async def resume(
        self, scope: Scope, receive: Receive, send: Send, run_id: str, principal: Principal
    ) -> None:
        """``GET runs/{runId}``: the run's events after the client's id, then its live tail."""
        last_event_id = _header(scope, b"last-event-id")
        if last_event_id is None:
            after = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after")
            if after:
                last_event_id = after[-1]
        await self._follow(scope, receive, send, run_id, principal, last_event_id)

    async def rejoin(
        self, scope: Scope, receive: Receive, send: Send, run_id: str, principal: Principal
    ) -> None:
        """A retried run POST: the run's events from the start, then its live tail."""
        await self._follow(scope, receive, send, run_id, principal, None)

    async def _follow(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        run_id: str,
        principal: Principal,
        last_event_id: str | None,
    ) -> None:
        tenant = principal.scope
        try:
            store = await self._durable.store()
            start = await store.resume_after(run_id, last_event_id, scope=tenant)
            record = await store.run(run_id, scope=tenant)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        thread_id = record.thread_id if record is not None else "-"
        epoch = store.epoch
        live = self._durable.live.get((tenant, run_id))

        remote = live is None and record is not None and not record.status.ended

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, tenant, run_id if remote else None):
                    yield _followed(store, epoch, tenant, run_id, start)

        response = SSERun(
            open_frames=open_frames,
            stats=RunStats("resume", run_id, thread_id),
            **self._streaming,
        )
        await response(scope, receive, send)

    async def stop(
        self, scope: Scope, receive: Receive, send: Send, run_id: str, principal: Principal
    ) -> None:
        """``POST runs/{runId}/stop``: cancel the run now; 200 once it ended (202 if slow)."""
        tenant = principal.scope
        try:
            store = await self._durable.store()
            record = await store.run(run_id, scope=tenant)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        if record is None:
            await _send_store_error(send, UnknownRun(run_id))
            return
        live = self._durable.live.get((tenant, run_id))
        if live is None:
            if record.status.ended:
                await send_json_error(
                    send,
                    BadRequest(
                        409,
                        "run_ended",
                        f"run {run_id!r} already ended ({record.status.value}); nothing to stop",
                    ),
                )
            else:
                await self._stop_elsewhere(send, store, tenant, run_id)
            return
        live.stop("stopped by a client (POST runs/{runId}/stop)")
        with anyio.move_on_after(self._durable.stop_wait):
            await live.done.wait()
        record = await store.run(run_id, scope=tenant)
        status = record.status.value if record is not None else "cancelled"
        code = 200 if live.done.is_set() else 202
        await send_json(send, code, {"runId": run_id, "status": status})

    async def _stop_elsewhere(self, send: Send, store: EventLog, tenant: str, run_id: str) -> None:
        """Stop a run another process serves: a request in the store, then wait for its end.

        The owner notices within ``stop_poll`` seconds. A run whose owner
        died is marked lost here (``check_owner``) rather than waited for.
        """
        try:
            await store.request_stop(
                run_id, "stopped by a client (POST runs/{runId}/stop)", scope=tenant
            )
            record = await store.check_owner(run_id, scope=tenant)
            with anyio.move_on_after(self._durable.stop_wait):
                while record is not None and not record.status.ended:
                    await anyio.sleep(0.05)
                    record = await store.run(run_id, scope=tenant)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        if record is None:
            await _send_store_error(send, UnknownRun(run_id))
            return
        code = 200 if record.status.ended else 202
        await send_json(send, code, {"runId": run_id, "status": record.status.value})

    @asynccontextmanager
    async def _touching(
        self, store: EventLog, tenant: str, run_id: str | None
    ) -> AsyncIterator[None]:
        """While a reader follows ``run_id`` (served elsewhere), say so in the store.

        Refreshed every third of the grace (at most 5 s), so the owner's
        check, made when its own grace runs out, always finds a fresh mark.
        """
        if run_id is None:
            yield
            return
        every = max(0.05, min(self._durable.detach_grace / 3, 5.0))

        async def touch() -> None:
            while True:
                try:
                    await store.touch_reader(run_id, scope=tenant)
                except StoreError as exc:
                    self._log.warning("run %s: cannot mark the reader: %s", run_id, exc)
                await anyio.sleep(every)

        failure: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(touch, name=f"agui_pipes reader mark {run_id}")
            try:
                yield
            except Exception as exc:
                # Raised again outside the task group, unwrapped: the stream's
                # RunFailure (RUN_LOST...) must reach SSERun as itself.
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def thread(
        self, scope: Scope, receive: Receive, send: Send, thread_id: str, principal: Principal
    ) -> None:
        """``GET threads/{threadId}``: the ended runs folded into one run, then a live run."""
        tenant = principal.scope
        try:
            store = await self._durable.store()
            runs = await store.thread_runs(thread_id, scope=tenant)
            if not runs:
                raise UnknownRun(thread_id, f"no thread {thread_id!r} in the event log")
            wire: list[list[bytes]] = []
            for record in runs:
                if not record.status.ended or record.status in (RunStatus.BROKEN, RunStatus.LOST):
                    continue  # a lost run was cut anywhere: its events may not fold
                try:
                    entries = await store.read(record.run_id, scope=tenant)
                    wire.append([data for _, data in entries])
                except (RunBroken, UnknownRun):
                    continue  # broken or pruned since listed: it has no history to give
            history = thread_history(thread_id, wire)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        except ValueError as exc:
            self._log.error("thread %s: history does not fold: %s", thread_id, exc)
            await send_json_error(
                send,
                BadRequest(500, "history_failed", f"the thread's stored runs do not fold: {exc}"),
            )
            return
        head = b"".join(encode_sse(event) for event in history)
        tail = next((r for r in reversed(runs) if r.status is RunStatus.LIVE), None)
        epoch = store.epoch
        live = None if tail is None else self._durable.live.get((tenant, tail.run_id))

        remote = None if tail is None or live is not None else tail.run_id

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, tenant, remote):
                    yield _history_frames(
                        store, epoch, tenant, head, None if tail is None else tail.run_id
                    )

        response = SSERun(
            open_frames=open_frames,
            stats=RunStats("history", "-", thread_id),
            **self._streaming,
        )
        await response(scope, receive, send)


Handler = Callable[[Scope, Receive, Send, str, Principal], Any]
"""A route's work: ``handler(scope, receive, send, <the path parameter>, principal)``."""


class _Handler:
    """An ASGI app: authorize, check the path's id, then call the route's handler.

    The hook runs first, before anything is read; ``not_found`` (reads) is
    the 404 a ``Forbidden`` caller gets, the body of an id that does not exist.
    """

    def __init__(
        self,
        durable: DurableRuns,
        handler: Handler,
        not_found: Callable[[str], BadRequest] | None,
        what: str | None,
    ) -> None:
        self._access = durable.access
        self._handler = handler
        self._not_found = not_found
        self._what = what

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = scope.get("path_params", {})
        value = str(next(iter(params.values()), ""))
        gone: NotFound | None = None
        if self._not_found is not None:
            not_found = self._not_found

            def gone() -> BadRequest:
                return not_found(value)

        principal = await self._access.principal(scope, send, gone)
        if principal is None:
            return
        refused = None if self._what is None else bad_id(self._what, value)
        if refused is not None:
            await send_json_error(send, refused)
            return
        await self._handler(scope, receive, send, value, principal)


def _run_gone(run_id: str) -> BadRequest:
    return _store_error(UnknownRun(run_id))


def _thread_gone(thread_id: str) -> BadRequest:
    return _store_error(UnknownRun(thread_id, f"no thread {thread_id!r} in the event log"))


def _int_param(query: dict[str, list[str]], name: str, default: int | None) -> Any:
    values = query.get(name)
    if not values:
        return default
    text = values[-1]
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise ValueError(f"?{name}= is a whole number, got {text[:40]!r}")
    return int(text)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


async def _followed(
    store: EventLog, epoch: str, tenant: str, run_id: str, after: int
) -> AsyncIterator[bytes]:
    try:
        async for seq, data in store.follow(run_id, after, scope=tenant):
            yield sse_frame(data, format_event_id(epoch, run_id, seq))
    except RunLost as exc:
        raise RunFailure("RUN_LOST", str(exc)) from exc
    except StoreError as exc:
        raise RunFailure("RUN_NOT_RESUMABLE", str(exc)) from exc


async def _history_frames(
    store: EventLog, epoch: str, tenant: str, head: bytes, live_run: str | None
) -> AsyncIterator[bytes]:
    yield head
    if live_run is not None:
        async for frame in _followed(store, epoch, tenant, live_run, 0):
            yield frame


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


_STORE_ERRORS = {
    400: "bad_event_id",
    404: "not_found",
    409: "wrong_run",
    410: "run_broken",
    503: "store_unavailable",
}
"""The ``error`` of the JSON answer to a store error, by its ``http_status``."""


def _store_error(exc: StoreError) -> BadRequest:
    error = _STORE_ERRORS.get(exc.http_status, "store_error")
    return BadRequest(exc.http_status, error, str(exc))


async def _send_store_error(send: Send, exc: StoreError) -> None:
    await send_json_error(send, _store_error(exc))
