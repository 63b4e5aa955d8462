"""RFC 6902 JSON Patch, applied atomically *in place* and within :class:`Limits`.

Why not copy-then-patch (what the ``jsonpatch`` package's ``apply_patch``
does by default): a consumer applies thousands of small deltas to one
growing document, and copying the document per delta makes folding a long
stream quadratic. Why not ``jsonpatch`` in place: a patch that fails halfway
leaves the document half-changed, and AG-UI requires a delta to apply
atomically (all operations or none). So each operation here records how to
undo itself, and a failure rolls the document back before raising.

Why limits: ``copy`` duplicates a subtree, so a 1 KB delta of twenty
``{"op": "copy", "from": "/a", "path": "/a/-"}`` doubles a document twenty
times — millions of values from nothing. A :class:`JsonDocument` therefore
keeps a running size (values, estimated bytes of its compact JSON, an upper
bound on its depth) and checks every operation *before* it allocates: the
value an ``add``/``replace`` inserts and the subtree a ``copy`` duplicates are
measured by a walk that stops as soon as the room left is crossed, so a copy
of a huge subtree is refused without walking all of it. What an operation
removes is measured to keep the count exact (that walk is paid for by the
insertion that put those values there). One patch may also copy at most
``max_nodes`` values in total, so the work of a single delta is bounded even
when it removes what it copies. A refused operation raises
:class:`LimitExceeded` (a :class:`PatchError`): the document is rolled back,
exactly like any other delta that does not apply.

Nesting: every walk here (measure, clone, compare) recurses only for the
first few dozen levels and continues iteratively below, so values up to
``Limits.max_depth`` (1024, what orjson parses) never hit Python's recursion
limit, and deeper values are refused with :class:`LimitExceeded`.

Semantics follow RFC 6902 as the reference client's applier (fast-json-patch,
validating) implements it: ``-`` appends, an array index is decimal digits
and may equal the length only for ``add``, the parent of every target must
exist, ``test`` compares JSON values strictly (``true`` is not ``1``), and an
operation on the root (``""``) replaces, removes (to ``null``) or tests the
whole document. Inserted values are copied so a later patch can never mutate
the event that carried them.
"""

from __future__ import annotations

import sys
from typing import Any, Final

from .errors import AguiPipesError
from .limits import Limits
from .limits_scope import resolve_limits

__all__ = [
    "JsonDocument",
    "LimitExceeded",
    "PatchError",
    "apply_patch",
    "clone_json",
    "json_equal",
    "measure_json",
]


class PatchError(AguiPipesError):
    """A well-formed patch that does not apply to the document (nothing was changed)."""


