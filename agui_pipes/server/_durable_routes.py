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

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import anyio
from ag_ui.core import RunAgentInput

from .._foundation.principal import Principal
from ..codecs import DecodeError, decode
from ..store import (
    BadEventId,
    EventLog,
    RunLost,
    RunStatus,
    StoredRun,
    StoreError,
    StoreUnavailable,
    UnknownRun,
    format_event_id,
    sse_frame,
)
from ..store._base import MAX_THREADS_PAGE
from ._access import NotFound, bad_id
from ._failures import RunFailure
from ._http import BadRequest, send_json, send_json_error
from ._join import joined_frames
from ._options import streaming
from ._stats import RunStats
from ._store_health import store_unavailable
from ._streaming import Receive, Scope, Send, SSERun
from ._thread_histories import DEFAULT_HISTORY_PAGE, MAX_HISTORY_PAGE, UnknownBefore

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

        _register_id_convertor()
        if not base.endswith("/"):
            base += "/"
        return [
            Route(f"{base}runs/{{run_id:{_ID}}}/stop", self._handler(self.stop), methods=["POST"]),
            Route(
                f"{base}runs/{{run_id:{_ID}}}",
                self._handler(self.resume, _run_gone),
                methods=["GET"],
            ),
            Route(f"{base}threads", self._handler(self.threads, what=None), methods=["GET"]),
            Route(
                f"{base}threads/{{thread_id:{_ID}}}",
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
        """``GET runs/{runId}``: the run's events after the client's id, then its live tail.

        ``?join=1`` answers the join stream instead (``_join``), for a client
        that holds nothing of the run.
        """
        if _joining(scope):
            await self.join(scope, receive, send, run_id, principal)
            return
        try:
            last_event_id = _header(scope, b"last-event-id")
        except UnicodeDecodeError:
            # EventSource sends the id it was given as UTF-8: anything else was never one.
            await _send_store_error(send, BadEventId("the Last-Event-ID header is not UTF-8"))
            return
        if last_event_id is None:
            query = scope.get("query_string", b"").decode("latin-1")
            after = parse_qs(query, errors="replace").get("after")
            if after:
                last_event_id = after[-1]
        await self._follow(scope, receive, send, run_id, principal, last_event_id)

    async def rejoin(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        run_id: str,
        principal: Principal,
        run_input: RunAgentInput | None = None,
    ) -> None:
        """A retried run POST: the run's join stream, seeded with the POST's own input.

        The client retrying may hold part of the run or nothing of it; the
        join stream is right for both (its snapshot replaces what it holds).
        """
        messages = None
        state = None
        if run_input is not None:
            messages = [m.model_dump(by_alias=True, exclude_none=True) for m in run_input.messages]
            state = run_input.state
        await self.join(scope, receive, send, run_id, principal, messages=messages, state=state)

    async def join(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        run_id: str,
        principal: Principal,
        *,
        messages: list[dict[str, Any]] | None = None,
        state: Any = None,
        thread_id: str | None = None,
    ) -> None:
        """The run's join stream: a self-contained head, then its live tail (``_join``)."""
        tenant = principal.scope
        try:
            store = await self._durable.store()
            await store.resume_after(run_id, None, scope=tenant)
            record = await store.run(run_id, scope=tenant)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        epoch = store.epoch
        generation = record.generation if record is not None else ""
        live = self._durable.live.get((tenant, run_id))
        remote = live is None and record is not None and not record.status.ended

        def tail(after: int) -> AsyncIterator[bytes]:
            return _followed(store, epoch, generation, tenant, run_id, after)

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, tenant, run_id if remote else None):
                    yield joined_frames(
                        store,
                        epoch,
                        tenant,
                        run_id,
                        tail,
                        messages=messages,
                        state=state,
                        generation=generation,
                    )

        shown_thread = thread_id or (record.thread_id if record is not None else "-")
        response = SSERun(
            open_frames=open_frames,
            stats=RunStats("join", run_id, shown_thread),
            **self._streaming,
        )
        await response(scope, receive, send)

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
        live = self._durable.live.get((tenant, run_id))
        # This process numbers a run it serves: an id past that number is no frame of it.
        issued = None if live is None else live.recorder.next_seq - 1
        try:
            store = await self._durable.store()
            start = await store.resume_after(run_id, last_event_id, scope=tenant, issued=issued)
            record = await store.run(run_id, scope=tenant)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        thread_id = record.thread_id if record is not None else "-"
        generation = record.generation if record is not None else ""
        epoch = store.epoch

        remote = live is None and record is not None and not record.status.ended

        stats = RunStats("resume", run_id, thread_id)

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, tenant, run_id if remote else None):
                    yield _followed(store, epoch, generation, tenant, run_id, start, stats)

        response = SSERun(open_frames=open_frames, stats=stats, **self._streaming)
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
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        thread_id: str,
        principal: Principal,
        *,
        join: bool = False,
    ) -> None:
        """``GET threads/{threadId}``: the ended runs folded into one run, then a live run.

        ``?join=1`` (or a run POST asking to join the thread) answers one run
        instead when the thread has a live run: that run's join stream, its
        snapshot seeded with the thread's history, so a reloaded page gets the
        whole conversation in one run it can take up cold.
        """
        joining = join or _joining(scope)
        if joining and await self.join_thread(scope, receive, send, thread_id, principal):
            return
        tenant = principal.scope
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        try:
            limit = _int_param(query, "limit", DEFAULT_HISTORY_PAGE)
            if not 1 <= limit <= MAX_HISTORY_PAGE:
                raise ValueError(f"limit is from 1 to {MAX_HISTORY_PAGE} runs, got {limit}")
            before = query["before"][-1] if query.get("before") else None
            refused = None if before is None else bad_id("?before= run id", before)
            if refused is not None:
                raise ValueError(refused.message)
        except ValueError as exc:
            await send_json_error(send, BadRequest(400, "bad_query", str(exc)))
            return
        try:
            store = await self._durable.store()
            view = await self._durable.histories.page(
                store, tenant, thread_id, before=before, limit=limit
            )
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        except UnknownBefore as exc:
            await send_json_error(send, BadRequest(400, "bad_query", str(exc)))
            return
        except ValueError as exc:
            self._log.error("thread %s: history does not fold: %s", thread_id, exc)
            await send_json_error(
                send,
                BadRequest(500, "history_failed", f"the thread's stored runs do not fold: {exc}"),
            )
            return
        head = view.head
        # The live run follows the newest page only: an older page is the past.
        runs = view.runs if before is None else []
        tail = next((r for r in reversed(runs) if r.status is RunStatus.LIVE), None)
        epoch = store.epoch
        live = None if tail is None else self._durable.live.get((tenant, tail.run_id))

        remote = None if tail is None or live is not None else tail.run_id

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, tenant, remote):
                    yield _history_frames(store, epoch, tenant, head, tail)

        response = SSERun(
            open_frames=open_frames,
            stats=RunStats("history", "-", thread_id),
            **self._streaming,
        )
        await response(scope, receive, send)

    async def join_thread(
        self, scope: Scope, receive: Receive, send: Send, thread_id: str, principal: Principal
    ) -> bool:
        """Answer the join stream of the thread's live run; False when none is live.

        The join's snapshot is seeded with the thread's ended runs folded
        (as ``GET threads/{id}`` folds them), so the one run it answers holds
        the whole conversation. A store error is answered here (True).
        """
        tenant = principal.scope
        try:
            store = await self._durable.store()
            runs = await store.thread_runs(thread_id, scope=tenant)
            live_run = next((r for r in reversed(runs) if r.status is RunStatus.LIVE), None)
            if live_run is None:
                return False
            _, messages, state = await self._durable.histories.seed(store, tenant, thread_id)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return True
        except ValueError as exc:
            self._log.error("thread %s: history does not fold: %s", thread_id, exc)
            await send_json_error(
                send,
                BadRequest(500, "history_failed", f"the thread's stored runs do not fold: {exc}"),
            )
            return True
        await self.join(
            scope,
            receive,
            send,
            live_run.run_id,
            principal,
            messages=messages,
            state=state,
            thread_id=thread_id,
        )
        return True


