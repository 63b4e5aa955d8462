"""Serving pipelines over HTTP: an ASGI agent endpoint and an AG-UI gateway.

* ``AgentEndpoint`` / ``agent_route`` — run an agent per POSTed
  RunAgentInput and stream the run as SSE (the ``server`` extra).
* ``Gateway`` / ``gateway_route`` — forward each request to an upstream AG-UI
  agent and apply a chain to what comes back (the ``http`` extra as well).
* ``producer_gateway`` / ``build_app(producer=...)`` — serve an in-process event
  producer (a framework's AG-UI adapter) as a gateway's upstream, no second hop.
* ``ServerOptions`` — what both take besides their source (keep-alive, send
  bounds, limits, store, repair, compat), with the defaults in one place.

See docs/serving.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.routing import Route

    from ..driver import AgentLike
    from ._app import HEALTH_PATH, build_app
    from ._failures import RunFailure, run_error_for
    from ._options import ServerOptions
    from ._producer import Producer, ProducerTransport, producer_gateway
    from ._stats import RunStats
    from ._streaming import SSE_HEADERS, SSERun
    from .endpoint import AgentEndpoint, AgentFactory
    from .gateway import Gateway, UpstreamError, gateway_route
else:
    from .._lazy import attach

    __getattr__, __dir__ = attach(
        __name__,
        {
            "HEALTH_PATH": "._app",
            "build_app": "._app",
            "RunStats": "._stats",
            "ServerOptions": "._options",
            "SSE_HEADERS": "._streaming",
            "RunFailure": "._failures",
            "SSERun": "._streaming",
            "run_error_for": "._failures",
            "AgentEndpoint": ".endpoint",
            "AgentFactory": ".endpoint",
            # The gateway needs httpx (the ``http`` extra); it is imported only when asked.
            "Gateway": ".gateway",
            "UpstreamError": ".gateway",
            "gateway_route": ".gateway",
            "Producer": "._producer",
            "ProducerTransport": "._producer",
            "producer_gateway": "._producer",
        },
        extras={
            ".gateway": "pip install 'agui-pipes[server,http]'",
            "._producer": "pip install 'agui-pipes[server,http]'",
        },
    )

__all__ = [
    "HEALTH_PATH",
    "SSE_HEADERS",
    "AgentEndpoint",
    "AgentFactory",
    "Gateway",
    "Producer",
    "ProducerTransport",
    "RunFailure",
    "RunStats",
    "SSERun",
    "ServerOptions",
    "UpstreamError",
    "agent_route",
    "agent_routes",
    "build_app",
    "gateway_route",
    "producer_gateway",
    "run_error_for",
]


def agent_route(path: str, agent: AgentLike | None = None, **options: Any) -> Route:
    """A Starlette ``Route`` (POST only) serving ``AgentEndpoint(agent, **options)``.

    With ``store=`` an endpoint serves more than one route: use
    :func:`agent_routes`.
    """
    from ._options import records

    if records(options):
        raise TypeError(
            "agent_route() returns the one POST route; with store=... the endpoint also serves "
            "runs/{runId}, runs/{runId}/stop and threads/{threadId}: use "
            "agent_routes(path, agent, store=...) (a list of routes) or build_app(...)"
        )
    try:
        from starlette.routing import Route
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "agent_route() needs Starlette: pip install 'agui-pipes[server]' (or mount the "
            "AgentEndpoint ASGI app in your own framework)"
        ) from exc
    from .endpoint import AgentEndpoint

    return Route(path, AgentEndpoint(agent, **options), methods=["POST"])


def agent_routes(path: str, agent: AgentLike | None = None, **options: Any) -> list[Route]:
    """``AgentEndpoint(agent, **options)``'s Starlette routes: POST ``path``, and with
    ``store=`` the resume, stop and thread-history routes under ``path``.

    The event log given as a URL is opened on first use; close it at shutdown
    with ``await routes[0].endpoint.aclose()`` or use ``build_app``, whose
    lifespan does both.
    """
    try:
        from starlette.routing import Route  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "agent_routes() needs Starlette: pip install 'agui-pipes[server]'"
        ) from exc
    from .endpoint import AgentEndpoint

    return AgentEndpoint(agent, **options).routes(path)
