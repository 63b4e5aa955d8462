"""What each stage of a chain did to the stream: passed, changed, dropped or added.

Every stage runs on its own, fed the previous stage's output event by event, so
each output can be matched to the input that produced it: the same object handed
back is *passed*; a different event from one input is *changed* (its first output;
the diff is computed when asked for); no output is *dropped*; further outputs, and
what ``finish()`` emits, are *added*.

Memory stays proportional to the events, not to events × stages: each stage keeps
its outputs as JSON bytes, and a passed event's bytes are the input's own object
(shared, not copied); rows are typed arrays of indexes. An operator stage (a
``StreamOperator``, which sees the whole stream at once) is matched by identity
after the fact: unmatched inputs are dropped, unmatched outputs added.
"""

from __future__ import annotations

from array import array
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import anyio
import jsonpatch
import orjson
from ag_ui.core import BaseEvent

from .. import AsyncStreamTransformer, Stage, StreamOperator, TransformerChain
from ..codecs import decode, encode_json
from ._model import summary_of, wire_json

__all__ = ["KINDS", "StageRecord", "record_stages"]

KINDS = ("passed", "changed", "dropped", "added")
_PASSED, _CHANGED, _DROPPED, _ADDED = range(4)


class StageRecord:
    """One stage's rows and its output (as JSON bytes)."""

    def __init__(self, name: str, inputs: Sequence[bytes]) -> None:
        self.name = name
        self.inputs = inputs  # the input events' JSON, by input index (stage 0: file index)
        self.received = 0
        self.outputs: list[bytes] = []
        self.kind = array("b")
        self.source = array("i")  # input index, -1 for an added event from finish()
        self.first_out = array("i")  # first output index, -1 for none
        self.out_count = array("i")
        self.error: str | None = None
        self._by_kind: dict[str, array[int]] = {}
        self.held: dict[int, tuple[int, BaseEvent]] = {}  # dropped so far: id → (row, event)

    def note(self, kind: int, source: int, outputs: Sequence[bytes]) -> None:
        self.kind.append(kind)
        self.source.append(source)
        self.first_out.append(len(self.outputs) if outputs else -1)
        self.out_count.append(len(outputs))
        self.outputs.extend(outputs)

    def release(self, row: int, raw: bytes) -> None:
        """An input dropped so far comes out late: its row becomes passed."""
        self.kind[row] = _PASSED
        self.first_out[row] = len(self.outputs)
        self.out_count[row] = 1
        self.outputs.append(raw)

    def summary(self) -> dict[str, Any]:
        counts = [0, 0, 0, 0]
        for kind in self.kind:
            counts[kind] += 1
        return {
            "name": self.name,
            "in": self.received,
            "out": len(self.outputs),
            "passed": counts[_PASSED],
            "changed": counts[_CHANGED],
            "dropped": counts[_DROPPED],
            "added": counts[_ADDED],
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
        page = positions[offset: offset + limit]
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
        if kind == _CHANGED:
            after = orjson.loads(self.outputs[outs[0]])
            diff = jsonpatch.make_patch(event, after).patch
        return {
            "kind": KINDS[kind],
            "in": None if source < 0 else source,
            "out": outs,
            "type": event.get("type", "?") if isinstance(event, dict) else "?",
            "summary": _summary(event),
            "diff": diff,
            "event": event,
        }


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
        return records
    current: list[tuple[int, BaseEvent]] = list(run.events())
    for stage, record in zip(stages, records, strict=True):
        produced = _run_stage(stage, current, record)
        current = list(enumerate(produced))
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


_HELD_MAX = 4096
"""Dropped events remembered in case the stage emits them later (as passed, late)."""


def _match(record: StageRecord, position: int, event: BaseEvent, outs: list[BaseEvent]) -> None:
    """The row(s) for one input and what the stage emitted for it, in emission order.

    Output ``i`` of this call becomes the stage's output ``start + i``: the next
    stage sees the events in the order this one emitted them. A stage may hold an
    event back and emit it later (``filter_tool_calls`` waits to see whether a
    message turns out empty): an output that is an earlier, so far dropped, input is
    that input *passed* (late), not an added event.
    """
    passed = any(out is event for out in outs)
    has_row = False
    for out in outs:
        if out is event and not has_row:
            record.note(_PASSED, position, [record.inputs[position]])
            has_row = True
            continue
        held = record.held.pop(id(out), None)
        if held is not None and held[1] is out:
            record.release(held[0], record.inputs[record.source[held[0]]])
            continue
        if not passed and not has_row:
            record.note(_CHANGED, position, [wire_json(out)])
            has_row = True
            continue
        record.note(_ADDED, position, [wire_json(out)])
    if not has_row:
        held_now = record.held
        held_now[id(event)] = (len(record.kind), event)
        if len(held_now) > _HELD_MAX:
            del held_now[next(iter(held_now))]
        record.note(_DROPPED, position, ())


def _added(record: StageRecord, outs: Iterable[BaseEvent]) -> None:
    for out in outs:
        held = record.held.pop(id(out), None)
        if held is not None and held[1] is out:
            record.release(held[0], record.inputs[record.source[held[0]]])
        else:
            record.note(_ADDED, -1, [wire_json(out)])
    record.held.clear()


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
        for _, event in inputs:
            record.received += 1
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
    for out in outs:
        position = by_id.get(id(out))
        if position is not None and position not in matched:
            matched.add(position)
            record.note(_PASSED, position, [record.inputs[position]])
        else:
            record.note(_ADDED, -1, [wire_json(out)])
    for position, _ in inputs:
        if position not in matched:
            record.note(_DROPPED, position, ())
    return outs