class LimitExceeded(PatchError):
    """A value or document would cross one of the :class:`Limits` (nothing was changed).

    ``limit`` is the field crossed (``"max_nodes"``, ``"max_bytes"`` or
    ``"max_depth"``) and ``ceiling`` its value; the message says what was
    refused, the limit by name, and how to raise it.
    """

    limit: str
    ceiling: int

    def __init__(self, message: str, *, limit: str, ceiling: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.ceiling = ceiling


_UNITS: Final = {"max_nodes": "values", "max_bytes": "bytes", "max_depth": "levels of nesting"}


def _shown(pointer: str) -> str:
    """A pointer as quoted in a message: long ones (they come from input) are shortened."""
    if len(pointer) <= 80:
        return f"'{pointer}'"
    return f"'{pointer[:50]}...{pointer[-20:]}' ({len(pointer):,} characters)"


def _exceeded(what: str, limit: str, ceiling: int, detail: str = "") -> LimitExceeded:
    unit = _UNITS[limit]
    tail = f" ({detail})" if detail else ""
    return LimitExceeded(
        f"{what} would exceed Limits.{limit} = {ceiling:,} {unit}{tail}; raise it with "
        f"Limits({limit}=...) if documents this large are expected",
        limit=limit,
        ceiling=ceiling,
    )


class _Over(Exception):
    """Internal: a bounded walk crossed its budget (``limit`` names which)."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


_ATOM_TYPES: Final = frozenset({str, int, float, bool, type(None)})
_ATOMS: Final = (str, int, float, bool, type(None))
_SHALLOW: Final = 48
"""Levels walked by recursion before the iterative walk takes over (each level is two
interpreter frames under 3.11, so this stays far below the default recursion limit
whatever the caller's own stack depth)."""


def _atom_bytes(value: Any) -> int:
    """Estimated length of a scalar's JSON text (exact for strings without escapes)."""
    cls = value.__class__
    if cls is str:
        return len(value) + 2
    if cls is int:
        bits: int = value.bit_length()
        return bits // 3 + 2  # >= the digit count, plus a sign
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if cls is float:
        return 24
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, int):
        return int(value).bit_length() // 3 + 2
    return 24


def _key_bytes(key: Any) -> int:
    """``"key":`` plus the comma that separates entries."""
    return (len(key) if key.__class__ is str else 24) + 4


def _measure(value: Any, max_nodes: int, max_bytes: int, max_depth: int) -> tuple[int, int, int]:
    """``(values, bytes, depth)`` of ``value``; raises :class:`_Over` once a budget is crossed.

    Depth counts containers: a scalar is depth 0, ``[1]`` depth 1. The walk is
    iterative (any nesting) and checks the budgets after each container, so
    it stops within one container's children of the point where a budget is
    crossed.
    """
    if not isinstance(value, dict | list | tuple):
        size = _atom_bytes(value)
        if max_nodes < 1:
            raise _Over("max_nodes")
        if size > max_bytes:
            raise _Over("max_bytes")
        return 1, size, 0
    if max_depth < 1:
        raise _Over("max_depth")
    nodes = 1
    size = 0
    depth = 1
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop = stack.pop
    push = stack.append
    while stack:
        node, level = pop()
        if level > depth:
            if level > max_depth:
                raise _Over("max_depth")
            depth = level
        child_level = level + 1
        nodes += len(node)
        size += 2
        if isinstance(node, dict):
            for key, item in node.items():
                cls = item.__class__
                if cls is str:
                    size += len(item) + 2 + _key_bytes(key)
                elif cls is dict or cls is list or isinstance(item, dict | list | tuple):
                    size += _key_bytes(key)
                    push((item, child_level))
                else:
                    size += _atom_bytes(item) + _key_bytes(key)
        else:
            for item in node:
                cls = item.__class__
                if cls is str:
                    size += len(item) + 3
                elif cls is dict or cls is list or isinstance(item, dict | list | tuple):
                    size += 1
                    push((item, child_level))
                else:
                    size += _atom_bytes(item) + 1
        if nodes > max_nodes:
            raise _Over("max_nodes")
        if size > max_bytes:
            raise _Over("max_bytes")
    return nodes, size, depth


def measure_json(value: Any, limits: Limits | None = None) -> tuple[int, int, int]:
    """``(values, estimated bytes, depth)`` of a JSON value, refused past ``limits``.

    Raises :class:`LimitExceeded` as soon as the walk crosses a limit (it does
    not walk the rest). ``limits=None`` means the limits in effect
    (:func:`~agui_pipes._foundation.limits_scope.current_limits`).
    """
    bounds = resolve_limits(limits)
    try:
        return _measure(value, bounds.max_nodes, bounds.max_bytes, bounds.max_depth)
    except _Over as over:
        raise _exceeded("the value", over.limit, getattr(bounds, over.limit)) from None


def size_json(value: Any, max_nodes: int) -> tuple[int, int, int] | None:
    """``(values, estimated bytes, depth)`` by the estimate documents keep, or None past
    ``max_nodes`` values (the walk stops there). For callers that add sizes up
    themselves before judging them against :class:`Limits`."""
    try:
        return _measure(value, max_nodes, sys.maxsize, sys.maxsize)
    except _Over:
        return None


# -- clone and compare, at any depth up to the limit ----------------------------


def clone_json(value: Any, limits: Limits | None = None) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars), much cheaper than ``deepcopy``.

    Tuples become lists and dict subclasses dicts. Values nested deeper than
    ``limits.max_depth`` (None: the limits in effect) raise
    :class:`LimitExceeded`; anything shallower is copied without touching the
    recursion limit.
    """
    return _clone(value, 0, resolve_limits(limits).max_depth)


def _clone(value: Any, level: int, max_depth: int) -> Any:
    cls = value.__class__
    if cls is dict:
        if level >= _SHALLOW or level >= max_depth:
            return _clone_deep(value, level, max_depth)
        level += 1
        return {
            k: v if v.__class__ in _ATOM_TYPES else _clone(v, level, max_depth)
            for k, v in value.items()
        }
    if cls is list:
        if level >= _SHALLOW or level >= max_depth:
            return _clone_deep(value, level, max_depth)
        level += 1
        return [v if v.__class__ in _ATOM_TYPES else _clone(v, level, max_depth) for v in value]
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, dict | list | tuple):
        return _clone_deep(value, level, max_depth)
    return value


def _too_deep(max_depth: int) -> LimitExceeded:
    return _exceeded("the value", "max_depth", max_depth, "it is nested deeper")


def _clone_deep(value: Any, level: int, max_depth: int) -> Any:
    """The iterative copier behind :func:`clone_json` (``level``: containers above ``value``)."""
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any, int]] = [(value, root, level + 1)]
    while stack:
        source, target, depth = stack.pop()
        if depth > max_depth:
            raise _too_deep(max_depth)
        child: Any
        if isinstance(source, dict):
            for key, item in source.items():
                if isinstance(item, dict):
                    target[key] = child = {}
                    stack.append((item, child, depth + 1))
                elif isinstance(item, list | tuple):
                    target[key] = child = []
                    stack.append((item, child, depth + 1))
                else:
                    target[key] = item
        else:
            append = target.append
            for item in source:
                if isinstance(item, dict):
                    append(child := {})
                    stack.append((item, child, depth + 1))
                elif isinstance(item, list | tuple):
                    append(child := [])
                    stack.append((item, child, depth + 1))
                else:
                    append(item)
    return root


def json_equal(a: Any, b: Any, limits: Limits | None = None) -> bool:
    """Equality of JSON values as JSON defines it (``true`` != ``1``, ``1`` == ``1.0``).

    Values nested deeper than ``limits.max_depth`` raise :class:`LimitExceeded`.
    """
    return _equal(a, b, 0, resolve_limits(limits).max_depth)


def _atoms_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a.__class__ is b.__class__ and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if a is None or b is None:
        return a is b
    return bool(a.__class__ is b.__class__ and a == b)


def _equal(a: Any, b: Any, level: int, max_depth: int) -> bool:
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        if level >= _SHALLOW or level >= max_depth:
            return _equal_deep(a, b, level, max_depth)
        level += 1
        return all(k in b and _equal(v, b[k], level, max_depth) for k, v in a.items())
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        if level >= _SHALLOW or level >= max_depth:
            return _equal_deep(a, b, level, max_depth)
        level += 1
        return all(_equal(x, y, level, max_depth) for x, y in zip(a, b, strict=True))
    return _atoms_equal(a, b)


def _equal_deep(a: Any, b: Any, level: int, max_depth: int) -> bool:
    stack: list[tuple[Any, Any, int]] = [(a, b, level)]
    while stack:
        x, y, depth = stack.pop()
        if isinstance(x, dict):
            if not isinstance(y, dict) or len(x) != len(y):
                return False
            if depth + 1 > max_depth:
                raise _too_deep(max_depth)
            for key, item in x.items():
                if key not in y:
                    return False
                stack.append((item, y[key], depth + 1))
        elif isinstance(x, list):
            if not isinstance(y, list) or len(x) != len(y):
                return False
            if depth + 1 > max_depth:
                raise _too_deep(max_depth)
            stack.extend((p, q, depth + 1) for p, q in zip(x, y, strict=True))
        elif not _atoms_equal(x, y):
            return False
    return True


# -- pointers ------------------------------------------------------------------


_POINTERS: dict[str, tuple[str, ...]] = {}


def _tokens(pointer: str) -> tuple[str, ...]:
    tokens = _POINTERS.get(pointer)
    if tokens is None:
        if len(_POINTERS) > 4096:
            _POINTERS.clear()  # bounded: memory must not grow with stream length
        tokens = tuple(
            t.replace("~1", "/").replace("~0", "~") if "~" in t else t
            for t in pointer.split("/")[1:]
        )
        _POINTERS[pointer] = tokens
    return tokens


def _index(token: str, pointer: str) -> int:
    if not token.isdigit() or not token.isascii():
        raise PatchError(f"'{token}' in '{pointer}' is not an array index")
    return int(token)


def _parent(doc: Any, tokens: tuple[str, ...], pointer: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"path '{pointer}' does not exist")
            node = node[token]
        elif isinstance(node, list):
            index = _index(token, pointer)
            if index >= len(node):
                raise PatchError(f"path '{pointer}' does not exist")
            node = node[index]
        else:
            raise PatchError(f"path '{pointer}' does not exist")
        if not isinstance(node, dict | list):
            raise PatchError(f"path '{pointer}' runs through a scalar")
    if not isinstance(node, dict | list):
        raise PatchError(f"cannot address '{pointer}' inside a scalar document")
    return node


def _get(doc: Any, pointer: str) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path '{pointer}' does not exist")
        return parent[last]
    index = _index(last, pointer) if last != "-" else len(parent)
    if index >= len(parent):
        raise PatchError(f"path '{pointer}' does not exist")
    return parent[index]


class _Undo:
    """The inverse of every change made so far, replayed backwards on failure."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[tuple[int, Any, Any, Any]] = []

    def rollback(self) -> None:
        rollback(self.steps)


