"""Serving pipelines over HTTP: an ASGI agent endpoint and an AG-UI gateway.

* ``AgentEndpoint`` / ``agent_route`` — run an agent per POSTed
  RunAgentInput and stream the run as SSE (the ``server`` extra).
* ``Gateway`` / ``gateway_route`` — forward each request to an upstream AG-UI
  agent and apply a chain to what comes back (the ``http`` extra as well).

See docs/serving.md.
"""

from __future__ import annotations

from typing import Any

from ._app import HEALTH_PATH, build_app
from ._stats import RunStats
from ._streaming import SSE_HEADERS, RunFailure, SSERun, run_error_for
from .endpoint import AgentEndpoint, AgentFactory


def __getattr__(name: str) -> Any:
    # The gateway needs httpx (the ``http`` extra); import it only when asked.
    if name in ("Gateway", "UpstreamError", "gateway_route"):
        try:
            from . import gateway
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                f"agui_pipes.server.{name} needs httpx: pip install 'agui-pipes[server,http]'"
            ) from exc
        return getattr(gateway, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "HEALTH_PATH",
    "SSE_HEADERS",
    "AgentEndpoint",
    "AgentFactory",
    "Gateway",
    "RunFailure",
    "RunStats",
    "SSERun",
    "UpstreamError",
    "agent_route",
    "build_app",
    "gateway_route",
    "run_error_for",
]


def agent_route(path: str, agent: Any = None, **options: Any) -> Any:
    """A Starlette ``Route`` (POST only) serving ``AgentEndpoint(agent, **options)``."""
    try:
        from starlette.routing import Route
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "agent_route() needs Starlette: pip install 'agui-pipes[server]' (or mount the "
            "AgentEndpoint ASGI app in your own framework)"
        ) from exc
    return Route(path, AgentEndpoint(agent, **options), methods=["POST"])
