"""A chain's request half applied by a server: the gateway's body, a producer's input.

The hooks (``_pipeline.request_hooks``) take and return the request as its wire
dict. The gateway rewrites the body it forwards; the agent endpoint serving an
in-process producer rewrites the ``RunAgentInput`` it hands the producer, the
producer being its upstream. Either way the thread's contract and the other
trust checks were decided on the client's own request, and a hook's failure is
answered the same way (``rewrite_failure``).
"""

from __future__ import annotations

import logging
from typing import Any

from ag_ui.core import RunAgentInput

from .._pipeline.request_hooks import RequestRefused, RequestRewriter, rewrite_request
from ._http import BadRequest

__all__ = ["rewrite_failure", "rewritten_input"]


def rewritten_input(hooks: list[RequestRewriter], run_input: RunAgentInput) -> RunAgentInput:
    """``run_input`` as the hooks forward it: the same object when none changes it.

    A hook's result that is not a valid ``RunAgentInput`` raises pydantic's
    ``ValidationError`` — the hook's bug, answered as one.
    """
    if not hooks:
        return run_input
    request: dict[str, Any] = run_input.model_dump(mode="json", by_alias=True, exclude_none=True)
    forwarded = rewrite_request(hooks, request)
    if forwarded is request:
        return run_input
    return RunAgentInput.model_validate(forwarded)


def rewrite_failure(log: logging.Logger, exc: Exception, run_id: str, message: str) -> BadRequest:
    """The answer to a request half that failed: the stage's refusal, or a logged 500.

    A ``RequestRefused`` is the stage's own answer to the client; anything else
    is the stage's bug, logged here and not shown to the client: the client
    gets ``message``.
    """
    if isinstance(exc, RequestRefused):
        log.info("rejected request: %s %s", exc.status, exc.message)
        return BadRequest(exc.status, exc.code, exc.message)
    log.error("a stage's rewrite_request failed for run %s: %s", run_id, exc, exc_info=exc)
    return BadRequest(500, "request_rewrite_failed", message)