def rollback(steps: list[tuple[int, Any, Any, Any]]) -> None:
    """Replay recorded inverse steps backwards: 0 set, 1 delete key, 2 insert, 3 pop."""
    for kind, container, key, value in reversed(steps):
        if kind == 0:
            container[key] = value
        elif kind == 1:
            del container[key]
        elif kind == 2:
            container.insert(key, value)
        else:
            container.pop(key)


_ABSENT: Final = object()


def _measured(old: Any) -> tuple[int, int]:
    """(values, bytes) of a value about to be replaced: scalars inline, containers walked."""
    if old.__class__ in _ATOM_TYPES:
        return 1, (len(old) + 2 if old.__class__ is str else _atom_bytes(old))
    return _sized(old)


def _what(op: Any) -> str:
    """The operation as named in a message (built only when something is refused)."""
    if isinstance(op, _Described):
        return op.text
    name = op.op
    if name == "copy":
        return f"'copy' from {_shown(op.from_)} to {_shown(op.path)}"
    return f"'{name}' at {_shown(op.path)}"


class _Described:
    """An operation known only by its description (a move whose target is the root)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class JsonDocument:
    """A JSON document with its running size, patched atomically in place within limits.

    ``value`` is the document. The constructor measures ``value`` once (a
    bounded walk) and, unless ``copy=False``, takes a private copy; it raises
    :class:`LimitExceeded` when the value is already past ``limits`` (None:
    the limits in effect). :meth:`patch` applies RFC 6902 operations; on any
    failure — including an operation that would cross a limit — the document
    is exactly as before and :class:`PatchError` is raised. :meth:`reset`
    replaces the whole document (a snapshot) under the same checks.

    ``nodes`` counts every value (objects, arrays, scalars); ``size`` is the
    estimated length of the compact JSON text (string lengths in characters,
    numbers by magnitude); ``depth`` is an upper bound on the nesting.
    """

    __slots__ = ("_walk", "depth", "limits", "nodes", "size", "value")

    def __init__(self, value: Any, *, limits: Limits | None = None, copy: bool = True) -> None:
        self.limits = resolve_limits(limits)
        self.value: Any = None
        self.nodes = 1
        self.size = 4
        self.depth = 0
        self._walk = 0
        self.reset(value, copy=copy, what="the document")

    def reset(self, value: Any, *, copy: bool = True, what: str = "the snapshot") -> None:
        """Make ``value`` the document (copied unless ``copy=False``); refused past the limits."""
        bounds = self.limits
        try:
            nodes, size, depth = _measure(
                value, bounds.max_nodes, bounds.max_bytes, bounds.max_depth
            )
        except _Over as over:
            raise _exceeded(what, over.limit, getattr(bounds, over.limit)) from None
        self.value = _clone(value, 0, bounds.max_depth) if copy else value
        self.nodes, self.size, self.depth = nodes, size, depth

    def patch(self, operations: Any) -> None:
        """Apply ``operations`` (objects with ``op``/``path``/``value``/``from_``) atomically.

        On failure every change is undone and :class:`PatchError` (or its
        subclass :class:`LimitExceeded`) is raised.
        """
        undo = _Undo()
        saved = (self.value, self.nodes, self.size, self.depth)
        self._walk = self.limits.max_nodes
        try:
            for op in operations:
                self._operation(op, undo)
        except PatchError:
            self._restore(undo, saved)
            raise
        except (TypeError, AttributeError, RecursionError, ValueError, LookupError) as exc:
            self._restore(undo, saved)
            raise PatchError(f"malformed operation: {exc}") from None

    def _restore(self, undo: _Undo, saved: tuple[Any, int, int, int]) -> None:
        undo.rollback()
        self.value, self.nodes, self.size, self.depth = saved

    # -- operations ---------------------------------------------------------

    def _operation(self, op: Any, undo: _Undo) -> None:
        name = op.op
        if name == "replace" or name == "add":
            value = op.value
            pointer = op.path
            if value.__class__ in _ATOM_TYPES and self._set_scalar(op, pointer, value, undo):
                return
            self._set(op, pointer, value, name == "replace", undo)
        elif name == "remove":
            self._remove(op.path, undo)
        elif name == "test":
            if not json_equal(_get(self.value, op.path), op.value, self.limits):
                raise PatchError(f"test at '{op.path}' failed")
        elif name == "copy":
            self._set(op, op.path, _get(self.value, op.from_), False, undo, copied=True)
        elif name == "move":
            self._move(op.from_, op.path, undo)
        else:
            raise PatchError(f"unknown operation '{name}'")

    def _room(self, what: str, limit: str, detail: str = "") -> LimitExceeded:
        return _exceeded(what, limit, getattr(self.limits, limit), detail)

    def _set_scalar(self, op: Any, pointer: str, value: Any, undo: _Undo) -> bool:
        """The hot case — a scalar added or replacing a scalar — done inline.

        Returns False, having changed nothing, for anything else (a container
        replaced, a missing path, a limit crossed), which ``_set`` handles and
        reports.
        """
        tokens = _tokens(pointer)
        if not tokens:
            return False
        parent = _parent(self.value, tokens, pointer)
        last = tokens[-1]
        size = len(value) + 2 if value.__class__ is str else _atom_bytes(value)
        if parent.__class__ is dict:
            key: Any = last
            old = parent.get(last, _ABSENT)
            if old is _ABSENT:
                if op.op == "replace":
                    return False
                size += len(last) + 4
        elif parent.__class__ is list:
            key = len(parent) if last == "-" else _index(last, pointer)
            if op.op == "add":
                if key > len(parent):
                    return False
                old = _ABSENT
                size += 1
            elif key >= len(parent):
                return False
            else:
                old = parent[key]
        else:
            return False
        if old is _ABSENT:
            grow = 1
        elif old.__class__ in _ATOM_TYPES:
            grow = 0
            size -= len(old) + 2 if old.__class__ is str else _atom_bytes(old)
        else:
            return False
        bounds = self.limits
        if self.nodes + grow > bounds.max_nodes or self.size + size > bounds.max_bytes:
            return False
        if grow == 0:
            undo.steps.append((0, parent, key, old))
            parent[key] = value
        elif key.__class__ is str:
            undo.steps.append((1, parent, key, None))
            parent[key] = value
        else:
            parent.insert(key, value)
            undo.steps.append((3, parent, key, None))
        self.nodes += grow
        self.size += size
        return True

    def _set(
        self,
        op: Any,
        pointer: str,
        incoming: Any,
        must_exist: bool,
        undo: _Undo,
        *,
        copied: bool = False,
    ) -> None:
        """add / replace / copy: measure ``incoming`` against the room left, then place a copy.

        A scalar (the common case: a counter, a status, a string) costs a size
        lookup and two comparisons; only containers are walked and copied.
        """
        tokens = _tokens(pointer)
        if not tokens:
            self._set_root(op, incoming, undo, copied)
            return
        parent = _parent(self.value, tokens, pointer)
        last = tokens[-1]
        if isinstance(parent, dict):
            key: Any = last
            old = parent.get(last, _ABSENT)
            if old is _ABSENT:
                if must_exist:
                    raise PatchError(f"path '{pointer}' does not exist")
                old_nodes = old_size = 0
                entry = len(last) + 4
            else:
                entry = 0
                old_nodes, old_size = _measured(old)
        else:
            key = len(parent) if last == "-" else _index(last, pointer)
            if must_exist:
                if key >= len(parent):
                    raise PatchError(f"path '{pointer}' does not exist")
                old = parent[key]
                entry = 0
                old_nodes, old_size = _measured(old)
            else:
                if key > len(parent):
                    raise PatchError(f"index {key} in '{pointer}' is past the end of the array")
                old = _ABSENT
                old_nodes = old_size = 0
                entry = 1
        bounds = self.limits
        if incoming.__class__ in _ATOM_TYPES:
            nodes = 1
            depth = 0
            size = len(incoming) + 2 if incoming.__class__ is str else _atom_bytes(incoming)
            value = incoming
            if self.nodes + 1 - old_nodes > bounds.max_nodes:
                raise self._room(_what(op), "max_nodes", f"the document holds {self.nodes:,}")
            if self.size + size + entry - old_size > bounds.max_bytes:
                raise self._room(_what(op), "max_bytes", f"the document holds ~{self.size:,}")
        else:
            nodes, size, depth = self._admit(
                op,
                incoming,
                bounds.max_nodes - self.nodes + old_nodes,
                bounds.max_bytes - self.size + old_size - entry,
                len(tokens),
                copied,
            )
            value = _clone(incoming, 0, bounds.max_depth)
        if old is _ABSENT:
            if entry == 1:
                parent.insert(key, value)
                undo.steps.append((3, parent, key, None))
            else:
                undo.steps.append((1, parent, key, None))
                parent[key] = value
        else:
            undo.steps.append((0, parent, key, old))
            parent[key] = value
        self.nodes += nodes - old_nodes
        self.size += size + entry - old_size
        if depth:
            reach = len(tokens) + depth
            if reach > self.depth:
                self.depth = reach

    def _admit(
        self,
        op: Any,
        incoming: Any,
        room_nodes: int,
        room_bytes: int,
        level: int,
        copied: bool,
    ) -> tuple[int, int, int]:
        """Measure a container about to be copied in, within the room left (else refuse)."""
        bounds = self.limits
        budget = min(room_nodes, self._walk) if copied else room_nodes
        try:
            nodes, size, depth = _measure(incoming, budget, room_bytes, bounds.max_depth - level)
        except _Over as over:
            if over.limit == "max_depth":
                detail = f"the target is {level} levels down"
            elif over.limit == "max_nodes" and budget < room_nodes:
                detail = "counting every value one patch copies"
            elif over.limit == "max_nodes":
                detail = f"the document holds {self.nodes:,}"
            else:
                detail = f"the document holds ~{self.size:,}"
            raise self._room(_what(op), over.limit, detail) from None
        if copied:
            self._walk -= nodes
        return nodes, size, depth

    def _set_root(self, op: Any, incoming: Any, undo: _Undo, copied: bool) -> None:
        """An operation on ``""``: the document becomes (a copy of) ``incoming``."""
        bounds = self.limits
        nodes, size, depth = self._admit(
            op, incoming, bounds.max_nodes, bounds.max_bytes, 0, copied
        )
        self.value = _clone(incoming, 0, bounds.max_depth)
        self.nodes, self.size, self.depth = nodes, size, depth

    def _detach(self, tokens: tuple[str, ...], pointer: str, undo: _Undo) -> tuple[Any, int]:
        """Take the value at ``pointer`` out (counts untouched); it and its entry's bytes."""
        parent = _parent(self.value, tokens, pointer)
        last = tokens[-1]
        if isinstance(parent, dict):
            if last not in parent:
                raise PatchError(f"path '{pointer}' does not exist")
            removed = parent.pop(last)
            undo.steps.append((0, parent, last, removed))
            return removed, _key_bytes(last)
        index = len(parent) if last == "-" else _index(last, pointer)
        if index >= len(parent):
            raise PatchError(f"path '{pointer}' does not exist")
        removed = parent.pop(index)
        undo.steps.append((2, parent, index, removed))
        return removed, 1

    def _remove(self, pointer: str, undo: _Undo) -> None:
        """remove: the count drops by what left (measured; its insertion paid for the walk)."""
        tokens = _tokens(pointer)
        if not tokens:
            self.value = None
            self.nodes, self.size, self.depth = 1, 4, 0
            return
        removed, entry = self._detach(tokens, pointer, undo)
        nodes, size = _sized(removed)
        self.nodes -= nodes
        self.size -= size + entry

    def _move(self, source: str, pointer: str, undo: _Undo) -> None:
        """move: no copy, so the count changes only by the target it replaces and the keys."""
        moved = _get(self.value, source)
        target = _tokens(pointer)
        what = f"'move' from {_shown(source)} to {_shown(pointer)}"
        if not target:
            self._set_root(_Described(what), moved, undo, True)
            return
        src = _tokens(source)
        if not src:
            raise PatchError(f"cannot move the whole document inside itself, to {_shown(pointer)}")
        bounds = self.limits
        if len(target) > len(src):
            if self.depth + len(target) - len(src) <= bounds.max_depth:
                self.depth += len(target) - len(src)
            else:
                # Only a move deeper into a document near the depth limit needs the
                # moved subtree's real depth; that walk counts against the copy budget.
                try:
                    nodes, _, depth = _measure(moved, self._walk, 1 << 62, bounds.max_depth)
                except _Over:
                    raise self._room(
                        what, "max_nodes", "counting every value one patch copies or moves"
                    ) from None
                self._walk -= nodes
                if len(target) + depth > bounds.max_depth:
                    raise self._room(what, "max_depth", f"the target is {len(target)} levels down")
                self.depth = max(self.depth, len(target) + depth)
        _, entry_src = self._detach(src, source, undo)
        parent = _parent(self.value, target, pointer)
        last = target[-1]
        freed_nodes = freed_size = entry = 0
        if isinstance(parent, dict):
            if last in parent:
                old = parent[last]
                undo.steps.append((0, parent, last, old))
                freed_nodes, freed_size = _sized(old)
            else:
                undo.steps.append((1, parent, last, None))
                entry = _key_bytes(last)
            parent[last] = moved
        else:
            index = len(parent) if last == "-" else _index(last, pointer)
            if index > len(parent):
                raise PatchError(f"index {index} in '{pointer}' is past the end of the array")
            parent.insert(index, moved)
            undo.steps.append((3, parent, index, None))
            entry = 1
        self.nodes -= freed_nodes
        self.size += entry - entry_src - freed_size
        if self.size > bounds.max_bytes:
            raise self._room(what, "max_bytes", "a longer key")


def _sized(value: Any) -> tuple[int, int]:
    """Values and bytes of something already in a document (within its limits by invariant)."""
    if value.__class__ in _ATOM_TYPES:
        return 1, _atom_bytes(value)
    nodes, size, _ = _measure(value, 1 << 62, 1 << 62, 1 << 30)
    return nodes, size


def apply_patch(doc: Any, operations: Any, limits: Limits | None = None) -> Any:
    """Apply ``operations`` to ``doc`` in place and return the (possibly new) document.

    A one-shot convenience: it measures ``doc`` first (O(document)), so code
    that patches one document repeatedly should hold a :class:`JsonDocument`.
    On failure ``doc`` is exactly as it was and :class:`PatchError` is raised.
    """
    document = JsonDocument(doc, limits=limits, copy=False)
    document.patch(operations)
    return document.value
