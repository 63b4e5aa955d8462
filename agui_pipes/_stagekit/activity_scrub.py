"""Taking a removed tool call out of an activity's free-form content.

Activity content is the producer's own JSON, so a denied call can ride in it
whole: Microsoft Agent Framework's workflow ``executor`` activity carries the
executor's output — the agent's messages, with each ``function_call`` (name,
``call_id``, arguments) and ``function_result`` (``call_id``, result). The
official client turns the activity into a ``role: activity`` message, so none of
it may pass. The rule, for any JSON value:

* an **object that names a removed call** goes: one whose name key (``name``,
  ``toolName``, ``tool_name``, ``toolCallName``, ``tool_call_name``) holds a
  blocked tool's name, or whose id key (``id``, ``toolCallId``, ``tool_call_id``,
  ``callId``, ``call_id``) holds a removed call's id — including the ids of calls
  first named in this same content (a ``function_result`` carries only the id of
  the ``function_call`` beside it);
* a **string that is a removed call's id** goes (a list of pending ids);
* an object member or list element that goes is taken out of its parent; the
  rest of the value is kept as it was.

Names are matched only under name keys (in allow mode every other word would be
"a blocked name"); ids anywhere, since they are the producer's unique strings.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import Any, Final

__all__ = ["ID_KEYS", "NAME_KEYS", "ActivityScrub"]

NAME_KEYS: Final = frozenset({"name", "toolName", "tool_name", "toolCallName", "tool_call_name"})
ID_KEYS: Final = frozenset({"id", "toolCallId", "tool_call_id", "callId", "call_id"})

_GONE: Final = object()
"""What ``_rebuilt`` returns for a value that is taken out of its parent."""


class ActivityScrub:
    """One scrub of one activity value against the stage's blocked names and ids."""

    def __init__(self, blocks: Callable[[str], bool], blocked_ids: Set[str]) -> None:
        self._blocks = blocks
        self._ids: set[str] = set(blocked_ids)
        self.changed = False

    def scrubbed(self, value: Any) -> Any:
        """``value`` without any trace of a removed call (the same object when clean)."""
        self._collect(value)
        out = self._rebuilt(value)
        return None if out is _GONE else out

    def _names_blocked(self, node: dict[str, Any]) -> bool:
        for key in NAME_KEYS:
            name = node.get(key)
            if isinstance(name, str) and self._blocks(name):
                return True
        return False

    def _collect(self, value: Any) -> None:
        """Add the ids of every object naming a blocked tool (iterative: any depth)."""
        stack = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if self._names_blocked(node):
                    for key in ID_KEYS:
                        found = node.get(key)
                        if isinstance(found, str):
                            self._ids.add(found)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)

    def _goes(self, node: Any) -> bool:
        if isinstance(node, str):
            return node in self._ids
        if isinstance(node, dict):
            if self._names_blocked(node):
                return True
            return any(isinstance(node.get(k), str) and node[k] in self._ids for k in ID_KEYS)
        return False

    def _rebuilt(self, value: Any) -> Any:
        """The value with what goes taken out, copying only the containers that change.

        Iterative post-order, so a deep document cannot exhaust the stack.
        """
        if self._goes(value):
            self.changed = True
            return _GONE
        if not isinstance(value, dict | list):
            return value
        # Frames: (container, its items, index, rebuilt items so far, changed?).
        results: list[Any] = []
        frames: list[list[Any]] = [[value, _items(value), 0, [], False]]
        while frames:
            frame = frames[-1]
            container, items, index, kept, dirty = frame
            if results:
                child = results.pop()
                key, original = items[index - 1]
                if child is _GONE:
                    frame[4] = dirty = True
                else:
                    kept.append((key, child))
                    if child is not original:
                        frame[4] = dirty = True
            if index == len(items):
                frames.pop()
                if not dirty:
                    results.append(container)
                elif isinstance(container, dict):
                    results.append(dict(kept))
                else:
                    results.append([item for _, item in kept])
                continue
            key, child = items[index]
            frame[2] = index + 1
            if self._goes(child):
                self.changed = True
                results.append(_GONE)
            elif isinstance(child, dict | list):
                frames.append([child, _items(child), 0, [], False])
            else:
                results.append(child)
        return results.pop()


def _items(container: dict[str, Any] | list[Any]) -> list[tuple[Any, Any]]:
    if isinstance(container, dict):
        return list(container.items())
    return list(enumerate(container))
