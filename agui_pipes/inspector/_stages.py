"""What each stage of a chain did to the stream: passed, changed, merged, dropped or added.

Every stage runs on its own, fed the previous stage's output event by event, and
each output is attributed to the input it came from **by identity**, not by the
call it was emitted in, so a stage that holds events back and releases them later
(Redact, CoalesceDeltas, Repair, FilterToolCalls) is shown as it really behaved.
The rule, applied to each output of a ``transform`` (or ``finish``) call in turn:

1. an output that *is* an input object — the current one, or an earlier one the
   stage held back — is that input *passed* (late, when held);
2. a new object that is a copy of a held input — the same class, sharing a field
   object with it (``model_copy`` keeps the fields it does not replace: an id
   string, a text, a nested value) — is that input *changed* (the earliest such),
   with the JSON Patch from it;
3. otherwise, while the current input has neither come out nor been changed, the
   output is its change (same-call attribution: a stage rewriting what it is given);
4. anything else is *added* (next to the current input; ``in: null`` at the end).

An input still held at the end of the stream was *merged* into the changed output
of the same item (same class, same message / tool call / subagent ids) whose source
arrived last before it, provided that output was emitted after it arrived (deltas
of one item come out in order): that is how CoalesceDeltas and Redact fold a run
of deltas into one. Any other input that never came out is *dropped*.

A stage may say *why* it did what it did (docs/inspector.md, "stage reasons"):
see ``_reasons``.

Memory stays proportional to the events, not to events × stages: each stage keeps
its outputs as JSON bytes, and a passed event's bytes are the input's own object
(shared, not copied); rows are typed arrays of indexes. An operator stage (a
``StreamOperator``, which sees the whole stream at once) is matched by identity
after the fact: unmatched inputs are dropped, unmatched outputs added.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import AsyncIterator, Iterable, Sequence
from enum import Enum
from typing import Any

import anyio
import jsonpatch
import orjson
from ag_ui.core import BaseEvent

from .. import AsyncStreamTransformer, Stage, StreamOperator, TransformerChain
from ..codecs import decode, encode_json
from ._model import summary_of, wire_json
from ._reasons import explain

__all__ = ["KINDS", "StageRecord", "record_stages"]

KINDS = ("passed", "changed", "dropped", "added", "merged")
_PASSED, _CHANGED, _DROPPED, _ADDED, _MERGED = range(5)
_AT_FINISH = 2**62  # "emitted at" of what finish() emits: after every input


class StageRecord:
    """One stage's rows and its output (as JSON bytes)."""

    def __init__(self, name: str, inputs: Sequence[bytes]) -> None:
        self.name = name
        self.inputs = inputs  # the input events' JSON, by input index (stage 0: file index)
        self.received = 0
        self.arrivals = array("i")  # the input index of each event received, in order
        self.input_rows = array("i")  # the row of each event received (its own, not added)
        self.outputs: list[bytes] = []
        self.kind = array("b")
        self.source = array("i")  # input index, -1 for an added event from finish()
        self.first_out = array("i")  # first output index, -1 for none
        self.out_count = array("i")
        self.error: str | None = None
        self.reasons: dict[int, list[dict[str, Any]]] = {}  # row → why (see _reasons)
        self.merged: dict[int, list[int]] = {}  # output index → inputs merged into it
        self.merged_row: dict[int, int] = {}  # output index → its changed row (merged ones)
        self._by_kind: dict[str, array[int]] = {}
        self.held = _Held()
        # item → (source input, input being processed when emitted, output, row) per change
        self.derived: dict[tuple[Any, ...], list[tuple[int, int, int, int]]] = {}

    def note(self, kind: int, source: int, outputs: Sequence[bytes]) -> int:
        self.kind.append(kind)
        self.source.append(source)
        self.first_out.append(len(self.outputs) if outputs else -1)
        self.out_count.append(len(outputs))
        self.outputs.extend(outputs)
        return len(self.kind) - 1

    def settle(self, row: int, kind: int, raw: bytes) -> int:
        """A held input comes out late (passed, or changed into ``raw``): its row says so."""
        self.kind[row] = kind
        self.first_out[row] = len(self.outputs)
        self.out_count[row] = 1
        self.outputs.append(raw)
        return len(self.outputs) - 1

    def summary(self) -> dict[str, Any]:
        counts = [0] * len(KINDS)
        for kind in self.kind:
            counts[kind] += 1
        return {
            "name": self.name,
            "in": self.received,
            "out": len(self.outputs),
            **{name: counts[code] for code, name in enumerate(KINDS)},
            "reasons": sum(len(found) for found in self.reasons.values()),
            "error": self.error,
        }

    def rows(self, kind: str | None, offset: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """The matching rows' count and one page of them, with diffs for changed rows."""
        if kind is None:
            total = len(self.kind)
            return total, [self._row(i) for i in range(offset, min(offset + limit, total))]
        positions = self._by_kind.get(kind)
        if positions is None:  # the record is complete once built: index each kind once
            wanted = KINDS.index(kind)
            positions = self._by_kind[kind] = array(
                "i", (i for i, k in enumerate(self.kind) if k == wanted)
            )
        page = positions[offset : offset + limit]
        return len(positions), [self._row(i) for i in page]

    def _row(self, position: int) -> dict[str, Any]:
        kind = self.kind[position]
        source = self.source[position]
        first, count = self.first_out[position], self.out_count[position]
        outs = list(range(first, first + count)) if count else []
        if kind == _ADDED:
            event = orjson.loads(self.outputs[outs[0]])
        else:
            event = _normalised(self.inputs[source])
        diff = None
        sources = None
        if kind == _CHANGED:
            after = orjson.loads(self.outputs[outs[0]])
            diff = jsonpatch.make_patch(event, after).patch
            merged = self.merged.get(outs[0])
            if merged:
                sources = [source, *merged]
        elif kind == _MERGED:
            sources = [self.source[self.merged_row[outs[0]]], *self.merged[outs[0]]]
        return {
            "kind": KINDS[kind],
            "in": None if source < 0 else source,
            "out": outs,
            "type": event.get("type", "?") if isinstance(event, dict) else "?",
            "summary": _summary(event),
            "diff": diff,
            "sources": sources,
            "reasons": self.reasons.get(position, []),
            "event": event,
        }


_HELD_MAX = 4096
"""Inputs held back remembered in case the stage emits them (or a copy) later."""

_SMALL = (type(None), bool, int, float, Enum)


def _item_key(event: BaseEvent) -> tuple[Any, ...]:
    """The item an event belongs to: its class and its message / tool call / subagent ids."""
    fields = event.__dict__
    return (
        type(event),
        fields.get("message_id"),
        fields.get("tool_call_id"),
        fields.get("subagent_run_id"),
    )


def _marks(event: BaseEvent) -> list[int]:
    """The ids of the field values of ``event`` that mark it: a copy shares them.

    Small constants (None, booleans, numbers, enum members, one-character and empty
    strings) are shared by unrelated events and say nothing.
    """
    return [
        id(value)
        for value in event.__dict__.values()
        if not isinstance(value, _SMALL) and not (type(value) is str and len(value) < 2)
    ]


class _Held:
    """The inputs a stage has not emitted yet, and an index of their marks.

    A held event keeps its field values alive, so the id of a mark cannot be reused
    while the event is held: an output with a mark of that id shares that very object.
    """

    def __init__(self) -> None:
        self.rows: dict[int, tuple[int, BaseEvent, list[int]]] = {}  # id → (row, event, marks)
        self._marks: dict[int, dict[int, None]] = {}  # id(mark) → ids of held events having it

    def add(self, row: int, event: BaseEvent) -> None:
        marks = _marks(event)
        self.rows[id(event)] = (row, event, marks)
        index = self._marks
        for mark in marks:
            holders = index.get(mark)
            if holders is None:
                index[mark] = {id(event): None}
            else:
                holders[id(event)] = None
        if len(self.rows) > _HELD_MAX:
            self._pop(next(iter(self.rows)))

    def take(self, out: BaseEvent) -> tuple[int, BaseEvent] | None:
        """The held input that *is* ``out``, removed from the held set."""
        found = self.rows.get(id(out))
        if found is None or found[1] is not out:
            return None
        self._pop(id(out))
        return found[0], found[1]

    def copied(self, out: BaseEvent) -> tuple[int, BaseEvent] | None:
        """The earliest held input of ``out``'s class that ``out`` is a copy of.

        Only the same class: an event built from a held one's id (a synthesized END
        naming a held START's message) is a new event, not that input changed.
        """
        best: tuple[int, BaseEvent] | None = None
        for mark in _marks(out):
            for held_id in self._marks.get(mark, ()):
                row, event, _ = self.rows[held_id]
                if type(event) is type(out) and (best is None or row < best[0]):
                    best = (row, event)
        return best

    def pop(self, event: BaseEvent) -> None:
        if id(event) in self.rows:
            self._pop(id(event))

    def _pop(self, key: int) -> None:
        _, _, marks = self.rows.pop(key)
        index = self._marks
        for mark in marks:
            holders = index.get(mark)
            if holders is not None:
                holders.pop(key, None)
                if not holders:
                    del index[mark]

    def clear(self) -> list[tuple[int, BaseEvent]]:
        left = [(row, event) for row, event, _ in self.rows.values()]
        self.rows.clear()
        self._marks.clear()
        return left


def _normalised(raw: bytes) -> Any:
    """An input event as the stage saw it: decoded (unknown fields dropped), re-encoded."""
    try:
        event = decode(raw).event
    except Exception:
        event = None
    return orjson.loads(raw) if event is None else orjson.loads(encode_json(event))


def _summary(obj: Any) -> str:
    return summary_of(obj)


def _as_chain(chain: Any) -> TransformerChain:
    built = chain() if callable(chain) and not isinstance(chain, TransformerChain) else chain
    if not isinstance(built, TransformerChain):
        raise TypeError(f"expected a TransformerChain or a factory of one, got {built!r}")
    return built.fresh()


def record_stages(run: Any, chain: Any) -> list[StageRecord]:
    """Run each stage of ``chain`` over the run's events, each fed the previous one's output.

    A chain of synchronous stages is driven event by event through all its stages
    (depth first, as the chain itself runs them), so no stage's whole output is held
    as events; a chain with an async stage or an operator runs stage after stage.
    """
    stages = list(_as_chain(chain).stages)
    if not stages:
        return []
    singles = [TransformerChain([stage]) for stage in stages]
    records: list[StageRecord] = []
    inputs: Sequence[bytes] = _SparseRaw(run)
    for stage in stages:
        record = StageRecord(stage.name, inputs)
        records.append(record)
        inputs = record.outputs
    if all(single.is_sync for single in singles):
        _depth_first(run, singles, records)
    else:
        current: list[tuple[int, BaseEvent]] = list(run.events())
        for stage, record in zip(stages, records, strict=True):
            produced = _run_stage(stage, current, record)
            current = list(enumerate(produced))
    for stage, record in zip(stages, records, strict=True):
        explain(stage, record)
    return records


def _depth_first(run: Any, singles: list[TransformerChain], records: list[StageRecord]) -> None:
    last = len(singles)

    def push(k: int, position: int, event: BaseEvent) -> None:
        record = records[k]
        if record.error is not None:
            return
        record.received += 1
        try:
            outs = list(singles[k].transform(event))
        except Exception as error:
            record.error = str(error)
            return
        start = len(record.outputs)
        _match(record, position, event, outs)
        if k + 1 < last:
            for offset, out in enumerate(outs):
                push(k + 1, start + offset, out)

    for index, event in run.events():
        push(0, index, event)
    for k, single in enumerate(singles):
        record = records[k]
        if record.error is not None:
            continue
        try:
            extra = list(single.finish())
        except Exception as error:
            record.error = str(error)
            continue
        start = len(record.outputs)
        _added(record, extra)
        if k + 1 < last:
            for offset, out in enumerate(extra):
                push(k + 1, start + offset, out)


class _SparseRaw(Sequence[bytes]):
    """The file's events by wire index (stage 0's input)."""

    def __init__(self, run: Any) -> None:
        self._run = run

    def __len__(self) -> int:
        return len(self._run)

    def __getitem__(self, index: Any) -> Any:
        return self._run.raw_at(index)


def _run_stage(
    stage: Stage, inputs: list[tuple[int, BaseEvent]], record: StageRecord
) -> list[BaseEvent]:
    if isinstance(stage, StreamOperator):
        return anyio.run(_run_operator, stage, inputs, record)
    return anyio.run(_run_async, stage, inputs, record)


def _match(record: StageRecord, position: int, event: BaseEvent, outs: list[BaseEvent]) -> None:
    """The row(s) for one input and what the stage emitted for it, in emission order.

    Output ``i`` of this call becomes the stage's output ``start + i``: the next
    stage sees the events in the order this one emitted them. Each output is
    attributed by identity (the module's rule): the input itself, a held input
    released late, a copy of one of them, or else an added event.
    """
    record.arrivals.append(position)
    record.input_rows.append(-1)
    passed = any(out is event for out in outs)
    accounted = passed  # the current input came out, or something is its change
    for out in outs:
        if out is event and passed:
            record.input_rows[-1] = record.note(_PASSED, position, [record.inputs[position]])
            passed = False  # a second emission of the same object is an added event
            continue
        if _release(record, out, position):
            continue
        raw = wire_json(out)
        if not accounted:
            # Rule 2 for the current input (a copy of it), or rule 3: the first new
            # output of a call whose input did not come out is its change.
            record.input_rows[-1] = record.note(_CHANGED, position, [raw])
            _derived(record, event, position, position, len(record.kind) - 1)
            accounted = True
            continue
        record.note(_ADDED, position, [raw])
    if not accounted:
        row = record.input_rows[-1] = record.note(_DROPPED, position, ())
        record.held.add(row, event)


def _release(record: StageRecord, out: BaseEvent, at: int) -> bool:
    """``out`` is a held input (passed late) or a copy of one (changed): settle its row."""
    held = record.held.take(out)
    if held is not None:
        record.settle(held[0], _PASSED, record.inputs[record.source[held[0]]])
        return True
    copied = record.held.copied(out)
    if copied is None:
        return False
    row, source = copied
    record.held.pop(source)
    record.settle(row, _CHANGED, wire_json(out))
    _derived(record, source, record.source[row], at, row)
    return True


def _derived(record: StageRecord, source: BaseEvent, position: int, at: int, row: int) -> None:
    entry = (position, at, record.first_out[row], row)
    record.derived.setdefault(_item_key(source), []).append(entry)


def _added(record: StageRecord, outs: Iterable[BaseEvent]) -> None:
    for out in outs:
        if not _release(record, out, _AT_FINISH):
            record.note(_ADDED, -1, [wire_json(out)])
    _settle_merged(record)


def _settle_merged(record: StageRecord) -> None:
    """Inputs never emitted: merged into their item's changed output, else dropped.

    Deltas of one item come out in order, so a held input whose content went out
    inside a merged event went into the changed output of its item whose source
    arrived last before it — if that output was emitted after the input arrived.
    """
    by_source: dict[tuple[Any, ...], list[tuple[int, int, int, int]]] = {}
    for row, event in record.held.clear():
        position = record.source[row]
        key = _item_key(event)
        entries = by_source.get(key)
        if entries is None:
            entries = by_source[key] = sorted(record.derived.get(key, ()))
        # The latest source at or before this input; its output must have come out
        # after this input arrived (an item's outputs come out in order, so an
        # earlier source's output came out earlier still).
        at = bisect_right(entries, (position, _AT_FINISH + 1)) - 1
        if at < 0 or entries[at][1] < position:
            continue
        best = entries[at]
        out = best[2]
        record.merged_row[out] = best[3]
        record.kind[row] = _MERGED
        record.first_out[row] = out
        record.out_count[row] = 1
        record.merged.setdefault(out, []).append(position)
    for merged in record.merged.values():
        merged.sort()
    record.derived.clear()


async def _run_async(
    stage: Stage, inputs: list[tuple[int, BaseEvent]], record: StageRecord
) -> list[BaseEvent]:
    assert isinstance(stage, AsyncStreamTransformer)
    produced: list[BaseEvent] = []
    try:
        for position, event in inputs:
            record.received += 1
            outs = list(await stage.transform(event) or ())
            _match(record, position, event, outs)
            produced.extend(outs)
        extra = list(await stage.finish() or ())
    except Exception as error:
        record.error = str(error)
        return produced
    _added(record, extra)
    produced.extend(extra)
    return produced


async def _run_operator(
    stage: StreamOperator, inputs: list[tuple[int, BaseEvent]], record: StageRecord
) -> list[BaseEvent]:
    async def source() -> AsyncIterator[BaseEvent]:
        for position, event in inputs:
            record.received += 1
            record.arrivals.append(position)
            yield event

    outs: list[BaseEvent] = []
    try:
        async with TransformerChain([stage]).apply(source()) as events:
            async for out in events:
                outs.append(out)
    except Exception as error:
        record.error = str(error)
    by_id = {id(event): position for position, event in inputs}
    matched: set[int] = set()
    rows: dict[int, int] = {}
    for out in outs:
        position = by_id.get(id(out))
        if position is not None and position not in matched:
            matched.add(position)
            rows[position] = record.note(_PASSED, position, [record.inputs[position]])
        else:
            record.note(_ADDED, -1, [wire_json(out)])
    for position, _ in inputs:
        if position not in matched:
            rows[position] = record.note(_DROPPED, position, ())
    record.input_rows.extend(rows.get(position, -1) for position in record.arrivals)
    return outs
