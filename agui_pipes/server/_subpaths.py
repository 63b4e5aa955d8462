"""The durable routes of an endpoint or gateway served as an ASGI app of its own.

``AgentEndpoint(..., store=...)`` and ``Gateway(..., store=...)`` have routes
beside the run POST (resume, stop, thread history, capabilities), which
``.routes(path)``, ``agent_routes`` and ``build_app`` list for a router. An app
served as it is — ``uvicorn module:endpoint``, or FastAPI's ``app.mount("/agent",
endpoint)`` — gets every request itself: without this, ``POST runs/{id}/stop``
was read as a run and refused as a malformed body (422), and ``GET runs/{id}``
as a wrong method. ``Subpaths`` answers them here, as the routes would.

Which requests it takes is decided by the method and the path *below the app's
root* (``scope["path"]`` less ``scope["root_path"]``), as the routes are: a ``GET``
of ``/runs/...``, ``/threads``, ``/threads/...`` or ``/capabilities``, and a
``POST`` of ``/runs/{runId}/stop``. Every other request stays the run POST, so the
root (``/``), any other path an app served alone is posted to, and an app behind a
plain ``Route(path, endpoint)`` (which sees the route's own path) are served as
before; only a run POSTed to a path ending in ``runs/{id}/stop`` is now the stop.
That router has no sub-routes to offer: ``.routes(path)`` lists them.

An app served alone also gets the server's ``lifespan`` scope: it runs the
owner's lifespan (the event log opened at start-up and closed at shutdown, on
the server's own event loop), as ``build_app``'s lifespan does. Under a Mount
the enclosing app's lifespan is the one that runs (pass ``endpoint.lifespan``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._durable import DurableRuns
    from ._streaming import Receive, Scope, Send

__all__ = ["Subpaths"]

_READ_FOLDERS = ("/runs/", "/threads/")
_READ_LEAVES = ("/threads", "/capabilities")


def below_root(scope: Scope) -> str:
    """The request's path below the app's mount point (``/`` for the root itself)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        path = path[len(root) :]
    return path or "/"


class Subpaths:
    """Serve the durable routes of ``durable`` below the app's root, and its lifespan."""

    def __init__(
        self,
        durable: DurableRuns,
        lifespan: Callable[[Any], AbstractAsyncContextManager[None]],
    ) -> None:
        try:
            from starlette.routing import Router
        except ImportError:  # pragma: no cover - depends on the environment
            # The routes are Starlette's: without it (an endpoint run by another
            # framework) every request stays the run POST, as it was.
            self._router: Any = None
            return
        from ._capabilities import capabilities_route

        routes: list[Any] = [*durable.routes("/"), capabilities_route("/", True)]
        self._router = Router(routes, lifespan=lifespan)

    def claims(self, scope: Scope) -> bool:
        """Whether the request is for a durable route rather than the run POST."""
        if self._router is None:
            return False
        kind = scope.get("type")
        if kind == "lifespan":
            return True
        if kind != "http":
            return False
        path = below_root(scope)
        method = scope.get("method")
        if method == "GET":
            return path.startswith(_READ_FOLDERS) or path in _READ_LEAVES
        return method == "POST" and path.startswith("/runs/") and path.endswith("/stop")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The router matches the path below root_path, as under a Mount; an app
        # served alone has an empty root path and matches its whole path.
        await self._router(scope, receive, send)
