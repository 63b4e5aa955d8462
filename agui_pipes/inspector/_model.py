"""The inspected stream: lanes, an events index, the verdict, the fold at any index.

One pass over the wire events builds everything the inspector's JSON API serves,
and keeps it compact so a 100k-event recording stays cheap to hold:

* each event is kept once, as its compact JSON bytes (the wire form it arrived
  in); its type, owner and timestamp go in typed arrays, its ids in an inverted
  index (id → event indexes) so the ``id=`` filter does not parse every event;
* events are verified with the consumer profile (``Consumer``): the first
  violation is kept at its event, decode and application warnings at theirs;
* the fold at any index is a checkpoint (messages and state: a snapshot of the
  consumer's fold, or after a rejection blocks folded with the public ``fold``,
  kept as JSON bytes shared with the previous checkpoint where a message did not
  change) plus a replay of the events after it with ``fold``, so a scrubber request
  costs O(K), not O(N); see ``CHECKPOINT_BYTES_PER_EVENT`` for how K grows with
  the conversation. Only events whose chunk expansion differs
  from the event itself keep their expanded JSON (the replay needs it); after a
  rejection the remaining events are folded as decoded, best effort, like ``fold``.

A run grows with ``add`` (a live run in ``serve --inspect``) and is sealed by
``close``; a file is read whole and closed at once (see ``InspectedRun.build``).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson
from ag_ui.core import BaseEvent

from .. import Consumer, fold
from .._foundation.principal import DEFAULT_SCOPE
from ..codecs import DecodeError, DecodeWarning, decode, encode_json
from ..verify import ProtocolViolation
from ._lanes import LaneBuilder

__all__ = [
    "CHECKPOINT_EVERY",
    "EVENT_OVERHEAD",
    "FOLD_RESERVE",
    "NOT_AN_EVENT",
    "TICKS_CAP",
    "InspectedRun",
    "kept",
    "summary_of",
    "wire_json",
]

CHECKPOINT_EVERY = 512
"""Fewest events between fold checkpoints (see ``CHECKPOINT_BYTES_PER_EVENT``)."""

CHECKPOINT_BYTES_PER_EVENT = 128
"""A checkpoint copies the whole conversation, so one is taken only after at least one
event per this many bytes of it: checkpoint costs stay O(1) per event however long the
conversation grows (a 100k-event stream is not quadratic), and a ``fold?at=`` replays at
most ``max(CHECKPOINT_EVERY, conversation bytes / CHECKPOINT_BYTES_PER_EVENT)`` events."""

EVENT_OVERHEAD = 160
"""Bytes a run accounts per event beyond its JSON: the bytes object's header, its slots in
the type, time, owner and id indexes and its share of the lanes (about 160 measured on
benchmarks/streams.py's stream). A run's ``nbytes`` — what ``max_bytes`` bounds — is its
events' JSON plus this per event plus the bytes its fold checkpoints keep, and while the
run is open ``FOLD_RESERVE`` times what its live fold holds."""

FOLD_RESERVE = 2
"""While a run is open, the verifier's fold of its conversation is held next to its events:
the fold holds the text again (a delta's text, a state value), and joining buffered deltas
into a message copies it once more for a moment. So an open run accounts this many times
its live fold (the conversation's JSON at the last checkpoint plus the JSON of every event
folded since, an upper bound) on top of its events; ``close`` — or reaching the cap, which
drops the fold — gives that back. Measured with tracemalloc on 40 MiB runs of text."""

MIB = 1024 * 1024

NOT_AN_EVENT = "(not an event)"
"""The type listed for an input item that is not a JSON object with a string ``type``."""

TICKS_CAP = 2000
"""Ticks per lane in a summary; more are thinned evenly (``tick_count`` keeps the total)."""

_ID_FIELDS = (
    ("runId", "run_id"),
    ("threadId", "thread_id"),
    ("messageId", "message_id"),
    ("toolCallId", "tool_call_id"),
    ("parentMessageId", "parent_message_id"),
    ("subagentRunId", "subagent_run_id"),
    ("parentSubagentRunId", "parent_subagent_run_id"),
    ("parentToolCallId", "parent_tool_call_id"),
    ("stepName", "step_name"),
    ("interruptId", "interrupt_id"),
)
_ID_ATTRIBUTES: dict[type, tuple[str, ...]] = {}
"""The id attributes each event class has (most have one or two of the ten)."""

_SUMMARY_FIELDS = (
    "delta",
    "content",
    "message",
    "toolCallName",
    "name",
    "stepName",
    "role",
    "activityType",
    "snapshot",
    "patch",
    "value",
    "result",
    "outcome",
    "messages",
    "event",
)
_SUMMARY_MAX = 120


def kept(data: bytes) -> bytes:
    """``data`` in a bytes object of its own size, to be held for long.

    orjson's output keeps the buffer it grew in (4 kB for a 60-byte event): held
    per event, that would be most of an inspected run's memory.
    """
    return bytes(memoryview(data))


def wire_json(event: BaseEvent) -> bytes:
    """The event as compact wire JSON (camelCase, unset fields left out), to be kept."""
    return kept(encode_json(event))


def _shorten(text: str, limit: int = _SUMMARY_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary_of(obj: Any) -> str:
    """One line (≤120 chars) saying what an event carries: its most telling field."""
    if not isinstance(obj, dict):
        return _shorten(repr(obj))
    parts: list[str] = []
    for key in _SUMMARY_FIELDS:
        if key in obj:
            value = obj[key]
            shown = value if isinstance(value, str) else orjson.dumps(value).decode()
            if key == "delta" and isinstance(value, str):
                shown = orjson.dumps(value).decode()
            parts.append(f"{key}={shown}" if key not in ("delta",) else shown)
            if sum(len(p) for p in parts) >= _SUMMARY_MAX:
                break
    if not parts:
        parts = [f"{k}={v}" for k, v in obj.items() if k != "type" and isinstance(v, str)]
    return _shorten(" ".join(parts))


LONG_TEXT = 64 * 1024
"""A message holding a string this long is dumped with the standard library's ``json``:
orjson reserves about 15 times a string's length while it encodes it (63 MiB for 4 MiB of
text, measured with tracemalloc), the standard library about twice."""


def _dump_message(message: dict[str, Any]) -> bytes:
    """A fold message as compact JSON bytes, without orjson's reserve for long text."""
    if not _has_long_text(message):
        return orjson.dumps(message)
    import json

    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def _has_long_text(message: dict[str, Any]) -> bool:
    for value in message.values():
        if isinstance(value, str) and len(value) >= LONG_TEXT:
            return True
    for call in message.get("toolCalls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str) and len(arguments) >= LONG_TEXT:
            return True
    return False


class _Checkpoint:
    """The fold after event ``at``, as JSON bytes: a message unchanged since the previous
    checkpoint shares that checkpoint's bytes object, so checkpoints cost what changed."""

    __slots__ = ("at", "messages", "state")

    def __init__(self, at: int, messages: tuple[bytes, ...], state: bytes) -> None:
        self.at = at  # the fold of events 0..at inclusive
        self.messages = messages
        self.state = state

    def restore(self) -> tuple[list[dict[str, Any]], Any]:
        return [orjson.loads(m) for m in self.messages], orjson.loads(self.state)


class InspectedRun:
    """One inspected stream (a file, or a run ``serve --inspect`` recorded).

    Indexes are wire positions: event ``i`` is the ``i``-th item of the input,
    unknown event types included (they are flagged with their decode warning).
    """

    def __init__(
        self,
        label: str,
        *,
        run_id: str = "0",
        checkpoint_every: int = CHECKPOINT_EVERY,
        max_events: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
        if (max_events is not None and max_events < 1) or (max_bytes is not None and max_bytes < 1):
            raise ValueError(
                f"max_events and max_bytes must be >= 1, got {max_events}, {max_bytes}"
            )
        self.id = run_id
        self.label = label
        self.scope = DEFAULT_SCOPE
        """Whose run it is (the principal's scope of the request that streamed it)."""
        self.live = True
        self.evicted = False
        """A ring dropped the run to make room: whoever records it should let it go."""
        self.disconnected = False
        """The stream stopped without an end: its client went away (``abandon``)."""
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._event_bytes = 0
        self._fold_bytes = 0
        """What the live fold holds (an upper bound), accounted ``FOLD_RESERVE`` times."""
        self.nbytes = 0
        """What the run holds, as accounted against ``max_bytes`` (see ``EVENT_OVERHEAD``)."""
        self._every = checkpoint_every
        self._raw: list[bytes] = []
        self._types: list[str] = []
        self._type_code: dict[str, int] = {}
        self._type_of = array("h")
        self._by_type: dict[int, array[int]] = {}
        self._t = array("d")
        self._timed_all = True
        self._owner_names: list[str] = []
        self._owner_code: dict[str, int] = {}
        self._owner = array("i")
        self._by_id: dict[str, array[int]] = {}
        self._expanded: dict[int, list[bytes]] = {}
        self.violations: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []
        self._flagged: dict[int, set[str]] = {}
        self._consumer: Consumer | None = Consumer(allow_truncated=True)
        self._seen_warnings = 0
        self._outcome: str | None = None
        self._lanes = LaneBuilder()
        self._checkpoints: list[_Checkpoint] = []
        self._block: list[BaseEvent] = []
        self._block_start = 0
        self._gap = checkpoint_every
        self._fold_messages: list[dict[str, Any]] = []
        self._fold_state: Any = {}
        self._shared: dict[str, bytes] = {}
        self.stages: list[Any] | None = None
        self.request: dict[str, Any] | None = None
        """The ``RunAgentInput`` (wire JSON) the run was started with, when known."""
        self._output: InspectedRun | None = None
        self.capped = False
        self._haystack: tuple[bytes, array[int]] | None = None
        self._lane_rows: list[dict[str, Any]] | None = None

    # -- building ------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._raw)

    def add(self, item: dict[str, Any] | str | bytes | BaseEvent) -> None:
        """Take the next event: a wire object, its JSON text, or an ``ag_ui.core`` event."""
        if not self.live:
            raise RuntimeError("this InspectedRun is closed; no event can be added")
        if self.capped:
            return
        index = len(self._raw)
        if self.max_events is not None and index >= self.max_events:
            self._cap(f"only the first {self.max_events} events were kept (the run's event cap)")
            return
        read = self._read_bounded(item, index)
        if read is None:
            return
        raw, event, obj, type_name = read
        self._note_type(index, type_name)
        self._note_time(event, obj)
        if event is None:
            self._owner.append(-1)
            self._raw.append(raw)  # last: readers bound themselves by len(self._raw)
            return
        self._index_ids(index, event)
        delivered = self._deliver(index, event)
        if len(delivered) != 1 or delivered[0] is not event:
            self._expanded[index] = [wire_json(e) for e in delivered]
        owner: str | None = None
        for out in delivered:
            owner = self._lanes.observe(index, out) or owner
        self._owner.append(self._owner_id(owner))
        self._raw.append(raw)  # last: readers bound themselves by len(self._raw)
        if self._consumer is None:
            self._block.extend(delivered)  # while a consumer lives, it folds them
        if index + 1 - self._block_start >= self._gap:
            self._checkpoint(index)

    def _read_bounded(
        self, item: dict[str, Any] | str | bytes | BaseEvent, index: int
    ) -> tuple[bytes, BaseEvent | None, Any, str] | None:
        """``_read``; None, capped, if the event would take the run past ``max_bytes``."""
        if self.max_bytes is not None:
            # Sized before it is read: a capped event leaves no verdict or warning behind.
            if isinstance(item, bytes | str):
                size = len(item)
            elif isinstance(item, dict):
                size = len(orjson.dumps(item))
            else:
                raw = wire_json(item)  # encoded once: it is what the run keeps
                if self.nbytes + self._cost(len(raw)) > self.max_bytes:
                    self._cap_bytes(index)
                    return None
                self._account(len(raw))
                return raw, item, None, item.type.value
            if self.nbytes + self._cost(size) > self.max_bytes:
                self._cap_bytes(index)
                return None
        read = self._read(item, index)
        self._account(len(read[0]))
        return read

    def _cost(self, size: int) -> int:
        """What an event of ``size`` JSON bytes adds to the account: itself, its indexes,
        and while the run is open what folding it may add (``FOLD_RESERVE``)."""
        return size + EVENT_OVERHEAD + FOLD_RESERVE * size

    def _account(self, size: int) -> None:
        self.nbytes += self._cost(size)
        self._event_bytes += size
        self._fold_bytes += size

    def _release_fold(self) -> None:
        """The live fold is let go of: its reserve leaves the account."""
        self.nbytes -= FOLD_RESERVE * self._fold_bytes
        self._fold_bytes = 0
        self._consumer = None
        self._block = []
        self._fold_messages, self._fold_state, self._shared = [], {}, {}

    def _cap_bytes(self, index: int) -> None:
        assert self.max_bytes is not None
        self._cap(
            f"only the first {index} events ({self.nbytes / MIB:.1f} MiB) were kept: the next "
            f"would pass the run's byte cap of {self.max_bytes / MIB:.1f} MiB"
        )

    def _cap(self, what: str) -> None:
        """Stop recording (the stream goes on for its client): say so once, as a warning.

        The live fold is dropped at once (its end will not be seen: the run is
        ``truncated``, unless already rejected), so a capped run holds only what it kept.
        """
        self.capped = True
        self._warn(None, "recording-capped", f"{what}; the run went on, the rest is not shown")
        if self._outcome is None:
            self._outcome = "truncated"
        self._release_fold()

    def abandon(self) -> None:
        """The stream stopped without its end (the client went away): no longer live."""
        if self.live:
            self.disconnected = True
            self._warn(
                None,
                "disconnected",
                f"the stream stopped after event #{len(self._raw) - 1} without an end "
                "(its client disconnected, or the server stopped it)",
            )
            self.close()

    def _read(
        self, item: dict[str, Any] | str | bytes | BaseEvent, index: int
    ) -> tuple[bytes, BaseEvent | None, Any, str]:
        """``item`` as (its wire bytes, its event or None, its JSON object if parsed, its type).

        An item that does not decode is flagged (rejected, or warned about) here;
        its type is then what its ``type`` field says, or ``NOT_AN_EVENT``.
        """
        if not isinstance(item, bytes | str | dict) and isinstance(item, BaseEvent):
            return wire_json(item), item, None, item.type.value
        obj: Any = None
        if type(item) is bytes:
            raw = item.strip()
        elif isinstance(item, str):
            raw = item.strip().encode()
        elif isinstance(item, bytes | bytearray):
            raw = bytes(item).strip()
        else:
            raw = kept(orjson.dumps(item))
            obj = item
        event = self._decode(obj if obj is not None else raw, index)
        if event is not None:
            return raw, event, obj, event.type.value
        if obj is None:
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                obj = None
        found = obj.get("type") if isinstance(obj, dict) else None
        return raw, None, obj, found if isinstance(found, str) else NOT_AN_EVENT

    def _decode(self, payload: dict[str, Any] | bytes, index: int) -> BaseEvent | None:
        """The event ``payload`` holds (its decode warnings noted), or None, rejected."""
        try:
            decoded = decode(payload, index=index)
        except DecodeError as error:
            self._reject(index, error)
            return None
        for warning in decoded.warnings:
            self._warn(index, warning.code, warning.message)
        return decoded.event

    def _note_time(self, event: BaseEvent | None, obj: Any) -> None:
        """The event's ``timestamp`` (or its wire object's), NaN when it has none."""
        timestamp = event.__dict__.get("timestamp") if event is not None else None
        if timestamp is None and isinstance(obj, dict):
            value = obj.get("timestamp")
            timestamp = value if isinstance(value, int | float) else None
        if timestamp is None:
            self._timed_all = False
            self._t.append(math.nan)
        else:
            self._t.append(float(timestamp))

    def _deliver(self, index: int, event: BaseEvent) -> Sequence[BaseEvent]:
        """What the consumer makes of ``event`` (chunks expanded); itself once rejected."""
        consumer = self._consumer
        if consumer is None:
            return (event,)
        try:
            delivered = consumer.push(event)
        except ProtocolViolation as violation:
            self._collect_consumer_warnings(consumer, index)
            self._reject(index, violation)
            return (event,)
        self._collect_consumer_warnings(consumer, index)
        return delivered

    def close(self) -> None:
        """The stream ended: settle the outcome (truncated runs are not violations here)."""
        if not self.live:
            return
        self.live = False
        self._lanes.close()
        if self._consumer is not None and self._outcome is None:
            consumer, self._consumer = self._consumer, None
            try:
                result = consumer.finish()
            except ProtocolViolation as violation:
                # Only "no run at all" fails with allow_truncated: place it at the last event.
                self._reject(max(len(self._raw) - 1, 0), violation)
            else:
                self._outcome = {
                    "success": "finished",
                    "interrupt": "finished",
                    "cancelled": "finished",
                    "error": "error",
                    "truncated": "truncated",
                }.get(result.outcome or "", "truncated")
                if self._outcome == "truncated":
                    self._warn(
                        None,
                        "truncated",
                        "the stream ended while a run was still open: it has no outcome",
                    )
        # Only the checkpoints' bytes are needed from here on.
        self._release_fold()

    @classmethod
    def build(
        cls,
        items: Iterable[dict[str, Any] | str | bytes | BaseEvent],
        label: str,
        *,
        chain: Any = None,
        checkpoint_every: int = CHECKPOINT_EVERY,
        broken: str | None = None,
    ) -> InspectedRun:
        """Inspect a whole recorded stream; with ``chain`` (a ``TransformerChain`` or a
        factory of one) also record what each of its stages did; ``output`` is then
        the stream the chain emits (the client's side: its own verdict, lanes, fold).

        ``broken`` says why reading stopped early (bad framing after the last event
        read): the stream is then rejected, with that reason as a warning.
        """
        run = cls(label, checkpoint_every=checkpoint_every)
        for item in items:
            run.add(item)
        run.close()
        if broken is not None:
            run._warn(
                None, "input-broken", f"reading stopped after event #{len(run) - 1}: {broken}"
            )
            run._outcome = "rejected"
        if chain is not None:
            from ._stages import record_stages

            run.stages = record_stages(run, chain)
        return run

    @property
    def output(self) -> InspectedRun | None:
        """With a chain: the stream as the client receives it (the last stage's output),
        inspected on its own; None without one. Built when first asked for (about what
        building this run cost), so a chain costs no second model until it is viewed."""
        if self._output is None and self.stages:
            output = InspectedRun.build(
                self.stages[-1].outputs, self.label, checkpoint_every=self._every
            )
            output.id = self.id
            output.stages = self.stages  # the pipeline view describes both sides
            output.request = self.request
            self._output = output
        return self._output

    # -- bookkeeping ---------------------------------------------------------

    def _note_type(self, index: int, type_name: str) -> None:
        code = self._type_code.get(type_name)
        if code is None:
            code = self._type_code[type_name] = len(self._types)
            self._types.append(type_name)
            self._by_type[code] = array("i")
        self._type_of.append(code)
        self._by_type[code].append(index)

    def _owner_id(self, owner: str | None) -> int:
        if owner is None:
            return -1
        code = self._owner_code.get(owner)
        if code is None:
            code = self._owner_code[owner] = len(self._owner_names)
            self._owner_names.append(owner)
        return code

    def _index_ids(self, index: int, event: BaseEvent) -> None:
        by_id = self._by_id
        cls = event.__class__
        attributes = _ID_ATTRIBUTES.get(cls)
        if attributes is None:
            names = cls.model_fields
            attributes = _ID_ATTRIBUTES[cls] = tuple(a for _, a in _ID_FIELDS if a in names)
        fields = event.__dict__  # pydantic's field values: no __getattr__ fallback
        for attribute in attributes:
            value = fields.get(attribute)
            if isinstance(value, str):
                hits = by_id.get(value)
                if hits is None:
                    hits = by_id[value] = array("i")
                if not hits or hits[-1] != index:
                    hits.append(index)

    def _collect_consumer_warnings(self, consumer: Consumer, index: int) -> None:
        warnings: list[DecodeWarning] = consumer.warnings
        for warning in warnings[self._seen_warnings :]:
            self._warn(index, warning.code, warning.message)
        self._seen_warnings = len(warnings)

    def _warn(self, index: int | None, code: str, message: str) -> None:
        self.warnings.append({"index": index, "code": code, "message": message})
        if index is not None:
            self._flagged.setdefault(index, set()).add("warning")

    def _reject(self, index: int, violation: ProtocolViolation) -> None:
        # Its traceback holds the frames that raised it, and they this run (and the
        # consumer that keeps the error): a cycle that would keep the whole run alive
        # after the ring dropped it, until the cyclic collector ran — uncounted memory.
        violation.__traceback__ = None
        if self.violations:
            return
        rule = getattr(violation, "rule", None)
        self.violations.append(
            {
                "index": index,
                "rule": str(getattr(rule, "value", rule)) if rule is not None else "decode",
                "message": str(violation),
            }
        )
        self._flagged.setdefault(index, set()).add("violation")
        self._outcome = "rejected"
        if self._consumer is not None:
            # The verdict is in: from here on the events are folded best effort, block by
            # block with ``fold``, starting from what the consumer had folded.
            folded = self._consumer.snapshot()
            self._fold_messages, self._fold_state = folded.messages, folded.state
            self._block = []
            self._consumer = None

    def _checkpoint(self, index: int) -> None:
        if self.max_bytes is not None and self.nbytes + self._fold_bytes > self.max_bytes:
            # Dumping the conversation makes one more copy of it (at most the live fold's
            # size): skipped before it is made when that would pass the cap (a fold then
            # replays from the previous checkpoint). The fold goes on as it was.
            return
        if self._consumer is not None:
            result = self._consumer.snapshot()  # a copy of its fold so far
        else:
            result = fold(self._block, state=self._fold_state, messages=self._fold_messages)
            self._fold_messages, self._fold_state = result.messages, result.state
        shared: dict[str, bytes] = self._shared
        now: dict[str, bytes] = {}
        blobs: list[bytes] = []
        size = cost = 0  # the conversation's bytes; what of them this checkpoint adds
        for message in result.messages:
            blob = _dump_message(message)
            key = str(message.get("id"))
            previous = shared.get(key)
            if previous is not None and previous == blob:
                blob = previous
            else:
                blob = kept(blob)
                cost += len(blob)
            now[key] = blob
            blobs.append(blob)
            size += len(blob)
        state = orjson.dumps(result.state)
        previous_state = self._checkpoints[-1].state if self._checkpoints else None
        if previous_state is not None and previous_state == state:
            state = previous_state
        else:
            state = kept(state)
            cost += len(state)
        size += len(state)
        self._block = []
        self._block_start = index + 1
        self._gap = max(self._every, size // CHECKPOINT_BYTES_PER_EVENT)
        # The live fold is now exactly this conversation (plus what is folded from here).
        self.nbytes += FOLD_RESERVE * (size - self._fold_bytes)
        self._fold_bytes = size
        if self.max_bytes is not None and self.nbytes + cost > self.max_bytes:
            return  # not kept: a fold here replays from the previous checkpoint instead
        self.nbytes += cost
        self._shared = now
        self._checkpoints.append(_Checkpoint(index, tuple(blobs), state))

    # -- reading -------------------------------------------------------------

    @property
    def outcome(self) -> str:
        if self._outcome == "rejected":
            return "rejected"
        if self.live:
            return "live"
        if self.disconnected:
            return "disconnected"
        return self._outcome or "truncated"

    @property
    def timed(self) -> bool:
        return bool(self._raw) and self._timed_all

    def type_at(self, index: int) -> str:
        return self._types[self._type_of[index]]

    def raw_at(self, index: int) -> bytes:
        return self._raw[index]

    def json_at(self, index: int) -> Any:
        return orjson.loads(self._raw[index])

    def t_at(self, index: int) -> float | None:
        value = self._t[index]
        return None if math.isnan(value) else value

    def owner_at(self, index: int) -> str | None:
        code = self._owner[index] if index < len(self._owner) else -1
        return None if code < 0 else self._owner_names[code]

    def flags_at(self, index: int) -> list[str]:
        return sorted(self._flagged.get(index, ()))

    def problems_at(self, index: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if index not in self._flagged:
            return [], []
        return (
            [v for v in self.violations if v["index"] == index],
            [w for w in self.warnings if w["index"] == index],
        )

    def row(self, index: int) -> dict[str, Any]:
        obj = self.json_at(index)
        ids: dict[str, str] = {}
        if isinstance(obj, dict):
            for key, _ in _ID_FIELDS:
                value = obj.get(key)
                if isinstance(value, str):
                    ids[key] = value
        return {
            "index": index,
            "type": self.type_at(index),
            "t": self.t_at(index),
            "ids": ids,
            "owner": self.owner_at(index),
            "summary": summary_of(obj),
            "flags": self.flags_at(index),
        }

    def page(
        self,
        offset: int,
        limit: int,
        types: Sequence[str] = (),
        text: str = "",
        ident: str = "",
    ) -> tuple[int, list[int]]:
        """How many events pass every given filter, and the indexes of one page of them.

        ``types``: any of them; ``text``: a case-insensitive substring of the JSON;
        ``ident``: an id field equal to it. Without filters nothing is scanned.
        """
        count = len(self._raw)  # a live run may grow meanwhile: its newest event is not indexed
        if not (types or text or ident):
            return count, list(range(offset, min(offset + limit, count)))
        candidates: Iterable[int]
        if text:
            candidates = self._text_hits(text.lower().encode(), count)
        elif ident:
            candidates = self._by_id.get(ident, ())
        elif types:
            merged: list[int] = []
            for name in types:
                code = self._type_code.get(name)
                if code is not None:
                    merged.extend(self._by_type[code])
            candidates = sorted(merged) if len(types) > 1 else merged
        codes = {self._type_code[t] for t in types if t in self._type_code}
        wanted = None
        if ident and text:
            wanted = set(self._by_id.get(ident, ()))
        total = 0
        found: list[int] = []
        type_of = self._type_of
        for index in candidates:
            if index >= count:
                break
            if types and type_of[index] not in codes:
                continue
            if wanted is not None and index not in wanted:
                continue
            if offset <= total < offset + limit:
                found.append(index)
            total += 1
        return total, found

    def _text_hits(self, needle: bytes, count: int) -> list[int]:
        """Indexes of the events whose lower-cased JSON holds ``needle``.

        A closed run searches one lower-cased copy of all its events with ``bytes.find``
        (made on the first text search, kept: about the file's size), a C-speed scan
        instead of lower-casing every event per request; a live run scans its events.
        """
        if self.live or b"\n" in needle:
            return [i for i in range(count) if needle in self._raw[i].lower()]
        if self._haystack is None:
            starts = array("q")
            position = 0
            for raw in self._raw:
                starts.append(position)
                position += len(raw) + 1
            self._haystack = (b"\n".join(self._raw).lower(), starts)
        haystack, starts = self._haystack
        hits: list[int] = []
        at = haystack.find(needle)
        while at >= 0:
            index = bisect_right(starts, at) - 1
            hits.append(index)
            if index + 1 >= len(starts):
                break
            at = haystack.find(needle, starts[index + 1])
        return hits

    def types_count(self) -> dict[str, int]:
        return {name: len(self._by_type[code]) for code, name in enumerate(self._types)}

    def t0(self) -> float | None:
        if not self.timed:
            return None
        return min(self._t)

    def lanes(self) -> list[dict[str, Any]]:
        """The lanes (computed once for a closed run: a summary is asked for often)."""
        if self.live:
            return self._lanes.rows(TICKS_CAP)
        if self._lane_rows is None:
            self._lane_rows = self._lanes.rows(TICKS_CAP)
        return self._lane_rows

    def fold_at(self, at: int) -> dict[str, Any]:
        """Messages and state after events 0..``at`` (a checkpoint plus a short replay)."""
        if not 0 <= at < len(self._raw):
            raise IndexError(at)
        first: int = 0
        messages: list[dict[str, Any]] = []
        state: Any = {}
        lo, hi = 0, len(self._checkpoints)
        while lo < hi:  # the last checkpoint at or before ``at``
            mid = (lo + hi) // 2
            if self._checkpoints[mid].at <= at:
                lo = mid + 1
            else:
                hi = mid
        if lo:
            point = self._checkpoints[lo - 1]
            first = point.at + 1
            messages, state = point.restore()
        result = fold(self._replay(first, at), state=state, messages=messages)
        return {"at": at, "messages": result.messages, "state": result.state}

    def _replay(self, first: int, last: int) -> Iterator[BaseEvent]:
        for index in range(first, last + 1):
            expanded = self._expanded.get(index)
            for raw in expanded if expanded is not None else (self._raw[index],):
                try:
                    event = decode(raw).event
                except ProtocolViolation:
                    continue  # a malformed event was never folded
                if event is not None:
                    yield event

    def events(self) -> Iterator[tuple[int, BaseEvent]]:
        """The decodable events with their indexes (what a chain's first stage gets)."""
        for index, raw in enumerate(self._raw):
            try:
                event = decode(raw).event
            except ProtocolViolation:
                continue
            if event is not None:
                yield index, event

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "events": len(self._raw),
            "timed": self.timed,
            "t0": self.t0(),
            "types": self.types_count(),
            "outcome": self.outcome,
            "capped": self.capped,
            "bytes": self.nbytes,
            "lanes": self.lanes(),
            "violations": list(self.violations),
            "warnings": list(self.warnings),
            "stages": None if self.stages is None else [s.summary() for s in self.stages],
            "request": self.request,
        }

    def listing(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "events": len(self._raw),
            "live": self.live,
            "outcome": self.outcome,
            "capped": self.capped,
            "bytes": self.nbytes,
            "request": self.request is not None,
        }
