"""One JSON document as the input has it, and its patches translated to the pruned view.

A JSON Patch cannot be filtered operation by operation on its text alone: a
``move`` or ``copy`` reads a value the client never saw, an array index means
a different element once hidden elements are gone, ``-`` is an index only the
current document knows, and whether a value shows at all can depend on its
kind (a scalar on the way to an allowed pointer goes, an object stays). So
the stage keeps one copy of the document as the *input* has it (bounded by
:class:`agui_pipes.Limits`) and translates each operation against it, just
before applying it:

* an operation inside a removed subtree is dropped; one that creates, replaces
  or removes a visible value is rewritten with the pruned value (``add`` /
  ``replace`` / ``remove`` as the value appears or disappears in the view);
* ``copy`` becomes an ``add`` of the pruned value, ``move`` a ``remove`` plus
  an ``add`` — kept as ``copy`` / ``move`` only where both ends are wholly
  visible, so nothing hidden is ever read into view;
* array indices are mapped to the pruned array;
* inserting or removing an element of an array whose elements show by
  *index* (a pattern names an index, e.g. ``/items/0``) shifts which ones
  show, which no operation expresses: the caller then sends the whole pruned
  document instead (:attr:`Translation.resync`).

A patch that does not apply (or would take the document past the limits) is
rolled back and reported, as the client skips it too.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Final, get_args

from ag_ui.core import StateDeltaEvent
from pydantic import BaseModel

from .._foundation.errors import StreamRejected
from .._foundation.json_patch import clone_json, json_equal, rollback, size_json
from .._foundation.limits import Limits
from .pointer_scope import PointerScope, Position, parse_pointer, pointer_text

__all__ = ["ScopedDocument", "Translation", "clone", "measure", "replace_root"]


_NOTHING: Final = object()


class _Fail(Exception):
    """The patch does not apply (or would cross the limits); the message says why."""


def measure(value: Any, cap: int) -> tuple[int, int, int]:
    """(nodes, estimated compact JSON bytes, container depth) of ``value``, by the same
    estimate the fold keeps (``_patch``), so the stage and the client judge a
    document at the limits alike. Past ``cap`` nodes: ``cap + 1``, the rest unknown.
    """
    sized = size_json(value, cap)
    return (cap + 1, 0, 0) if sized is None else sized


def clone(value: Any) -> Any:
    """A deep copy of a JSON value at any depth (the stage checks depth itself)."""
    return clone_json(value, _UNBOUNDED_DEPTH)


_UNBOUNDED_DEPTH: Final = Limits(max_depth=sys.maxsize)


def _index(token: str) -> int:
    if not token.isdigit() or not token.isascii():
        raise _Fail(f"'{token}' is not an array index")
    return int(token)


class Translation:
    """What a patch became: the operations for the pruned view, or a resync, or a failure."""

    __slots__ = ("error", "operations", "resync", "unchanged")

    def __init__(self) -> None:
        self.operations: list[Any] = []
        self.resync = False
        self.error: str | None = None
        self.unchanged = True


class ScopedDocument:
    """The input's copy of one document, with the scope that prunes what the client sees."""

    def __init__(self, scope: PointerScope, limits: Limits, what: str) -> None:
        self._scope = scope
        self._limits = limits
        self._what = what
        self.document: Any = {}
        self._nodes = 1
        self._bytes = 2
        self._undo: list[tuple[Any, ...]] = []

    # -- whole documents ---------------------------------------------------------

    def reset(self, value: Any) -> Any:
        """Take ``value`` as the document; return its pruned view (sharing ``value``'s parts)."""
        limits = self._limits
        nodes, size, depth = measure(value, limits.max_nodes)
        if nodes > limits.max_nodes or size > limits.max_bytes or depth > limits.max_depth:
            count = f"more than {limits.max_nodes:,}" if nodes > limits.max_nodes else f"{nodes:,}"
            raise StreamRejected(
                f"StateFilter: the {self._what} is larger than the limits allow "
                f"({count} nodes, ~{size:,} bytes, depth {depth}; Limits: "
                f"max_nodes={limits.max_nodes:,}, max_bytes={limits.max_bytes:,}, "
                f"max_depth={limits.max_depth}); the stage cannot follow it, so it refuses "
                "the stream rather than risk sending hidden parts — raise "
                "StateFilter(limits=Limits(...)) if such documents are expected"
            )
        self.document = clone(value)
        self._nodes, self._bytes = nodes, size
        return self._scope.prune_root(value)

    def pruned(self) -> Any:
        """A fresh copy of the pruned view of the current document."""
        return clone(self._scope.prune_root(self.document))

    # -- patches ---------------------------------------------------------------------

    def apply(self, operations: Sequence[Any]) -> Translation:
        """Apply ``operations`` to the document (atomically) and translate them."""
        result = Translation()
        self._undo = []
        saved = (self.document, self._nodes, self._bytes)
        try:
            for op in operations:
                before = len(result.operations)
                self._operation(op, result)
                if result.unchanged and not (
                    len(result.operations) == before + 1 and result.operations[-1] is op
                ):
                    result.unchanged = False
        except _Fail as exc:
            self._rollback()
            self.document, self._nodes, self._bytes = saved
            result.error = str(exc)
            result.operations = []
            result.unchanged = False
        except (TypeError, AttributeError, ValueError, RecursionError) as exc:
            self._rollback()
            self.document, self._nodes, self._bytes = saved
            result.error = f"malformed operation: {exc}"
            result.operations = []
            result.unchanged = False
        finally:
            self._undo = []
        return result

    def _rollback(self) -> None:
        rollback(self._undo)

    def _operation(self, op: Any, out: Translation) -> None:
        name = op.op
        tokens = parse_pointer(op.path)
        if name == "add":
            self._add(tokens, op, op.value, clone(op.value), out, from_state=False)
        elif name == "remove":
            self._remove(tokens, op, out)
        elif name == "replace":
            self._replace(tokens, op, out)
        elif name == "test":
            self._test(tokens, op, out)
        elif name in ("copy", "move"):
            self._copy_or_move(tokens, op, out, move=name == "move")
        else:
            raise _Fail(f"unknown operation '{name}'")

    # -- locating --------------------------------------------------------------

    def _walk(self, tokens: tuple[str, ...]) -> tuple[Any, Position | None, list[str]]:
        """The parent container of ``tokens``, its position (None: removed) and pruned path."""
        scope = self._scope
        node = self.document
        pos: Position | None = scope.root if scope.root_visible(node) else None
        path: list[str] = []
        for token in tokens[:-1]:
            if isinstance(node, dict):
                if token not in node:
                    raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
                child = node[token]
                key = shown = token
            elif isinstance(node, list):
                index = _index(token)
                if index >= len(node):
                    raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
                child = node[index]
                key = str(index)
                shown = str(scope.out_index(pos, node, index)) if pos is not None else key
            else:
                raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
            if not isinstance(child, dict | list):
                raise _Fail(f"path '{pointer_text(tokens)}' runs through a scalar")
            if pos is not None:
                pos = scope.child(pos, key, child)
                if pos is not None:
                    path.append(shown)
            node = child
        if not isinstance(node, dict | list):
            raise _Fail(f"cannot address '{pointer_text(tokens)}' inside a scalar document")
        return node, pos, path

    def _grow(self, tokens: tuple[str, ...], value: Any, removed: Any, removing: bool) -> None:
        """Account for inserting ``value`` (and dropping ``removed``); refuse past the limits.

        ``value`` is ``_NOTHING`` for a plain removal.
        """
        limits = self._limits
        if value is _NOTHING:
            nodes = size = depth = 0
        else:
            nodes, size, depth = measure(value, limits.max_nodes)
        if removing:
            gone_nodes, gone_size, _ = measure(removed, limits.max_nodes)
        else:
            gone_nodes = gone_size = 0
        total = self._nodes + nodes - gone_nodes
        total_bytes = self._bytes + size - gone_size
        if (
            total > limits.max_nodes
            or total_bytes > limits.max_bytes
            or len(tokens) + depth > limits.max_depth
        ):
            raise _Fail(
                f"the {self._what} would exceed the limits at '{pointer_text(tokens)}' "
                f"(max_nodes={limits.max_nodes:,}, max_bytes={limits.max_bytes:,}, "
                f"max_depth={limits.max_depth})"
            )
        self._nodes, self._bytes = total, total_bytes

    def _shown(self, pos: Position, value: Any, from_state: bool) -> Any:
        kept = self._scope.prune(pos, value)
        return clone(kept) if from_state else kept

    def _root_shown(self, value: Any, from_state: bool) -> Any:
        kept = self._scope.prune_root(value)
        return clone(kept) if from_state else kept

    # -- operations ------------------------------------------------------------

    def _set_root(self, value: Any, tokens: tuple[str, ...]) -> None:
        self._grow(tokens, value, self.document, True)
        self._undo.append((0, self, "document", self.document))
        self.document = value

    def __setitem__(self, key: str, value: Any) -> None:
        # lets the undo log restore the root like any other slot
        setattr(self, key, value)

    def _add(
        self,
        tokens: tuple[str, ...],
        op: Any,
        shown: Any,
        value: Any,
        out: Translation,
        *,
        from_state: bool,
    ) -> Position | None:
        """Insert ``value`` at ``tokens``; ``shown`` is what the pruned view is made from.

        Returns the position of the inserted value (None: it does not show).
        """
        scope = self._scope
        if not tokens:
            self._set_root(value, tokens)
            out.operations.append(_replace_op("", self._root_shown(shown, from_state)))
            return scope.root if scope.root_visible(value) else None
        parent, pos, path = self._walk(tokens)
        last = tokens[-1]
        if isinstance(parent, dict):
            existed = last in parent
            old = parent.get(last)
            self._grow(tokens, value, old, existed)
            self._undo.append((0, parent, last, old) if existed else (1, parent, last, None))
            parent[last] = value
            if pos is None:
                return None
            new_at = scope.child(pos, last, value)
            old_at = scope.child(pos, last, old) if existed else None
            if new_at is not None:
                if not from_state and new_at.clean and path == list(tokens[:-1]):
                    out.operations.append(op)
                else:
                    shown_value = self._shown(new_at, shown, from_state)
                    out.operations.append(_add_op(pointer_text([*path, last]), shown_value))
            elif old_at is not None:
                out.operations.append(_remove_op(pointer_text([*path, last])))
            return new_at
        index = len(parent) if last == "-" else _index(last)
        if index > len(parent):
            raise _Fail(f"index {index} in '{pointer_text(tokens)}' is past the end of the array")
        self._grow(tokens, value, None, False)
        at: Position | None = None
        if pos is not None:
            if scope.index_sensitive(pos):
                out.resync = True
            else:
                at = scope.child(pos, str(index), value)
                if at is not None:
                    shown_index = scope.out_index(pos, parent, index)
                    if (
                        not from_state
                        and at.clean
                        and shown_index == index
                        and path == list(tokens[:-1])
                    ):
                        out.operations.append(op)
                    else:
                        out.operations.append(
                            _add_op(
                                pointer_text([*path, str(shown_index)]),
                                self._shown(at, shown, from_state),
                            )
                        )
        parent.insert(index, value)
        self._undo.append((3, parent, index, None))
        return at

    def _remove(self, tokens: tuple[str, ...], op: Any, out: Translation) -> Any:
        """Remove and return the value at ``tokens``."""
        scope = self._scope
        if not tokens:
            old = self.document
            self._set_root(None, tokens)
            out.operations.append(_replace_op("", self._root_shown(None, False)))
            return old
        parent, pos, path = self._walk(tokens)
        last = tokens[-1]
        if isinstance(parent, dict):
            if last not in parent:
                raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
            old = parent[last]
            self._grow(tokens, _NOTHING, old, True)
            self._undo.append((0, parent, last, old))
            del parent[last]
            if pos is not None and scope.child(pos, last, old) is not None:
                shown_path = [*path, last]
                if op is not None and shown_path == list(tokens):
                    out.operations.append(op)
                else:
                    out.operations.append(_remove_op(pointer_text(shown_path)))
            return old
        index = len(parent) if last == "-" else _index(last)
        if index >= len(parent):
            raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
        old = parent[index]
        self._grow(tokens, _NOTHING, old, True)
        if pos is not None:
            if scope.index_sensitive(pos):
                out.resync = True
            elif scope.child(pos, str(index), old) is not None:
                shown_path = [*path, str(scope.out_index(pos, parent, index))]
                if op is not None and shown_path == list(tokens):
                    out.operations.append(op)
                else:
                    out.operations.append(_remove_op(pointer_text(shown_path)))
        parent.pop(index)
        self._undo.append((2, parent, index, old))
        return old

    def _replace(self, tokens: tuple[str, ...], op: Any, out: Translation) -> None:
        scope = self._scope
        value = clone(op.value)
        if not tokens:
            self._set_root(value, tokens)
            out.operations.append(_replace_op("", self._root_shown(op.value, False)))
            return
        parent, pos, path = self._walk(tokens)
        last = tokens[-1]
        if isinstance(parent, dict):
            if last not in parent:
                raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
            key: str | int = last
            token = last
        else:
            index = len(parent) if last == "-" else _index(last)
            if index >= len(parent):
                raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
            key, token = index, str(index)
        old = parent[key]
        self._grow(tokens, value, old, True)
        self._undo.append((0, parent, key, old))
        parent[key] = value
        if pos is None:
            return
        new_at = scope.child(pos, token, value)
        old_at = scope.child(pos, token, old)
        if new_at is None and old_at is None:
            return
        shown = token if isinstance(key, str) else str(scope.out_index(pos, parent, key))
        where = pointer_text([*path, shown])
        if new_at is None:
            out.operations.append(_remove_op(where))
        elif old_at is None:
            out.operations.append(_add_op(where, scope.prune(new_at, op.value)))
        elif new_at.clean and where == op.path:
            out.operations.append(op)
        else:
            out.operations.append(_replace_op(where, scope.prune(new_at, op.value)))

    def _get(self, tokens: tuple[str, ...]) -> tuple[Any, Position | None, list[str]]:
        """The value at ``tokens``, its position (None: removed) and pruned path."""
        scope = self._scope
        if not tokens:
            document = self.document
            return document, scope.root if scope.root_visible(document) else None, []
        parent, pos, path = self._walk(tokens)
        last = tokens[-1]
        if isinstance(parent, dict):
            if last not in parent:
                raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
            value = parent[last]
            shown = last
        else:
            index = len(parent) if last == "-" else _index(last)
            if index >= len(parent):
                raise _Fail(f"path '{pointer_text(tokens)}' does not exist")
            value = parent[index]
            shown = str(scope.out_index(pos, parent, index)) if pos is not None else last
            last = str(index)
        at = scope.child(pos, last, value) if pos is not None else None
        return value, at, [*path, shown]

    def _test(self, tokens: tuple[str, ...], op: Any, out: Translation) -> None:
        value, at, path = self._get(tokens)
        if not json_equal(value, op.value):
            raise _Fail(f"test at '{op.path}' failed")
        if at is None:
            return  # a hidden value: the test passed here, the client has nothing to test
        if at.clean and pointer_text(path) == op.path:
            out.operations.append(op)
        elif not tokens:
            out.operations.append(_test_op("", self._scope.prune_root(op.value)))
        else:
            out.operations.append(_test_op(pointer_text(path), self._scope.prune(at, op.value)))

    def _copy_or_move(
        self, tokens: tuple[str, ...], op: Any, out: Translation, *, move: bool
    ) -> None:
        source = parse_pointer(op.from_)
        value, source_at, source_path = self._get(source)
        if move and not tokens:
            # moving onto the root: the document becomes the value (nothing is removed)
            self._set_root(value, tokens)
            out.operations.append(_replace_op("", self._root_shown(value, True)))
            return
        start = len(out.operations)
        saved_counts = (self._nodes, self._bytes)
        if move:
            self._remove(source, None, out)
            target_at = self._add(tokens, None, value, value, out, from_state=True)
        else:
            # refuse a copy past the limits before it is made (copies double a document)
            self._grow(tokens, value, None, False)
            self._nodes, self._bytes = saved_counts
            # the copy is what shows: ``value`` may be the parent it lands in
            duplicate = clone(value)
            target_at = self._add(tokens, None, duplicate, duplicate, out, from_state=True)
        emitted = out.operations[start:]
        # both ends wholly visible: the cheaper move / copy shows nothing hidden
        if source_at is None or not source_at.clean or out.resync:
            return
        target = emitted[-1] if emitted else None
        if not isinstance(target, _ADD):
            return
        if target_at is None or not target_at.clean:
            return
        del out.operations[start:]
        if move:
            out.operations.append(_move_op(pointer_text(source_path), target.path))
        else:
            out.operations.append(_copy_op(pointer_text(source_path), target.path))


