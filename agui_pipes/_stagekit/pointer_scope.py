"""Allow / deny sets of JSON Pointers (``*`` matches any key or index), and pruning by them.

Why a trie of pointer tokens rather than matching each path against each
pattern: a document is walked top-down, and at every node the question is
"which patterns can still match below here?". The answer is a small set of
trie nodes (a :class:`Position`); once it is empty and the node is allowed,
the whole subtree is kept as is, without being visited. So pruning costs work
proportional to the parts of the document the patterns reach, not to its
size, and recursion never goes deeper than the longest pattern.

The meaning is a pure function of the document (what :meth:`PointerScope.prune`
returns): with an allow list, only allowed subtrees survive, plus the objects
and arrays on the way to them (kept as containers, even when left empty; a
scalar on the way holds nothing allowed and goes); a denied subtree goes,
whatever the allow list says. A removed array element shifts the ones after
it, exactly like a JSON Patch ``remove`` would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["PointerScope", "Position", "parse_pointer", "pointer_text"]

WILDCARD = "*"


_PARSED: dict[str, tuple[str, ...]] = {}


def parse_pointer(pointer: str) -> tuple[str, ...]:
    """The unescaped reference tokens of an RFC 6901 pointer (``""`` -> ``()``)."""
    tokens = _PARSED.get(pointer)
    if tokens is None:
        if len(_PARSED) > 4096:
            _PARSED.clear()  # bounded: memory must not grow with stream length
        tokens = _PARSED[pointer] = tuple(
            t.replace("~1", "/").replace("~0", "~") if "~" in t else t
            for t in pointer.split("/")[1:]
        )
    return tokens


def pointer_text(tokens: Sequence[str]) -> str:
    """The RFC 6901 pointer of ``tokens`` (escaping ``~`` and ``/``)."""
    return "".join(
        "/" + (t.replace("~", "~0").replace("/", "~1") if ("~" in t or "/" in t) else t)
        for t in tokens
    )


class _Node:
    """One pattern token: where the patterns go from here, and which end here."""

    __slots__ = ("allow", "allow_below", "deny", "deny_below", "index_keys", "keys", "star")

    def __init__(self) -> None:
        self.keys: dict[str, _Node] = {}
        self.star: _Node | None = None
        self.allow = False
        self.deny = False
        self.allow_below = False
        self.deny_below = False
        self.index_keys = False  # a literal token that can name an array index

    def child(self, token: str) -> _Node:
        if token == WILDCARD:
            if self.star is None:
                self.star = _Node()
            return self.star
        node = self.keys.get(token)
        if node is None:
            node = self.keys[token] = _Node()
            if token.isdigit() and token.isascii():
                self.index_keys = True
        return node


class Position:
    """Where a value sits relative to the patterns.

    ``nodes`` are the trie nodes that may still match something below it
    (empty when nothing can); ``allowed`` says the value is inside an allowed
    subtree (always true without an allow list). Allowed with no nodes left
    means *clean*: the subtree is kept whole.
    """

    __slots__ = ("allowed", "children", "literals", "nodes")

    def __init__(self, nodes: tuple[_Node, ...], allowed: bool) -> None:
        self.nodes = nodes
        self.allowed = allowed
        # the tokens some node names literally; any other token only meets `*`
        self.literals: frozenset[str] = frozenset(k for n in nodes for k in n.keys)
        # child positions by (literal token or None, value is a container): the
        # positions form a small automaton, so walking a document allocates nothing
        self.children: dict[tuple[str | None, bool], Position | None] = {}

    @property
    def clean(self) -> bool:
        return not self.nodes


class PointerScope:
    """Compiled allow / deny pointer lists; ``what`` names the owner in error messages."""

    def __init__(self, allow: Sequence[str] | None, deny: Sequence[str] | None, what: str) -> None:
        if allow is None and deny is None:
            raise ValueError(f"{what}: give `allow` or `deny` (or both), e.g. deny=['/secret']")
        root = _Node()
        for kind, pointers in (("allow", allow), ("deny", deny)):
            if pointers is None:
                continue
            if isinstance(pointers, str):
                raise ValueError(
                    f"{what}: `{kind}` must be a list of JSON Pointers, got the string "
                    f"{pointers!r} (write [{pointers!r}])"
                )
            for i, pointer in enumerate(pointers):
                self._add(root, kind, pointer, i, what)
        if allow is not None and not allow:
            raise ValueError(f"{what}: `allow` is empty, so nothing would pass; give a pointer")
        allowed = not allow or root.allow
        self.root = Position(self._relevant((root,), allowed), allowed)

    @staticmethod
    def _add(root: _Node, kind: str, pointer: object, i: int, what: str) -> None:
        if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
            raise ValueError(
                f"{what}: {kind} pointer #{i + 1} {pointer!r} is not a JSON Pointer: it must "
                "start with `/`, e.g. `/config/secret` or `/messages/*/content`"
            )
        rest = pointer.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise ValueError(
                f"{what}: {kind} pointer #{i + 1} {pointer!r} is not a JSON Pointer: `~` may "
                "only appear as `~0` (for ~) or `~1` (for /)"
            )
        if kind == "deny" and pointer == "":
            raise ValueError(
                f"{what}: deny pointer #{i + 1} is the empty pointer (the whole state); "
                "to send no state at all, drop the `state` family with drop_events"
            )
        node = root
        for token in parse_pointer(pointer):
            if kind == "allow":
                node.allow_below = True
            else:
                node.deny_below = True
            node = node.child(token)
        if kind == "allow":
            node.allow = True
        else:
            node.deny = True

    @staticmethod
    def _relevant(nodes: tuple[_Node, ...], allowed: bool) -> tuple[_Node, ...]:
        """The nodes that can still change what is kept below (allow ones matter until allowed)."""
        if allowed:
            return tuple(n for n in nodes if n.deny_below)
        return tuple(n for n in nodes if n.deny_below or n.allow_below)

    # -- walking -------------------------------------------------------------

    def child(self, pos: Position, token: str, value: Any) -> Position | None:
        """The position of ``value`` at ``token`` under ``pos``, or None when it is removed."""
        if not pos.nodes:
            return pos  # clean: everything below is kept
        key = (token if token in pos.literals else None, isinstance(value, dict | list))
        try:
            return pos.children[key]
        except KeyError:
            pass
        result = self._child(pos, token, key[1])
        pos.children[key] = result
        return result

    def _child(self, pos: Position, token: str, container: bool) -> Position | None:
        found: list[_Node] = []
        for node in pos.nodes:
            hit = node.keys.get(token)
            if hit is not None:
                found.append(hit)
            if node.star is not None:
                found.append(node.star)
        allowed = pos.allowed
        for node in found:
            if node.deny:
                return None
            if node.allow:
                allowed = True
        if not allowed and not (container and any(n.allow_below for n in found)):
            return None
        return Position(self._relevant(tuple(found), allowed), allowed)

    def prune(self, pos: Position, value: Any) -> Any:
        """``value`` (visible at ``pos``) without its removed parts; itself when nothing goes."""
        if not pos.nodes:
            return value
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            changed = False
            for key, item in value.items():
                at = self.child(pos, key, item)
                if at is None:
                    changed = True
                    continue
                kept = self.prune(at, item)
                changed = changed or kept is not item
                out[key] = kept
            return out if changed else value
        if isinstance(value, list):
            items: list[Any] = []
            changed = False
            for index, item in enumerate(value):
                at = self.child(pos, str(index), item)
                if at is None:
                    changed = True
                    continue
                kept = self.prune(at, item)
                changed = changed or kept is not item
                items.append(kept)
            return items if changed else value
        return value

    def prune_root(self, document: Any) -> Any:
        """The pruned document; a scalar document outside every allowed pointer becomes null."""
        pos = self.root
        if not pos.allowed and not isinstance(document, dict | list):
            return None
        return self.prune(pos, document)

    def root_visible(self, document: Any) -> bool:
        """Whether the document's own value shows (not: a scalar outside the allow list)."""
        return self.root.allowed or isinstance(document, dict | list)

    # -- arrays ----------------------------------------------------------------

    def index_sensitive(self, pos: Position) -> bool:
        """Whether which elements of an array at ``pos`` show depends on their index.

        Then inserting or removing an element can show or hide *other* elements,
        which no single patch operation on the pruned array expresses.
        """
        return any(n.index_keys for n in pos.nodes)

    def out_index(self, pos: Position, array: list[Any], index: int) -> int:
        """Where element ``index`` of ``array`` (at ``pos``) lands in the pruned array."""
        if not pos.nodes or index == 0:
            return index
        if not self.index_sensitive(pos):
            # every element has the same tokens, so only its kind can matter
            scalars = self.child(pos, "0", 0) is not None
            containers = self.child(pos, "0", {}) is not None
            if scalars and containers:
                return index
            if not scalars and not containers:
                return 0
            return sum(1 for item in array[:index] if isinstance(item, dict | list) == containers)
        return sum(1 for i in range(index) if self.child(pos, str(i), array[i]) is not None)
