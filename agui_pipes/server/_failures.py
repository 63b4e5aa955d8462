"""What a run that failed tells its client (a RUN_ERROR) and the server log (one line).

Errors after a response started cannot become an HTTP status any more: each
becomes the RUN_ERROR ``run_error_for`` gives, whose ``code`` is stable, so
the client always sees a well-formed end. The server log gets one line per
failure from ``log_failure``: a WARNING for what the producer or the wire
got wrong (a protocol violation, with its rule and position; an upstream
failure; an event that cannot be encoded), and an ERROR with its traceback
only for what is the server's own fault.
"""

from __future__ import annotations

import logging

from ag_ui.core import RunErrorEvent

from .._foundation.errors import AguiPipesError, StageError, StreamRejected
from ..codecs import EncodeError
from ..store import StoreError, StoreUnavailable
from ..verify import ProtocolViolation

__all__ = ["RunFailure", "log_failure", "run_error_for"]


class RunFailure(AguiPipesError):
    """A failure the client should see as RUN_ERROR with this ``code``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def run_error_for(exc: BaseException) -> RunErrorEvent:
    """The RUN_ERROR that tells the client what went wrong (codes are stable)."""
    if isinstance(exc, RunFailure):
        return RunErrorEvent(code=exc.code, message=exc.message)
    if isinstance(exc, StreamRejected):
        code = "PROTOCOL_VIOLATION" if isinstance(exc, ProtocolViolation) else "REJECTED"
        return RunErrorEvent(code=code, message=str(exc))
    if isinstance(exc, StageError):
        return RunErrorEvent(code="STAGE_ERROR", message=str(exc))
    if isinstance(exc, EncodeError):
        # The agent or a stage made a value no JSON peer can read back (NaN, too deep):
        # a fault of that code, named by event type and path, not of the server.
        return RunErrorEvent(code="ENCODE_ERROR", message=str(exc))
    if isinstance(exc, StoreUnavailable):  # the store's reason, never its path
        return RunErrorEvent(
            code="STORE_UNAVAILABLE", message=f"the event log is unavailable: {exc.reason}"
        )
    if isinstance(exc, StoreError):
        return RunErrorEvent(
            code="INTERNAL_ERROR", message="the server failed: the event log failed"
        )
    return RunErrorEvent(
        code="INTERNAL_ERROR", message=f"the server failed: {type(exc).__name__}: {exc}"
    )


def log_failure(log: logging.Logger, run_id: str, exc: Exception) -> None:
    """The one log line of run ``run_id`` failing with ``exc`` (see the module doc).

    A violation the client was told without its message (``WithheldViolation``)
    is logged in full here: the operator may read what the client may not.
    """
    violation = getattr(exc, "violation", None)
    if isinstance(violation, ProtocolViolation):
        log.warning(
            "run %s: protocol violation before the end of the chain (the client gets the "
            "rule and position only): %s",
            run_id,
            violation,
        )
    elif isinstance(exc, ProtocolViolation):
        # The producer broke the protocol: its fault, not the server's, and the
        # message names the rule and the event's position.
        log.warning("run %s failed: PROTOCOL_VIOLATION: %s", run_id, exc)
    elif isinstance(exc, EncodeError):
        log.warning("run %s failed: %s", run_id, exc)
    elif isinstance(exc, RunFailure):
        log.warning("run %s failed: %s: %s", run_id, exc.code, exc.message)
    elif isinstance(exc, StoreUnavailable):
        # An operational fault with its own log lines from the store: no traceback.
        log.error("run %s failed: %s", run_id, exc)
    else:
        log.error("run %s failed: %s", run_id, exc, exc_info=exc)


def log_after_terminal(log: logging.Logger, run_id: str, exc: Exception) -> None:
    """The log line of a run that failed once its terminal event was out (nothing is sent)."""
    log.warning("run %s failed after its terminal event (not sent): %s", run_id, exc)
