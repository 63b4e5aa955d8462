"""The ordering verifier: is this sequence of events a valid AG-UI 1.0 stream?

One state machine, two profiles, because the two ends of a stream owe
different things:

* ``consumer`` — exactly what AG-UI 1.0 requires a client to reject, and no
  more. Its verdicts and wording follow the official TypeScript client
  (``@ag-ui/client`` 1.0.0, ``verifyEvents``) so an error reads the same in
  every SDK and a stream accepted there is accepted here. A consumer that is
  stricter than the protocol breaks on conforming producers.
* ``producer`` — the consumer rules plus the strict ones a well-behaved
  producer keeps anyway: a tool result must answer a call introduced in this
  run (``unknown-id``) and come after that call's END (``out-of-order``), and a
  stream carries exactly one run (``run-ended`` / ``duplicate-run-started``).
  The run driver checks every event it emits against this profile, where a
  bug is caused rather than three network hops downstream.

Each rejection names a :class:`Rule`; a :class:`VerificationError` carries the
event, the rule and the detail. Per-event cost is one dict dispatch on the
event's class and a few set/dict lookups; the open-entity dump that debug mode
appends is the only expensive part, so it is off by default.

The verifier runs *after* chunk expansion (``*_CHUNK`` events are rejected
here with a hint to put :class:`~agui_pipes.transformers.ExpandChunks` first).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, NamedTuple

import ag_ui.core as ag
from ag_ui.core import BaseEvent

from ._foundation.errors import ProtocolViolation
from ._lazy import public_dir, publish
from ._protocol.interrupts import InterruptRefused, NewInput, ThreadVerifier

__all__ = [
    "InterruptRefused",
    "NewInput",
    "OpenItems",
    "Profile",
    "ProtocolViolation",
    "Rule",
    "ThreadVerifier",
    "VerificationError",
    "Verifier",
]
__dir__ = public_dir(__all__)
publish(__name__, InterruptRefused, ThreadVerifier)

Profile = Literal["consumer", "producer"]


class OpenItems(NamedTuple):
    """What :meth:`Verifier.open_items` answers: the verifier's live tables for one kind."""

    by_tool_call: bool
    """True when the items are keyed by ``tool_call_id``, False for ``message_id``."""
    ids: Mapping[str, None]
    """The ids of the open items (keys; the verifier keeps them as an ordered dict)."""
    owners: Mapping[str, str | None]
    """Recorded owner (``subagent_run_id``, None for the parent) per id; may lack an id."""


class Rule(str, enum.Enum):
    """The named ways a stream can break the protocol (kebab-case values)."""

    FIRST_EVENT = "first-event"
    RUN_ENDED = "run-ended"
    DUPLICATE_RUN_STARTED = "duplicate-run-started"
    DUPLICATE_START = "duplicate-start"
    NOT_OPEN = "not-open"
    UNKNOWN_ID = "unknown-id"
    OUT_OF_ORDER = "out-of-order"
    OPEN_AT_FINISH = "open-at-finish"
    OWNER_MISMATCH = "owner-mismatch"
    TRUNCATED = "truncated"
    CHUNK_INCOMPLETE = "chunk-incomplete"
    CHUNK_CONFLICT = "chunk-conflict"
    CHUNK_AMBIGUOUS = "chunk-ambiguous"
    UNEXPANDED_CHUNK = "unexpanded-chunk"
    LIMIT_EXCEEDED = "limit-exceeded"
    INTERRUPT_SHAPE = "interrupt-shape"
    SUSPENDED_INTERRUPTS = "suspended-interrupts"

    def describe(self) -> str:
        """The rule in one sentence."""
        return _DESCRIPTIONS[self]

    def __str__(self) -> str:
        return self.value


_DESCRIPTIONS: Final[dict[Rule, str]] = {
    Rule.FIRST_EVENT: "a stream opens with RUN_STARTED, or RUN_ERROR for a run that never began",
    Rule.RUN_ENDED: "once a run has finished or errored, only a new run may follow",
    Rule.DUPLICATE_RUN_STARTED: "a run cannot start while another one is active",
    Rule.DUPLICATE_START: (
        "an id that is still open cannot be opened again, and a subagent invocation "
        "id is announced once per run"
    ),
    Rule.NOT_OPEN: "content and terminators require a matching start",
    Rule.UNKNOWN_ID: "a reference must name something this run introduced",
    Rule.OUT_OF_ORDER: "a tool result comes after its call's TOOL_CALL_END",
    Rule.OPEN_AT_FINISH: (
        "RUN_FINISHED needs every step, message, reasoning block, tool call and "
        "subagent closed first"
    ),
    Rule.OWNER_MISMATCH: (
        "a continuation, terminator or re-open must not name a different subagent "
        "than the entity's opener"
    ),
    Rule.TRUNCATED: "a stream must not end while a run is still open",
    Rule.CHUNK_INCOMPLETE: "the first chunk of an item must carry its id (and a tool's name)",
    Rule.CHUNK_CONFLICT: "a continuation chunk must not contradict what its first chunk said",
    Rule.CHUNK_AMBIGUOUS: "an id-less chunk must resolve to exactly one open chunk stream",
    Rule.UNEXPANDED_CHUNK: "chunk events are expanded before verification",
    Rule.LIMIT_EXCEEDED: (
        "a state or activity document stays within the consumer's Limits (values, bytes, "
        "nesting); producer profile only"
    ),
    Rule.INTERRUPT_SHAPE: (
        "an interrupt outcome names at least one interrupt, each with a non-empty id and "
        "reason and no id twice, and a toolCallId names a tool call of the run; producer "
        "profile only"
    ),
    Rule.SUSPENDED_INTERRUPTS: (
        "a subagent suspended with interruptIds finds each of them, raised by it, among "
        "the interrupts of its run's outcome; producer profile only"
    ),
}


