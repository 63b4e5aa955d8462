"""Interrupts the agent raises, and the answers it reads back, checked on both ends.

``ctx.interrupt(...)`` builds an ``Interrupt`` at the line that asks: its
``expiresAt`` from a moment or a delay (ISO 8601, UTC — the form a consumer
parses and the server's thread check compares), its ``responseSchema``
checked to be a JSON Schema, and, inside a subagent scope, attributed to that
subagent. ``ctx.resume_for(...)`` finds the answer to one interrupt and, given
the interrupt (or its schema), checks a ``resolved`` payload against it, so an
agent acts on an answer of the shape it asked for or stops with a
``RunError`` ``INVALID_RESUME`` that names the path — never on half an answer.

``jsonschema`` (the ``interrupts`` extra, part of ``server``) does the schema
work; without it a schema can still be sent, only not checked here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from ag_ui.core import Interrupt, ResumeEntry
from pydantic import ValidationError

from ._errors import ErrorCode, RunError

__all__ = ["build_interrupt", "checked_answer"]


def _moment(expires_at: datetime | str | None, expires_in: float | timedelta | None) -> str | None:
    if expires_at is not None and expires_in is not None:
        raise RunError.protocol(
            "ctx.interrupt takes expires_at or expires_in, not both; pass one moment"
        )
    if expires_in is not None:
        seconds = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not seconds > 0:
            raise RunError.protocol(
                f"expires_in must be a positive number of seconds or a timedelta, got "
                f"{expires_in!r}"
            )
        moment = datetime.fromtimestamp(time.time() + seconds, tz=timezone.utc)
    elif isinstance(expires_at, str):
        try:
            moment = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
        except ValueError:
            raise RunError.protocol(
                f"expires_at {expires_at!r} is not an ISO 8601 date-time; pass e.g. "
                "'2026-12-02T10:00:00Z' or a timezone-aware datetime"
            ) from None
        if moment.tzinfo is None:
            raise RunError.protocol(
                f"expires_at {expires_at!r} has no timezone; add one (e.g. a trailing 'Z' for "
                "UTC) so every reader compares the same moment"
            )
    elif isinstance(expires_at, datetime):
        if expires_at.tzinfo is None:
            raise RunError.protocol(
                "expires_at is a naive datetime; pass a timezone-aware one, e.g. "
                "datetime.now(timezone.utc) + timedelta(minutes=10)"
            )
        moment = expires_at
    elif expires_at is None:
        return None
    else:
        raise RunError.protocol(
            f"expires_at is a {type(expires_at).__name__}; pass a timezone-aware datetime or an "
            "ISO 8601 string"
        )
    utc = moment.astimezone(timezone.utc)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _jsonschema() -> Any | None:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - an install without the extra
        return None
    return jsonschema


def _check_schema(interrupt_id: str, schema: Mapping[str, Any]) -> None:
    if not isinstance(schema, Mapping):
        raise RunError.protocol(
            f"interrupt {interrupt_id!r}: response_schema must be a JSON Schema object (a "
            f"mapping), got a {type(schema).__name__}"
        )
    jsonschema = _jsonschema()
    if jsonschema is None:  # pragma: no cover - an install without the extra
        return
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise RunError.protocol(
            f"interrupt {interrupt_id!r}: response_schema is not a valid JSON Schema "
            f"({exc.message})"
        ) from None


def build_interrupt(
    interrupt_id: str,
    reason: str,
    *,
    tag: str | None,
    message: str | None = None,
    tool_call_id: str | None = None,
    response_schema: Mapping[str, Any] | None = None,
    expires_at: datetime | str | None = None,
    expires_in: float | timedelta | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Interrupt:
    """The ``Interrupt`` ``ctx.interrupt`` returns (module doc); ``RunError`` PROTOCOL if bad."""
    if not isinstance(interrupt_id, str) or not interrupt_id:
        raise RunError.protocol(
            f"an interrupt needs a non-empty string id (resume entries answer it by that id), "
            f"got {interrupt_id!r}"
        )
    if not isinstance(reason, str) or not reason:
        raise RunError.protocol(
            f"interrupt {interrupt_id!r} needs a non-empty reason (why the run stopped, e.g. "
            "'tool_approval')"
        )
    if response_schema is not None:
        _check_schema(interrupt_id, response_schema)
    fields: dict[str, Any] = {"id": interrupt_id, "reason": reason}
    optional = {
        "message": message,
        "tool_call_id": tool_call_id,
        "response_schema": None if response_schema is None else dict(response_schema),
        "expires_at": _moment(expires_at, expires_in),
        "metadata": None if metadata is None else dict(metadata),
        "subagent_run_id": tag,
    }
    fields.update((key, value) for key, value in optional.items() if value is not None)
    try:
        return Interrupt(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise RunError.protocol(
            f"interrupt {interrupt_id!r} is not a valid Interrupt: {error['msg']} at "
            f"{'.'.join(str(p) for p in error['loc'])}"
        ) from None


def checked_answer(
    entry: ResumeEntry | None,
    interrupt_id: str,
    schema: Mapping[str, Any] | None,
    *,
    required: bool,
) -> ResumeEntry | None:
    """``entry`` once its ``resolved`` payload matches ``schema``; ``RunError`` INVALID_RESUME."""
    if entry is None:
        if required:
            raise RunError(
                ErrorCode.INVALID_RESUME,
                f"input.resume has no answer to interrupt {interrupt_id!r}; the client must "
                "answer it with {interruptId, status: 'resolved' | 'cancelled'}",
            )
        return None
    if schema is None or entry.status != "resolved":
        return entry
    jsonschema = _jsonschema()
    if jsonschema is None:  # pragma: no cover - an install without the extra
        raise RunError.protocol(
            f"checking the answer to interrupt {interrupt_id!r} against its schema needs "
            "jsonschema: pip install 'agui-pipes[interrupts]'"
        )
    try:
        jsonschema.validate(entry.payload, dict(schema))
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(the payload itself)"
        raise RunError(
            ErrorCode.INVALID_RESUME,
            f"the answer to interrupt {interrupt_id!r} does not match its responseSchema at "
            f"{where}: {exc.message}",
        ) from None
    except jsonschema.SchemaError as exc:
        raise RunError.protocol(
            f"interrupt {interrupt_id!r}: the schema to check its answer against is not a "
            f"valid JSON Schema ({exc.message})"
        ) from None
    return entry
