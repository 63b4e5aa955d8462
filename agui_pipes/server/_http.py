"""Plain-ASGI request plumbing shared by the endpoint and the gateway.

Kept free of any framework so the endpoint is one ASGI callable that mounts
anywhere (Starlette, FastAPI, any ASGI router); Starlette is needed only for
the ``Route`` convenience.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import RunAgentInput
from pydantic import ValidationError

from .. import _json
from ._streaming import Receive, Send

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "BadRequest",
    "ClientGone",
    "parse_run_input",
    "read_body",
    "send_json_error",
]

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024


class BadRequest(Exception):
    """The request cannot start a run; answered with ``status`` and a JSON body."""

    def __init__(
        self, status: int, error: str, message: str, details: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.details = details


class ClientGone(Exception):
    """The client disconnected while we were still reading its request."""


async def read_body(receive: Receive, max_bytes: int) -> bytes:
    """The whole request body, refusing more than ``max_bytes`` (413)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise BadRequest(
                413,
                "request_too_large",
                f"the request body is larger than {max_bytes} bytes; a RunAgentInput this "
                "large is refused (raise max_body_bytes if it is legitimate)",
            )
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(body)"


def parse_run_input(body: bytes) -> RunAgentInput:
    """Validate the POSTed body as a RunAgentInput, or raise a 422 ``BadRequest``."""
    if not body.strip():
        raise BadRequest(
            422,
            "invalid_run_input",
            "the request body is empty; POST a JSON RunAgentInput "
            '({"threadId": ..., "runId": ..., "messages": [...]})',
        )
    try:
        # pydantic's JSON parser takes NaN / Infinity and numbers past a double; a
        # state holding them could never be echoed or encoded back. The strict
        # parser refuses them here, as the 422 they are (invalid JSON is left to
        # pydantic, whose message says where).
        _json.loads(body)
    except _json.JSONValueError as exc:
        where = f" at `{_json.shown_path(exc.path)}`" if exc.path else ""
        raise BadRequest(
            422, "invalid_run_input", f"the request body is not valid JSON{where}: {exc.problem}"
        ) from None
    except ValueError:
        pass
    try:
        return RunAgentInput.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        first = errors[0]
        if first["type"] == "json_invalid":
            message = f"the request body is not valid JSON: {first['msg']}"
        else:
            shown = "; ".join(f"{_loc(e['loc'])}: {e['msg']}" for e in errors[:3])
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            message = f"the request body is not a valid RunAgentInput: {shown}{more}"
        details = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in errors]
        raise BadRequest(422, "invalid_run_input", message, details) from None


async def send_json_error(send: Send, error: BadRequest) -> None:
    """A complete JSON error response (never a half-open stream)."""
    payload: dict[str, Any] = {"error": error.error, "message": error.message}
    if error.details is not None:
        payload["details"] = error.details
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if error.status == 405:
        headers.append((b"allow", b"POST"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
