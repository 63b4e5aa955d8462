"""The routes of durable runs: resume a run, stop it, read a thread's history.

Under a server's path (``{path}/...``), served by ``DurableRoutes``:

* ``GET runs/{runId}`` — the run's events after the client's id
  (``Last-Event-ID`` or ``?after=``), then its live tail;
* ``POST runs/{runId}/stop`` — cancel the run now (200 once it ended, 202 if
  slow), here or, through a stop request in the store, on the process that
  serves it;
* ``GET threads/{threadId}`` — the thread's ended runs folded into one run,
  then the run still live.

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
            Route(f"{base}runs/{{run_id:path}}/stop", _Handler(self.stop), methods=["POST"]),
            Route(f"{base}runs/{{run_id:path}}", _Handler(self.resume), methods=["GET"]),
            Route(f"{base}threads/{{thread_id:path}}", _Handler(self.thread), methods=["GET"]),
        ]

    async def resume(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        """``GET runs/{runId}``: the run's events after the client's id, then its live tail."""
        last_event_id = _header(scope, b"last-event-id")
        if last_event_id is None:
            after = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after")
            if after:
                last_event_id = after[-1]
        try:
            store = await self._durable.store()
            start = await store.resume_after(run_id, last_event_id)
            record = await store.run(run_id)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        thread_id = record.thread_id if record is not None else "-"
        epoch = store.epoch
        live = self._durable.live.get(run_id)

        remote = live is None and record is not None and not record.status.ended

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, run_id if remote else None):
                    yield _followed(store, epoch, run_id, start)

        response = SSERun(
            open_frames=open_frames,
            stats=RunStats("resume", run_id, thread_id),
            **self._streaming,
        )
        await response(scope, receive, send)

    async def stop(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        """``POST runs/{runId}/stop``: cancel the run now; 200 once it ended (202 if slow)."""
        try:
            store = await self._durable.store()
            record = await store.run(run_id)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        if record is None:
            await _send_store_error(send, UnknownRun(run_id))
            return
        live = self._durable.live.get(run_id)
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
                await self._stop_elsewhere(send, store, run_id)
            return
        live.stop("stopped by a client (POST runs/{runId}/stop)")
        with anyio.move_on_after(self._durable.stop_wait):
            await live.done.wait()
        record = await store.run(run_id)
        status = record.status.value if record is not None else "cancelled"
        code = 200 if live.done.is_set() else 202
        await send_json(send, code, {"runId": run_id, "status": status})

    async def _stop_elsewhere(self, send: Send, store: EventLog, run_id: str) -> None:
        """Stop a run another process serves: a request in the store, then wait for its end.

        The owner notices within ``stop_poll`` seconds. A run whose owner
        died is marked lost here (``check_owner``) rather than waited for.
        """
        try:
            await store.request_stop(run_id, "stopped by a client (POST runs/{runId}/stop)")
            record = await store.check_owner(run_id)
            with anyio.move_on_after(self._durable.stop_wait):
                while record is not None and not record.status.ended:
                    await anyio.sleep(0.05)
                    record = await store.run(run_id)
        except StoreError as exc:
            await _send_store_error(send, exc)
            return
        if record is None:
            await _send_store_error(send, UnknownRun(run_id))
            return
        code = 200 if record.status.ended else 202
        await send_json(send, code, {"runId": run_id, "status": record.status.value})

    @asynccontextmanager
    async def _touching(self, store: EventLog, run_id: str | None) -> AsyncIterator[None]:
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
                    await store.touch_reader(run_id)
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

    async def thread(self, scope: Scope, receive: Receive, send: Send, thread_id: str) -> None:
        """``GET threads/{threadId}``: the ended runs folded into one run, then a live run."""
        try:
            store = await self._durable.store()
            runs = await store.thread_runs(thread_id)
            if not runs:
                raise UnknownRun(thread_id, f"no thread {thread_id!r} in the event log")
            wire: list[list[bytes]] = []
            for record in runs:
                if not record.status.ended or record.status in (RunStatus.BROKEN, RunStatus.LOST):
                    continue  # a lost run was cut anywhere: its events may not fold
                try:
                    wire.append([data for _, data in await store.read(record.run_id)])
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
        live = None if tail is None else self._durable.live.get(tail.run_id)

        remote = None if tail is None or live is not None else tail.run_id

        @asynccontextmanager
        async def open_frames() -> AsyncIterator[AsyncIterator[bytes]]:
            with live.reader() if live is not None else _nothing():
                async with self._touching(store, remote):
                    yield _history_frames(store, epoch, head, None if tail is None else tail.run_id)

        response = SSERun(
            open_frames=open_frames,
            stats=RunStats("history", "-", thread_id),
            **self._streaming,
        )
        await response(scope, receive, send)


class _Handler:
    """An ASGI app calling ``handler(scope, receive, send, <the path parameter>)``."""

    def __init__(self, handler: Callable[[Scope, Receive, Send, str], Any]) -> None:
        self._handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = scope.get("path_params", {})
        value = next(iter(params.values()), "")
        await self._handler(scope, receive, send, str(value))


@contextmanager
def _nothing() -> Iterator[None]:
    yield


async def _followed(store: EventLog, epoch: str, run_id: str, after: int) -> AsyncIterator[bytes]:
    try:
        async for seq, data in store.follow(run_id, after):
            yield sse_frame(data, format_event_id(epoch, run_id, seq))
    except RunLost as exc:
        raise RunFailure("RUN_LOST", str(exc)) from exc
    except StoreError as exc:
        raise RunFailure("RUN_NOT_RESUMABLE", str(exc)) from exc


async def _history_frames(
    store: EventLog, epoch: str, head: bytes, live_run: str | None
) -> AsyncIterator[bytes]:
    yield head
    if live_run is not None:
        async for frame in _followed(store, epoch, live_run, 0):
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
}
"""The ``error`` of the JSON answer to a store error, by its ``http_status``."""


async def _send_store_error(send: Send, exc: StoreError) -> None:
    error = _STORE_ERRORS.get(exc.http_status, "store_error")
    await send_json_error(send, BadRequest(exc.http_status, error, str(exc)))
