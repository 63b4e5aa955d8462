"""Repair: the smallest change that makes a producer's broken stream valid AG-UI 1.0.

Real producers break the ordering rules (pydantic-ai sends a parallel tool
call's late arguments after its TOOL_CALL_END; others send RUN_FINISHED after
RUN_ERROR, or finish a run with a message still open), and a consumer may
only reject such a stream. ``Repair`` sits before verification and rewrites
what it must, recording each change as a :class:`RepairFix`.

How it decides: every event is offered to a consumer-profile
:class:`~agui_pipes.Verifier` — exactly what a 1.0 client checks. An event
it accepts passes unchanged (the same object), so on a valid stream the
stage is the identity. An event it refuses is repaired according to the
rule it broke (docs/repair.md lists every fix and why it is the nearest
meaning), and the repaired events are offered to the verifier in turn, so
what comes out is always a stream the consumer verifier accepts.

Content after its item's END is the one refusal that changes what Repair
does next: the late content reopens the item (1.0 allows it; content
appends), and from then on the run's ENDs of that kind are held back until
an event of another kind, so each goes out after all of its item's content.
A stream that does not open with RUN_STARTED is held for a few events while
Repair looks for a late one to move first.

Two fixes do not come from a refusal: ``STATE_DELTA`` operations that
cannot apply to the state tracked since the last snapshot (a 1.0 client
would skip the whole delta), and the end of a stream that leaves its run
open (a truncated run gets a RUN_ERROR: it has no outcome to report).

Chunk events (``*_CHUNK``) are expanded first, as by
:class:`~agui_pipes.transformers.ExpandChunks`, because what is open can
only be tracked on explicit START / END events; a chunk stream the
expansion refuses is dropped (rules ``chunk-incomplete`` /
``chunk-conflict`` / ``chunk-ambiguous``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Final

import ag_ui.core as ag
from ag_ui.core import BaseEvent

from .._foundation.json_patch import JsonDocument, LimitExceeded, PatchError, clone_json
from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer, Transform
from .._protocol.chunks import ChunkExpander
from .._protocol.construct import construct, replace
from .._stagekit.open_deltas import DeltaGate, open_item_deltas
from .._stagekit.repair_report import RepairFix, RepairLimitExceeded, RepairReport
from ..verify import Rule, VerificationError, Verifier

__all__ = ["REPAIR_EVENT_NAME", "Repair", "RepairFix", "RepairLimitExceeded", "RepairReport"]
__dir__ = public_dir(__all__)

logger = logging.getLogger("agui_pipes.repair")
logger.addHandler(logging.NullHandler())

REPAIR_EVENT_NAME: Final = "agui_pipes.repair"
"""The ``name`` of the CUSTOM event ``emit=True`` sends per fix (value: ``fix.as_dict()``)."""

_LOOKAHEAD: Final = 8
"""How many events a stream that does not open with RUN_STARTED is held, looking for one."""

TRUNCATED_CODE: Final = "STREAM_TRUNCATED"
"""The ``code`` of the RUN_ERROR Repair appends to a stream that ends mid-run."""

_Key = tuple[type, Any]

# The opener class of each item kind, for the events that continue or close one.
_OPENER: Final[dict[type, type]] = {
    ag.TextMessageStartEvent: ag.TextMessageStartEvent,
    ag.TextMessageContentEvent: ag.TextMessageStartEvent,
    ag.TextMessageEndEvent: ag.TextMessageStartEvent,
    ag.ToolCallStartEvent: ag.ToolCallStartEvent,
    ag.ToolCallArgsEvent: ag.ToolCallStartEvent,
    ag.ToolCallEndEvent: ag.ToolCallStartEvent,
    ag.ReasoningMessageStartEvent: ag.ReasoningMessageStartEvent,
    ag.ReasoningMessageContentEvent: ag.ReasoningMessageStartEvent,
    ag.ReasoningMessageEndEvent: ag.ReasoningMessageStartEvent,
    ag.ReasoningStartEvent: ag.ReasoningStartEvent,
    ag.ReasoningEndEvent: ag.ReasoningStartEvent,
}
_ENDS: Final = frozenset(
    {
        ag.TextMessageEndEvent,
        ag.ToolCallEndEvent,
        ag.ReasoningMessageEndEvent,
        ag.ReasoningEndEvent,
    }
)
_CONTENT: Final = frozenset(
    {ag.TextMessageContentEvent, ag.ToolCallArgsEvent, ag.ReasoningMessageContentEvent}
)
_CHUNKS: Final = frozenset(
    {ag.TextMessageChunkEvent, ag.ToolCallChunkEvent, ag.ReasoningMessageChunkEvent}
)
_TERMINALS: Final = frozenset({ag.RunFinishedEvent, ag.RunErrorEvent})
# Events that close nothing (as for chunk streams, PROTOCOL.md §5): they do not
# release held ENDs either.
_NEUTRAL: Final = frozenset(
    {
        ag.RawEvent,
        ag.ActivitySnapshotEvent,
        ag.ActivityDeltaEvent,
        ag.ReasoningEncryptedValueEvent,
    }
)
_LABEL: Final[dict[type, str]] = {
    ag.TextMessageStartEvent: "text message",
    ag.ToolCallStartEvent: "tool call",
    ag.ReasoningMessageStartEvent: "reasoning message",
    ag.ReasoningStartEvent: "reasoning span",
    ag.StepStartedEvent: "step",
    ag.SubagentStartedEvent: "subagent",
}
# Closing order at RUN_FINISHED: contents before their containers, subagents last.
_CLOSE_ORDER: Final = (
    ag.TextMessageStartEvent,
    ag.ReasoningMessageStartEvent,
    ag.ToolCallStartEvent,
    ag.ReasoningStartEvent,
    ag.StepStartedEvent,
    ag.SubagentStartedEvent,
)


class _Held:
    """An END held back, with what happened while it waited."""

    __slots__ = ("end", "index", "late", "moved")

    def __init__(self, end: BaseEvent, index: int) -> None:
        self.end = end
        self.index = index
        self.late = False  # content of its own item arrived after it
        self.moved = False  # other events went out before it


def _item_id(event: Any) -> Any:
    """The key of the item an event opens, continues or closes (within its kind)."""
    cls = event.__class__
    if cls is ag.ToolCallStartEvent or cls is ag.ToolCallArgsEvent or cls is ag.ToolCallEndEvent:
        return event.tool_call_id
    if cls is ag.StepStartedEvent or cls is ag.StepFinishedEvent:
        return (event.subagent_run_id, event.step_name)
    if cls in (ag.SubagentStartedEvent, ag.SubagentFinishedEvent, ag.SubagentErrorEvent):
        return event.subagent_run_id
    return event.message_id


def _closer(start: Any, metadata: Any = None) -> BaseEvent:
    """The END that closes the item ``start`` opened (carrying the opener's tag).

    ``metadata``: the producer's own END metadata, when this END stands in for
    it (see ``Repair._close_reopened``).
    """
    cls = start.__class__
    tag = {} if start.subagent_run_id is None else {"subagent_run_id": start.subagent_run_id}
    if metadata is not None:
        tag["metadata"] = metadata
    if cls is ag.TextMessageStartEvent:
        return construct(ag.TextMessageEndEvent, {"message_id": start.message_id, **tag})
    if cls is ag.ToolCallStartEvent:
        return construct(ag.ToolCallEndEvent, {"tool_call_id": start.tool_call_id, **tag})
    if cls is ag.ReasoningMessageStartEvent:
        return construct(ag.ReasoningMessageEndEvent, {"message_id": start.message_id, **tag})
    if cls is ag.ReasoningStartEvent:
        return construct(ag.ReasoningEndEvent, {"message_id": start.message_id, **tag})
    if cls is ag.StepStartedEvent:
        return construct(ag.StepFinishedEvent, {"step_name": start.step_name, **tag})
    return construct(ag.SubagentFinishedEvent, {"subagent_run_id": start.subagent_run_id})


def _reopener(start: BaseEvent) -> BaseEvent:
    """A copy of an opener to reopen its item (1.0 allows reopening a closed id)."""
    copy: BaseEvent = start
    for name in ("timestamp", "raw_event", "metadata"):
        if getattr(copy, name) is not None:
            copy = replace(copy, name, None)
    return copy if copy is not start else start.model_copy()


def _described(key: _Key) -> str:
    opener, item = key
    if opener is ag.StepStartedEvent:
        owner, name = item
        return f'step "{name}"' + ("" if owner is None else f" of subagent '{owner}'")
    return f"{_LABEL[opener]} '{item}'"


class Repair(StreamTransformer):
    """Rewrite a broken stream into one the consumer verifier accepts (see module doc).

    ``max_fixes`` (None: no limit): past this many fixes the stream is
    rejected with :class:`RepairLimitExceeded` — a stream that needs that
    much repair is not the producer's intent any more. ``emit``: also send a
    CUSTOM event ``agui_pipes.repair`` per fix (inside the run it concerns).
    ``report_limit``: how many fixes ``report`` lists (all are counted).
    ``thread_id`` / ``run_id``: the ids of a RUN_STARTED Repair must
    synthesize (a server passes the request's).

    Put it first in a chain (it expands chunks itself). It makes no
    ``passes`` promise: fix positions are input positions, so it must see
    every event.
    """

    def __init__(
        self,
        *,
        max_fixes: int | None = 100,
        emit: bool = False,
        report_limit: int = 1000,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> None:
        if max_fixes is not None and max_fixes < 0:
            raise ValueError(f"max_fixes must be >= 0 or None (no limit), got {max_fixes}")
        if report_limit < 0:
            raise ValueError(f"report_limit must be >= 0, got {report_limit}")
        self._max_fixes = max_fixes
        self._emit = emit
        self._thread_id = thread_id
        self._run_id = run_id
        self.report = RepairReport(report_limit)
        """Every fix made so far (see :class:`RepairReport`)."""
        self._verifier = Verifier("consumer")
        self._expander = ChunkExpander(self._chunks_changed)
        self._chunking = False
        self._gate = DeltaGate(shut=True, seen=-1)
        """``shut``: whether the next event needs the full path: between runs (the
        verifier's sequence checks), a chunk stream open, an item Repair reopened,
        or ENDs being held. Only the full path or a run's end can make it true, and
        each sets it (``_settle`` / ``_run_ended``). ``seen``: the input position of
        the latest event (fix positions are input positions); the routed delta
        handlers count the deltas they accept into it."""
        self._open: dict[_Key, BaseEvent] = {}
        """Open items of the current run, by (opener class, id), in opening order."""
        self._openers: dict[_Key, BaseEvent] = {}
        """The first opener of every message, tool call and reasoning item of the run."""
        self._reopened: dict[_Key, BaseEvent] = {}
        """Items Repair (re)opened itself; closed at the first event of another kind."""
        self._end_metadata: dict[_Key, Any] = {}
        """The ``metadata`` of the latest END of each item of the run (absent: it had none)."""
        self._opening: list[tuple[int, BaseEvent]] | None = None
        """The first events, held while looking for a late RUN_STARTED (None: not looking)."""
        self._hold_kinds: set[type] = set()
        """Kinds whose ENDs this run holds back: its producer sent content after an END."""
        self._held: dict[_Key, _Held] = {}
        """ENDs held back, by item; at most one per open item."""
        self._state: JsonDocument | None = None
        """The run's state since a snapshot (or the input echo); None while unknown."""
        self._pending: list[RepairFix] = []
        """Fixes whose CUSTOM event is not out yet (``emit=True``)."""
        self._after: dict[type, Callable[[Any], None]] = {
            ag.TextMessageStartEvent: self._opened,
            ag.ToolCallStartEvent: self._opened,
            ag.ReasoningMessageStartEvent: self._opened,
            ag.ReasoningStartEvent: self._opened,
            ag.StepStartedEvent: self._opened,
            ag.SubagentStartedEvent: self._opened,
            ag.TextMessageEndEvent: self._closed,
            ag.ToolCallEndEvent: self._closed,
            ag.ReasoningMessageEndEvent: self._closed,
            ag.ReasoningEndEvent: self._closed,
            ag.StepFinishedEvent: self._closed,
            ag.SubagentFinishedEvent: self._subagent_closed,
            ag.SubagentErrorEvent: self._subagent_closed,
            ag.RunStartedEvent: self._run_started,
            ag.RunFinishedEvent: self._run_ended,
            ag.RunErrorEvent: self._run_ended,
            ag.StateSnapshotEvent: self._snapshot,
        }

    @property
    def verifier(self) -> Verifier:
        """The consumer verifier that judges every event (for inspection; do not feed it)."""
        return self._verifier

    # -- the stage -------------------------------------------------------------

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        self._gate.seen += 1
        out = self._process(event)
        self._settle()
        return out

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        # Every event is counted (fix positions are input positions), so no
        # class is skipped; what ``route`` saves is the verifier's dispatch.
        # Mid-run, with nothing reopened and no chunk stream open, an event is
        # checked by the verifier's per-class check directly, and a delta of
        # an open item whose tag agrees needs no check at all (the handler
        # ``Verify.route`` uses too: ``_stagekit.open_deltas``).
        if event_class in _CHUNKS or event_class is ag.StateDeltaEvent:
            return self.transform
        check = self._verifier.mid_run_check(event_class)
        if check is None:
            return self.transform
        transform = self.transform
        refused = self._refused_alone
        after = self._after.get(event_class)
        table = self._verifier.open_items(event_class)
        gate = self._gate

        def checked(event: BaseEvent) -> Iterable[BaseEvent]:
            if gate.shut:
                return transform(event)
            gate.seen += 1
            try:
                check(event)
            except VerificationError as error:
                out = refused(event, error)
                self._settle()
                return out
            if after is not None:
                after(event)
            return (event,)

        if table is None:
            return checked
        return open_item_deltas(table, self._gate, checked)

    def _process(self, event: BaseEvent) -> Iterable[BaseEvent]:
        cls = event.__class__
        if cls in _CHUNKS or self._chunking:
            return self._expanded(event)
        if (
            self._opening is not None
            or self._reopened
            or self._hold_kinds
            or (cls is ag.StateDeltaEvent and self._state is not None)
        ):
            out: list[BaseEvent] = []
            self._one(event, out)
            return self._flush(out)
        try:
            self._verifier.observe(event)
        except VerificationError as error:
            return self._refused_alone(event, error)
        after = self._after.get(cls)
        if after is not None:
            after(event)
        return (event,)

    def _one(self, event: BaseEvent, out: list[BaseEvent]) -> None:
        """The full path for one (expanded) event: held ENDs, reopened items, state."""
        if self._opening is not None:
            self._buffered(event, out)
            return
        cls = event.__class__
        kind = _OPENER.get(cls)
        if self._held or self._reopened:
            if kind is None:
                if cls not in _NEUTRAL:
                    self._release(out)  # a boundary: an event of another kind
            elif kind not in self._pending_kinds():
                self._release(out)
            elif kind is cls and (kind, _item_id(event)) in self._held:
                self._release(out, (kind, _item_id(event)))  # the producer reopens it
        if kind is not None and kind in self._hold_kinds:
            key = (kind, _item_id(event))
            if cls in _ENDS:
                if key in self._held:
                    self._fix(
                        "duplicate-end",
                        "dropped",
                        f"{event.type.value} for {_described(key)}, already closed",
                    )
                    return
                if key in self._open:
                    # This producer sends content after END: hold the END until
                    # the item's kind gives way to another (see _release).
                    self._held[key] = _Held(event, self._gate.seen)
                    self._reopened.pop(key, None)
                    return
            elif cls in _CONTENT:
                held = self._held.get(key)
                if held is not None:
                    held.late = True
        fed: BaseEvent | None = event
        if cls is ag.StateDeltaEvent and self._state is not None and self._verifier.run_open:
            fed = self._delta(event)
        before = len(out)
        self._feed(fed, out)
        if self._held and len(out) > before:
            for held in self._held.values():
                held.moved = True

    def _pending_kinds(self) -> set[type]:
        return {kind for kind, _ in self._held} | {kind for kind, _ in self._reopened}

    def _release(self, out: list[BaseEvent], only: _Key | None = None) -> None:
        """Send the held ENDs (or the one of ``only``), then close what Repair reopened."""
        keys = list(self._held) if only is None else [only]
        for key in keys:
            held = self._held.pop(key)
            if held.late:
                self._fix(
                    "content-after-end",
                    "moved",
                    f"{held.end.type.value} for {_described(key)} came before content of "
                    "its own; it is moved after that content",
                    held.index,
                )
            elif held.moved:
                self._fix(
                    "end-held",
                    "moved",
                    f"{held.end.type.value} for {_described(key)} was held back (this "
                    "producer sends content after END) and is sent at the next event of "
                    "another kind",
                    held.index,
                )
            self._feed(held.end, out)  # the producer's own END: repaired like any other
        if only is None:
            self._close_reopened(out)

    def _refused_alone(self, event: BaseEvent, error: VerificationError) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        self._refused(event, error, out)
        return self._flush(out)

    def _settle(self) -> None:
        """Work out ``_gate.shut`` again after the full path ran (it may have changed any of it)."""
        self._gate.shut = (
            self._chunking
            or bool(self._reopened)
            or bool(self._hold_kinds)
            or self._verifier.between_runs
        )

    def _run_ended(self, event: BaseEvent) -> None:
        self._gate.shut = True  # between runs: the next event needs the sequence checks

    def _chunks_changed(self) -> None:
        self._chunking = self._expander.is_open

    def finish(self) -> Iterable[BaseEvent]:
        self._gate.seen += 1
        self._gate.shut = True
        out: list[BaseEvent] = []
        if self._opening is not None:
            self._synthesize_start(None, out)
        if not self._verifier.run_open:
            return self._flush(out)
        self._release(out)
        self._fix(
            "truncated",
            "synthesized",
            "the stream ended while its run was still open; a RUN_ERROR "
            f"(code {TRUNCATED_CODE}) ends it, since a cut-off run has no outcome",
        )
        self._feed(
            construct(
                ag.RunErrorEvent,
                {
                    "message": "the stream ended before the run finished",
                    "code": TRUNCATED_CODE,
                },
            ),
            out,
        )
        return out

    # -- plumbing --------------------------------------------------------------

    def _expanded(self, event: BaseEvent) -> list[BaseEvent]:
        try:
            expanded = self._expander.expand(event)
        except VerificationError as error:
            self._fix(error.rule.value, "dropped", f"{error.message}; the chunk is dropped")
            return self._flush([])
        out: list[BaseEvent] = []
        for item in expanded:
            self._one(item, out)
        return self._flush(out)

    def _feed(self, event: BaseEvent | None, out: list[BaseEvent], retry: bool = True) -> None:
        """Offer ``event`` to the verifier: append it when accepted, repair it when not."""
        if event is None:
            return
        cls = event.__class__
        if self._pending and cls in _TERMINALS and self._verifier.run_open:
            # The CUSTOM events of this run's fixes go before its terminal event.
            self._pending_into(out)
        try:
            self._verifier.observe(event)
        except VerificationError as error:
            if retry:
                self._refused(event, error, out)
            else:
                self._fix(error.rule.value, "dropped", f"{error.message}; the event is dropped")
            return
        out.append(event)
        after = self._after.get(cls)
        if after is not None:
            after(event)

    def _flush(self, out: list[BaseEvent]) -> list[BaseEvent]:
        if self._pending:
            if self._verifier.run_open:
                self._pending_into(out)
            else:
                self._pending.clear()  # no run to carry them (the report keeps them)
        return out

    def _pending_into(self, out: list[BaseEvent]) -> None:
        pending, self._pending = self._pending, []
        for fix in pending:
            custom = construct(ag.CustomEvent, {"name": REPAIR_EVENT_NAME, "value": fix.as_dict()})
            self._verifier.observe(custom)  # CUSTOM is accepted anywhere in a run
            out.append(custom)

    def _fix(self, rule: str, action: str, detail: str, index: int | None = None) -> None:
        fix = RepairFix(rule, max(self._gate.seen if index is None else index, 0), action, detail)
        self.report.add(fix)
        logger.warning("repaired event #%d: %s (%s, %s)", fix.index, detail, rule, action)
        limit = self._max_fixes
        if limit is not None and self.report.count > limit:
            raise RepairLimitExceeded(
                f"the stream needed more than {limit} repairs (max_fixes); it is rejected "
                "instead. Fix the producer, or raise max_fixes if its breakage is known "
                f"and bounded. Fixes by rule: {self.report.counts()}",
                self.report,
            )
        if self._emit:
            self._pending.append(fix)

    # -- bookkeeping of what is open ------------------------------------------

    def _opened(self, event: BaseEvent) -> None:
        key = (event.__class__, _item_id(event))
        self._open[key] = event
        if key not in self._openers and event.__class__ in _LABEL:
            self._openers[key] = event

    def _closed(self, event: Any) -> None:
        cls = event.__class__
        opener = _OPENER.get(cls, ag.StepStartedEvent)
        key = (opener, _item_id(event))
        self._open.pop(key, None)
        self._reopened.pop(key, None)
        if event.metadata is not None:
            self._end_metadata[key] = event.metadata
        else:  # the latest END is the one a closer stands in for: none to repeat
            self._end_metadata.pop(key, None)

    def _subagent_closed(self, event: Any) -> None:
        self._open.pop((ag.SubagentStartedEvent, event.subagent_run_id), None)

    def _run_started(self, event: Any) -> None:
        self._open.clear()
        self._openers.clear()
        self._end_metadata.clear()
        self._reopened.clear()
        self._hold_kinds.clear()
        self._held.clear()
        echo = event.input
        state = None if echo is None else echo.state
        if state is not None:
            self._set_state(state)
        # Otherwise the state is the client's own (RunAgentInput.state) until a snapshot.
        elif self._state is not None and echo is not None:
            self._state = None

    def _snapshot(self, event: Any) -> None:
        self._set_state(event.snapshot)

    def _set_state(self, value: Any) -> None:
        try:
            if self._state is None:
                self._state = JsonDocument(value)
            else:
                self._state.reset(value)
        except LimitExceeded:
            self._state = None  # too big to track: deltas pass unchecked, as before a snapshot

    def _close_reopened(self, out: list[BaseEvent]) -> None:
        """End the items Repair reopened: the producer had closed them already.

        The closing END carries the metadata of the producer's own END: that END
        came before content of its item, and metadata merges per key with the
        last write winning, so its keys must be written after that content again
        for the item to fold as the producer meant (its END last).
        """
        for key, start in list(self._reopened.items()):
            if key in self._open:
                metadata = self._end_metadata.get(key)
                self._feed(_closer(start, metadata), out, retry=False)
        self._reopened.clear()

    # -- the fixes -------------------------------------------------------------

    def _refused(self, event: Any, error: VerificationError, out: list[BaseEvent]) -> None:
        rule = error.rule
        cls = event.__class__
        name = event.type.value
        if rule is Rule.FIRST_EVENT:
            self._start_run(event, out)
        elif rule is Rule.RUN_ENDED:
            if cls in _TERMINALS:
                self._fix(
                    "second-terminal",
                    "dropped",
                    f"{name} after the run already ended; a run ends once",
                )
            else:
                self._fix(
                    "after-run-end",
                    "dropped",
                    f"{name} after the run ended (only RUN_STARTED may follow)",
                )
        elif rule is Rule.DUPLICATE_RUN_STARTED:
            self._fix(
                "duplicate-run-started",
                "dropped",
                f"RUN_STARTED (run '{event.run_id}') while a run is active; its events "
                "continue the active run",
            )
        elif rule is Rule.DUPLICATE_START:
            self._fix(
                "duplicate-start",
                "dropped",
                f"{name} for an item that is already open ({error.message})",
            )
        elif rule is Rule.NOT_OPEN:
            self._not_open(event, out)
        elif rule is Rule.OPEN_AT_FINISH:
            self._close_all(event, out)
        elif rule is Rule.OWNER_MISMATCH:
            self._owner(event, error, out)
        elif rule is Rule.UNKNOWN_ID and cls is ag.SubagentStartedEvent:
            parent = event.parent_subagent_run_id
            self._fix(
                "unknown-parent-subagent",
                "rewritten",
                f"SUBAGENT_STARTED '{event.subagent_run_id}' names parent subagent "
                f"'{parent}', never started in this run; the parent is removed",
            )
            self._feed(replace(event, "parent_subagent_run_id", None), out, retry=False)
        else:
            self._fix(rule.value, "dropped", f"{error.message}; the event is dropped")

    def _start_run(self, event: Any, out: list[BaseEvent]) -> None:
        """The stream does not open with RUN_STARTED: look a few events ahead for it."""
        self._opening = [(self._gate.seen, event)]
        self._buffered(event, out)

    def _buffered(self, event: Any, out: list[BaseEvent]) -> None:
        """While the opening is held: wait for the RUN_STARTED, or for ids, a few events."""
        opening = self._opening
        assert opening is not None
        cls = event.__class__
        if cls is ag.RunStartedEvent:
            self._fix(
                "missing-run-started",
                "moved",
                f"RUN_STARTED came after {len(opening)} other event(s); it is moved first",
            )
            self._open_run(event, out)
            return
        if event is not opening[-1][1]:
            opening.append((self._gate.seen, event))
        carries = getattr(event, "thread_id", None) is not None
        if carries or len(opening) >= _LOOKAHEAD:
            self._synthesize_start(event if carries else None, out)

    def _synthesize_start(self, source: Any, out: list[BaseEvent]) -> None:
        opening = self._opening
        assert opening is not None
        thread_id = self._thread_id or getattr(source, "thread_id", None)
        run_id = self._run_id or getattr(source, "run_id", None)
        thread_id = thread_id or f"repair-thread-{uuid.uuid4()}"
        run_id = run_id or f"repair-run-{uuid.uuid4()}"
        self._fix(
            "missing-run-started",
            "synthesized",
            f"the stream opened with {opening[0][1].type.value}, not RUN_STARTED; a "
            f"RUN_STARTED (thread '{thread_id}', run '{run_id}') is put first",
            opening[0][0],
        )
        started = construct(ag.RunStartedEvent, {"thread_id": thread_id, "run_id": run_id})
        self._open_run(started, out)

    def _open_run(self, started: BaseEvent, out: list[BaseEvent]) -> None:
        """Send the RUN_STARTED, then the held opening events, each at its own position."""
        opening = self._opening
        assert opening is not None
        self._opening = None
        self._feed(started, out, retry=False)
        now = self._gate.seen
        for index, event in opening:
            self._gate.seen = index
            self._one(event, out)
        self._gate.seen = now

    def _not_open(self, event: Any, out: list[BaseEvent]) -> None:
        cls = event.__class__
        name = event.type.value
        opener = _OPENER.get(cls)
        if opener is None:  # a step or subagent closed without an opener
            what = "step" if cls is ag.StepFinishedEvent else "subagent"
            self._fix(
                f"{what}-not-started",
                "dropped",
                f"{name} for a {what} that is not open "
                f"('{getattr(event, 'step_name', None) or event.subagent_run_id}')",
            )
            return
        key = (opener, _item_id(event))
        described = _described(key)
        start = self._openers.get(key)
        if cls in _ENDS:
            if start is not None:
                self._fix("duplicate-end", "dropped", f"{name} for {described}, already closed")
            else:
                self._fix("end-not-started", "dropped", f"{name} for {described}, never opened")
            return
        if start is not None:
            self._fix(
                "content-after-end",
                "reopened",
                f"{name} for {described} after its end; the item is reopened (1.0 allows "
                "it, content appends) and closed again before the next event of another kind",
            )
            reopen = _reopener(start)
        elif opener is ag.TextMessageStartEvent or opener is ag.ReasoningMessageStartEvent:
            self._fix(
                "content-not-started",
                "synthesized",
                f"{name} for {described}, never opened; a START opens it",
            )
            values: dict[str, Any] = {"message_id": event.message_id}
            if opener is ag.ReasoningMessageStartEvent:
                values["role"] = "reasoning"
            if event.subagent_run_id is not None:
                values["subagent_run_id"] = event.subagent_run_id
            reopen = construct(opener, values)
        else:
            self._fix(
                "content-not-started",
                "dropped",
                f"{name} for {described}, never opened (its name is unknown, so it cannot "
                "be opened)",
            )
            return
        before = len(out)
        self._feed(reopen, out, retry=False)
        if len(out) == before:
            return
        self._reopened[key] = reopen
        if start is not None:
            # This run's producer sends content after END: hold its later ENDs.
            self._hold_kinds.add(opener)
        self._feed(event, out, retry=False)

    def _close_all(self, event: Any, out: list[BaseEvent]) -> None:
        """RUN_FINISHED with items open: close them (innermost kinds first), then finish."""
        by_kind: dict[type, list[tuple[_Key, BaseEvent]]] = {}
        for key, start in self._open.items():
            by_kind.setdefault(key[0], []).append((key, start))
        for kind in _CLOSE_ORDER:
            for key, start in reversed(by_kind.get(kind, ())):
                self._fix(
                    "open-at-finish",
                    "synthesized",
                    f"RUN_FINISHED with {_described(key)} still open; it is closed first",
                )
                self._feed(_closer(start), out, retry=False)
        self._feed(event, out, retry=False)

    def _owner(self, event: Any, error: VerificationError, out: list[BaseEvent]) -> None:
        """A tag that disagrees with the opener: the opener's owner wins (first writer)."""
        cls = event.__class__
        candidates: list[tuple[BaseEvent, str]] = []
        if cls is ag.StepFinishedEvent:
            for (opener, item), _start in self._open.items():
                if opener is ag.StepStartedEvent and item[1] == event.step_name:
                    candidates.append(
                        (replace(event, "subagent_run_id", item[0]), "retagged to its opener")
                    )
                    break
        elif event.subagent_run_id is not None:
            candidates.append((replace(event, "subagent_run_id", None), "tag removed"))
        if cls is ag.ToolCallStartEvent and event.parent_message_id is not None:
            untagged = replace(event, "subagent_run_id", None)
            candidates.append(
                (replace(untagged, "parent_message_id", None), "tag and parentMessageId removed")
            )
        for candidate, how in candidates:
            try:
                self._verifier.observe(candidate)
            except VerificationError:
                continue
            self._fix(
                "owner-mismatch",
                "rewritten",
                f"{error.message} The opener's owner wins: {how}.",
            )
            out.append(candidate)
            after = self._after.get(cls)
            if after is not None:
                after(candidate)
            return
        self._fix("owner-mismatch", "dropped", f"{error.message} The event is dropped.")

    # -- state -----------------------------------------------------------------

    def _delta(self, event: Any) -> BaseEvent | None:
        """The delta rewritten to apply to the tracked state (None: nothing of it applies)."""
        document = self._state
        assert document is not None
        operations = event.delta
        try:
            document.patch(operations)
            return event  # type: ignore[no-any-return]
        except LimitExceeded:
            self._state = None
            return event  # type: ignore[no-any-return]
        except PatchError:
            pass
        saved = clone_json(document.value)
        kept: list[Any] = []
        fixes: list[tuple[str, str, str]] = []
        for position, op in enumerate(operations):
            try:
                document.patch((op,))
                kept.append(op)
                continue
            except LimitExceeded:
                self._state = None
                return event  # type: ignore[no-any-return]
            except PatchError as failure:
                reason = str(failure)
            where = f"operation #{position} ({op.op} {op.path!r})"
            if op.op == "test":
                # A failed test means "do not apply": the client skips the whole
                # delta, which is the producer's own instruction. Leave it.
                document.reset(saved, copy=False)
                return event  # type: ignore[no-any-return]
            if op.op == "replace":
                added = ag.StateDeltaEvent.model_validate(
                    {"delta": [{"op": "add", "path": op.path, "value": op.value}]}
                ).delta[0]
                try:
                    document.patch((added,))
                except PatchError:
                    pass
                else:
                    kept.append(added)
                    fixes.append(
                        (
                            "state-replace-missing",
                            "rewritten",
                            f"STATE_DELTA {where} replaces a path the state lacks ({reason}); "
                            "it becomes an add",
                        )
                    )
                    continue
            fixes.append(
                (
                    "state-op-unappliable",
                    "dropped",
                    f"STATE_DELTA {where} cannot apply to the state ({reason}); "
                    "the operation is dropped",
                )
            )
        for rule, action, detail in fixes:
            self._fix(rule, action, detail)
        if not kept:
            self._fix(
                "state-delta-empty",
                "dropped",
                "STATE_DELTA with no operation left that applies; the event is dropped",
            )
            return None
        rewritten: BaseEvent = replace(event, "delta", kept)
        return rewritten
