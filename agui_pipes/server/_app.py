"""A ready-made Starlette app: one agent endpoint or one gateway, plus a health check.

What ``agui-pipes serve`` runs, and a shortcut for deployments that need
nothing else. ``GET /healthz`` answers ``ok`` so a load balancer can probe a
worker without starting a run; with a store, it probes the store too (bounded)
and answers 503 ``{"status": "unavailable", "store": reason}`` when the store
cannot take writes (a stalled or full disk, the database file deleted).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from .._pipeline.chain import ChainFactory
from ._cors import cors_middleware
from ._options import ServerOptions

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..driver import AgentLike
    from ._durable import DurableRuns
    from ._producer import Producer

__all__ = ["HEALTH_PATH", "build_app"]

HEALTH_PATH = "/healthz"


def build_app(
    *,
    agent: AgentLike | None = None,
    upstream: str | None = None,
    producer: Producer | None = None,
    chain: ChainFactory | None = None,
    path: str = "/",
    options: ServerOptions | None = None,
    cors_origins: Iterable[str] | None = None,
    **keywords: Any,
) -> Starlette:
    """A Starlette app serving ``agent``, relaying to ``upstream`` or serving ``producer``.

    Exactly one of ``agent``, ``upstream`` and ``producer`` (an in-process event
    producer such as a framework's AG-UI adapter, served by
    ``AgentEndpoint(producer=...)``; docs/integrations.md). ``options`` (a
    ``ServerOptions``) and the other keywords go to ``AgentEndpoint`` or
    ``Gateway``, whose defaults they are. The gateway's HTTP client is closed at
    shutdown by the app's lifespan. With ``store=`` (agent or gateway) the
    app also serves ``{path}/runs/{runId}`` (resume), ``{path}/runs/{runId}/stop``
    and ``{path}/threads/{threadId}``, and its lifespan opens the event log at
    startup and closes it at shutdown. ``app.state.agui_server`` is the
    ``AgentEndpoint`` or ``Gateway``: ``await app.state.agui_server.stop_runs()``
    stops its live runs before the ASGI server waits for the open streams
    (what ``agui-pipes serve`` does on SIGINT / SIGTERM). ``cors_origins`` (``scheme://host[:port]``
    each, or ``"*"``) lets browser apps on those origins call every route
    (docs/security.md, CORS); an origin that is not one is a ValueError here.
    """
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    from ._store_health import store_health

    if sum(given is not None for given in (agent, upstream, producer)) != 1:
        raise TypeError("build_app() needs exactly one of agent=..., upstream=... or producer=...")
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    if path == HEALTH_PATH:
        raise ValueError(f"{HEALTH_PATH} is the health check; serve the agent at another path")

    durable: list[DurableRuns] = []  # the server's store, once the server is built

    async def health(request: Request) -> Response:
        reason = await store_health(durable[0]) if durable else None
        if reason is None:
            return PlainTextResponse("ok")
        return JSONResponse(
            {"status": "unavailable", "store": reason},
            status_code=503,
            headers={"retry-after": "5", "cache-control": "no-store"},
        )

    middleware = [] if not cors_origins else [cors_middleware(cors_origins)]
    routes = [Route(HEALTH_PATH, health, methods=["GET"])]
    if upstream is not None:
        from .gateway import Gateway

        gateway = Gateway(upstream, chain=chain, options=options, **keywords)
        durable.extend([] if gateway.durable is None else [gateway.durable])
        routes.extend(gateway.routes(path))

        @asynccontextmanager
        async def lifespan(app: object) -> AsyncIterator[None]:
            async with gateway.lifespan(app):
                yield

        relaying = Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
        relaying.state.agui_server = gateway
        return relaying

    from .endpoint import AgentEndpoint

    if producer is not None:
        keywords["producer"] = producer
    endpoint = AgentEndpoint(agent, chain=chain, options=options, **keywords)
    durable.extend([] if endpoint.durable is None else [endpoint.durable])
    routes.extend(endpoint.routes(path))
    if endpoint.durable is None:
        served = Starlette(routes=routes, middleware=middleware)
    else:

        @asynccontextmanager
        async def store_lifespan(app: object) -> AsyncIterator[None]:
            async with endpoint.lifespan(app):
                yield

        served = Starlette(routes=routes, lifespan=store_lifespan, middleware=middleware)
    served.state.agui_server = endpoint
    return served
