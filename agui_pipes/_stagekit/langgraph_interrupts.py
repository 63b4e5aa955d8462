"""ag-ui-langgraph's legacy interrupt dialect, both ways, as plain functions.

What ag-ui-langgraph (0.0.47, with its defaults) does when a graph calls
``interrupt(value)``: the run ends with one ``CUSTOM`` event per pending
interrupt, ``name: "on_interrupt"``, ``value`` the interrupt's value as JSON
*text* (``json.dumps``; a string value verbatim) and ``rawEvent`` LangGraph's
``Interrupt`` as JSON, ``{"value": ..., "id": "<LangGraph's interrupt id>"}``,
then a plain ``RUN_FINISHED`` with no outcome. The next run answers it in
``forwardedProps.command.resume``: the value ``interrupt()`` returns (a
string is ``json.loads``-ed when it parses), or, for several interrupts,
LangGraph's own map ``{interrupt id: value}``.

Canonical (AG-UI 1.0) from the dialect, as ag-ui-langgraph's own
``emit_interrupt_outcome`` maps a LangGraph interrupt:

* ``id`` — LangGraph's interrupt id from ``rawEvent`` (the id the adapter's
  canonical mode uses too); when ``rawEvent`` was stripped, ``langgraph-``
  and a digest of thread id, run id, position and value (stable across a
  replay of the same run, but not an id LangGraph knows: such an interrupt
  can be answered only alone);
* from a dict value: ``reason`` (default ``langgraph:interrupt``),
  ``message``, ``toolCallId`` / ``tool_call_id``, ``responseSchema`` /
  ``response_schema``, ``expiresAt`` / ``expires_at``; a plain string is the
  ``message``; a value with anything else keeps the whole value under
  ``metadata.langgraph.value``, so nothing the graph asked is lost.

Answers, canonical to the dialect (what ``interrupt()`` returns is what it
returns under the adapter's canonical mode): ``resolved`` → the payload,
``cancelled`` → ``{"__agui_cancelled__": true, "interrupt_id": id}``; one
answer is sent bare (a string payload JSON-encoded, since the adapter decodes
strings), several as ``{id: value}``. An empty ``resolved`` payload cannot
be sent (the adapter reads ``resume: null`` as no answer) and is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ag_ui.core import CustomEvent, EventType, Interrupt, ResumeEntry

from .._pipeline.request_hooks import RequestRefused

__all__ = [
    "CANCELLED_SENTINEL",
    "DEFAULT_REASON",
    "DERIVED_PREFIX",
    "ON_INTERRUPT",
    "command_resume",
    "custom_for_interrupt",
    "interrupt_from_custom",
    "resume_from_command",
]

ON_INTERRUPT: Final = "on_interrupt"
"""The CUSTOM event name ag-ui-langgraph signals an interrupt with."""

DEFAULT_REASON: Final = "langgraph:interrupt"
"""The reason of an interrupt whose value names none (ag-ui-langgraph's default)."""

CANCELLED_SENTINEL: Final = "__agui_cancelled__"
"""The key of the value a cancelled interrupt resumes with (ag-ui-langgraph's)."""

DERIVED_PREFIX: Final = "langgraph-"
"""The start of an id derived because the CUSTOM event carried no LangGraph id."""

# value key -> Interrupt field, camelCase first (the adapter takes either spelling).
_FIELDS: Final = (
    ("reason", ("reason",)),
    ("message", ("message",)),
    ("tool_call_id", ("toolCallId", "tool_call_id")),
    ("response_schema", ("responseSchema", "response_schema")),
    ("expires_at", ("expiresAt", "expires_at")),
)
_CAMEL: Final = {field: keys[0] for field, keys in _FIELDS}
_KNOWN_KEYS: Final = frozenset(_CAMEL.values())
_TYPES: Final = {"response_schema": dict}


def _decoded(value: Any) -> Any:
    """The interrupt's value: the CUSTOM ``value`` is JSON text (a plain string verbatim)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _derived_id(thread_id: str, run_id: str, index: int, value: Any) -> str:
    text = json.dumps([thread_id, run_id, index, value], sort_keys=True, ensure_ascii=False)
    return DERIVED_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:32]


def interrupt_from_custom(
    event: CustomEvent, *, thread_id: str, run_id: str, index: int
) -> Interrupt:
    """The canonical interrupt an ``on_interrupt`` CUSTOM event signals (module doc).

    ``index`` is the event's position among the run's interrupts (for a
    derived id).
    """
    value = _decoded(event.value)
    raw = event.raw_event
    lg_id = raw.get("id") if isinstance(raw, Mapping) else None
    if not isinstance(lg_id, str) or not lg_id:
        lg_id = _derived_id(thread_id, run_id, index, value)
    fields: dict[str, Any] = {"reason": DEFAULT_REASON}
    keep_value = True
    if isinstance(value, Mapping):
        taken: set[str] = set()
        for field, keys in _FIELDS:
            for key in keys:
                found = value.get(key)
                if found is not None and isinstance(found, _TYPES.get(field, str)):
                    fields[field] = found
                    taken.add(key)
                    break
        # Anything not read into a field (another key, a snake_case spelling, a null,
        # a value of the wrong type) keeps the whole value in the metadata.
        keep_value = set(value) != taken or not taken <= _KNOWN_KEYS
    elif isinstance(value, str):
        fields["message"] = value
        keep_value = False
    metadata = {"langgraph": {"value": value}} if keep_value else None
    return Interrupt(
        id=lg_id,
        metadata=metadata,
        subagent_run_id=event.subagent_run_id,
        **fields,
    )


def custom_for_interrupt(interrupt: Interrupt) -> CustomEvent:
    """The ``on_interrupt`` event ag-ui-langgraph emits for ``interrupt`` (the inverse)."""
    kept = (interrupt.metadata or {}).get("langgraph")
    if isinstance(kept, Mapping) and "value" in kept:
        value = kept["value"]
    else:
        value = {
            key: getattr(interrupt, field)
            for field, key in _CAMEL.items()
            if getattr(interrupt, field) is not None
        }
    text = value if isinstance(value, str) else json.dumps(value)
    raw: dict[str, Any] = {"value": value}
    if not interrupt.id.startswith(DERIVED_PREFIX):
        raw["id"] = interrupt.id
    return CustomEvent(
        type=EventType.CUSTOM,
        name=ON_INTERRUPT,
        value=text,
        raw_event=raw,
        subagent_run_id=interrupt.subagent_run_id,
    )


def _answer(entry: Mapping[str, Any]) -> Any:
    if entry.get("status") == "cancelled":
        return {CANCELLED_SENTINEL: True, "interrupt_id": entry["interruptId"]}
    return entry.get("payload")


def command_resume(entries: Sequence[Mapping[str, Any]]) -> Any:
    """``forwardedProps.command.resume`` for the wire resume entries (module doc).

    Raises :class:`RequestRefused` for an answer the dialect cannot carry.
    """
    for entry in entries:
        if entry.get("status") != "cancelled" and entry.get("payload") is None:
            raise RequestRefused(
                "resume_not_translatable",
                f"resume entry for interrupt {entry.get('interruptId')!r} resolves it with no "
                "payload, which this upstream's interrupt dialect (LangGraph "
                "forwardedProps.command.resume) reads as no answer: give a payload (say "
                "true), or answer it 'cancelled'",
            )
    if len(entries) == 1:
        value = _answer(entries[0])
        # The adapter json.loads a string resume: encode it so "123" stays a string.
        return json.dumps(value) if isinstance(value, str) else value
    derived = [
        str(entry.get("interruptId"))
        for entry in entries
        if str(entry.get("interruptId")).startswith(DERIVED_PREFIX)
    ]
    if derived:
        raise RequestRefused(
            "resume_not_translatable",
            f"interrupt {derived[0]!r} carries no LangGraph id (the upstream's on_interrupt "
            "event had no rawEvent), so it can be answered only alone, not with "
            f"{len(entries) - 1} other answer(s); keep rawEvent on the upstream (do not strip "
            "it before the bridge)",
        )
    return {str(entry["interruptId"]): _answer(entry) for entry in entries}


def resume_from_command(resume: Any, open_ids: Sequence[str]) -> list[ResumeEntry]:
    """The canonical answers a ``command.resume`` value gives ``open_ids`` (the inverse)."""

    def entry(interrupt_id: str, value: Any) -> ResumeEntry:
        if isinstance(value, Mapping) and value.get(CANCELLED_SENTINEL) is True:
            return ResumeEntry(interrupt_id=interrupt_id, status="cancelled")
        return ResumeEntry(interrupt_id=interrupt_id, status="resolved", payload=value)

    if len(open_ids) == 1:
        return [entry(open_ids[0], _decoded(resume))]
    if not isinstance(resume, Mapping):
        raise ValueError(f"{len(open_ids)} open interrupts need a map of answers by id")
    return [entry(interrupt_id, resume[interrupt_id]) for interrupt_id in open_ids]
