"""Faults the mock backend plants in a run: the syntax, and the event-level ones.

One syntax serves a scenario's ``fault:`` key and the ``x-agui-mock-fault``
request header: items separated by ``;`` or ``,``, each ``name`` or
``name=value``; ``@N`` means "after N events were sent". Example:
``status=503; retry-after=2`` or ``stall=1.5@3, malformed=5``.

=====================  =========================================================
``status=CODE``        answer with HTTP CODE (401, 429, 500, 503) and a JSON body
``retry-after=S``      with ``status``: a ``retry-after: S`` header
``first-byte=S``       wait S seconds before the response headers
``stall=S[@N]``        pause S seconds after N events (default 1)
``drop-after=N``       cut the connection after N events (no clean end of body)
``truncate-after=N``   end the body cleanly after N events, with no terminal event
``malformed=N``        send a frame that is not JSON after N events
``duplicate=N``        send the Nth event (1-based) twice
``reorder=N``          swap the Nth and the next event
``break=RULE``         break a rule of the 1.0 verifier (``BREAKABLE_RULES``)
``keepalive=S[@N]``    after N events (default 0), only keep-alive comments, every
                       S seconds, until the client goes away
=====================  =========================================================

The HTTP- and frame-level faults are applied by the app (``_mock_app``);
``mutate`` applies the event-level ones (duplicate, reorder, break) to the
event stream before it is framed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ag_ui.core import (
    BaseEvent,
    EventType,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from ...verify import Rule

__all__ = [
    "BREAKABLE_RULES",
    "FAULT_HEADER",
    "FAULT_NAMES",
    "HTTP_FAULT_STATUSES",
    "FaultPlan",
    "MockDrop",
    "mutate",
    "parse_faults",
]

FAULT_HEADER = "x-agui-mock-fault"
"""The request header that plants faults in one request (same syntax as ``fault:``)."""

HTTP_FAULT_STATUSES = (401, 429, 500, 503)

BREAKABLE_RULES: tuple[Rule, ...] = (
    Rule.FIRST_EVENT,
    Rule.RUN_ENDED,
    Rule.DUPLICATE_RUN_STARTED,
    Rule.DUPLICATE_START,
    Rule.NOT_OPEN,
    Rule.UNKNOWN_ID,
    Rule.OUT_OF_ORDER,
    Rule.OPEN_AT_FINISH,
    Rule.TRUNCATED,
)
"""The verifier rules ``break=`` can break (the chunk rules need a chunked stream and
``limit-exceeded`` a producer-side state, so they are not offered).

``unknown-id`` and ``out-of-order`` are rules of the strict producer profile
(``Verifier("producer")``): the reference client tolerates both, so a frontend
sees nothing wrong. ``open-at-finish`` needs a run that finishes (a RUN_ERROR may
leave things open)."""

_TERMINAL = frozenset({EventType.RUN_FINISHED, EventType.RUN_ERROR})
_AFTER = re.compile(r"^(?P<value>[^@]+?)(?:@(?P<after>\d+))?$")


class MockDrop(Exception):
    """Raised to make the ASGI server cut the connection (the ``drop-after`` fault).

    An ASGI app cannot close its socket; an exception after the response
    started is how it asks the server to abort the response, which leaves the
    client with a body that never ended (no final chunk).
    """


@dataclass(frozen=True)
class FaultPlan:
    """The faults of one request; ``None`` / empty fields plant nothing."""

    status: int | None = None
    retry_after: float | None = None
    first_byte: float = 0.0
    stalls: tuple[tuple[int, float], ...] = ()
    """(after N events, seconds) pairs."""
    drop_after: int | None = None
    truncate_after: int | None = None
    malformed_after: int | None = None
    duplicate: int | None = None
    reorder: int | None = None
    break_rule: Rule | None = None
    keepalive: tuple[int, float] | None = None
    """(after N events, interval in seconds)."""

    def over(self, other: FaultPlan | None) -> FaultPlan:
        """This plan with ``other``'s planted faults on top (a header over a scenario)."""
        if other is None:
            return self
        changes = {
            f.name: getattr(other, f.name)
            for f in dataclasses.fields(other)
            if getattr(other, f.name) != f.default
        }
        return dataclasses.replace(self, **changes)


def _number(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"fault `{name}` takes a number of seconds, got {text!r}") from None
    if not value >= 0:
        raise ValueError(f"fault `{name}` takes a number of seconds >= 0, got {text!r}")
    return value


def _count(name: str, text: str, least: int = 0) -> int:
    if not text.isdigit() or int(text) < least:
        raise ValueError(f"fault `{name}` takes a whole number >= {least}, got {text!r}")
    return int(text)


