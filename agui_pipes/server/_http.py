"""Request intake shared by the endpoint and the gateway: read, validate, or answer JSON.

A POSTed run is read with a cap on its size, validated as a RunAgentInput
(an older client's ``binary`` parts upgraded first, with ``compat_down``),
and refused with a complete JSON answer before any stream starts.

Kept free of any framework so the endpoint is one ASGI callable that mounts
anywhere (Starlette, FastAPI, any ASGI router); Starlette is needed only for
the ``Route`` convenience.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ag_ui.core import RunAgentInput
from pydantic import ValidationError

from .._foundation import json as _json
from .._foundation.principal import id_problem
from .._protocol.legacy import upgrade_binary_parts
from ._options import DEFAULT_MAX_BODY_BYTES
from ._streaming import Receive, Scope, Send

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "BadRequest",
    "ClientGone",
    "accept_run_input",
    "parse_run_input",
    "read_body",
    "send_json",
    "send_json_error",
]


class BadRequest(Exception):
    """The request cannot start a run; answered with ``status`` and a JSON body."""

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        *,
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.details = details
        self.headers = headers  # e.g. retry-after on a 503


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


async def send_json(
    send: Send,
    status: int,
    payload: dict[str, Any],
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    """A complete JSON response: ``payload`` with ``status`` (and ``headers`` after the two)."""
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_json_error(send: Send, error: BadRequest) -> None:
    """A complete JSON error response (never a half-open stream)."""
    payload: dict[str, Any] = {"error": error.error, "message": error.message}
    if error.details is not None:
        payload["details"] = error.details
    allow = ((b"allow", b"POST"),) if error.status == 405 else ()
    await send_json(send, error.status, payload, (*allow, *error.headers))


async def accept_run_input(
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    app: str,
    max_body: int,
    log: logging.Logger,
    legacy: bool = False,
) -> tuple[bytes, RunAgentInput] | None:
    """The body of a POSTed run and its validated input, or ``None`` once answered.

    A run or thread id over 256 characters or with a control character is
    refused here (422 ``bad_id``), before the store or the agent sees it.
    A bad request gets its JSON error response here (and an info log line, since
    it is the client's mistake); a client that left mid-body gets nothing. Either
    way the caller has nothing more to send. The raw body comes back too because
    the gateway forwards it upstream as it came — unless ``legacy`` (a server
    with ``compat_down``): then an older client's ``binary`` content parts are
    upgraded to media parts first, as the reference client upgrades its own,
    and the body that comes back is the upgraded one.
    """
    if scope["type"] != "http":
        raise RuntimeError(f"{app} serves HTTP only, got a {scope['type']!r} scope")
    try:
        if scope.get("method") != "POST":
            raise BadRequest(405, "method_not_allowed", "POST a RunAgentInput to start a run")
        body = await read_body(receive, max_body)
        if legacy:
            body = _upgraded_body(body, log)
        run_input = parse_run_input(body)
        for what, value in (("runId", run_input.run_id), ("threadId", run_input.thread_id)):
            problem = id_problem(value)
            if problem is not None:
                shown = value[:40] + ("..." if len(value) > 40 else "")
                raise BadRequest(422, "bad_id", f"the {what} {shown!r} {problem}")
        return body, run_input
    except ClientGone:
        return None
    except BadRequest as error:
        log.info("rejected request: %s %s", error.status, error.message)
        await send_json_error(send, error)
        return None


def _upgraded_body(body: bytes, log: logging.Logger) -> bytes:
    """``body`` with the legacy ``binary`` parts of its messages upgraded (else as it is)."""
    if b'"binary"' not in body:
        return body
    try:
        parsed = json.loads(body)
    except ValueError:
        return body  # parse_run_input says what is wrong with it
    messages = parsed.get("messages") if isinstance(parsed, dict) else None
    if not isinstance(messages, list):
        return body
    changed = False
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        content, notes = upgrade_binary_parts(message.get("content"))
        for note in notes:
            log.warning("request message %s: %s", position, note)
        if content is not message.get("content"):
            messages[position] = {**message, "content": content}
            changed = True
    if not changed:
        return body
    log.info("upgraded the pre-1.0 binary content parts of the request to media parts")
    return json.dumps(parsed).encode()
