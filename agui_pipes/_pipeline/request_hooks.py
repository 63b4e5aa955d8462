"""The request half of a stage: how a stage changes the request a gateway forwards.

Most stages only see the stream coming back. A stage that translates between
dialects (``interrupt_bridge``) must also change what goes *up*: the client's
canonical ``resume[]`` becomes what the upstream reads. Such a stage defines
the optional hook ``rewrite_request(request) -> request``: it takes the
request as its wire dict (camelCase keys, fields this version does not know
kept) and returns the dict to forward, a new one or the same.

The gateway calls the hooks of its chain's stages in chain order on the
request it has checked (the thread's interrupt contract and the other trust
checks are decided on the client's request, before any rewrite), just before
the request goes upstream — and so does the agent endpoint serving an
in-process producer (its upstream), on the ``RunAgentInput`` it hands it. The
stage instance is the one that then sees that run's stream, so the two halves
can share what the request told. A hook
refuses a request it cannot translate with :class:`RequestRefused`, which the
gateway answers as a JSON error (nothing forwarded, nothing recorded); anything
else a hook raises is a bug, logged and answered 500 ``request_rewrite_failed``
without its text. Elsewhere (``agui-pipes run``, ``chain.apply``, a driver
agent's endpoint) the hook is not called.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .._foundation.errors import AguiPipesError

__all__ = ["RequestRefused", "RequestRewriter", "request_rewriters", "rewrite_request"]

RequestRewriter = Callable[[dict[str, Any]], dict[str, Any]]
"""A stage's ``rewrite_request``: the wire request in, the request to forward out."""


class RequestRefused(AguiPipesError):
    """A stage cannot forward this request: ``code`` and ``status`` for the JSON error.

    ``message`` is shown to the client: say what is wrong and how to fix it,
    never an internal detail.
    """

    def __init__(self, code: str, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def __reduce__(self) -> Any:
        return (type(self), (self.code, self.message, self.status))


def request_rewriters(stages: Iterable[object]) -> list[RequestRewriter]:
    """The ``rewrite_request`` hooks of ``stages``, in chain order."""
    hooks: list[RequestRewriter] = []
    for stage in stages:
        hook = getattr(stage, "rewrite_request", None)
        if callable(hook):
            hooks.append(hook)
    return hooks


def rewrite_request(hooks: Iterable[RequestRewriter], request: dict[str, Any]) -> dict[str, Any]:
    """``request`` through every hook in turn; a hook that returns no dict is a bug."""
    for hook in hooks:
        rewritten = hook(request)
        if not isinstance(rewritten, dict):
            owner = getattr(hook, "__self__", hook)
            raise TypeError(
                f"{type(owner).__name__}.rewrite_request returned "
                f"{type(rewritten).__name__}; it must return the request as a dict"
            )
        request = rewritten
    return request
