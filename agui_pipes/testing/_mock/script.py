"""A scenario's script as a run-driver agent, and which scenario a request matches.

The mock does not write event sequences itself: each script step is a call
on the driver's ``RunContext`` (``assistant_message``, ``reasoning``,
``tool_call``, ``subagent``, ``step``, ``emit``), so the run the mock serves
is as well-formed as any driver run — ids ``{runId}-msg-N`` /
``{runId}-call-N`` / ``{runId}-sub-N`` included — and faults are planted on
top of it afterwards, never by accident.

Determinism: everything depends only on the scenario, the request and the
seed. The driver derives the message, tool-call and subagent ids from the
request's ``runId``; the interrupt ids and the pace jitter come from the
seed, the ``runId`` and the scenario's name.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from typing import Any

import anyio
from ag_ui.core import (
    AssistantMessage,
    CustomEvent,
    Interrupt,
    RunAgentInput,
    StateDeltaEvent,
    StateSnapshotEvent,
    ToolMessage,
    UserMessage,
)

from ...driver import Emitter, RunContext, RunError, RunOutcome
from .scenarios import Match, Scenario, Step, ToolCallStep

__all__ = ["ScriptAgent", "derived_id", "last_user_text", "matches", "select", "tokens"]

_TOKEN = re.compile(r"\S+\s*|\s+")


def tokens(text: str) -> list[str]:
    """``text`` cut into streaming deltas (a word and its trailing space) that join back."""
    return _TOKEN.findall(text) or [""]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(getattr(part, "text", "") or "" for part in content)
    return ""


def last_user_text(request: RunAgentInput) -> str:
    """The text of the request's last user message ("" when it has none)."""
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return _text_of(message.content)
    return ""


def _tool_name(request: RunAgentInput, tool_call_id: str) -> str | None:
    for message in request.messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or ():
                if call.id == tool_call_id:
                    return call.function.name
    return None


def _answered_tool(request: RunAgentInput) -> ToolMessage | None:
    last = request.messages[-1] if request.messages else None
    return last if isinstance(last, ToolMessage) else None


def matches(match: Match, request: RunAgentInput) -> bool:
    """Whether ``request`` meets every condition of ``match``."""
    if match.user is not None and not match.user.search(last_user_text(request)):
        return False
    if match.thread is not None and not match.thread.fullmatch(request.thread_id):
        return False
    if match.tool_result is not None:
        answered = _answered_tool(request)
        if match.tool_result is False:
            if answered is not None:
                return False
        elif answered is None or (
            isinstance(match.tool_result, str)
            and _tool_name(request, answered.tool_call_id) != match.tool_result
        ):
            return False
    if match.resume is not None and bool(request.resume) != match.resume:
        return False
    if match.forwarded_props is not None:
        props = request.forwarded_props if isinstance(request.forwarded_props, dict) else {}
        for key, value in match.forwarded_props.items():
            if key not in props or _canonical(props[key]) != _canonical(value):
                return False
    return True


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def select(scenarios: Sequence[Scenario], request: RunAgentInput) -> Scenario | None:
    """The first scenario (in file order) whose match ``request`` meets."""
    for scenario in scenarios:
        if matches(scenario.match, request):
            return scenario
    return None


def derived_id(seed: int, request: RunAgentInput, scenario: str, what: str) -> str:
    """A stable id for ``what``: the same seed, run and scenario give the same id."""
    digest = hashlib.sha256(f"{seed}\0{request.run_id}\0{scenario}\0{what}".encode())
    return f"{what}-{digest.hexdigest()[:12]}"


