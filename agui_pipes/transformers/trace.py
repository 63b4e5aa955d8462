"""OpenTelemetry: GenAI spans and metrics from the events of any AG-UI stream.

The stream already says everything a trace needs — when a run starts and
ends, which subagent a tool call spawned, what the run cost in tokens — so
one stage can trace any agent, in-process or behind the gateway, without
instrumenting the agent. Spans open and close on item boundaries only: the
deltas of an open message or tool call are the bulk of a stream, and after
the first delta of a message (its first-token time) the stage promises to
pass them untouched (``passes``), so a relay forwards them without building
them. ``delta_stats=True`` trades that for message lengths and delta counts.

Where the stage sits decides what it traces: after a filter it sees what the
client sees, so a hidden subagent or tool gets no span.

A run that never ends is still exported: ``finish()`` closes it as truncated
when the stream ends, and a stream abandoned mid-run (client gone,
cancellation) is closed as abandoned when the stage is collected — a span
that is never ended is never exported, and a cancelled run is exactly the
one an operator wants to see. See docs/observability.md for the span tree,
attributes and metrics.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from .._foundation.trace_context import current_trace_headers
from .._lazy import public_dir
from .._pipeline.transformer import Condition, StreamTransformer, Transform
from .._protocol.construct import replace
from .._stagekit.telemetry import (
    TOKEN_TYPE_OF,
    Instruments,
    instruments_for,
    merge_usage,
    require_opentelemetry,
    tracer_for,
    usage_attributes,
    usage_from_metadata,
)

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["DEFAULT_MAX_ATTRIBUTE_CHARS", "DEFAULT_MAX_SPANS_PER_RUN", "OpenTelemetry"]
__dir__ = public_dir(__all__)

_Handler = Callable[[Any], Sequence[BaseEvent]]


def _now_ns() -> int:
    return time.time_ns()


_MAX_STAMP_MS = (2**63 - 1) // 1_000_000

DEFAULT_MAX_ATTRIBUTE_CHARS: Final = 4096
"""The longest string a span attribute, span name or span-event attribute carries."""
DEFAULT_MAX_SPANS_PER_RUN: Final = 1024
"""Spans one run may open; past it they are counted (``agui.spans.dropped``) instead."""
"""The latest ``timestamp`` whose nanoseconds fit the signed 64 bits exporters write."""


@dataclass(slots=True)
class _Node:
    """An open span and the context that parents its children."""

    span: Span
    context: Context
    owner: str | None


@dataclass(slots=True)
class _Tool:
    node: _Node
    name: str
    args: list[str] | None


@dataclass(slots=True)
class _Message:
    reasoning: bool
    owner: str | None
    role: str
    start: int
    first: int | None = None
    chars: int = 0
    deltas: int = 0


@dataclass(slots=True)
class _Run:
    node: _Node
    start: int
    thread_id: str
    awaiting_first_event: bool = True
    subagents: dict[str, _Node] = field(default_factory=dict)
    steps: dict[tuple[str | None, str], _Node] = field(default_factory=dict)
    tools: dict[str, _Tool] = field(default_factory=dict)
    messages: dict[str, _Message] = field(default_factory=dict)
    subagent_usage: list[TokenUsage] = field(default_factory=list)


class _Book:
    """Everything open, kept apart from the stage so a finalizer can close it.

    The finalizer must not hold the stage (it would keep it alive forever),
    so the state it needs — the open run and the pending metric counts —
    lives here.
    """

    __slots__ = ("__weakref__", "agent_name", "counts", "instruments", "run")

    def __init__(self, instruments: Instruments | None, agent_name: str | None) -> None:
        self.run: _Run | None = None
        self.counts: dict[str, int] = {}
        self.instruments = instruments
        self.agent_name = agent_name

    def metric_attributes(self) -> dict[str, str]:
        return {} if self.agent_name is None else {"gen_ai.agent.name": self.agent_name}

    def flush_counts(self) -> None:
        """Hand the events counted since the last flush to the events metric.

        Counted in a dict and handed over per run: an SDK call per event would
        cost more than the rest of the stage.
        """
        if self.instruments is not None and self.counts:
            self.instruments.events.add(self.agent_name, self.counts)
        self.counts.clear()

    def close_children(self, run: _Run, at: int, closed_by: str) -> None:
        """End every span of ``run`` still open (innermost first), saying what closed it."""
        mark = {"agui.closed_by": closed_by}
        for tool in reversed(list(run.tools.values())):
            tool.node.span.set_attributes(mark)
            tool.node.span.end(end_time=at)
        run.tools.clear()
        for step in reversed(list(run.steps.values())):
            step.span.set_attributes(mark)
            step.span.end(end_time=at)
        run.steps.clear()
        for sub in reversed(list(run.subagents.values())):
            sub.span.set_attributes(mark)
            sub.span.end(end_time=at)
        run.subagents.clear()
        run.messages.clear()

    def end_incomplete(self, outcome: str, at: int) -> None:
        """Close an open run the stream never ended (``truncated``) or left (``abandoned``)."""
        run = self.run
        if run is None:
            self.flush_counts()
            return
        self.run = None
        self.close_children(run, at, outcome)
        span = run.node.span
        span.set_attribute("agui.run.outcome", outcome)
        if outcome == "truncated":
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", "truncated")
            span.set_status(Status(StatusCode.ERROR, "the stream ended with the run still open"))
        span.end(end_time=at)
        if self.instruments is not None:
            attributes = {**self.metric_attributes(), "agui.run.outcome": outcome}
            self.instruments.runs_incomplete.add(1, attributes)
            self.instruments.run_duration.record(max(at - run.start, 0) / 1e9, attributes)
        self.flush_counts()


def _abandon(book: _Book) -> None:
    book.end_incomplete("abandoned", _now_ns())


class OpenTelemetry(StreamTransformer):
    """OpenTelemetry GenAI spans (and metrics) for every run that passes, built from its events.

    A run becomes an ``invoke_agent`` span, each subagent a child
    ``invoke_agent`` span (under the ``execute_tool`` span of the call that
    spawned it when the stream says so), each tool call an ``execute_tool``
    span, each step a ``step`` span; messages and reasoning are span events.

    ``agent_name`` names the top-level agent (the stream does not).
    ``capture_content`` records tool arguments and results (sensitive: off by
    default). ``delta_stats`` makes the stage see every delta, for message
    lengths and delta counts in the events metric, at the price of the relay
    bypass. ``roll_up_usage`` adds the usage each subagent reports in its
    ``SUBAGENT_FINISHED``/``SUBAGENT_ERROR`` ``metadata.usage`` into the
    run's terminal ``usage``. ``metrics=False`` records spans only.

    In Python, ``tracer_provider``/``meter_provider`` default to the global
    ones; ``context`` is the parent of the run spans (default: the request's
    ``traceparent`` when served by an endpoint or gateway, else the current
    context); ``clock`` returns nanoseconds since the epoch, used for events
    without a ``timestamp``.
    """

    def __init__(
        self,
        *,
        agent_name: str | None = None,
        capture_content: bool = False,
        delta_stats: bool = False,
        roll_up_usage: bool = False,
        metrics: bool = True,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        context: Context | None = None,
        clock: Callable[[], int] | None = None,
        max_attribute_chars: int = DEFAULT_MAX_ATTRIBUTE_CHARS,
        max_spans_per_run: int = DEFAULT_MAX_SPANS_PER_RUN,
    ) -> None:
        require_opentelemetry()
        for option, value in (
            ("max_attribute_chars", max_attribute_chars),
            ("max_spans_per_run", max_spans_per_run),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{option} must be a positive whole number, got {value!r}")
        self._max_chars = max_attribute_chars
        self._max_spans = max_spans_per_run
        self._spans_in_run = 0
        self._spans_dropped = 0
        if agent_name is not None and not (isinstance(agent_name, str) and agent_name):
            raise ValueError(f"agent_name must be a non-empty string or None, got {agent_name!r}")
        self._agent_name = agent_name
        self._capture = bool(capture_content)
        self._delta_stats = bool(delta_stats)
        self._roll_up = bool(roll_up_usage)
        self._metrics = bool(metrics)
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._explicit_context = context
        self._clock = clock or _now_ns
        self._tracer: Tracer = tracer_for(tracer_provider)
        # Imported once here (a function, not a bound method: no reference cycle).
        from opentelemetry.trace import SpanKind, set_span_in_context

        self._kind = SpanKind.INTERNAL
        self._in_context = set_span_in_context
        self._parent: Context | None = context if context is not None else _request_context()
        self._book = _Book(instruments_for(meter_provider) if metrics else None, agent_name)
        self._first_pending: set[str] = set()
        """Open messages whose first delta has not come yet (live: the relay tests it)."""
        self.route_key: bool = False
        """Whether a message awaits its first delta: only then are deltas routed here."""
        # No bound method is stored on the stage: without a reference cycle, it is
        # freed (and an abandoned run closed) as soon as the server drops the chain.
        weakref.finalize(self, _abandon, self._book)

    def fresh(self) -> OpenTelemetry:
        # Providers are shared, not deep-copied, and the parent context is the
        # one in effect now (the next request's traceparent), unless fixed.
        return OpenTelemetry(
            agent_name=self._agent_name,
            capture_content=self._capture,
            delta_stats=self._delta_stats,
            roll_up_usage=self._roll_up,
            metrics=self._metrics,
            tracer_provider=self._tracer_provider,
            meter_provider=self._meter_provider,
            context=self._explicit_context,
            clock=None if self._clock is _now_ns else self._clock,
            max_attribute_chars=self._max_chars,
            max_spans_per_run=self._max_spans,
        )

    def __repr__(self) -> str:
        options = {
            "agent_name": self._agent_name,
            "capture_content": self._capture,
            "delta_stats": self._delta_stats,
            "roll_up_usage": self._roll_up,
            "metrics": self._metrics,
            "max_attribute_chars": self._max_chars,
            "max_spans_per_run": self._max_spans,
        }
        return f"OpenTelemetry({', '.join(f'{k}={v!r}' for k, v in options.items())})"

    # -- routing -----------------------------------------------------------------

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        name = _HANDLERS.get(event_class)
        if name is not None:
            handler: _Handler = getattr(self, name)
            return handler
        if event_class is TextMessageContentEvent or event_class is ReasoningMessageContentEvent:
            counted: _Handler = self._content_counted
            if self._delta_stats:
                return counted
            # Deltas matter only for a first-token time: while no message awaits its
            # first delta, the chain does not even call the stage for them.
            content: _Handler = self._content
            return content if self.route_key else None
        if event_class is ToolCallArgsEvent:
            # Neither captured nor counted: the stage never needs to see them.
            args: _Handler = self._tool_args
            return args if self._capture or self._delta_stats else None
        return self._other

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        routed = self.route(type(event))
        return (event,) if routed is None else routed(event)

    def passes(
        self, event_class: type[BaseEvent], fields: frozenset[str]
    ) -> tuple[Condition, ...] | None:
        if self._delta_stats:
            return None
        if event_class is TextMessageContentEvent or event_class is ReasoningMessageContentEvent:
            # After its first delta, a message's deltas change nothing here.
            return (Condition.not_member("message_id", self._first_pending),)
        return None

    def finish(self) -> Iterable[BaseEvent]:
        self._first_pending.clear()
        self._pending_changed()
        self._book.end_incomplete("truncated", self._clock())
        return ()

    # -- helpers -----------------------------------------------------------------

    def _time(self, event: BaseEvent) -> int:
        stamp = event.timestamp
        if stamp is not None and 0 <= stamp <= _MAX_STAMP_MS:
            return stamp * 1_000_000
        # Absent, or not milliseconds since the epoch a span can hold: arrival time.
        return self._clock()

    def _pending_changed(self) -> None:
        """Reroute when messages start or stop awaiting their first delta (boundaries only)."""
        awaiting = bool(self._first_pending)
        if awaiting is not self.route_key:
            self.route_key = awaiting
            self.reroute()

    def _seen(self, event: BaseEvent, at: int | None = None) -> _Run | None:
        """Count the event; the first event after RUN_STARTED gives the time to it."""
        counts = self._book.counts
        key = event.type.value
        counts[key] = counts.get(key, 0) + 1
        run = self._book.run
        if run is not None and run.awaiting_first_event:
            run.awaiting_first_event = False
            instruments = self._book.instruments
            if instruments is not None:
                at = self._time(event) if at is None else at
                instruments.time_to_first_event.record(
                    max(at - run.start, 0) / 1e9, self._book.metric_attributes()
                )
        return run

    def _agent_node(self, run: _Run, owner: str | None) -> _Node:
        if owner is not None:
            node = run.subagents.get(owner)
            if node is not None:
                return node
        return run.node

    def _tool_parent(self, run: _Run, owner: str | None) -> _Node:
        """The innermost open step of the owner, else the owner's agent span."""
        for (step_owner, _), node in reversed(run.steps.items()):
            if step_owner == owner:
                return node
        return self._agent_node(run, owner)

    def _start(
        self,
        name: str,
        parent: Context | None,
        attributes: dict[str, Any],
        at: int,
        owner: str | None,
    ) -> _Node:
        """A span, or past the run's cap a non-recording one (counted on the run span)."""
        if self._spans_in_run >= self._max_spans:
            from opentelemetry.trace import INVALID_SPAN

            self._spans_dropped += 1
            return _Node(
                INVALID_SPAN,
                parent if parent is not None else self._in_context(INVALID_SPAN),
                owner,
            )
        self._spans_in_run += 1
        span = self._tracer.start_span(
            name[: self._max_chars],
            context=parent,
            kind=self._kind,
            attributes=self._bounded(attributes),
            start_time=at,
        )
        return _Node(span, self._in_context(span), owner)

    def _bounded(self, attributes: dict[str, Any]) -> dict[str, Any]:
        """String values cut to ``max_attribute_chars`` (a span holds what it is given)."""
        limit = self._max_chars
        for key, value in attributes.items():
            if isinstance(value, str) and len(value) > limit:
                attributes[key] = value[:limit]
        return attributes

    def _text(self, value: str) -> str:
        return value[: self._max_chars]

    def _error(self, span: Span, code: str | None, message: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", self._text(code) if code else "_OTHER")
        # An error message is free text: only with content capture on, and bounded.
        span.set_status(Status(StatusCode.ERROR, self._text(message) if self._capture else None))

    def _agent_span_name(self) -> str:
        return "invoke_agent" if self._agent_name is None else f"invoke_agent {self._agent_name}"

    # -- runs --------------------------------------------------------------------

    def _run_started(self, event: RunStartedEvent) -> Sequence[BaseEvent]:
        at = self._time(event)
        if self._book.run is not None:
            self._book.end_incomplete("truncated", at)  # a new run while one is open
        self._first_pending.clear()
        self._pending_changed()
        self._seen(event)
        self._spans_in_run = self._spans_dropped = 0
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": event.thread_id,
            "agui.run.id": event.run_id,
        }
        if self._agent_name is not None:
            attributes["gen_ai.agent.name"] = self._agent_name
        if event.parent_run_id is not None:
            attributes["agui.run.parent_id"] = event.parent_run_id
        node = self._start(self._agent_span_name(), self._parent, attributes, at, None)
        self._book.run = _Run(node, at, event.thread_id)
        instruments = self._book.instruments
        if instruments is not None:
            instruments.runs_started.add(1, self._book.metric_attributes())
        return (event,)

    def _end_run(
        self, run: _Run, at: int, usage: list[TokenUsage] | None, closed_by: str
    ) -> list[TokenUsage] | None:
        """Close the run's children, record usage; returns the usage after any roll-up."""
        self._book.run = None
        self._first_pending.clear()
        self._pending_changed()
        self._book.close_children(run, at, closed_by)
        if self._spans_dropped:
            # Past the cap, what the dropped spans would have been is counted here.
            run.node.span.set_attribute("agui.spans.dropped", self._spans_dropped)
        rolled = usage
        if self._roll_up and run.subagent_usage:
            rolled = merge_usage(usage or (), run.subagent_usage)
        if rolled:
            run.node.span.set_attributes(usage_attributes(rolled))
            instruments = self._book.instruments
            if instruments is not None:
                for entry in rolled:
                    labels = self._book.metric_attributes()
                    if entry.provider is not None:
                        labels["gen_ai.provider.name"] = entry.provider
                    if entry.model is not None:
                        labels["gen_ai.response.model"] = entry.model
                    for name, token_type in TOKEN_TYPE_OF.items():
                        count = getattr(entry, name)
                        if count:
                            instruments.tokens.add(
                                count, {**labels, "gen_ai.token.type": token_type}
                            )
        return rolled

    def _run_finished(self, event: RunFinishedEvent) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is None:
            return (event,)
        usage = self._end_run(run, at, event.usage, "RUN_FINISHED")
        outcome = "success" if event.outcome is None else str(event.outcome.type)
        span = run.node.span
        span.set_attribute("agui.run.outcome", outcome)
        span.end(end_time=at)
        self._record_end(run, at, "runs_finished", {"agui.run.outcome": outcome})
        if usage is not event.usage:
            return (replace(event, "usage", usage),)
        return (event,)

    def _run_error(self, event: RunErrorEvent) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is None:
            # A run that failed before it started: still one (empty) span to show it.
            attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
            if self._agent_name is not None:
                attributes["gen_ai.agent.name"] = self._agent_name
            node = self._start(self._agent_span_name(), self._parent, attributes, at, None)
            run = _Run(node, at, "", awaiting_first_event=False)
            self._book.run = run
        usage = self._end_run(run, at, event.usage, "RUN_ERROR")
        span = run.node.span
        span.set_attribute("agui.run.outcome", "error")
        self._error(span, event.code, event.message)
        span.end(end_time=at)
        self._record_end(run, at, "runs_errored", {"error.type": event.code or "_OTHER"})
        if usage is not event.usage:
            return (replace(event, "usage", usage),)
        return (event,)

    def _record_end(self, run: _Run, at: int, counter: str, attributes: dict[str, str]) -> None:
        instruments = self._book.instruments
        if instruments is not None:
            labels = {**self._book.metric_attributes(), **attributes}
            getattr(instruments, counter).add(1, labels)
            instruments.run_duration.record(max(at - run.start, 0) / 1e9, labels)
        self._book.flush_counts()

    # -- subagents ---------------------------------------------------------------

    def _subagent_started(self, event: SubagentStartedEvent) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is None:
            return (event,)
        parent: _Node | None = None
        if event.parent_tool_call_id is not None:
            tool = run.tools.get(event.parent_tool_call_id)
            parent = tool.node if tool is not None else None
        if parent is None and event.parent_subagent_run_id is not None:
            parent = run.subagents.get(event.parent_subagent_run_id)
        if parent is None:
            parent = run.node
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.name,
            "gen_ai.conversation.id": run.thread_id,
            "agui.subagent.run_id": event.subagent_run_id,
        }
        if event.description is not None and self._capture:
            attributes["gen_ai.agent.description"] = event.description
        run.subagents[event.subagent_run_id] = self._start(
            f"invoke_agent {event.name}", parent.context, attributes, at, event.subagent_run_id
        )
        return (event,)

    def _subagent_ended(
        self, event: SubagentFinishedEvent | SubagentErrorEvent
    ) -> tuple[_Node, int] | None:
        at = self._time(event)
        run = self._seen(event, at)
        if run is None:
            return None
        node = run.subagents.pop(event.subagent_run_id, None)
        if node is None:
            return None
        owner = event.subagent_run_id
        mark = {"agui.closed_by": event.type.value}
        for key in [k for k, t in run.tools.items() if t.node.owner == owner]:
            tool = run.tools.pop(key)
            tool.node.span.set_attributes(mark)
            tool.node.span.end(end_time=at)
        for step_key in [k for k in run.steps if k[0] == owner]:
            step = run.steps.pop(step_key)
            step.span.set_attributes(mark)
            step.span.end(end_time=at)
        usage = usage_from_metadata(event.metadata)
        if usage:
            node.span.set_attributes(usage_attributes(usage))
            run.subagent_usage.extend(usage)
        return node, at

    def _subagent_finished(self, event: SubagentFinishedEvent) -> Sequence[BaseEvent]:
        ended = self._subagent_ended(event)
        if ended is not None:
            node, at = ended
            outcome = "success" if event.outcome is None else str(event.outcome.type)
            node.span.set_attribute("agui.subagent.outcome", outcome)
            node.span.end(end_time=at)
        return (event,)

    def _subagent_error(self, event: SubagentErrorEvent) -> Sequence[BaseEvent]:
        ended = self._subagent_ended(event)
        if ended is not None:
            node, at = ended
            node.span.set_attribute("agui.subagent.outcome", "error")
            self._error(node.span, event.code, event.message)
            node.span.end(end_time=at)
        return (event,)

    # -- steps -------------------------------------------------------------------

    def _step_started(self, event: StepStartedEvent) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is None:
            return (event,)
        owner = event.subagent_run_id
        key = (owner, event.step_name)
        if key not in run.steps:
            parent = self._agent_node(run, owner)
            # A step's name is the producer's free text: in the span only with capture on.
            run.steps[key] = self._start(
                f"step {event.step_name}" if self._capture else "step",
                parent.context,
                {"agui.step.name": event.step_name} if self._capture else {},
                at,
                owner,
            )
        return (event,)

    def _step_finished(self, event: StepFinishedEvent) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is not None:
            node = run.steps.pop((event.subagent_run_id, event.step_name), None)
            if node is None and event.subagent_run_id is None:
                # An untagged terminator agrees with whichever owner opened the step.
                for key in run.steps:
                    if key[1] == event.step_name:
                        node = run.steps.pop(key)
                        break
            if node is not None:
                node.span.end(end_time=at)
        return (event,)

    # -- tool calls --------------------------------------------------------------

    def _tool_start(self, event: ToolCallStartEvent) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is None:
            return (event,)
        if event.tool_call_id in run.tools:
            return (event,)  # a reopened call still awaiting its result: same span
        owner = event.subagent_run_id
        parent = self._tool_parent(run, owner)
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_call_name,
            "gen_ai.tool.call.id": event.tool_call_id,
            "gen_ai.tool.type": "function",
        }
        node = self._start(
            f"execute_tool {event.tool_call_name}", parent.context, attributes, at, owner
        )
        run.tools[event.tool_call_id] = _Tool(
            node, event.tool_call_name, [] if self._capture else None
        )
        instruments = self._book.instruments
        if instruments is not None:
            instruments.tool_calls.add(
                1, {**self._book.metric_attributes(), "gen_ai.tool.name": event.tool_call_name}
            )
        return (event,)

    def _tool_args(self, event: ToolCallArgsEvent) -> Sequence[BaseEvent]:
        if self._delta_stats:
            counts = self._book.counts
            counts["TOOL_CALL_ARGS"] = counts.get("TOOL_CALL_ARGS", 0) + 1
        run = self._book.run
        if run is not None:
            tool = run.tools.get(event.tool_call_id)
            if tool is not None and tool.args is not None:
                tool.args.append(event.delta)
        return (event,)

    def _tool_end(self, event: ToolCallEndEvent) -> Sequence[BaseEvent]:
        run = self._seen(event)
        if run is not None:
            tool = run.tools.get(event.tool_call_id)
            if tool is not None and tool.args is not None:
                tool.node.span.set_attribute(
                    "gen_ai.tool.call.arguments", self._text("".join(tool.args))
                )
        return (event,)

    def _tool_result(self, event: ToolCallResultEvent) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is not None:
            tool = run.tools.pop(event.tool_call_id, None)
            if tool is not None:
                if self._capture:
                    content = event.content
                    tool.node.span.set_attribute(
                        "gen_ai.tool.call.result",
                        self._text(
                            content
                            if isinstance(content, str)
                            else json.dumps(
                                [
                                    part.model_dump(mode="json", by_alias=True, exclude_none=True)
                                    for part in content
                                ]
                            )
                        ),
                    )
                tool.node.span.end(end_time=at)
        return (event,)

    # -- messages ----------------------------------------------------------------

    def _message_start(
        self, event: TextMessageStartEvent | ReasoningMessageStartEvent
    ) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is not None:
            reasoning = isinstance(event, ReasoningMessageStartEvent)
            role = str(event.role) if event.role is not None else "assistant"
            run.messages[event.message_id] = _Message(reasoning, event.subagent_run_id, role, at)
            self._first_pending.add(event.message_id)
            self._pending_changed()
        return (event,)

    def _content(
        self, event: TextMessageContentEvent | ReasoningMessageContentEvent
    ) -> Sequence[BaseEvent]:
        if event.message_id in self._first_pending:
            self._first_pending.discard(event.message_id)
            self._pending_changed()
            # Not counted (the events metric counts deltas only with delta_stats),
            # and never a run's first event: a START came before it.
            run = self._book.run
            message = None if run is None else run.messages.get(event.message_id)
            if message is not None:
                message.first = self._time(event)
        return (event,)

    def _content_counted(
        self, event: TextMessageContentEvent | ReasoningMessageContentEvent
    ) -> Sequence[BaseEvent]:
        run = self._seen(event)
        if run is not None:
            message = run.messages.get(event.message_id)
            if message is not None:
                if message.first is None:
                    self._first_pending.discard(event.message_id)
                    self._pending_changed()
                    message.first = self._time(event)
                message.chars += len(event.delta)
                message.deltas += 1
        return (event,)

    def _message_end(
        self, event: TextMessageEndEvent | ReasoningMessageEndEvent
    ) -> Sequence[BaseEvent]:
        at = self._time(event)
        run = self._seen(event, at)
        if run is None:
            return (event,)
        if event.message_id in self._first_pending:
            self._first_pending.discard(event.message_id)
            self._pending_changed()
        message = run.messages.pop(event.message_id, None)
        if message is None:
            return (event,)
        attributes: dict[str, Any] = {
            "agui.message.id": event.message_id,
            "agui.message.role": message.role,
            "agui.message.duration_ms": (at - message.start) / 1e6,
        }
        if message.first is not None:
            attributes["agui.message.first_token_ms"] = (message.first - message.start) / 1e6
        if self._delta_stats:
            attributes["agui.message.length"] = message.chars
            attributes["agui.message.deltas"] = message.deltas
        name = "agui.reasoning" if message.reasoning else "agui.message"
        self._agent_node(run, message.owner).span.add_event(
            name, self._bounded(attributes), timestamp=at
        )
        return (event,)

    # -- everything else ---------------------------------------------------------

    def _other(self, event: BaseEvent) -> Sequence[BaseEvent]:
        self._seen(event)
        return (event,)


