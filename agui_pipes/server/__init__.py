"""Serving pipelines over HTTP: an ASGI agent endpoint and an AG-UI gateway.

* ``AgentEndpoint`` / ``agent_route`` — run an agent per POSTed
  RunAgentInput and stream the run as SSE (the ``server`` extra).
* ``Gateway`` / ``gateway_route`` — forward each request to an upstream AG-UI
  agent and apply a chain to what comes back (the ``http`` extra as well).
* ``AgentEndpoint(producer=...)`` / ``build_app(producer=...)`` — serve an
  in-process event producer (a framework's AG-UI adapter), no second hop.
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
    from ._producer import DEFAULT_PRODUCER_TIMEOUT, Producer
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
            "DEFAULT_PRODUCER_TIMEOUT": "._producer",
            "Producer": "._producer",
        },
        extras={
            ".gateway": "pip install 'agui-pipes[server,http]'",
        },
    )

__all__ = [
    "DEFAULT_PRODUCER_TIMEOUT",
    "HEALTH_PATH",
    "SSE_HEADERS",
    "AgentEndpoint",
    "AgentFactory",
    "Gateway",
    "Producer",
    "RunFailure",
    "RunStats",
    "SSERun",
    "ServerOptions",
    "UpstreamError",
    "agent_route",
    "agent_routes",
    "build_app",
    "gateway_route",
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
