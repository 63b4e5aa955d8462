"""Message lists inside the state, scrubbed of blocked calls in snapshots and deltas.

Agents that keep their conversation in the state (``ag-ui-langgraph`` puts the
graph state, LangChain ``messages`` included, into STATE_SNAPSHOT) would
otherwise hand the client every call FilterToolCalls removed from the event
stream, with its secret result. :class:`StateMessages` rewrites the state
events so the client's state is always the scrubbed input state:

* a STATE_SNAPSHOT (and the RUN_STARTED ``input.state`` echo) has each list
  named by a pointer scrubbed (``call_traces.scrub_messages``, the same
  rules as MESSAGES_SNAPSHOT);
* a STATE_DELTA whose operations all work inside one list (and away from all
  lists) is replayed operation by operation on copies of the input's and the
  client's list, indices mapped (the client's list may lack removed messages)
  and whole messages scrubbed; it is sent if the client's copy lands exactly
  on the scrubbed result (``_reindexed``);
* any other STATE_DELTA is rewritten operation by operation when that is
  exact: operations away from the lists pass as they are; an ``add`` /
  ``replace`` of a list or of something containing it carries the scrubbed
  value; an append (``/messages/-``) carries the scrubbed message or goes when
  nothing of it is left; a ``remove`` of a whole list passes; an operation
  inside a list passes when the list is clean before and after;
* what cannot be said exactly as a delta (an operation on a removed message,
  one adding a blocked call) becomes a STATE_SNAPSHOT of the scrubbed state.

For that fallback the stage folds the *input* state (snapshot copies and
in-place patches, as the client does); a delta that does not apply to it is
dropped, since the client would skip it too. The folded copy is one state
document, the size the client holds.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from ag_ui.core import BaseEvent, StateDeltaEvent, StateSnapshotEvent

from .._foundation.json_patch import PatchError, apply_patch, clone_json, json_equal
from .._protocol.construct import construct
from .call_traces import DICT_SHAPE, scrub_messages

__all__ = ["StateMessages", "parse_pointer"]

Pointer = tuple[str, ...]


def parse_pointer(pointer: str) -> Pointer:
    """RFC 6901 tokens of ``pointer``; a clear ValueError for anything else."""
    if not isinstance(pointer, str) or (
        pointer and (not pointer.startswith("/") or re.search(r"~(?![01])", pointer))
    ):
        raise ValueError(
            f"state_messages entry {pointer!r} is not a JSON pointer; write one such as "
            "'/messages' (a '/'-separated path from the state's root; `~` only as `~0` "
            "or `~1`)"
        )
    return _op_tokens(pointer)


def _op_tokens(path: str) -> Pointer:
    """Tokens of an operation's pointer, read exactly as ``_patch`` reads it."""
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:])


def _is_prefix(short: Pointer, long: Pointer) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