_HANDLERS: dict[type[BaseEvent], str] = {
    RunStartedEvent: "_run_started",
    RunFinishedEvent: "_run_finished",
    RunErrorEvent: "_run_error",
    SubagentStartedEvent: "_subagent_started",
    SubagentFinishedEvent: "_subagent_finished",
    SubagentErrorEvent: "_subagent_error",
    StepStartedEvent: "_step_started",
    StepFinishedEvent: "_step_finished",
    ToolCallStartEvent: "_tool_start",
    ToolCallEndEvent: "_tool_end",
    ToolCallResultEvent: "_tool_result",
    TextMessageStartEvent: "_message_start",
    TextMessageEndEvent: "_message_end",
    ReasoningMessageStartEvent: "_message_start",
    ReasoningMessageEndEvent: "_message_end",
}
"""The handler of each event class the stage acts on (others are only counted)."""


def _request_context() -> Context | None:
    """The parent for run spans: the served request's ``traceparent``, else the current one.

    Extracted with the globally configured propagator, so ``OTEL_PROPAGATORS``
    (b3, say) is honoured when the SDK was configured from the environment.
    """
    headers = current_trace_headers()
    if not headers:
        return None  # start_span then uses the current context
    from opentelemetry import propagate

    return propagate.extract(dict(headers))