def _joining(scope: Scope) -> bool:
    """Whether the request asks for the join stream (``?join=1``, ``true`` or ``yes``)."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("join") or []
    return bool(values) and values[-1].lower() in ("1", "true", "yes")


_ID = "agui_pipes_id"
"""The path convertor of the id routes: Starlette's ``path`` (``.*``), line breaks included."""


def _register_id_convertor() -> None:
    """Register ``_ID`` once: a path whose id holds a line break (``%0A``) matches the route,
    so it gets the route's 422 ``bad_id`` rather than the router's plain-text 404."""
    from starlette.convertors import CONVERTOR_TYPES, PathConvertor, register_url_convertor

    class IdConvertor(PathConvertor):
        regex = "[\\s\\S]*"

    if _ID not in CONVERTOR_TYPES:
        register_url_convertor(_ID, IdConvertor())


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
    store: EventLog,
    epoch: str,
    generation: str,
    tenant: str,
    run_id: str,
    after: int,
    stats: RunStats | None = None,
) -> AsyncIterator[bytes]:
    """The run's stored frames after ``after``, then its live ones, to its end.

    With ``stats`` (the resume route's) each frame is counted and the run's
    terminal event sets the outcome: frames handed to ``SSERun`` as bytes are
    their producer's to count, and without it every resume was logged as
    "client disconnected" with 0 events, however much it sent.
    """
    try:
        async for seq, data in store.follow(run_id, after, scope=tenant):
            if stats is not None:
                stats.count_source()
                stats.written += 1
                if any(marker in data for marker in _TERMINAL):
                    _note_terminal(stats, data)
            yield sse_frame(data, format_event_id(epoch, run_id, seq, generation))
    except RunLost as exc:
        raise RunFailure("RUN_LOST", str(exc)) from exc
    except StoreUnavailable as exc:  # the store itself: its reason, not its path
        raise RunFailure(
            "STORE_UNAVAILABLE", f"the event log is unavailable: {exc.reason}"
        ) from exc
    except StoreError as exc:
        raise RunFailure("RUN_NOT_RESUMABLE", str(exc)) from exc


