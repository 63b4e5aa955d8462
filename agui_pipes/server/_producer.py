"""In-process producers: a framework's AG-UI event stream served as the endpoint's run.

A *producer* is what every Python framework's AG-UI adapter boils down to: a
callable taking the run's ``RunAgentInput`` (and the caller's principal) and
returning an async iterable of ``ag_ui.core`` events — or of their wire form,
JSON objects. ``AgentEndpoint(producer=...)`` (and ``build_app(producer=...)``)
serves one with everything the endpoint offers; this module is the producer's
side of it: :func:`produced_events` opens one run's producer as an event
source, which the endpoint runs through ``ExpandChunks | chain | Verify`` as a
gateway runs its upstream's events — but without encoding and decoding them
in between, and without a second server.

The producer's own run events are the run (its ``RUN_STARTED`` /
``RUN_FINISHED`` / ``RUN_ERROR``). It is iterated only as the client reads
(backpressure), and its iterator is closed (``aclose()``: a generator's
``finally`` runs, a framework's run is cancelled) when the run ends — a stop, a
client that left for good, the run's end. What can go wrong on the
producer's side reaches the client as a RUN_ERROR whose code says what — once
the producer's run started, a raised error, a malformed item or an early end is
the stream's last event, through the chain as a driver agent's failure is (a
tracing stage records it; ``AGENT_TIMEOUT`` and ``CANCELLED`` stop the chain
with the run, and the server sends them after it):

==================  ==================================================================
``AGENT_ERROR``     the producer raised (the message names the exception's type only)
``AGENT_TIMEOUT``   the producer gave nothing for ``producer_timeout`` seconds
``AGENT_MALFORMED`` an item that is neither an event nor a valid event's wire form
``AGENT_TRUNCATED`` the stream ended without any event, or with its run still open
``CANCELLED``       the run was stopped (``stop_runs``) with no event log to record it
==================  ==================================================================
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import anyio
from ag_ui.core import BaseEvent, EventType, RunAgentInput, RunErrorEvent
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .._foundation.principal import Principal
from ..codecs import DecodeError, decode
from ..driver import CancelToken
from ._failures import RunFailure

__all__ = [
    "DEFAULT_PRODUCER_TIMEOUT",
    "ProducedItem",
    "Producer",
    "check_producer",
    "check_producer_timeout",
    "produced_events",
]

ProducedItem: TypeAlias = BaseEvent | Mapping[str, Any]
Producer: TypeAlias = Callable[
    [RunAgentInput, Principal],
    AsyncIterable[ProducedItem] | Awaitable[AsyncIterable[ProducedItem]],
]
"""``producer(run_input, principal)``: the run's events (a coroutine returning them is
awaited first)."""

DEFAULT_PRODUCER_TIMEOUT = 60.0
"""Seconds a producer may go without an event before its run ends with ``AGENT_TIMEOUT``:
the silence a gateway tolerates from its upstream by default (``DEFAULT_TIMEOUT.read``),
so moving a framework from behind the gateway into the process changes nothing. Only
the producer's own waits count: while a slow client holds the run, the clock stops."""

_CLOSE_TIMEOUT = 5.0
"""Seconds the producer's ``aclose()`` may take (its ``finally`` blocks, the framework
cancelling its run) before the run's end stops waiting for it, as the gateway waits for
its upstream connection to close."""

_log = logging.getLogger("agui_pipes.server")


def check_producer(producer: object) -> None:
    """Refuse what cannot be a producer, at construction rather than on the first run."""
    if not callable(producer):
        raise TypeError(
            f"a producer must be callable as producer(run_input, principal), got "
            f"{type(producer).__name__}"
        )


def check_producer_timeout(timeout: float | None) -> None:
    if timeout is not None and not timeout > 0:
        raise ValueError(
            f"producer_timeout must be a number of seconds > 0 (or None: no limit), got {timeout!r}"
        )


