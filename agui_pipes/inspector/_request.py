"""The exported run's format: NDJSON of events, led by the request the run was started with.

An exported run is NDJSON, one wire event a line, as ``agui-pipes run`` and ``verify``
read it. When the run's ``RunAgentInput`` is known (it was sent from the inspector's
page, or imported or read with one), the first line carries it::

    {"type": "agui_pipes.request", "input": {"threadId": "t1", "runId": "r1", ...}}

Its ``type`` is no AG-UI event type, so a reader of AG-UI events drops it with an
unknown-type warning (AG-UI 1.0 says to), and the inspector takes it as the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

__all__ = ["REQUEST_TYPE", "RequestError", "request_line", "split_request", "validated_request"]

REQUEST_TYPE = "agui_pipes.request"


class RequestError(ValueError):
    """The request line is there but is not a ``RunAgentInput`` (the message says why)."""


def request_line(request: dict[str, Any]) -> bytes:
    """The first line of an export carrying ``request`` (a RunAgentInput's wire JSON)."""
    return orjson.dumps({"type": REQUEST_TYPE, "input": request})


def split_request(items: Sequence[Any]) -> tuple[dict[str, Any] | None, Sequence[Any]]:
    """``items`` (wire events as read) without a leading request line, and its request.

    Raises ``RequestError`` when the first item is a request line whose ``input`` is not
    a valid ``RunAgentInput`` — the events are not inspected with a wrong request.
    """
    if not items:
        return None, items
    first = items[0]
    obj: Any = first
    if isinstance(first, bytes | str):
        if REQUEST_TYPE not in (
            first if isinstance(first, str) else first.decode("utf-8", "replace")
        ):
            return None, items
        try:
            obj = orjson.loads(first)
        except orjson.JSONDecodeError:
            return None, items
    if not isinstance(obj, dict) or obj.get("type") != REQUEST_TYPE:
        return None, items
    return validated_request(obj.get("input")), items[1:]


def validated_request(value: Any) -> dict[str, Any]:
    """``value`` as a RunAgentInput's wire JSON (camelCase), or ``RequestError``."""
    from ag_ui.core import RunAgentInput
    from pydantic import ValidationError

    if not isinstance(value, dict):
        raise RequestError(
            f'the first line is a {REQUEST_TYPE} line, but its "input" is not a JSON object: '
            'give {"type": "agui_pipes.request", "input": {"threadId": ..., "runId": ..., ...}}'
        )
    try:
        RunAgentInput.model_validate(value)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
            for e in error.errors()[:5]
        )
        raise RequestError(
            f"the {REQUEST_TYPE} line's input is not a RunAgentInput: {problems}"
        ) from None
    return value