_TERMINAL = (b'"RUN_FINISHED"', b'"RUN_ERROR"')
"""In the stored JSON of a terminal event (and of few others: inside a string the quotes
are escaped), so only the candidates are decoded, not every event of every resume."""


def _note_terminal(stats: RunStats, data: bytes) -> None:
    try:
        event = decode(data).event
    except DecodeError:
        return  # the log line's outcome only; the client gets the stored bytes regardless
    if event is not None:
        stats.note_output(event)


async def _history_frames(
    store: EventLog, epoch: str, tenant: str, head: bytes, live_run: StoredRun | None
) -> AsyncIterator[bytes]:
    yield head
    if live_run is not None:
        frames = _followed(store, epoch, live_run.generation, tenant, live_run.run_id, 0)
        async for frame in frames:
            yield frame


def _header(scope: Scope, name: bytes) -> str | None:
    """The header's value as UTF-8 text (``UnicodeDecodeError`` if it is not UTF-8)."""
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("utf-8")
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
    error = _STORE_ERRORS.get(exc.http_status)
    if error is None:  # the store itself failed: no path or driver text for the client
        return store_unavailable(exc, logging.getLogger("agui_pipes.server"))
    return BadRequest(exc.http_status, error, str(exc))


async def _send_store_error(send: Send, exc: StoreError) -> None:
    await send_json_error(send, _store_error(exc))
