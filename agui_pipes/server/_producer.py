"""In-process producers: a framework's AG-UI event stream served as a gateway's upstream.

A *producer* is what every Python framework's AG-UI adapter boils down to: a
callable taking the run's ``RunAgentInput`` (and the caller's principal) and
returning an async iterable of ``ag_ui.core`` events — or of their wire form,
JSON objects. :func:`producer_gateway` serves one with everything a gateway
offers — its chain, verification or ``repair``, ``compat``, the store (resume,
join, history), authorization, the interrupt contract, tracing — without a
second HTTP hop or a second server: the producer is the gateway's upstream,
reached through :class:`ProducerTransport`, an httpx transport that calls it
in-process and streams its events as SSE.

The producer's own run events are the run (its ``RUN_STARTED`` /
``RUN_FINISHED`` / ``RUN_ERROR``, repaired or verified like any upstream's).
It is iterated only as the gateway reads (backpressure), and its iterator is
closed (``aclose()``: a generator's ``finally`` runs, a framework's run is
cancelled) when the gateway closes the upstream response — on a stop, on a
client that left for good, at the end of the run. An exception it raises
ends the run with ``RUN_ERROR`` code ``AGENT_ERROR`` naming the exception's
type only; the log gets the traceback.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import httpx
import orjson
from ag_ui.core import BaseEvent, RunAgentInput

from .._foundation.principal import ANONYMOUS, Principal
from ..codecs import encode_sse
from ._failures import RunFailure

if TYPE_CHECKING:
    from .gateway import Gateway

__all__ = [
    "PRINCIPAL_HEADER",
    "PRODUCER_URL",
    "Producer",
    "ProducerTransport",
    "producer_gateway",
]

ProducedItem: TypeAlias = BaseEvent | Mapping[str, Any]
Producer: TypeAlias = Callable[
    [RunAgentInput, Principal],
    AsyncIterable[ProducedItem] | Awaitable[AsyncIterable[ProducedItem]],
]
"""``producer(run_input, principal)``: the run's events (a coroutine returning them is
awaited first)."""

_log = logging.getLogger("agui_pipes.server")

PRODUCER_URL = "http://in-process.agui-pipes.invalid/producer"
"""The gateway's upstream URL for a producer (never resolved: the transport answers it)."""

PRINCIPAL_HEADER = "x-agui-pipes-principal"
"""How the gateway hands the caller's principal (scope and subject) to the transport."""


class ProducerTransport(httpx.AsyncBaseTransport):
    """An httpx transport answering every POST by calling ``producer`` in-process."""

    def __init__(self, producer: Producer) -> None:
        if not callable(producer):
            raise TypeError(
                f"a producer must be callable as producer(run_input, principal), got "
                f"{type(producer).__name__}"
            )
        self._producer = producer

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        # The gateway checked this body before forwarding it: it parses.
        run_input = RunAgentInput.model_validate_json(body)
        principal = _principal(request.headers.get(PRINCIPAL_HEADER))
        produced = self._producer(run_input, principal)
        if inspect.isawaitable(produced):
            produced = await produced
        if not isinstance(produced, AsyncIterable):
            raise TypeError(
                f"the producer returned {type(produced).__name__}, not an async iterable of "
                "events; write it as an async generator (async def ...: yield event)"
            )
        return httpx.Response(
            200,
            headers=[("content-type", "text/event-stream")],
            stream=_SSEStream(produced),
            request=request,
        )


def _principal(value: str | None) -> Principal:
    if not value:
        return ANONYMOUS
    fields = json.loads(value)
    return Principal(str(fields["scope"]), fields.get("subject"))


class _SSEStream(httpx.AsyncByteStream):
    """The producer's events as SSE frames, one per event, pulled as the gateway reads."""

    def __init__(self, produced: AsyncIterable[ProducedItem]) -> None:
        self._items = produced.__aiter__()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        position = 0
        try:
            async for item in self._items:
                yield _frame(item, position)
                position += 1
        except Exception as exc:
            # The producer's own failure: the log gets the traceback, the client a
            # RUN_ERROR that names the kind of failure but none of its text (which
            # may hold what only the operator should read: keys, hosts, paths).
            _log.error("the producer failed after %d events", position, exc_info=exc)
            raise RunFailure(
                "AGENT_ERROR",
                f"the agent failed ({type(exc).__name__}); the server log has the details",
            ) from exc

    async def aclose(self) -> None:
        close = getattr(self._items, "aclose", None)
        if close is not None:
            await close()


def _frame(item: ProducedItem, position: int) -> bytes:
    if isinstance(item, BaseEvent):
        return encode_sse(item)
    if isinstance(item, Mapping):
        return b"data: " + orjson.dumps(item) + b"\n\n"
    raise TypeError(
        f"the producer's item #{position} is a {type(item).__name__}; yield ag_ui.core events "
        "or their wire form (a dict)"
    )


def producer_gateway(producer: Producer, **options: Any) -> Gateway:
    """A :class:`~agui_pipes.server.Gateway` whose upstream is ``producer``, in-process.

    ``options`` are the gateway's (``chain``, ``store``, ``authorize``, ...),
    except ``client`` and ``forward_principal_header``, which this sets.
    """
    from .gateway import Gateway

    for taken in ("client", "forward_principal_header", "upstream"):
        if taken in options:
            raise TypeError(f"producer_gateway() sets {taken}= itself; leave it out")
    client = httpx.AsyncClient(transport=ProducerTransport(producer))
    return Gateway(
        PRODUCER_URL, client=client, forward_principal_header=PRINCIPAL_HEADER, **options
    )