@asynccontextmanager
async def produced_events(
    producer: Producer,
    run_input: RunAgentInput,
    principal: Principal,
    *,
    idle_timeout: float | None = DEFAULT_PRODUCER_TIMEOUT,
    legacy: bool = False,
    token: CancelToken | None = None,
    logger: logging.Logger = _log,
) -> AsyncIterator[AsyncIterator[BaseEvent]]:
    """One run of ``producer`` as an event source, for the duration of the ``async with``.

    The producer's iterator is closed on the way out, whatever ended the run.
    ``idle_timeout`` bounds each wait for its next item (``AGENT_TIMEOUT``); a
    tripped ``token`` ends the run with ``CANCELLED`` (a server without an event
    log, whose recorder would otherwise stop it); dict items are decoded as a
    gateway decodes its upstream's frames (``legacy``: pre-1.0 shapes too).
    """
    items = await _items(producer, run_input, principal)
    run = _ProducerRun(items.__aiter__(), idle_timeout, legacy, logger)
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as watchers:
            with anyio.CancelScope() as run.scope:
                if idle_timeout is not None:
                    watchers.start_soon(run.watch, name="agui_pipes producer timeout")
                forget = token.on_cancel(run.cancel) if token is not None else None
                try:
                    yield run.events()
                except Exception as exc:
                    # Kept out of the task group, which would wrap it in a group:
                    # the run's failure propagates as itself.
                    failure = exc
                finally:
                    if forget is not None:
                        forget()
                    watchers.cancel_scope.cancel()
    finally:
        await run.aclose()
    if failure is not None:
        raise failure
    # Reached after a stop of the run's own scope too (an outer cancellation
    # propagates past it): say why, as a RUN_ERROR code.
    if run.expired:
        raise RunFailure(
            "AGENT_TIMEOUT",
            f"the agent sent nothing for {idle_timeout:g}s after {run.count} event"
            f"{'s' if run.count != 1 else ''}: timed out waiting for its next event",
        )
    if run.cancelled and token is not None:
        raise RunFailure("CANCELLED", token.reason or "the run was cancelled")


async def _items(
    producer: Producer, run_input: RunAgentInput, principal: Principal
) -> AsyncIterable[ProducedItem]:
    try:
        produced = producer(run_input, principal)
        if inspect.isawaitable(produced):
            produced = await produced
    except Exception as exc:
        raise _agent_error(exc, 0) from exc
    if not isinstance(produced, AsyncIterable):
        raise RunFailure(
            "AGENT_ERROR",
            f"the agent returned {type(produced).__name__}, not an async iterable of events",
        )
    return produced


def _agent_error(exc: Exception, count: int) -> RunFailure:
    # The producer's own failure: the log gets the traceback, the client a
    # RUN_ERROR that names the kind of failure but none of its text (which
    # may hold what only the operator should read: keys, hosts, paths).
    _log.error("the producer failed after %d events", count, exc_info=exc)
    return RunFailure(
        "AGENT_ERROR", f"the agent failed ({type(exc).__name__}); the server log has the details"
    )


_ALWAYS_FREE = ("raw_event", "metadata")
_FREE_FORM: dict[EventType, tuple[str, ...]] = {
    EventType.STATE_SNAPSHOT: (*_ALWAYS_FREE, "snapshot"),
    EventType.RAW: (*_ALWAYS_FREE, "event"),
    EventType.CUSTOM: (*_ALWAYS_FREE, "value"),
    EventType.RUN_FINISHED: (*_ALWAYS_FREE, "result"),
    EventType.ACTIVITY_SNAPSHOT: (*_ALWAYS_FREE, "content"),
}
"""The fields of each event type that take any value (``_ProducerRun._portable``)."""
_SCALARS = frozenset({str, int, float, bool})


