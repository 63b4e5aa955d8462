"""StateFilter on generated state streams: the client folds exactly the pruned state.

Streams are a snapshot, then deltas of every RFC 6902 operation — array inserts
and removals that re-index, ``move`` / ``copy`` across hidden and visible parts,
``-``, ``test``, and operations that do not apply at all — then a second run
whose RUN_STARTED echoes the state. Pointer sets mix allow and deny lists,
literal keys, array indices and ``*``. Every string in the state is a unique
marker, so a leak is a marker in the output bytes that was never visible.

The oracle ``_reference_prune`` is written from the definition (match every
pattern against every path), independently of the stage's trie.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    RunAgentInput,
    StateDeltaEvent,
    StateSnapshotEvent,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_pipes._foundation.json_patch import PatchError, apply_patch
from agui_pipes.testing import run_finished, run_started
from agui_pipes.transformers import StateFilter
from tests.transformers._stage_helpers import consumed, wire

_KEYS = ["a", "b", "s", "0", "a/b"]
_TOKENS = ["a", "b", "s", "*", "0", "1", "a/b"]
_HIDDEN = object()


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _pointer(tokens: list[str]) -> str:
    return "".join("/" + _escape(t) for t in tokens)


def _matches(pattern: list[str], path: list[str]) -> bool:
    if len(pattern) != len(path):
        return False
    return all(p in ("*", t) for p, t in zip(pattern, path, strict=True))


def _reference_prune(doc: Any, allow: list[list[str]] | None, deny: list[list[str]] | None) -> Any:
    """The pruned document, straight from the definition."""

    def walk(path: list[str], value: Any, allowed: bool) -> Any:
        if any(_matches(d, path) for d in deny or ()):
            return _HIDDEN
        allowed = allowed or any(_matches(a, path) for a in allow or ())
        if not allowed:
            ancestor = any(
                len(a) > len(path) and _matches(a[: len(path)], path) for a in allow or ()
            )
            if not ancestor or not isinstance(value, dict | list):
                return _HIDDEN
        if isinstance(value, dict):
            kept = {k: walk([*path, k], v, allowed) for k, v in value.items()}
            return {k: v for k, v in kept.items() if v is not _HIDDEN}
        if isinstance(value, list):
            items = [walk([*path, str(i)], v, allowed) for i, v in enumerate(value)]
            return [v for v in items if v is not _HIDDEN]
        return value

    pruned = walk([], doc, allow is None)
    return None if pruned is _HIDDEN else pruned


def _markers(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_markers(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_markers(v) for v in value)) if value else set()
    return set()


_scalars = st.one_of(st.integers(-3, 3), st.booleans(), st.none(), st.just("?"))
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)
_containers = st.dictionaries(st.sampled_from(_KEYS), _values, min_size=1, max_size=3)
_patterns = st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=3)


def _locations(doc: Any, path: list[str] | None = None) -> list[tuple[list[str], Any]]:
    path = path or []
    found = [(path, doc)]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _locations(v, [*path, k])
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _locations(v, [*path, str(i)])
    return found


class _Markers:
    """Gives every string a value unique in the whole stream."""

    def __init__(self) -> None:
        self.n = 0

    def relabel(self, value: Any) -> Any:
        if isinstance(value, str):
            self.n += 1
            return f"zq{self.n}zq"
        if isinstance(value, dict):
            return {k: self.relabel(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.relabel(v) for v in value]
        return value


def _operation(draw: st.DrawFn, doc: Any, markers: _Markers) -> dict[str, Any]:
    spots = _locations(doc)
    kind = draw(st.sampled_from(["add", "add", "remove", "replace", "move", "copy", "test"]))
    path, value = draw(st.sampled_from(spots))
    if draw(st.integers(0, 9)) == 0:
        path = [*path, draw(st.sampled_from(["zz", "9"]))]  # usually does not exist
    if kind in ("add", "move", "copy") and isinstance(value, dict | list) and draw(st.booleans()):
        # a new child: a fresh key, an index (shifting the rest) or `-`
        if isinstance(value, dict):
            path = [*path, draw(st.sampled_from(_KEYS))]
        else:
            path = [*path, draw(st.sampled_from([str(i) for i in range(len(value) + 1)] + ["-"]))]
    op: dict[str, Any] = {"op": kind, "path": _pointer(path)}
    if kind in ("add", "replace"):
        # objects often: a container where a scalar was is what makes a value show
        op["value"] = markers.relabel(draw(_values | _containers))
    elif kind == "test":
        op["value"] = (
            copy.deepcopy(value) if draw(st.integers(0, 5)) else markers.relabel(draw(_values))
        )
    elif kind in ("move", "copy"):
        source, _ = draw(st.sampled_from(spots))
        op["from"] = _pointer(source)
    return op


def _snapshot_event(doc: Any, activity: bool) -> BaseEvent:
    if activity:
        return ActivitySnapshotEvent(message_id="act", activity_type="plan", content=doc)
    return StateSnapshotEvent(snapshot=doc)


def _delta_event(ops: list[dict[str, Any]], activity: bool) -> BaseEvent:
    if activity:
        return ActivityDeltaEvent.model_validate(
            {"messageId": "act", "activityType": "plan", "patch": ops}
        )
    return StateDeltaEvent.model_validate({"delta": ops})


def _operations(event: BaseEvent) -> list[Any]:
    return list(event.patch if isinstance(event, ActivityDeltaEvent) else event.delta)  # type: ignore[attr-defined]


_objects = st.dictionaries(st.sampled_from(_KEYS), _values, max_size=4)


@st.composite
def _cases(
    draw: st.DrawFn, activity: bool = False
) -> tuple[list[BaseEvent], StateFilter, Any, set[str]]:
    allow = draw(st.none() | st.lists(_patterns, min_size=1, max_size=2))
    deny = draw(
        st.lists(_patterns, min_size=1, max_size=2)
        if allow is None
        else st.none() | st.lists(_patterns, min_size=1, max_size=2)
    )
    markers = _Markers()

    def prune(doc: Any) -> Any:
        return _reference_prune(doc, allow, deny)

    doc = markers.relabel(draw(_objects))
    visible = _markers(prune(doc))
    events: list[BaseEvent] = [
        *run_started("t", "r1"),
        _snapshot_event(copy.deepcopy(doc), activity),
    ]

    def deltas(count: int) -> None:
        nonlocal doc, visible
        for _ in range(count):
            if draw(st.integers(0, 9)) == 0:
                doc = markers.relabel(draw(_objects if activity else _values))
                visible |= _markers(prune(doc))
                events.append(_snapshot_event(copy.deepcopy(doc), activity))
                continue
            ops = [_operation(draw, doc, markers) for _ in range(draw(st.integers(1, 3)))]
            events.append(_delta_event(ops, activity))
            working = copy.deepcopy(doc)
            try:
                for op in _operations(events[-1]):
                    working = apply_patch(working, [op])
                    visible |= _markers(prune(working))
            except PatchError:
                continue
            doc = working

    deltas(draw(st.integers(1, 8)))
    events += run_finished("t", "r1")
    if draw(st.booleans()) and not activity:
        echo = RunAgentInput(
            thread_id="t",
            run_id="r2",
            messages=[],
            state=copy.deepcopy(doc),
            tools=[],
            context=[],
            forwarded_props={},
        )
        events += run_started("t", "r2", input=echo)
        deltas(draw(st.integers(0, 4)))
        events += run_finished("t", "r2")
    stage = StateFilter(
        allow=None if allow is None else [_pointer(p) for p in allow],
        deny=None if deny is None else [_pointer(p) for p in deny],
        activities=activity,
    )
    return events, stage, (allow, deny), visible


_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _fold_state(state: Any, event: BaseEvent) -> Any:
    """The client's rule: snapshots replace, deltas apply atomically or are skipped."""
    if isinstance(event, StateSnapshotEvent):
        return copy.deepcopy(event.snapshot)
    if isinstance(event, ActivitySnapshotEvent):
        return copy.deepcopy(event.content)
    if isinstance(event, StateDeltaEvent | ActivityDeltaEvent):
        try:
            return apply_patch(copy.deepcopy(state), _operations(event))
        except PatchError:
            return state
    return state