def _operation_classes() -> dict[str, type[BaseModel]]:
    """The RFC 6902 operation models by ``op``, read off ``STATE_DELTA.delta``'s type.

    ``ag_ui.core`` does not export them; their declared field type is the
    public way to reach them.
    """
    (item,) = get_args(StateDeltaEvent.model_fields["delta"].annotation)
    union = get_args(item)[0]
    return {cls.model_fields["op"].default: cls for cls in get_args(union)}


_OPS: Final = _operation_classes()
_ADD: Final[type[Any]] = _OPS["add"]


def _add_op(path: str, value: Any) -> Any:
    return _ADD.model_construct(op="add", path=path, value=value)


def _remove_op(path: str) -> Any:
    return _OPS["remove"].model_construct(op="remove", path=path)


def _replace_op(path: str, value: Any) -> Any:
    return _OPS["replace"].model_construct(op="replace", path=path, value=value)


def replace_root(value: Any) -> Any:
    """The operation that replaces a whole document with ``value``."""
    return _replace_op("", value)


def _test_op(path: str, value: Any) -> Any:
    return _OPS["test"].model_construct(op="test", path=path, value=value)


def _move_op(source: str, path: str) -> Any:
    return _OPS["move"].model_construct(op="move", from_=source, path=path)


def _copy_op(source: str, path: str) -> Any:
    return _OPS["copy"].model_construct(op="copy", from_=source, path=path)
