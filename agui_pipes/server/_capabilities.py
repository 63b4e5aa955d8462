"""``GET {path}capabilities``: what this server offers, as an AG-UI capabilities object.

The 1.0 ``AgentCapabilities`` object has ``transport.streaming`` and
``transport.resumable`` (a flag the protocol reserves with no mechanism of its
own); the mechanism agui_pipes implements is described under
``custom.aguiPipes`` — which durable routes exist and the ``forwardedProps``
a stock client sends to join its thread — so a client can choose how to
reconnect without guessing. docs/durable.md states the wire contract.

The answer depends only on the server's configuration, never on the caller,
so it is served without the ``authorize=`` hook (it names no run or thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._version import __version__
from ._http import send_json
from ._join import JOIN_PROPS_KEY

if TYPE_CHECKING:
    from starlette.routing import Route

    from ._streaming import Receive, Scope, Send

__all__ = ["capabilities", "capabilities_route"]


def capabilities(durable: bool) -> dict[str, Any]:
    """The capabilities object of a server with (``durable``) or without a store."""
    routes = (
        {
            "resume": "GET runs/{runId} with Last-Event-ID",
            "join": "GET runs/{runId}?join=1",
            "stop": "POST runs/{runId}/stop",
            "history": "GET threads/{threadId}",
            "joinThread": "GET threads/{threadId}?join=1",
            "threads": "GET threads",
        }
        if durable
        else {}
    )
    return {
        "transport": {"streaming": True, "resumable": durable},
        "custom": {
            JOIN_PROPS_KEY: {
                "version": __version__,
                "durable": durable,
                "routes": routes,
                "retryRejoins": durable,
                "joinThreadProps": {JOIN_PROPS_KEY: {"join": "thread"}} if durable else None,
            }
        },
    }


def capabilities_route(path: str, durable: bool) -> Route:
    """The ``GET`` route at ``{path}/capabilities`` (``path`` as a folder)."""
    from starlette.routing import Route

    base = path if path.endswith("/") else path + "/"
    return Route(f"{base}capabilities", _Capabilities(capabilities(durable)), methods=["GET"])


class _Capabilities:
    """The ASGI app answering one fixed capabilities object."""

    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 200, self._body)