class ScriptAgent:
    """The driver agent that plays one scenario's script for one request."""

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.scenario = scenario
        self.seed = seed
        self._calls: dict[str, str] = {}
        self._pending: list[str] = []
        self._rng = random.Random(0)
        self._words: dict[str, str] = {}

    async def run(self, ctx: RunContext) -> RunOutcome:
        request = ctx.input
        scenario = self.scenario
        self._rng = random.Random(f"{self.seed}\0{request.run_id}\0{scenario.name}")
        answered = _answered_tool(request)
        self._words = {
            "{{user}}": last_user_text(request),
            "{{tool_result}}": _text_of(answered.content) if answered is not None else "",
            "{{thread}}": request.thread_id,
        }
        await self._play(ctx, scenario.script)
        outcome = scenario.outcome
        if outcome.kind == "error":
            raise RunError(outcome.code or "MOCK_ERROR", self._fill(outcome.message or ""))
        if outcome.kind == "interrupt":
            fields: dict[str, Any] = {
                "id": outcome.interrupt_id
                or derived_id(self.seed, request, scenario.name, "interrupt"),
                "reason": outcome.reason,
                "message": outcome.message,
                "tool_call_id": self._calls.get(outcome.tool_call or ""),
                "response_schema": outcome.response_schema,
                "metadata": outcome.metadata,
            }
            return RunOutcome.interrupt(
                [Interrupt(**{k: v for k, v in fields.items() if v is not None})]
            )
        return RunOutcome.success(outcome.result, pending_tool_call_ids=self._pending or None)

    def _fill(self, text: str) -> str:
        for placeholder, value in self._words.items():
            text = text.replace(placeholder, value)
        return text

    async def _pause(self) -> None:
        pace = self.scenario.pace
        if pace:
            spread = self.scenario.jitter * pace
            await anyio.sleep(pace + self._rng.uniform(-spread, spread))

    async def _play(self, emitter: Emitter[Any], script: Sequence[Step]) -> None:
        last_message: str | None = None
        for step in script:
            if step.kind == "text":
                with emitter.assistant_message() as message:
                    last_message = message.id
                    for token in tokens(self._fill(step.text)):
                        message.delta(token)
                        await self._pause()
            elif step.kind == "reasoning":
                with emitter.reasoning() as span, span.message() as thought:
                    for token in tokens(self._fill(step.text)):
                        thought.delta(token)
                        await self._pause()
            elif step.kind == "tool_calls":
                await self._tool_calls(emitter, step.tool_calls, last_message)
            elif step.kind == "state":
                if step.delta is not None:
                    emitter.emit(StateDeltaEvent(delta=list(step.delta)))
                else:
                    emitter.emit(StateSnapshotEvent(snapshot=step.state))
            elif step.kind == "custom":
                emitter.emit(CustomEvent(name=step.name, value=step.value))
            elif step.kind == "sleep":
                await anyio.sleep(step.seconds)
            elif step.kind == "step":
                with emitter.step(step.name) as inner:
                    await self._play(inner, step.script)
            else:
                await self._subagent(emitter, step)

    async def _tool_calls(
        self, emitter: Emitter[Any], calls: Sequence[ToolCallStep], parent: str | None
    ) -> None:
        # Parallel calls: all started, then each one's arguments streamed in turn
        # and ended, then the backend ones answered — the order a model that
        # emits several calls in one turn produces.
        handles = [emitter.tool_call(call.name, parent_message_id=parent) for call in calls]
        for call, handle in zip(calls, handles, strict=True):
            self._calls[call.name] = handle.id
            args = call.args if isinstance(call.args, str) else json.dumps(call.args)
            for token in tokens(args):
                handle.args(token)
                await self._pause()
            handle.end()
        for call, handle in zip(calls, handles, strict=True):
            if not call.has_result:
                self._pending.append(handle.id)
            elif isinstance(call.result, str):
                handle.result(self._fill(call.result))
            else:
                handle.result_json(call.result)

    async def _subagent(self, emitter: Emitter[Any], step: Step) -> None:
        with emitter.subagent(step.name, description=step.description) as scope:
            await self._play(scope, step.script)
            if step.error is not None:
                scope.fail(self._fill(step.error))
            elif step.result is not None:
                scope.finish_with(step.result)
            else:
                scope.finish()
