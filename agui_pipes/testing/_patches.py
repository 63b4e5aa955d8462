"""JSON Patch (RFC 6902) generation that is guaranteed to apply.

STATE_DELTA and ACTIVITY_DELTA carry patches that a consumer applies to the
document it holds; a well-formed patch that fails to apply is skipped with a
warning, which is legal but not what a generator of *good* streams should
produce. So every operation here is chosen against the current document and
applied before the next one is chosen (a patch is atomic, but its operations
see each other's effects).

Only shapes whose meaning is identical in every JSON Patch implementation are
produced: ``move``/``copy`` target a fresh object key (never an array index
that the removal half could shift), and ``-`` only appears as an array append.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import jsonpatch

from ._choices import Choices

__all__ = ["escape_pointer", "patch_for"]


def escape_pointer(key: str) -> str:
    """One JSON Pointer reference token (``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def _locations(doc: Any, pointer: str = "", depth: int = 0) -> Iterator[tuple[str, Any, bool]]:
    """Every location below ``doc``: (pointer, value, parent_is_object)."""
    if depth > 3:
        return
    if isinstance(doc, dict):
        for key, value in doc.items():
            child = f"{pointer}/{escape_pointer(key)}"
            yield child, value, True
            yield from _locations(value, child, depth + 1)
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            child = f"{pointer}/{index}"
            yield child, value, False
            yield from _locations(value, child, depth + 1)


def _containers(doc: Any) -> list[tuple[str, Any]]:
    """The root (when it is a container) and every nested object/array."""
    found: list[tuple[str, Any]] = []
    if isinstance(doc, (dict, list)):
        found.append(("", doc))
    found.extend((p, v) for p, v, _ in _locations(doc) if isinstance(v, (dict, list)))
    return found


def _inside(pointer: str, ancestor: str) -> bool:
    return pointer == ancestor or pointer.startswith(ancestor + "/")


def _add(c: Choices, doc: Any) -> dict[str, Any] | None:
    containers = _containers(doc)
    if not containers:
        return None
    where, container = c.pick(containers)
    value = c.json_value(1)
    if isinstance(container, dict):
        return {"op": "add", "path": f"{where}/{escape_pointer(c.key())}", "value": value}
    index = c.integer(0, len(container) + 1)
    token = "-" if index > len(container) else str(index)
    return {"op": "add", "path": f"{where}/{token}", "value": value}


def _one_op(c: Choices, doc: Any) -> dict[str, Any] | None:
    locations = list(_locations(doc))
    kind = c.integer(0, 5) if locations else 0
    if kind == 0:
        return _add(c, doc)
    path, value, parent_is_object = c.pick(locations)
    if kind == 1:
        return {"op": "replace", "path": path, "value": c.json_value(1)}
    if kind == 2:
        return {"op": "remove", "path": path}
    if kind == 3:
        return {"op": "test", "path": path, "value": copy.deepcopy(value)}
    # move / copy into a fresh key of some object outside the source.
    targets = [(p, v) for p, v in _containers(doc) if isinstance(v, dict) and not _inside(p, path)]
    if not targets or (kind == 4 and not parent_is_object):
        return _add(c, doc)
    where, target = c.pick(targets)
    key = c.key()
    if key in target:
        return _add(c, doc)
    return {
        "op": "move" if kind == 4 else "copy",
        "from": path,
        "path": f"{where}/{escape_pointer(key)}",
    }


def patch_for(c: Choices, doc: Any, max_ops: int = 3) -> tuple[list[dict[str, Any]], Any]:
    """A patch of 1..max_ops operations that applies to ``doc``, and the result.

    ``doc`` must be an object or an array. It is never mutated.
    """
    ops: list[dict[str, Any]] = []
    current = doc
    for _ in range(c.integer(1, max_ops)):
        op = _one_op(c, current)
        if op is None:
            break
        current = jsonpatch.apply_patch(current, [op], in_place=False)
        ops.append(op)
    return ops, current
