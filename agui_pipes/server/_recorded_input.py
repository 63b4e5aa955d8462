"""The user's own words in the event log: a run's new input messages on its RUN_STARTED.

Why: a run's events are what the agent said; what the client said — the
user's turn, the tool results it ran — is only in the request. A thread's
history folded from the log alone started at the assistant's reply, so a UI
reloading a thread lost every user turn. So a recorded run's RUN_STARTED
carries ``input`` (the RunAgentInput echo AG-UI defines for it) holding the
messages of the request the thread did not hold yet, by id: each user turn
and tool result is recorded once, by the run it was sent with, not again
with every later run that repeats the conversation. Both folds — ours and
the reference client's — add an input message whose id they do not hold, so
the live client (which holds them: it sent them) sees no change, and the
folded history shows them where the UI did: before the run's reply.

The echo is partial on purpose: ``threadId``, ``runId``, the new
``messages`` (the fields the protocol requires) and, when the run answered
interrupts, its ``resume`` — never the request's tools, context, state or
forwarded props, which are not conversation and may be large or private.
The ``resume`` recorded is the one the run was sent on with: under
``interrupts="cancel"`` the client's answers *and* the cancellations the
server added for the interrupts it left open (``_interrupt_gate``), so a
reloaded run or thread shows that they were cancelled, and by which run.
A RUN_STARTED that already carries ``input`` (an agent with
``echo_input=True``, an upstream that echoes) keeps it; only the new messages
and the answers (by ``interruptId``) it lacks are added. A run whose first
event is not a RUN_STARTED (it failed before starting) records no input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ag_ui.core import Message, ResumeEntry

__all__ = ["input_recorder", "new_messages", "resume_wire"]


def new_messages(messages: Sequence[Message], held: set[str]) -> list[dict[str, Any]]:
    """The wire form of the ``messages`` whose id is not in ``held``, in order, once each."""
    fresh: list[dict[str, Any]] = []
    seen = set(held)
    for message in messages:
        if message.id in seen:
            continue
        seen.add(message.id)
        fresh.append(message.model_dump(by_alias=True, exclude_none=True, mode="json"))
    return fresh


def resume_wire(answers: Sequence[ResumeEntry]) -> list[dict[str, Any]]:
    """The wire form of a run's ``resume`` entries, in order."""
    return [a.model_dump(by_alias=True, exclude_none=True, mode="json") for a in answers]


def input_recorder(
    thread_id: str,
    run_id: str,
    messages: list[dict[str, Any]],
    resume: list[dict[str, Any]] | None = None,
) -> Callable[[bytes], bytes] | None:
    """What rewrites a run's first event to carry ``messages`` and ``resume`` (None: nothing
    to add)."""
    answers = resume or []
    if not messages and not answers:
        return None

    def rewrite(data: bytes) -> bytes:
        return with_input(data, thread_id, run_id, messages, answers)

    return rewrite


def with_input(
    data: bytes,
    thread_id: str,
    run_id: str,
    messages: list[dict[str, Any]],
    resume: list[dict[str, Any]] | None = None,
) -> bytes:
    """``data`` (one event's wire JSON) with ``messages`` and ``resume`` on its ``input``, if
    a RUN_STARTED."""
    if b'"RUN_STARTED"' not in data:
        return data
    try:
        event = json.loads(data)
    except ValueError:
        return data
    if not isinstance(event, dict) or event.get("type") != "RUN_STARTED":
        return data
    answers = resume or []
    echo = event.get("input")
    if isinstance(echo, dict) and isinstance(echo.get("messages"), list):
        present = {m.get("id") for m in echo["messages"] if isinstance(m, dict)}
        missing = [m for m in messages if m["id"] not in present]
        echoed = echo.get("resume")
        held = echoed if isinstance(echoed, list) else []
        answered = {a.get("interruptId") for a in held if isinstance(a, dict)}
        unechoed = [a for a in answers if a["interruptId"] not in answered]
        if not missing and not unechoed:
            return data  # the echo holds them all: the bytes stay the producer's
        if missing:
            echo["messages"] = [*echo["messages"], *missing]
        if unechoed:
            echo["resume"] = [*held, *unechoed]
    else:
        event["input"] = {
            "threadId": event.get("threadId", thread_id),
            "runId": event.get("runId", run_id),
            "messages": messages,
        }
        if answers:
            event["input"]["resume"] = answers
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