def _timed(name: str, text: str, default_after: int) -> tuple[int, float]:
    found = _AFTER.match(text)
    if found is None:
        raise ValueError(f"fault `{name}` takes SECONDS[@N], got {text!r}")
    after = found.group("after")
    return (int(after) if after else default_after, _number(name, found.group("value")))


FAULT_NAMES: tuple[str, ...] = (
    "status",
    "retry-after",
    "first-byte",
    "stall",
    "drop-after",
    "truncate-after",
    "malformed",
    "duplicate",
    "reorder",
    "break",
    "keepalive",
)


def parse_faults(spec: str) -> FaultPlan:
    """The plan ``spec`` describes; ``ValueError`` naming the item that is wrong."""
    fields: dict[str, object] = {}
    stalls: list[tuple[int, float]] = []
    for item in re.split(r"[;,]", spec):
        item = item.strip()
        if not item:
            continue
        name, _, value = (part.strip() for part in item.partition("="))
        if name not in FAULT_NAMES:
            raise ValueError(f"unknown fault `{name}`; the faults are: " + ", ".join(FAULT_NAMES))
        if not value:
            raise ValueError(f"fault `{name}` needs a value (`{name}=...`)")
        if name == "status":
            status = _count(name, value)
            if status not in HTTP_FAULT_STATUSES:
                raise ValueError(
                    f"fault `status` is one of {', '.join(map(str, HTTP_FAULT_STATUSES))}, "
                    f"got {value}"
                )
            fields["status"] = status
        elif name == "retry-after":
            fields["retry_after"] = _number(name, value)
        elif name == "first-byte":
            fields["first_byte"] = _number(name, value)
        elif name == "stall":
            stalls.append(_timed(name, value, 1))
        elif name == "keepalive":
            after, interval = _timed(name, value, 0)
            if interval <= 0:
                raise ValueError("fault `keepalive` takes an interval > 0 seconds")
            fields["keepalive"] = (after, interval)
        elif name == "break":
            rules = [r.value for r in BREAKABLE_RULES]
            if value not in rules:
                raise ValueError(
                    f"fault `break` cannot break `{value}`; it breaks: " + ", ".join(rules)
                )
            fields["break_rule"] = Rule(value)
        else:
            least = 1 if name in ("duplicate", "reorder") else 0
            key = {"malformed": "malformed_after"}.get(name, name.replace("-", "_"))
            fields[key] = _count(name, value, least)
    if "retry_after" in fields and "status" not in fields:
        raise ValueError("fault `retry-after` goes with `status=429` or `status=503`")
    if stalls:
        fields["stalls"] = tuple(stalls)
    return FaultPlan(**fields)  # type: ignore[arg-type]


def _planted(rule: Rule) -> list[BaseEvent]:
    """Events that, sent right after RUN_STARTED, break ``rule`` in any run."""
    if rule is Rule.DUPLICATE_START:
        opened = TextMessageStartEvent(message_id="mock-duplicate")
        return [opened, opened]
    if rule is Rule.NOT_OPEN:
        return [TextMessageContentEvent(message_id="mock-never-opened", delta="?")]
    if rule is Rule.UNKNOWN_ID:
        return [
            ToolCallResultEvent(
                message_id="mock-result", tool_call_id="mock-unknown-call", content="?"
            )
        ]
    if rule is Rule.OUT_OF_ORDER:
        return [
            ToolCallStartEvent(tool_call_id="mock-early", tool_call_name="mock"),
            ToolCallResultEvent(message_id="mock-result", tool_call_id="mock-early", content="?"),
            ToolCallEndEvent(tool_call_id="mock-early"),
        ]
    if rule is Rule.OPEN_AT_FINISH:
        return [StepStartedEvent(step_name="mock-left-open")]
    return []


async def mutate(events: AsyncIterator[BaseEvent], plan: FaultPlan) -> AsyncIterator[BaseEvent]:
    """``events`` with the plan's duplicate, reorder and rule-breaking faults applied."""
    rule = plan.break_rule
    held: BaseEvent | None = None
    index = 0
    async for event in events:
        index += 1
        out: list[BaseEvent] = [event]
        if rule is not None and event.type == EventType.RUN_STARTED:
            if rule is Rule.FIRST_EVENT:
                out = [TextMessageStartEvent(message_id="mock-before-start"), event]
            elif rule is Rule.DUPLICATE_RUN_STARTED:
                out = [event, event]
            else:
                out = [event, *_planted(rule)]
        elif rule is not None and event.type in _TERMINAL:
            if rule is Rule.TRUNCATED:
                out = []
            elif rule is Rule.RUN_ENDED:
                out = [event, TextMessageStartEvent(message_id="mock-after-end")]
        if plan.duplicate == index:
            out = [*out, *out]
        if plan.reorder == index:
            held, out = (out[-1] if out else None), out[:-1]
        elif held is not None:
            out = [*out, held]
            held = None
        for item in out:
            yield item
    if held is not None:
        yield held
