"""Why a stage did what it did: the reasons the pipeline view shows next to its rows.

A stage may say what it did through one optional hook, read once the stage has
finished (docs/inspector.md, "Stage reasons")::

    def explain(self) -> Iterable[Reason]: ...

Each reason has ``index`` (the 0-based position, among the events this stage
received, of the input that led to it — the reason is shown at that input's own
row; the count of inputs for one made at the end of the stream), ``rule`` (a short
stable name), ``detail`` (one sentence) and optionally ``action``. ``Repair``'s
``RepairFix`` has exactly this shape, so ``return self.report.fixes`` is a complete
hook; a mapping with those keys works too.

Built-in stages that have no hook yet are explained from what they already expose:
``Repair`` by its ``report``, ``FilterToolCalls`` by ``blocks(name)`` (a dropped
event of a denied call), ``Redact`` by ``redact_text`` (a changed input holding a
match). A hook, when a stage has one, replaces these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from ._stages import StageRecord

__all__ = ["HOOK", "explain"]

HOOK = "explain"
"""The name of the optional stage method the inspector reads reasons from."""

_MAX_REASONS = 10_000
"""Reasons kept per stage (a badly broken stream may need many fixes)."""


def explain(stage: Any, record: StageRecord) -> None:
    """Attach ``stage``'s reasons to ``record``'s rows (nothing when it gives none)."""
    hook = getattr(stage, HOOK, None)
    try:
        if callable(hook):
            reasons = [_reason(r) for r in hook()]
        else:
            cls = type(stage)
            ours = cls.__module__.startswith("agui_pipes.")
            builtin = _BUILTIN.get(cls.__name__) if ours else None
            reasons = builtin(stage, record) if builtin is not None else []
    except Exception as error:  # a broken hook must not break the inspector
        reasons = [
            (
                record.received,
                {
                    "rule": "explain-failed",
                    "action": None,
                    "detail": f"the stage's {HOOK}() raised: {error}",
                },
            )
        ]
    if not reasons:
        return
    last = len(record.kind) - 1
    for index, reason in reasons[:_MAX_REASONS]:
        row = record.input_rows[index] if 0 <= index < len(record.input_rows) else last
        if row >= 0:
            record.reasons.setdefault(row, []).append(reason)


def _reason(found: Any) -> tuple[int, dict[str, Any]]:
    def field(name: str) -> Any:
        return found.get(name) if isinstance(found, dict) else getattr(found, name, None)

    index = field("index")
    return (
        index if isinstance(index, int) else -1,
        {"rule": str(field("rule")), "action": field("action"), "detail": str(field("detail"))},
    )


def _repair(stage: Any, record: StageRecord) -> list[tuple[int, dict[str, Any]]]:
    return [_reason(fix) for fix in getattr(stage.report, "fixes", ())]


def _filter_tool_calls(stage: Any, record: StageRecord) -> list[tuple[int, dict[str, Any]]]:
    from ._stages import KINDS

    dropped = KINDS.index("dropped")
    denied: dict[str, str] = {}
    found: list[tuple[int, dict[str, Any]]] = []
    for k, (position, row) in enumerate(zip(record.arrivals, record.input_rows, strict=True)):
        if row < 0 or record.kind[row] != dropped:
            continue
        event = orjson.loads(record.inputs[position])
        call = event.get("toolCallId") if isinstance(event, dict) else None
        if not isinstance(call, str):
            continue
        name = event.get("toolCallName")
        if isinstance(name, str) and stage.blocks(name):
            denied[call] = name
            detail = f"calls of tool {name!r} are denied: the call is removed"
        elif call in denied:
            detail = f"part of the denied call {call} ({denied[call]!r})"
        else:
            continue
        found.append((k, {"rule": "denied-tool", "action": "dropped", "detail": detail}))
    return found


def _redact(stage: Any, record: StageRecord) -> list[tuple[int, dict[str, Any]]]:
    from ._stages import KINDS

    changed = KINDS.index("changed")
    found: list[tuple[int, dict[str, Any]]] = []
    for k, (position, row) in enumerate(zip(record.arrivals, record.input_rows, strict=True)):
        if row < 0 or record.kind[row] != changed:
            continue
        texts = list(_strings(orjson.loads(record.inputs[position])))
        merged = record.merged.get(record.first_out[row])
        if merged:  # held deltas released as one event: a match may span them
            deltas = [orjson.loads(record.inputs[i]).get("delta") for i in [position, *merged]]
            texts.append("".join(d for d in deltas if isinstance(d, str)))
        matched = sum(1 for text in texts if stage.redact_text(text) != text)
        if matched:
            found.append(
                (
                    k,
                    {
                        "rule": "redacted",
                        "action": "rewritten",
                        "detail": f"{matched} text(s) matched a pattern and were replaced",
                    },
                )
            )
    return found


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


_BUILTIN: dict[str, Callable[[Any, StageRecord], list[tuple[int, dict[str, Any]]]]] = {
    "Repair": _repair,
    "FilterToolCalls": _filter_tool_calls,
    "Redact": _redact,
}
"""Built-in stages without a hook, by class name (of a class defined in this package:
the inspector imports no stage, and a stage of one's own may share a name)."""
