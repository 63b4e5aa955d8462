"""RFC 6902 JSON Patch, applied atomically *in place*, for state and activity deltas.

Why not copy-then-patch (what the ``jsonpatch`` package's ``apply_patch``
does by default): a consumer applies thousands of small deltas to one
growing document, and copying the document per delta makes folding a long
stream quadratic. Why not ``jsonpatch`` in place: a patch that fails halfway
leaves the document half-changed, and AG-UI requires a delta to apply
atomically (all operations or none). So each operation here records how to
undo itself, and a failure rolls the document back before raising.

Semantics follow RFC 6902 as the reference client's applier (fast-json-patch,
validating) implements it: ``-`` appends, an array index is decimal digits
and may equal the length only for ``add``, the parent of every target must
exist, ``test`` compares JSON values strictly (``true`` is not ``1``), and an
operation on the root (``""``) replaces, removes (to ``null``) or tests the
whole document. Inserted values are copied so a later patch can never mutate
the event that carried them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PatchError", "apply_patch", "clone_json", "json_equal"]


class PatchError(Exception):
    """A well-formed patch that does not apply to the document (nothing was changed)."""


_ATOMS = (str, int, float, bool, type(None))


def clone_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars), much cheaper than ``deepcopy``."""
    cls = value.__class__
    if cls is dict:
        return {k: clone_json(v) for k, v in value.items()}
    if cls is list:
        return [clone_json(v) for v in value]
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, dict):
        return {k: clone_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clone_json(v) for v in value]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as JSON defines it (``true`` != ``1``, ``1`` == ``1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a.__class__ is b.__class__ and a == b
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        return all(k in b and json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if a is None or b is None:
        return a is b
    return bool(a.__class__ is b.__class__ and a == b)


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

    __slots__ = ("root", "steps")

    def __init__(self, root: Any) -> None:
        self.root = root
        self.steps: list[tuple[int, Any, Any, Any]] = []

    def rollback(self) -> Any:
        for kind, container, key, value in reversed(self.steps):
            if kind == 0:
                container[key] = value
            elif kind == 1:
                del container[key]
            elif kind == 2:
                container.insert(key, value)
            else:
                container.pop(key)
        return self.root


def _add(doc: Any, pointer: str, value: Any, undo: _Undo) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last in parent:
            undo.steps.append((0, parent, last, parent[last]))
        else:
            undo.steps.append((1, parent, last, None))
        parent[last] = value
        return doc
    index = len(parent) if last == "-" else _index(last, pointer)
    if index > len(parent):
        raise PatchError(f"index {index} in '{pointer}' is past the end of the array")
    parent.insert(index, value)
    undo.steps.append((3, parent, index, None))
    return doc


def _remove(doc: Any, pointer: str, undo: _Undo) -> tuple[Any, Any]:
    tokens = _tokens(pointer)
    if not tokens:
        return None, doc
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path '{pointer}' does not exist")
        removed = parent.pop(last)
        undo.steps.append((0, parent, last, removed))
        return doc, removed
    index = len(parent) if last == "-" else _index(last, pointer)
    if index >= len(parent):
        raise PatchError(f"path '{pointer}' does not exist")
    removed = parent.pop(index)
    undo.steps.append((2, parent, index, removed))
    return doc, removed


def _replace(doc: Any, pointer: str, value: Any, undo: _Undo) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    parent = _parent(doc, tokens, pointer)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path '{pointer}' does not exist")
        undo.steps.append((0, parent, last, parent[last]))
        parent[last] = value
        return doc
    index = len(parent) if last == "-" else _index(last, pointer)
    if index >= len(parent):
        raise PatchError(f"path '{pointer}' does not exist")
    undo.steps.append((0, parent, index, parent[index]))
    parent[index] = value
    return doc


def _operation(doc: Any, op: Any, undo: _Undo) -> Any:
    name = op.op
    if name == "add":
        return _add(doc, op.path, clone_json(op.value), undo)
    if name == "replace":
        return _replace(doc, op.path, clone_json(op.value), undo)
    if name == "remove":
        return _remove(doc, op.path, undo)[0]
    if name == "test":
        if not json_equal(_get(doc, op.path), op.value):
            raise PatchError(f"test at '{op.path}' failed")
        return doc
    source = op.from_
    if name == "copy":
        return _add(doc, op.path, clone_json(_get(doc, source)), undo)
    if name == "move":
        if not _tokens(op.path):
            return _get(doc, source)
        _get(doc, source)
        doc, moved = _remove(doc, source, undo)
        return _add(doc, op.path, moved, undo)
    raise PatchError(f"unknown operation '{name}'")


def apply_patch(doc: Any, operations: Any) -> Any:
    """Apply ``operations`` (objects with ``op``/``path``/``value``/``from_``) to ``doc``.

    Mutates ``doc`` in place and returns the (possibly new, for root
    operations) document. On failure every change is undone, so ``doc`` is
    exactly as it was, and :class:`PatchError` is raised.
    """
    undo = _Undo(doc)
    try:
        for op in operations:
            doc = _operation(doc, op, undo)
    except PatchError:
        undo.rollback()
        raise
    except (TypeError, AttributeError, RecursionError) as exc:
        undo.rollback()
        raise PatchError(f"malformed operation: {exc}") from None
    return doc