class StateMessages:
    """The state side of FilterToolCalls (see module doc); one per stage instance."""

    __slots__ = ("_blocked", "_blocked_owners", "_blocks", "_pointers", "_state")

    def __init__(
        self,
        pointers: Sequence[Pointer],
        blocked: set[str],
        blocks: Callable[[str], bool],
        blocked_owners: set[str],
    ) -> None:
        self._pointers = tuple(pointers)
        self._blocked = blocked
        self._blocks = blocks
        self._blocked_owners = blocked_owners
        self._state: Any = {}
        """The client's state as the *input* stream builds it (starts as ``{}``, like fold)."""

    # -- scrubbing ------------------------------------------------------------------

    def _scrub_list(self, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        scrubbed = scrub_messages(
            value, DICT_SHAPE, self._blocked, self._blocks, self._blocked_owners
        )
        return value if scrubbed is None else scrubbed

    def _scrub_at(self, doc: Any, tokens: Pointer) -> Any:
        """``doc`` with the list at ``tokens`` scrubbed; containers on the way are copied."""
        if not tokens:
            return self._scrub_list(doc)
        head, rest = tokens[0], tokens[1:]
        if isinstance(doc, dict) and head in doc:
            inner = self._scrub_at(doc[head], rest)
            return doc if inner is doc[head] else {**doc, head: inner}
        if isinstance(doc, list) and head.isdigit() and int(head) < len(doc):
            index = int(head)
            inner = self._scrub_at(doc[index], rest)
            if inner is doc[index]:
                return doc
            copy = list(doc)
            copy[index] = inner
            return copy
        return doc

    def scrub(self, doc: Any, under: Pointer = ()) -> Any:
        """``doc`` (the value found at ``under``) with every configured list in it scrubbed."""
        for pointer in self._pointers:
            if _is_prefix(under, pointer):
                doc = self._scrub_at(doc, pointer[len(under) :])
        return doc

    # -- events ---------------------------------------------------------------------

    def snapshot(self, event: StateSnapshotEvent) -> Sequence[BaseEvent]:
        self._state = clone_json(event.snapshot)
        scrubbed = self.scrub(event.snapshot)
        if scrubbed is event.snapshot:
            return (event,)
        return (event.model_copy(update={"snapshot": scrubbed}),)

    def delta(self, event: StateDeltaEvent) -> Sequence[BaseEvent]:
        within = [self._within(op) for op in event.delta]
        lists = {p for p in within if p is not None}
        if len(lists) == 1 and _OTHER not in lists and len(within) <= _MAX_REINDEXED:
            return self._reindexed(event, next(iter(lists)), within)
        # Lists whose output form equals the input form before this delta: only in
        # those do the indices of an operation mean the same message downstream.
        # Computed only when an operation reaches inside a list (a scan of the list).
        clean_before = (
            {p: self._clean(p) for p in self._pointers}
            if any(self._inside(op) for op in event.delta)
            else {}
        )
        try:
            self._state = apply_patch(self._state, event.delta)
        except PatchError:
            return ()  # the client skips it too and keeps its state
        ops: list[Any] = []
        changed = False
        for op in event.delta:
            rewritten = self._rewrite(op, clean_before)
            if rewritten is _FALLBACK:
                return self._fallback()
            if rewritten is not op:
                changed = True
            if rewritten is not None:
                ops.append(rewritten)
        if not changed:
            return (event,)
        if not ops:
            return ()
        return (event.model_copy(update={"delta": ops}),)

    def _within(self, op: Any) -> Any:
        """The list ``op`` works inside (path and ``from``), None if it touches no list,
        ``_OTHER`` if it sets a list or something containing one, or spans two."""
        found: set[Any] = set()
        for pointer_text in (op.path, getattr(op, "from_", None)):
            if pointer_text is None:
                continue
            tokens = _op_tokens(pointer_text)
            for pointer in self._pointers:
                if len(tokens) > len(pointer) and tokens[: len(pointer)] == pointer:
                    found.add(pointer)
                elif _is_prefix(tokens, pointer):
                    found.add(_OTHER)
        if not found:
            return None
        return found.pop() if len(found) == 1 else _OTHER

    def _reindexed(
        self, event: StateDeltaEvent, pointer: Pointer, within: list[Any]
    ) -> Sequence[BaseEvent]:
        """Operations inside one list (and away from all): the same at the client's indices.

        The indices of the input list are mapped to those of the scrubbed list the
        client holds, operation by operation; the mapped operations are replayed on
        a copy of the client's list and sent only if they land exactly on the
        scrubbed result (otherwise — an operation on a removed message, one adding
        a blocked call — the delta becomes a STATE_SNAPSHOT of the scrubbed state).
        """
        before = _resolve(self._state, pointer)
        scrubbed: Any = None
        if isinstance(before, list):
            scrubbed = self._scrub_list(before)
        # Copies of the input's and the client's list, replayed operation by operation
        # (the patch below changes the input's list in place).
        work: Any = None
        client: Any = None
        if isinstance(before, list):
            work = clone_json(before)
            client = work if scrubbed is before else clone_json(scrubbed)
        try:
            self._state = apply_patch(self._state, event.delta)
        except PatchError:
            return ()  # the client skips it too and keeps its state
        after = _resolve(self._state, pointer)
        if not isinstance(after, list) or work is None:
            if not isinstance(after, list) and work is None:
                return (event,)  # not a message list: nothing of it to scrub
            return self._fallback()
        expected = self._scrub_list(after)
        if client is work:
            if expected is after:
                # Clean before and after: the operations mean the same to the client.
                return (event,)
            client = clone_json(work)  # ``work`` is still the list before the delta
        replayed = self._replayed(event.delta, within, pointer, work, client)
        if replayed is None or not json_equal(replayed[1], expected):
            return self._fallback()
        ops = replayed[0]
        if not ops:
            return ()
        return (event.model_copy(update={"delta": ops}),)

    def _replayed(
        self, delta: list[Any], within: list[Any], pointer: Pointer, work: Any, client: Any
    ) -> tuple[list[Any], Any] | None:
        """The operations at the client's indices and the client's list after them.

        ``work`` and ``client`` are copies of the input's and the client's list
        before the delta; each operation inside the list is mapped, then applied
        to both. None when an operation has no exact counterpart for the client.
        """
        ops: list[Any] = []
        depth = len(pointer)
        for op, target in zip(delta, within, strict=True):
            if target is None:
                ops.append(op)
                continue
            mapped = self._mapped_for_client(op, pointer, work)
            if mapped is _FALLBACK:
                return None
            try:
                work = apply_patch(work, [op.model_copy(update=_relative(op, depth))])
                if mapped is not None:
                    client = apply_patch(
                        client, [mapped.model_copy(update=_relative(mapped, depth))]
                    )
            except PatchError:
                return None
            if mapped is not None:
                ops.append(mapped)
        return ops, client

    def _mapped_for_client(self, op: Any, pointer: Pointer, work: list[Any]) -> Any:
        """``op`` (inside the list at ``pointer``, now ``work``) at the client's indices.

        None when the client gets nothing of it (a whole message scrubbed away),
        ``_FALLBACK`` when no operation says it exactly.
        """
        origins: list[int] = []
        kept = scrub_messages(
            work, DICT_SHAPE, self._blocked, self._blocks, self._blocked_owners, origins
        )
        if kept is None:
            origins = list(range(len(work)))
        mapped = _mapped(op, pointer, origins, len(work), len(origins))
        if mapped is None:
            return _FALLBACK
        if op.op in ("add", "replace") and len(_op_tokens(op.path)) == len(pointer) + 1:
            # A whole message: it is scrubbed, and may be nothing to the client.
            kept = self._scrub_list([op.value])
            if not kept:
                return None if op.op == "add" else _remove(mapped.path)
            if kept[0] is not op.value:
                return mapped.model_copy(update={"value": kept[0]})
        return mapped

    def _fallback(self) -> Sequence[BaseEvent]:
        """The whole scrubbed state, when no delta says exactly the same to the client."""
        snapshot = self.scrub(clone_json(self._state))
        return (construct(StateSnapshotEvent, {"snapshot": snapshot}),)

    def _inside(self, op: Any) -> bool:
        """Whether ``op`` addresses something inside a list other than its end."""
        path = _op_tokens(op.path)
        return any(
            len(path) > len(p)
            and path[: len(p)] == p
            and not (op.op == "add" and len(path) == len(p) + 1 and path[-1] == "-")
            for p in self._pointers
        )

    def _clean(self, pointer: Pointer) -> bool:
        """Whether the list at ``pointer`` in the folded state has nothing to scrub."""
        current = _resolve(self._state, pointer)
        return not isinstance(current, list) or self._scrub_list(current) is current

    def _rewrite(self, op: Any, clean_before: dict[Pointer, bool]) -> Any:
        """``op`` as it is, rewritten, None (drop it) or ``_FALLBACK``."""
        path = _op_tokens(op.path)
        source = getattr(op, "from_", None)
        if source is not None:
            source_tokens = _op_tokens(source)
            if any(
                _is_prefix(source_tokens, p) or _is_prefix(p, source_tokens) for p in self._pointers
            ):
                return _FALLBACK
        kind = op.op
        rewritten = op
        for pointer in self._pointers:
            if _is_prefix(path, pointer):
                # The operation sets (or removes) the list, or something containing it.
                if kind in ("add", "replace"):
                    value = self.scrub(rewritten.value, path)
                    if value is not rewritten.value:
                        rewritten = rewritten.model_copy(update={"value": value})
                elif kind != "remove":
                    return _FALLBACK
            elif _is_prefix(pointer, path):
                if kind == "add" and len(path) == len(pointer) + 1 and path[-1] == "-":
                    kept = self._scrub_list([rewritten.value])
                    if not kept:
                        return None
                    if kept[0] is not rewritten.value:
                        rewritten = rewritten.model_copy(update={"value": kept[0]})
                elif not (clean_before[pointer] and self._clean(pointer)):
                    # An operation by index, or on a message's parts: exact only when
                    # the client's list is the input list before and after the delta.
                    return _FALLBACK
        return rewritten


_FALLBACK: Any = object()
_OTHER: Any = object()

_MAX_REINDEXED = 64
"""Operations in one delta mapped one by one (each maps over the whole list); a longer
delta inside a scrubbed list becomes a snapshot."""


def _remove(path: str) -> Any:
    """A ``remove`` operation model (what a replace by a removed message is to the client)."""
    return StateDeltaEvent.model_validate(
        {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": path}]}
    ).delta[0]


def _encode(tokens: Sequence[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _map_index(
    tokens: Pointer, pointer: Pointer, origins: list[int], size: int, client_size: int
) -> Pointer | None:
    """``tokens`` with its index in the list at ``pointer`` mapped to the client's list."""
    token = tokens[len(pointer)]
    if token == "-":
        return tokens
    if not token.isdigit() or not token.isascii():
        return None
    index = int(token)
    if index == size:
        mapped = client_size
    else:
        mapped = bisect_left(origins, index)  # origins ascend: the client's position
        if index > size or mapped == len(origins) or origins[mapped] != index:
            return None  # the message was removed (or the index is past the end)
    return (*pointer, str(mapped), *tokens[len(pointer) + 1 :])


def _mapped(op: Any, pointer: Pointer, origins: list[int], size: int, client_size: int) -> Any:
    """``op`` addressing the client's list, or None when an index has no counterpart."""
    path = _map_index(_op_tokens(op.path), pointer, origins, size, client_size)
    if path is None:
        return None
    update: dict[str, Any] = {"path": _encode(path)}
    source = getattr(op, "from_", None)
    if source is not None:
        mapped_source = _map_index(_op_tokens(source), pointer, origins, size, client_size)
        if mapped_source is None:
            return None
        update["from_"] = _encode(mapped_source)
    return op.model_copy(update=update)


def _relative(op: Any, depth: int) -> dict[str, Any]:
    """The path (and ``from``) of ``op`` relative to the list it works in."""
    update: dict[str, Any] = {"path": _encode(_op_tokens(op.path)[depth:])}
    source = getattr(op, "from_", None)
    if source is not None:
        update["from_"] = _encode(_op_tokens(source)[depth:])
    return update


def _resolve(doc: Any, tokens: Pointer) -> Any:
    for token in tokens:
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list) and token.isdigit() and int(token) < len(doc):
            doc = doc[int(token)]
        else:
            return None
    return doc
