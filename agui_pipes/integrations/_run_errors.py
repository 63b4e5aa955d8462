"""A framework's RUN_ERROR with its exception's text kept in the log, not sent to the client.

ag-ui-adk and ag-ui-strands turn a failure of the agent or the model into
``RUN_ERROR`` whose ``message`` is ``str(exception)``: hosts, keys, paths —
what only the operator should read. The producers send the code with a fixed
text instead (as agui_pipes does for a producer that raises) and log the
framework's message on ``agui_pipes.integrations``.
"""

from __future__ import annotations

import logging

from ag_ui.core import BaseEvent, RunErrorEvent

from .._protocol.construct import replace

__all__ = ["without_error_text"]

_log = logging.getLogger("agui_pipes.integrations")


def without_error_text(event: BaseEvent, framework: str, run_id: str) -> BaseEvent:
    """``event``, or for a RUN_ERROR the same error with its text moved to the log."""
    if not isinstance(event, RunErrorEvent):
        return event
    code = event.code or "AGENT_ERROR"
    _log.error("%s run %s failed (%s): %s", framework, run_id, code, event.message)
    return replace(event, "message", f"the agent failed ({code}); the server log has the details")