def _activity(messages: list[dict[str, Any]]) -> Any:
    (message,) = [m for m in messages if m["role"] == "activity"]
    return message["content"]


@pytest.mark.parametrize("activity", [False, True], ids=["state", "activity"])
@_SETTINGS
@given(data=st.data())
def test_the_client_folds_exactly_the_pruned_state_after_every_event(
    activity: bool, data: st.DataObject
) -> None:
    events, stage, (allow, deny), _ = data.draw(_cases(activity))
    theirs: Any = {}
    ours: Any = {}
    out: list[BaseEvent] = []
    for event in events:
        theirs = _fold_state(theirs, event)
        for emitted in stage.transform(event):
            out.append(emitted)
            if isinstance(emitted, StateDeltaEvent | ActivityDeltaEvent):
                # every delta sent applies to the document the client holds
                ours = apply_patch(copy.deepcopy(ours), _operations(emitted))
            else:
                ours = _fold_state(ours, emitted)
        assert ours == _reference_prune(theirs, allow, deny), event
    before, after = consumed(events), consumed(out)
    if activity:
        assert _activity(after.messages) == _reference_prune(
            _activity(before.messages), allow, deny
        )
    else:
        assert after.state == _reference_prune(before.state, allow, deny)


@pytest.mark.parametrize("activity", [False, True], ids=["state", "activity"])
@_SETTINGS
@given(data=st.data())
def test_no_hidden_string_ever_reaches_the_wire(activity: bool, data: st.DataObject) -> None:
    events, stage, _, visible = data.draw(_cases(activity))
    out = [emitted for event in events for emitted in stage.transform(event)]
    sent = set()
    text = wire(out)
    start = text.find("zq")
    while start != -1:
        end = text.find("zq", start + 2)
        sent.add(text[start : end + 2])
        start = text.find("zq", end + 2)
    assert sent <= visible