class _ProducerRun:
    """The producer's iterator, the wait for its next item timed, its run followed."""

    __slots__ = (
        "_items",
        "_legacy",
        "_log",
        "_open_run",
        "_timeout",
        "cancelled",
        "count",
        "expired",
        "scope",
        "waiting_since",
    )

    def __init__(
        self,
        items: AsyncIterator[ProducedItem],
        timeout: float | None,
        legacy: bool,
        logger: logging.Logger,
    ) -> None:
        self._items = items
        self._timeout = timeout
        self._legacy = legacy
        self._log = logger
        self._open_run: str | None = None
        self.scope: anyio.CancelScope | None = None
        self.waiting_since: float | None = None
        """When the wait for the producer's next item began (None while it is not awaited)."""
        self.count = 0
        self.expired = False
        self.cancelled = False

    async def events(self) -> AsyncIterator[BaseEvent]:
        """The producer's events; a failure on its side while its run is open ends the run.

        That failure is the stream's last event, a RUN_ERROR with its code, so
        the chain sees the run end as it sees a driver agent's failure (a
        tracing stage records the error and its code, a stage holding text
        releases it before the end); before the run started, or after it
        ended, it is raised for the server to answer.
        """
        items = self._items
        clock = time.monotonic
        while True:
            self.waiting_since = clock()
            try:
                item = await items.__anext__()
            except StopAsyncIteration:
                break
            except Exception as exc:
                failure = _agent_error(exc, self.count)
                if self._open_run is None:
                    raise failure from exc
                yield self._ended(failure)
                return
            finally:
                self.waiting_since = None
            try:
                event = self._portable(item) if isinstance(item, BaseEvent) else self._decoded(item)
            except RunFailure as failure:
                if self._open_run is None:
                    raise
                yield self._ended(failure)
                return
            self.count += 1
            if event is None:
                continue
            kind = event.type
            if kind is EventType.RUN_STARTED:
                self._open_run = getattr(event, "run_id", "?")
            elif kind is EventType.RUN_FINISHED or kind is EventType.RUN_ERROR:
                self._open_run = None
            yield event
        if not self.count:
            raise RunFailure("AGENT_TRUNCATED", "the agent ended its stream without any event")
        if self._open_run is not None:
            yield self._ended(
                RunFailure(
                    "AGENT_TRUNCATED",
                    f"the agent ended its stream while run {self._open_run} was still open "
                    "(no RUN_FINISHED or RUN_ERROR)",
                )
            )

    def _ended(self, failure: RunFailure) -> RunErrorEvent:
        """The RUN_ERROR ending the open run with ``failure`` (logged as the server would)."""
        self._log.warning("run %s failed: %s: %s", self._open_run, failure.code, failure.message)
        self._open_run = None
        return RunErrorEvent(code=failure.code, message=failure.message)

    def _portable(self, event: BaseEvent) -> BaseEvent:
        """``event`` with its free-form values as JSON: what the wire would have carried.

        A framework puts its own objects where the protocol allows any value
        (LangGraph: LangChain messages in ``STATE_SNAPSHOT.snapshot`` and
        ``rawEvent``). Over HTTP its server dumps them and a gateway reads plain
        JSON back; in-process the chain would see the objects (and a stage
        reading state, or the encoder, would refuse them), so they are dumped
        here — only those fields, only when they hold something.
        """
        update: dict[str, Any] | None = None
        for name in _FREE_FORM.get(event.type, _ALWAYS_FREE):
            value = getattr(event, name, None)
            if value is None or type(value) in _SCALARS:
                continue
            try:
                shaped = to_jsonable_python(value)
            except PydanticSerializationError as exc:
                raise RunFailure(
                    "AGENT_MALFORMED",
                    f"the agent's event #{self.count} (counted from 0, {event.type.value}) holds "
                    f"a value that is not JSON at {name}: {exc}",
                ) from exc
            if update is None:
                update = {}
            update[name] = shaped
        return event if update is None else event.model_copy(update=update)

    def _decoded(self, item: object) -> BaseEvent | None:
        index = self.count
        if not isinstance(item, Mapping):
            raise RunFailure(
                "AGENT_MALFORMED",
                f"the agent's item #{index} (counted from 0) is a {type(item).__name__}; "
                "yield ag_ui.core events or their wire form (a dict)",
            )
        try:
            decoded = decode(dict(item), index=index, legacy=self._legacy)
        except DecodeError as exc:
            raise RunFailure(
                "AGENT_MALFORMED",
                f"the agent sent an invalid event #{index} (counted from 0): {exc.message}",
            ) from exc
        for warning in decoded.warnings:
            self._log.debug("agent event: %s", warning)
        return decoded.event

    def cancel(self) -> None:
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()

    async def watch(self) -> None:
        """Stop the run once one wait for the producer lasted ``timeout`` seconds.

        A task of its own, like the send timeout's: the producer's loop only
        notes when each wait began, which costs nothing per event, where a
        cancel scope per item would cost more than the item.
        """
        assert self._timeout is not None and self.scope is not None
        timeout = self._timeout
        while True:
            since = self.waiting_since
            if since is None:
                await anyio.sleep(timeout / 2)
                continue
            late = time.monotonic() - (since + timeout)
            if late < 0:
                await anyio.sleep(-late)
                continue
            # Nothing else runs between this check and the cancel: the run's
            # task is still waiting on the producer, so that is what stops.
            self.expired = True
            self.scope.cancel()
            return

    async def aclose(self) -> None:
        close = getattr(self._items, "aclose", None)
        if close is None:
            return
        with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True) as scope:
            try:
                await close()
            except Exception as exc:  # the run's outcome stands; the log says what failed
                self._log.warning("closing the producer failed: %r", exc)
        if scope.cancelled_caught:
            self._log.warning(
                "the producer did not close within %ss; left to finish on its own", _CLOSE_TIMEOUT
            )
