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

    def __init__(self, name: str, inputs: Sequence[bytes], input_indexes: Sequence[int]) -> None:
        self.name = name
        self.inputs = inputs  # the input events' JSON, by input index
        self.input_indexes = input_indexes  # which input indexes exist (stage 0: file indexes)
        self.outputs: list[bytes] = []
        self.kind = array("b")
        self.source = array("i")  # input index, -1 for an added event from finish()
        self.first_out = array("i")  # first output index, -1 for none
        self.out_count = array("i")
        self.error: str | None = None
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
            "in": len(self.input_indexes),
            "out": len(self.outputs),
            "passed": counts[_PASSED],
            "changed": counts[_CHANGED],
            "dropped": counts[_DROPPED],
            "added": counts[_ADDED],
            "error": self.error,
        }

    def rows(self, kind: str | None, offset: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """The matching rows' count and one page of them, with diffs for changed rows."""
        wanted = None if kind is None else KINDS.index(kind)
        positions = [i for i, k in enumerate(self.kind) if wanted is None or k == wanted]
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
    """Run each stage of ``chain`` over the run's events, stage after stage."""
    stages = list(_as_chain(chain).stages)
    raw: Sequence[bytes] = _SparseRaw(run)
    records: list[StageRecord] = []
    current: list[tuple[int, BaseEvent]] = list(run.events())
    for stage in stages:
        record = StageRecord(stage.name, raw, [i for i, _ in current])
        produced = _run_stage(stage, current, record)
        records.append(record)
        raw = record.outputs
        current = list(enumerate(produced))
    return records


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
    if isinstance(stage, AsyncStreamTransformer):
        return anyio.run(_run_async, stage, inputs, record)
    single = TransformerChain([stage])
    produced: list[BaseEvent] = []
    try:
        for position, event in inputs:
            outs = list(single.transform(event))
            _match(record, position, event, outs, produced)
        extra = list(single.finish())
    except Exception as error:
        record.error = str(error)
        return produced
    _added(record, extra, produced)
    return produced


def _match(record: StageRecord, position: int, event: BaseEvent, outs: list[BaseEvent],
           produced: list[BaseEvent]) -> None:
    """Row(s) for one input and what the stage emitted for it.

    A stage may hold an event back and emit it later (``filter_tool_calls`` waits to
    see whether a message turns out empty): an output that is an earlier, so far
    dropped, input is that input *passed* (late), not an added event.
    """
    fresh: list[BaseEvent] = []
    passed = False
    for out in outs:
        if out is event and not passed:
            passed = True
            record.note(_PASSED, position, [record.inputs[position]])
            produced.append(event)
            continue
        held = record.held.pop(id(out), None)
        if held is not None and held[1] is out:
            record.release(held[0], record.inputs[record.source[held[0]]])
            produced.append(out)
            continue
        fresh.append(out)
    if not passed:
        if fresh:
            first = fresh.pop(0)
            record.note(_CHANGED, position, [wire_json(first)])
            produced.append(first)
        else:
            record.held[id(event)] = (len(record.kind), event)
            record.note(_DROPPED, position, ())
    for out in fresh:
        record.note(_ADDED, position, [wire_json(out)])
        produced.append(out)


def _added(record: StageRecord, outs: Iterable[BaseEvent], produced: list[BaseEvent]) -> None:
    for out in outs:
        held = record.held.pop(id(out), None)
        if held is not None and held[1] is out:
            record.release(held[0], record.inputs[record.source[held[0]]])
        else:
            record.note(_ADDED, -1, [wire_json(out)])
        produced.append(out)
    record.held.clear()


async def _run_async(
    stage: AsyncStreamTransformer, inputs: list[tuple[int, BaseEvent]], record: StageRecord
) -> list[BaseEvent]:
    produced: list[BaseEvent] = []
    try:
        for position, event in inputs:
            _match(record, position, event, list(await stage.transform(event) or ()), produced)
        extra = list(await stage.finish() or ())
    except Exception as error:
        record.error = str(error)
        return produced
    _added(record, extra, produced)
    return produced


async def _run_operator(
    stage: StreamOperator, inputs: list[tuple[int, BaseEvent]], record: StageRecord
) -> list[BaseEvent]:
    async def source() -> AsyncIterator[BaseEvent]:
        for _, event in inputs:
            yield event

    outs: list[BaseEvent] = []
    try:
        async for out in TransformerChain([stage]).apply(source()):
            outs.append(out)
    except Exception as error:
        record.error = str(error)
    by_id = {id(event): position for position, event in inputs}
    matched: set[int] = set()
    produced: list[BaseEvent] = []
    for out in outs:
        position = by_id.get(id(out))
        if position is not None and position not in matched:
            matched.add(position)
            record.note(_PASSED, position, [record.inputs[position]])
        else:
            record.note(_ADDED, -1, [wire_json(out)])
        produced.append(out)
    for position, _ in inputs:
        if position not in matched:
            record.note(_DROPPED, position, ())
    return produced