class VerificationError(ProtocolViolation):
    """An event broke a named rule.

    ``str()`` reads ``{EVENT} breaks rule `{rule}` ({description}): {detail}``,
    followed in debug mode by a dump of what was still open. For the consumer
    profile the detail is worded like the TypeScript client's error, so the
    two SDKs can be grepped for the same text.
    """

    rule: Rule
    detail: str
    open_dump: str | None

    def __init__(
        self,
        rule: Rule,
        detail: str,
        event: BaseEvent | None = None,
        *,
        open_dump: str | None = None,
    ) -> None:
        what = event.type.value if event is not None else "end of stream"
        message = f"{what} breaks rule `{rule.value}` ({rule.describe()}): {detail}"
        if open_dump is not None:
            message = f"{message} {open_dump}"
        super().__init__(message, event=event)
        self.rule = rule
        self.detail = detail
        self.open_dump = open_dump


_MISSING: Final = object()
"""'No owner on record' — distinct from ``None``, which is the parent agent's ownership."""

_PARENT = "(the parent agent)"


def _owner_name(owner: object) -> str:
    return _PARENT if owner is None else str(owner)


class Verifier:
    """Checks events one at a time; raises :class:`VerificationError` on the first violation.

    ``observe(event)`` accepts or raises; state is updated only for accepted
    events, so after a rejection the verifier still describes the valid
    prefix (the run driver relies on this to send RUN_ERROR instead of a
    rejected RUN_FINISHED). ``finish()`` is the end-of-stream check: a run
    still open is ``truncated``. ``debug=True`` appends what is still open to
    every message.
    """

    __slots__ = (
        "_active_messages",
        "_active_reasoning_messages",
        "_active_reasoning_spans",
        "_active_subagents",
        "_active_tool_calls",
        "_closed_subagents",
        "_debug",
        "_dispatch",
        "_ended_tool_calls",
        "_first_seen",
        "_gated",
        "_known_tool_calls",
        "_owners_activity",
        "_owners_message",
        "_owners_reasoning",
        "_owners_tool_call",
        "_producer",
        "_profile",
        "_run_errored",
        "_run_finished",
        "_run_started",
        "_steps",
        "_suspended",
    )

    def __init__(self, profile: Profile = "consumer", *, debug: bool = False) -> None:
        if profile not in ("consumer", "producer"):
            raise ValueError(
                f"unknown verifier profile {profile!r}; use 'consumer' (what AG-UI 1.0 "
                "requires a client to reject) or 'producer' (those rules plus the strict ones)"
            )
        self._profile: Profile = profile
        self._producer = profile == "producer"
        self._debug = debug
        self._first_seen = False
        self._gated = True  # first event, or after a run ended: run the sequence checks
        self._run_started = False
        self._run_finished = False
        self._run_errored = False
        self._active_messages: dict[str, None] = {}
        self._active_tool_calls: dict[str, None] = {}
        self._active_reasoning_spans: dict[str, None] = {}
        self._active_reasoning_messages: dict[str, None] = {}
        self._owners_message: dict[str, str | None] = {}
        self._owners_tool_call: dict[str, str | None] = {}
        self._owners_activity: dict[str, str | None] = {}
        self._owners_reasoning: dict[str, str | None] = {}
        self._steps: dict[str | None, dict[str, None]] = {}
        self._active_subagents: dict[str, None] = {}
        self._closed_subagents: set[str] = set()
        # Producer profile only: calls introduced in this run, and those ended.
        self._known_tool_calls: set[str] = set()
        self._ended_tool_calls: set[str] = set()
        # Producer profile only: suspended subagents and the interrupt ids each raised.
        self._suspended: dict[str, list[str]] = {}
        self._dispatch: dict[type[BaseEvent], Callable[[Any], None]] = {
            ag.TextMessageStartEvent: self._text_start,
            ag.TextMessageContentEvent: self._text_content,
            ag.TextMessageEndEvent: self._text_end,
            ag.ToolCallStartEvent: self._tool_start,
            ag.ToolCallArgsEvent: self._tool_args,
            ag.ToolCallEndEvent: self._tool_end,
            ag.ToolCallResultEvent: self._tool_result,
            ag.StepStartedEvent: self._step_started,
            ag.StepFinishedEvent: self._step_finished,
            ag.ActivitySnapshotEvent: self._activity_snapshot,
            ag.ActivityDeltaEvent: self._activity_delta,
            ag.ReasoningStartEvent: self._reasoning_open,
            ag.ReasoningMessageStartEvent: self._reasoning_open,
            ag.ReasoningMessageContentEvent: self._reasoning_continue,
            ag.ReasoningMessageEndEvent: self._reasoning_continue,
            ag.ReasoningEndEvent: self._reasoning_continue,
            ag.ReasoningEncryptedValueEvent: self._encrypted_value,
            ag.SubagentStartedEvent: self._subagent_started,
            ag.SubagentFinishedEvent: self._subagent_closed,
            ag.SubagentErrorEvent: self._subagent_closed,
            ag.MessagesSnapshotEvent: self._messages_snapshot,
            ag.RunStartedEvent: self._run_started_event,
            ag.RunFinishedEvent: self._run_finished_event,
            ag.RunErrorEvent: self._run_error_event,
            ag.TextMessageChunkEvent: self._chunk,
            ag.ToolCallChunkEvent: self._chunk,
            ag.ReasoningMessageChunkEvent: self._chunk,
            ag.StateSnapshotEvent: _accept,
            ag.StateDeltaEvent: _accept,
            ag.RawEvent: _accept,
            ag.CustomEvent: _accept,
        }

    # -- public --------------------------------------------------------------

    @property
    def profile(self) -> Profile:
        """``"consumer"`` or ``"producer"``."""
        return self._profile

    @property
    def run_errored(self) -> bool:
        """True when the latest run ended with RUN_ERROR (only a new RUN_STARTED may follow)."""
        return self._run_errored

    @property
    def run_open(self) -> bool:
        """True while a run has started and not yet finished or errored."""
        return self._run_started and not (self._run_finished or self._run_errored)

    def observe(self, event: BaseEvent) -> None:
        """Accept ``event`` or raise :class:`VerificationError` (state unchanged on raise)."""
        if self._gated:
            if event.type.__class__ is not ag.EventType:
                # A pre-1.0 event (only a legacy-reading decoder builds one) is an unknown
                # type in 1.0: dropped, in effect, so it is neither a run's first event
                # nor one after its end. Mid-run it is accepted like any class the
                # verifier has no rule for.
                return
            self._sequence_gate(event)
        elif event.__class__ is ag.RunStartedEvent:
            self._fail(
                Rule.DUPLICATE_RUN_STARTED,
                "Cannot send 'RUN_STARTED' while a run is still active. The previous run "
                "must be finished with 'RUN_FINISHED' before starting a new run.",
                event,
            )
        handler = self._dispatch.get(event.__class__)
        if handler is None:
            handler = self._dispatch_subclass(event)
        handler(event)

    @property
    def between_runs(self) -> bool:
        """True before the first event and after a run ended (RUN_FINISHED or RUN_ERROR).

        The next event then gets the run-sequence checks (is it a RUN_STARTED
        where one is due?), which the per-class checks of :meth:`mid_run_check`
        leave out.
        """
        return self._gated

    def mid_run_check(self, event_class: type[BaseEvent]) -> Callable[[BaseEvent], None] | None:
        """What ``observe`` runs for an event of exactly ``event_class`` mid-run, or None.

        For a caller that verifies many events of few classes (the ``Verify``
        stage) and resolves the dispatch once per class: the returned check
        accepts or raises like ``observe``, but only while
        :attr:`between_runs` is false — the caller checks that itself. None
        means "call ``observe``" (RUN_STARTED, which has its own pre-check, and
        classes the verifier does not dispatch on directly).
        """
        if event_class is ag.RunStartedEvent:
            return None
        return self._dispatch.get(event_class)

    def open_items(self, event_class: type[BaseEvent]) -> OpenItems | None:
        """For the three delta classes, the live tables of their open items; else None.

        Mid-run, a delta whose id is open and whose ``subagent_run_id`` is
        absent or agrees with the recorded owner is accepted with no state
        change — the whole check for the events that make up most of a
        stream, which a caller can therefore make without calling the
        verifier. The tables are never replaced (only cleared), so a caller may
        keep them; it must not change them.
        """
        if event_class is ag.TextMessageContentEvent:
            return OpenItems(False, self._active_messages, self._owners_message)
        if event_class is ag.ToolCallArgsEvent:
            return OpenItems(True, self._active_tool_calls, self._owners_tool_call)
        if event_class is ag.ReasoningMessageContentEvent:
            return OpenItems(False, self._active_reasoning_messages, self._owners_reasoning)
        return None

    def observe_all(self, events: Iterable[BaseEvent]) -> None:
        """``observe`` each event in order."""
        for event in events:
            self.observe(event)

    def finish(self, *, allow_truncated: bool = False) -> None:
        """End of stream: a run still open is ``truncated`` (unless allowed)."""
        if allow_truncated or not self.run_open:
            return
        raise VerificationError(
            Rule.TRUNCATED,
            "the stream ended while the run was still open (no RUN_FINISHED or RUN_ERROR); "
            "a truncated run has no outcome and must not be reported as completed",
            None,
            open_dump=self.open_dump() if self._debug else None,
        )

    def open_dump(self) -> str:
        """What is open right now, e.g. ``[open: messages={"m1"}]`` or ``[nothing open]``."""
        parts: list[str] = []

        def add(label: str, ids: Iterable[str]) -> None:
            listed = sorted(ids)
            if listed:
                parts.append(f"{label}={{{', '.join(json.dumps(i) for i in listed)}}}")

        add("messages", self._active_messages)
        add("tool_calls", self._active_tool_calls)
        add("reasoning_spans", self._active_reasoning_spans)
        add("reasoning_messages", self._active_reasoning_messages)
        steps = [
            name if owner is None else f"{name}@{owner}"
            for owner, names in self._steps.items()
            for name in names
        ]
        add("steps", steps)
        add("subagents", self._active_subagents)
        return f"[open: {', '.join(parts)}]" if parts else "[nothing open]"

    # -- plumbing ------------------------------------------------------------

    def _fail(self, rule: Rule, detail: str, event: BaseEvent | None) -> None:
        raise VerificationError(
            rule, detail, event, open_dump=self.open_dump() if self._debug else None
        )

    def _dispatch_subclass(self, event: BaseEvent) -> Callable[[Any], None]:
        for cls in type(event).__mro__:
            handler = self._dispatch.get(cls)
            if handler is not None:
                return handler
        return _accept

    def _sequence_gate(self, event: BaseEvent) -> None:
        """The run-level checks: first event, events after an end, run restarts."""
        cls = event.__class__
        name = event.type.value
        if self._run_errored and cls is not ag.RunStartedEvent:
            rule = Rule.RUN_ENDED
            self._fail(
                rule,
                f"Cannot send event type '{name}': The run has already errored with "
                "'RUN_ERROR'. No further events can be sent.",
                event,
            )
        if self._run_finished and cls is not ag.RunErrorEvent and cls is not ag.RunStartedEvent:
            self._fail(
                Rule.RUN_ENDED,
                f"Cannot send event type '{name}': The run has already finished with "
                "'RUN_FINISHED'. Start a new run with 'RUN_STARTED'.",
                event,
            )
        if self._producer and (self._run_finished or self._run_errored):
            # One run per stream, and nothing after its terminal event.
            if cls is ag.RunStartedEvent:
                self._fail(
                    Rule.DUPLICATE_RUN_STARTED,
                    "a producer stream carries one run; this RUN_STARTED follows a run "
                    "that already ended",
                    event,
                )
            self._fail(
                Rule.RUN_ENDED,
                f"Cannot send event type '{name}': the run already ended with "
                f"'{'RUN_ERROR' if self._run_errored else 'RUN_FINISHED'}'",
                event,
            )
        if not self._first_seen:
            if cls is not ag.RunStartedEvent and cls is not ag.RunErrorEvent:
                self._fail(Rule.FIRST_EVENT, "First event must be 'RUN_STARTED'", event)
            self._first_seen = True
        elif (
            cls is ag.RunStartedEvent
            and self._run_started
            and not (self._run_finished or self._run_errored)
        ):
            self._fail(
                Rule.DUPLICATE_RUN_STARTED,
                "Cannot send 'RUN_STARTED' while a run is still active. The previous run "
                "must be finished with 'RUN_FINISHED' before starting a new run.",
                event,
            )

    def _reset_run(self) -> None:
        self._active_messages.clear()
        self._active_tool_calls.clear()
        self._active_reasoning_spans.clear()
        self._active_reasoning_messages.clear()
        self._owners_message.clear()
        self._owners_tool_call.clear()
        self._owners_activity.clear()
        self._owners_reasoning.clear()
        self._steps.clear()
        self._active_subagents.clear()
        self._closed_subagents.clear()
        self._known_tool_calls.clear()
        self._ended_tool_calls.clear()
        self._suspended.clear()
        self._run_finished = False
        self._run_errored = False

    def _update_gate(self) -> None:
        self._gated = self._run_errored or self._run_finished or not self._first_seen

    def _tag_mismatch(
        self,
        event: BaseEvent,
        tag: str | None,
        owner: object,
        kind: str,
        entity_id: str,
    ) -> None:
        """First writer wins: a tagged continuation must agree with the recorded owner."""
        if tag is None or owner is _MISSING or owner == tag:
            return
        self._fail(
            Rule.OWNER_MISMATCH,
            f"Cannot send '{event.type.value}': subagentRunId '{tag}' does not match the "
            f"{kind} '{entity_id}' opener's subagent '{_owner_name(owner)}'.",
            event,
        )

    # -- text messages -------------------------------------------------------

    def _text_start(self, event: ag.TextMessageStartEvent) -> None:
        message_id = event.message_id
        if message_id in self._active_messages:
            self._fail(
                Rule.DUPLICATE_START,
                "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID "
                f"'{message_id}' is already in progress. Complete it with "
                "'TEXT_MESSAGE_END' first.",
                event,
            )
        tag = event.subagent_run_id
        owner = self._owners_message.get(message_id, _MISSING)
        self._tag_mismatch(event, tag, owner, "message", message_id)
        self._active_messages[message_id] = None
        if owner is _MISSING:
            self._owners_message[message_id] = tag

    def _text_content(self, event: ag.TextMessageContentEvent) -> None:
        message_id = event.message_id
        if message_id not in self._active_messages:
            self._fail(
                Rule.NOT_OPEN,
                "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found "
                f"with ID '{message_id}'. Start a text message with 'TEXT_MESSAGE_START' "
                "first.",
                event,
            )
        tag = event.subagent_run_id
        if tag is not None:
            self._tag_mismatch(
                event, tag, self._owners_message.get(message_id, _MISSING), "message", message_id
            )

    def _text_end(self, event: ag.TextMessageEndEvent) -> None:
        message_id = event.message_id
        if message_id not in self._active_messages:
            self._fail(
                Rule.NOT_OPEN,
                "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with "
                f"ID '{message_id}'. A 'TEXT_MESSAGE_START' event must be sent first.",
                event,
            )
        tag = event.subagent_run_id
        if tag is not None:
            self._tag_mismatch(
                event, tag, self._owners_message.get(message_id, _MISSING), "message", message_id
            )
        del self._active_messages[message_id]

    # -- tool calls ----------------------------------------------------------

    def _tool_start(self, event: ag.ToolCallStartEvent) -> None:
        call_id = event.tool_call_id
        if call_id in self._active_tool_calls:
            self._fail(
                Rule.DUPLICATE_START,
                "Cannot send 'TOOL_CALL_START' event: A tool call with ID "
                f"'{call_id}' is already in progress. Complete it with 'TOOL_CALL_END' "
                "first.",
                event,
            )
        parent_id = event.parent_message_id
        tag = event.subagent_run_id
        inherited: object = _MISSING
        if parent_id is not None:
            parent_owner: object = self._owners_message.get(parent_id, _MISSING)
            if parent_owner is not _MISSING:
                if tag is not None and tag != parent_owner:
                    self._fail(
                        Rule.OWNER_MISMATCH,
                        f"Cannot send 'TOOL_CALL_START': subagentRunId '{tag}' does not "
                        f"match its parent message '{parent_id}' owner "
                        f"'{_owner_name(parent_owner)}'. A tool call belongs to the "
                        "message that carries it.",
                        event,
                    )
                inherited = parent_owner
        existing = self._owners_tool_call.get(call_id, _MISSING)
        if existing is not _MISSING:
            self._tag_mismatch(event, tag, existing, "tool call", call_id)
            if tag is None and inherited is not _MISSING and inherited != existing:
                self._fail(
                    Rule.OWNER_MISMATCH,
                    f"Cannot send 'TOOL_CALL_START': tool call '{call_id}' is owned by "
                    f"'{_owner_name(existing)}' but its parent message '{parent_id}' is "
                    f"owned by '{_owner_name(inherited)}'. A tool call belongs to the "
                    "message that carries it.",
                    event,
                )
        self._active_tool_calls[call_id] = None
        if existing is _MISSING:
            if tag is None and inherited is not _MISSING:
                tag = inherited  # type: ignore[assignment]  # a str | None owner
            self._owners_tool_call[call_id] = tag
        if self._producer:
            self._known_tool_calls.add(call_id)
            self._ended_tool_calls.discard(call_id)

    def _tool_args(self, event: ag.ToolCallArgsEvent) -> None:
        call_id = event.tool_call_id
        if call_id not in self._active_tool_calls:
            self._fail(
                Rule.NOT_OPEN,
                "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID "
                f"'{call_id}'. Start a tool call with 'TOOL_CALL_START' first.",
                event,
            )
        tag = event.subagent_run_id
        if tag is not None:
            self._tag_mismatch(
                event, tag, self._owners_tool_call.get(call_id, _MISSING), "tool call", call_id
            )

    def _tool_end(self, event: ag.ToolCallEndEvent) -> None:
        call_id = event.tool_call_id
        if call_id not in self._active_tool_calls:
            self._fail(
                Rule.NOT_OPEN,
                "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID "
                f"'{call_id}'. A 'TOOL_CALL_START' event must be sent first.",
                event,
            )
        tag = event.subagent_run_id
        if tag is not None:
            self._tag_mismatch(
                event, tag, self._owners_tool_call.get(call_id, _MISSING), "tool call", call_id
            )
        del self._active_tool_calls[call_id]
        if self._producer:
            self._ended_tool_calls.add(call_id)

    def _tool_result(self, event: ag.ToolCallResultEvent) -> None:
        if self._producer:
            call_id = event.tool_call_id
            if call_id not in self._known_tool_calls:
                self._fail(
                    Rule.UNKNOWN_ID,
                    f"tool result for call '{call_id}', which was never introduced with "
                    "'TOOL_CALL_START' in this run",
                    event,
                )
            if call_id not in self._ended_tool_calls:
                self._fail(
                    Rule.OUT_OF_ORDER,
                    f"tool result for call '{call_id}' arrived before its 'TOOL_CALL_END'",
                    event,
                )
        # The result mints a tool message; its newest minter owns the id.
        self._owners_message[event.message_id] = event.subagent_run_id

    # -- steps ---------------------------------------------------------------

    def _step_started(self, event: ag.StepStartedEvent) -> None:
        name = event.step_name
        owner = event.subagent_run_id
        names = self._steps.get(owner)
        if names is None:
            names = self._steps[owner] = {}
        if name in names:
            where = f" in subagent '{owner}'" if owner is not None else ""
            self._fail(
                Rule.DUPLICATE_START,
                f"Step \"{name}\" is already active for 'STEP_STARTED'{where}",
                event,
            )
        names[name] = None

    def _step_finished(self, event: ag.StepFinishedEvent) -> None:
        name = event.step_name
        owner = event.subagent_run_id
        names = self._steps.get(owner)
        if names is None or name not in names:
            for other, other_names in self._steps.items():
                if other != owner and name in other_names:
                    mine = f"subagent '{owner}'" if owner is not None else "the parent agent"
                    theirs = f"subagent '{other}'" if other is not None else "the parent agent"
                    self._fail(
                        Rule.OWNER_MISMATCH,
                        f"Cannot send 'STEP_FINISHED' for step \"{name}\" attributed to "
                        f"{mine}: that step is open under {theirs}. A step must be "
                        "finished by whoever started it.",
                        event,
                    )
            self._fail(
                Rule.NOT_OPEN,
                f"Cannot send 'STEP_FINISHED' for step \"{name}\" that was not started",
                event,
            )
        assert names is not None
        del names[name]

    # -- activities ----------------------------------------------------------

    def _activity_snapshot(self, event: ag.ActivitySnapshotEvent) -> None:
        message_id = event.message_id
        if message_id not in self._owners_activity or event.replace is not False:
            self._owners_activity[message_id] = event.subagent_run_id

    def _activity_delta(self, event: ag.ActivityDeltaEvent) -> None:
        tag = event.subagent_run_id
        if tag is not None:
            self._tag_mismatch(
                event,
                tag,
                self._owners_activity.get(event.message_id, _MISSING),
                "activity",
                event.message_id,
            )

    # -- reasoning -----------------------------------------------------------

    def _reasoning_open(
        self, event: ag.ReasoningStartEvent | ag.ReasoningMessageStartEvent
    ) -> None:
        message_id = event.message_id
        span = event.__class__ is ag.ReasoningStartEvent
        opened = self._active_reasoning_spans if span else self._active_reasoning_messages
        if message_id in opened:
            if span:
                detail = (
                    "Cannot send 'REASONING_START' event: A reasoning span with ID "
                    f"'{message_id}' is already in progress. Complete it with "
                    "'REASONING_END' first."
                )
            else:
                detail = (
                    "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with "
                    f"ID '{message_id}' is already in progress. Complete it with "
                    "'REASONING_MESSAGE_END' first."
                )
            self._fail(Rule.DUPLICATE_START, detail, event)
        tag = event.subagent_run_id
        owner = self._owners_reasoning.get(message_id, _MISSING)
        self._tag_mismatch(event, tag, owner, "reasoning message", message_id)
        opened[message_id] = None
        if owner is _MISSING:
            self._owners_reasoning[message_id] = tag

    def _reasoning_continue(
        self,
        event: ag.ReasoningMessageContentEvent | ag.ReasoningMessageEndEvent | ag.ReasoningEndEvent,
    ) -> None:
        message_id = event.message_id
        cls = event.__class__
        span = cls is ag.ReasoningEndEvent
        opened = self._active_reasoning_spans if span else self._active_reasoning_messages
        if message_id not in opened:
            if span:
                detail = (
                    "Cannot send 'REASONING_END' event: No active reasoning span found with "
                    f"ID '{message_id}'. A 'REASONING_START' event must be sent first."
                )
            else:
                detail = (
                    f"Cannot send '{event.type.value}' event: No active reasoning message "
                    f"found with ID '{message_id}'. Start a reasoning message with "
                    "'REASONING_MESSAGE_START' first."
                )
            self._fail(Rule.NOT_OPEN, detail, event)
        tag = event.subagent_run_id
        if tag is not None:
            self._tag_mismatch(
                event,
                tag,
                self._owners_reasoning.get(message_id, _MISSING),
                "reasoning message",
                message_id,
            )
        if cls is not ag.ReasoningMessageContentEvent:
            del opened[message_id]

    def _encrypted_value(self, event: ag.ReasoningEncryptedValueEvent) -> None:
        tag = event.subagent_run_id
        if tag is None:
            return
        entity_id = event.entity_id
        subtype = event.subtype
        owner: object
        if subtype == "tool-call":
            owner = self._owners_tool_call.get(entity_id, _MISSING)
            kind = "tool call"
        elif subtype == "message":
            owner = self._owners_message.get(entity_id, _MISSING)
            if owner is _MISSING:
                owner = self._owners_reasoning.get(entity_id, _MISSING)
            kind = "message"
        else:
            owner = self._owners_reasoning.get(entity_id, _MISSING)
            kind = "reasoning message"
        self._tag_mismatch(event, tag, owner, kind, entity_id)

    # -- subagents -----------------------------------------------------------

    def _subagent_started(self, event: ag.SubagentStartedEvent) -> None:
        run_id = event.subagent_run_id
        if run_id in self._active_subagents:
            self._fail(
                Rule.DUPLICATE_START,
                f"Cannot send 'SUBAGENT_STARTED': subagent '{run_id}' is already active. "
                "Finish it with 'SUBAGENT_FINISHED' first.",
                event,
            )
        if run_id in self._closed_subagents:
            self._fail(
                Rule.DUPLICATE_START,
                f"Cannot send 'SUBAGENT_STARTED': subagent '{run_id}' has already finished "
                "in this run. Subagent IDs are per-invocation and cannot be reused.",
                event,
            )
        parent = event.parent_subagent_run_id
        if (
            parent is not None
            and parent not in self._active_subagents
            and parent not in self._closed_subagents
        ):
            self._fail(
                Rule.UNKNOWN_ID,
                f"Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{parent}' has not been "
                "started in this run.",
                event,
            )
        self._active_subagents[run_id] = None

    def _subagent_closed(self, event: ag.SubagentFinishedEvent | ag.SubagentErrorEvent) -> None:
        run_id = event.subagent_run_id
        if run_id not in self._active_subagents:
            self._fail(
                Rule.NOT_OPEN,
                f"Cannot send '{event.type.value}': no active subagent found with ID "
                f"'{run_id}'. A 'SUBAGENT_STARTED' event must be sent first.",
                event,
            )
        del self._active_subagents[run_id]
        self._closed_subagents.add(run_id)
        if self._producer and isinstance(event, ag.SubagentFinishedEvent):
            outcome = event.outcome
            if isinstance(outcome, ag.SubagentFinishedSuspendedOutcome):
                self._suspended[run_id] = list(outcome.interrupt_ids or ())

    # -- run level -----------------------------------------------------------

    def _seed_owners(self, messages: Iterable[Any], authoritative: bool) -> None:
        """Replayed history (snapshot or input echo) puts owners on record like openers."""
        for message in messages:
            message_id = getattr(message, "id", None)
            if not isinstance(message_id, str):
                continue
            role = getattr(message, "role", None)
            owner = getattr(message, "subagent_run_id", None)
            if role == "reasoning":
                bucket = self._owners_reasoning
            elif role == "activity":
                bucket = self._owners_activity
            else:
                bucket = self._owners_message
            if authoritative or message_id not in bucket:
                bucket[message_id] = owner
            for call in getattr(message, "tool_calls", None) or ():
                call_id = getattr(call, "id", None)
                if isinstance(call_id, str):
                    if authoritative or call_id not in self._owners_tool_call:
                        self._owners_tool_call[call_id] = owner
                    if self._producer:
                        # A recorded call was introduced (and ended) before this point.
                        self._known_tool_calls.add(call_id)
                        self._ended_tool_calls.add(call_id)

    def _messages_snapshot(self, event: ag.MessagesSnapshotEvent) -> None:
        self._seed_owners(event.messages, True)

    def _run_started_event(self, event: ag.RunStartedEvent) -> None:
        if self._run_finished or self._run_errored:
            self._reset_run()
        self._run_started = True
        self._update_gate()
        echo = event.input
        if echo is not None:
            self._seed_owners(echo.messages, False)

    def _run_finished_event(self, event: ag.RunFinishedEvent) -> None:
        steps = [
            name if owner is None else f"{name} (subagent '{owner}')"
            for owner, names in self._steps.items()
            for name in names
        ]
        if steps:
            self._fail(
                Rule.OPEN_AT_FINISH,
                f"Cannot send 'RUN_FINISHED' while steps are still active: {', '.join(steps)}",
                event,
            )
        for opened, label in (
            (self._active_messages, "text messages"),
            (self._active_reasoning_messages, "reasoning messages"),
            (self._active_reasoning_spans, "reasoning spans"),
            (self._active_tool_calls, "tool calls"),
            (self._active_subagents, "subagents"),
        ):
            if opened:
                self._fail(
                    Rule.OPEN_AT_FINISH,
                    f"Cannot send 'RUN_FINISHED' while {label} are still active: "
                    f"{', '.join(opened)}",
                    event,
                )
        if self._producer:
            self._check_interrupts(event)
        self._run_finished = True
        self._gated = True

    def _check_interrupts(self, event: ag.RunFinishedEvent) -> None:
        """Producer profile: the interrupt outcome, and what suspended subagents claim of it.

        AG-UI 1.0 (``RunFinishedInterruptOutcome``, ``Interrupt``,
        ``SubagentFinishedSuspendedOutcome``): an interrupt outcome carries at least
        one interrupt, each with an ``id`` (a resume entry answers it by that id, so
        one id names one interrupt) and a ``reason``; ``toolCallId`` is "the tool
        call this interrupt concerns"; a suspended subagent's ``interruptIds`` are
        "the run-level interrupts this subagent raised itself".
        """
        outcome = event.outcome
        raised: dict[str, ag.Interrupt] = {}
        if isinstance(outcome, ag.RunFinishedInterruptOutcome):
            if not outcome.interrupts:
                self._fail(
                    Rule.INTERRUPT_SHAPE,
                    "an interrupt outcome must name at least one interrupt (one with nothing "
                    "to answer leaves the client nothing to do); end the run with a success "
                    "outcome instead",
                    event,
                )
            for interrupt in outcome.interrupts:
                self._check_interrupt(event, interrupt, raised)
                raised[interrupt.id] = interrupt
        for subagent, claimed in self._suspended.items():
            missing = [i for i in claimed if i not in raised]
            if missing:
                where = (
                    "the run's interrupt outcome does not name"
                    if raised
                    else "the run does not end with an interrupt outcome, so nothing names"
                )
                self._fail(
                    Rule.SUSPENDED_INTERRUPTS,
                    f"subagent '{subagent}' was suspended on interrupt "
                    f"{', '.join(repr(i) for i in missing)}, but {where} it; put every "
                    "interrupt a subagent raised into RUN_FINISHED's outcome.interrupts",
                    event,
                )
            for interrupt_id in claimed:
                owner = raised[interrupt_id].subagent_run_id
                if owner is not None and owner != subagent:
                    self._fail(
                        Rule.SUSPENDED_INTERRUPTS,
                        f"subagent '{subagent}' was suspended on interrupt '{interrupt_id}', "
                        f"which is attributed to subagent '{owner}'; a subagent's "
                        "interruptIds name the interrupts it raised itself",
                        event,
                    )

    def _check_interrupt(
        self, event: ag.RunFinishedEvent, interrupt: ag.Interrupt, raised: Mapping[str, object]
    ) -> None:
        interrupt_id = interrupt.id
        if not isinstance(interrupt_id, str) or not interrupt_id:
            self._fail(
                Rule.INTERRUPT_SHAPE,
                f"an interrupt has the id {interrupt_id!r}; give each interrupt a non-empty "
                "string id (resume entries answer it by that id)",
                event,
            )
        if not isinstance(interrupt.reason, str) or not interrupt.reason:
            self._fail(
                Rule.INTERRUPT_SHAPE,
                f"interrupt '{interrupt_id}' has no reason; say why the run stopped (e.g. "
                "'tool_approval')",
                event,
            )
        if interrupt_id in raised:
            self._fail(
                Rule.INTERRUPT_SHAPE,
                f"interrupt id '{interrupt_id}' is named twice in one outcome; a resume "
                "entry could not tell the two apart, so give each its own id",
                event,
            )
        call_id = interrupt.tool_call_id
        if call_id is not None and call_id not in self._known_tool_calls:
            self._fail(
                Rule.INTERRUPT_SHAPE,
                f"interrupt '{interrupt_id}' concerns tool call '{call_id}', which this run "
                "never introduced with 'TOOL_CALL_START' (nor carried in its input or a "
                "MESSAGES_SNAPSHOT); name a tool call of the run, or leave toolCallId out",
                event,
            )

    def _run_error_event(self, event: ag.RunErrorEvent) -> None:
        self._run_errored = True
        self._gated = True

    def _chunk(self, event: BaseEvent) -> None:
        self._fail(
            Rule.UNEXPANDED_CHUNK,
            f"{event.type.value} reached the verifier unexpanded; put "
            "agui_pipes.transformers.ExpandChunks() before verification",
            event,
        )


def _accept(event: BaseEvent) -> None:
    """Events with no ordering constraint of their own (state, RAW, CUSTOM)."""
