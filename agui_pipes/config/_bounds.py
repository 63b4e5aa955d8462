"""How big and how deep a chain declaration may be, and the checks that say so early.

A chain file is a short list of stages written by a person, but ``check`` and
``run`` also meet files nobody wrote: a truncated download, a generated
monster, a hostile upload. PyYAML's composer recurses once per nesting level
(a 50,000-deep ``[[[...]]]`` is a ``RecursionError``), and its pure-Python
parser takes seconds per megabyte, so every dimension has a cap, checked
before the expensive step and reported as a ``ConfigError`` naming the cap:

* bytes: checked before parsing (at most ``MAX_CHAIN_BYTES + 1`` bytes of a
  file are ever read, so ``/dev/zero`` is refused too);
* depth, values and stages: checked on the YAML event stream by
  ``check_shape`` — with libyaml's parser when PyYAML has it, a few
  milliseconds per thousand values — and again, as a backstop, while the
  nodes are composed (``BoundedLoader``), so no input reaches the recursion.

The depth cap is far below ``agui_pipes.Limits.max_depth``: that one bounds
JSON documents on the wire, decoded without recursion; this one bounds the
recursion of a YAML composer, a few Python frames per level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import (
    CollectionEndEvent,
    CollectionStartEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
    SequenceStartEvent,
)
from yaml.nodes import Node

from ._errors import ConfigError

__all__ = [
    "MAX_CHAIN_BYTES",
    "MAX_CHAIN_DEPTH",
    "MAX_CHAIN_NODES",
    "MAX_CHAIN_STAGES",
    "BoundedLoader",
    "check_shape",
    "check_size",
    "check_text_size",
    "stages_error",
]

MAX_CHAIN_BYTES = 1024 * 1024
"""Largest chain file or text accepted (1 MiB); real ones are a few KiB."""

MAX_CHAIN_DEPTH = 64
"""Deepest nesting of lists and mappings in a chain declaration."""

MAX_CHAIN_NODES = 100_000
"""Most YAML values (scalars, lists, mappings, aliases; keys included) in one declaration."""

MAX_CHAIN_STAGES = 1_000
"""Most entries in ``transformers``: each one is validated and built at load time."""

_FASTEST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def check_size(size: int, source: str) -> None:
    """Refuse a declaration of ``size`` bytes when it is over ``MAX_CHAIN_BYTES``."""
    if size > MAX_CHAIN_BYTES:
        raise ConfigError(
            f"the chain declaration is larger than the {MAX_CHAIN_BYTES:,}-byte limit "
            f"(agui_pipes.config.MAX_CHAIN_BYTES, 1 MiB); a chain file is a short list of "
            "stages — is this the right file?",
            source=source,
        )


def check_text_size(text: str, source: str) -> None:
    """``check_size`` for text: its UTF-8 size (a character is at least one byte)."""
    if len(text) > MAX_CHAIN_BYTES:
        check_size(len(text), source)
    check_size(len(text.encode("utf-8", "surrogatepass")), source)


def _at(message: str, source: str, mark: Any, key: str | None = None) -> ConfigError:
    """A ``ConfigError`` at a YAML mark (0-based, possibly absent) as 1-based line:column."""
    return ConfigError(
        message,
        source=source,
        line=None if mark is None else mark.line + 1,
        column=None if mark is None else mark.column + 1,
        key=key,
    )


def _too_deep(source: str, mark: Any) -> ConfigError:
    return _at(
        f"lists and mappings nest deeper than {MAX_CHAIN_DEPTH} levels "
        "(agui_pipes.config.MAX_CHAIN_DEPTH); a chain declaration is shallow — is this "
        "the right file?",
        source,
        mark,
    )


def _too_many_nodes(source: str, mark: Any) -> ConfigError:
    return _at(
        f"the declaration holds more than {MAX_CHAIN_NODES:,} YAML values "
        "(agui_pipes.config.MAX_CHAIN_NODES); a chain declaration is a short list of "
        "stages — is this the right file?",
        source,
        mark,
    )


def stages_error(count: int | None) -> str:
    """The message for a ``transformers`` list over ``MAX_CHAIN_STAGES`` entries."""
    held = f"{count:,}" if count is not None else "more"
    return (
        f"a chain holds at most {MAX_CHAIN_STAGES:,} stages "
        f"(agui_pipes.config.MAX_CHAIN_STAGES), each validated and built when it loads; "
        f"this list has {held}"
    )


@dataclass(slots=True)
class _Frame:
    is_mapping: bool
    is_stages: bool = False
    expect_key: bool = True
    items: int = 0
    last_key: Any = None


def check_shape(text: str, source: str) -> None:
    """Refuse ``text`` if it nests, holds values or stages past the caps, before composing it.

    Reads only YAML events (no recursion, nothing built) and stops at the
    first value past a cap, so an oversized document costs a fraction of its
    parse. Malformed YAML is left to the full parse, which reports it in its
    own words and at its own position.
    """
    stack: list[_Frame] = []
    nodes = 0
    try:
        for event in yaml.parse(text, Loader=_FASTEST_LOADER):
            if isinstance(event, CollectionEndEvent):
                stack.pop()
                continue
            if not isinstance(event, NodeEvent):
                continue
            nodes += 1
            if nodes > MAX_CHAIN_NODES:
                raise _too_many_nodes(source, event.start_mark)
            is_value = True
            if stack:
                frame = stack[-1]
                if frame.is_mapping:
                    is_value = not frame.expect_key
                    if frame.expect_key and isinstance(event, ScalarEvent):
                        frame.last_key = event.value
                    frame.expect_key = not frame.expect_key
                else:
                    frame.items += 1
                    if frame.is_stages and frame.items > MAX_CHAIN_STAGES:
                        raise _at(stages_error(None), source, event.start_mark, "transformers")
            if isinstance(event, CollectionStartEvent):
                if len(stack) >= MAX_CHAIN_DEPTH:
                    raise _too_deep(source, event.start_mark)
                is_stages = (
                    isinstance(event, SequenceStartEvent)
                    and len(stack) == 1
                    and is_value
                    and stack[0].last_key == "transformers"
                )
                stack.append(_Frame(isinstance(event, MappingStartEvent), is_stages))
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or ""
        if "maximum nesting depth" in problem:
            # libyaml's own cap (1,000 levels), met while it scans ahead of the
            # events: the same verdict as ours, without the pure-Python rescan.
            raise _too_deep(source, getattr(exc, "problem_mark", None)) from None


class BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses to compose past ``MAX_CHAIN_DEPTH`` / ``MAX_CHAIN_NODES``.

    The backstop behind ``check_shape``: whatever the event pre-scan missed
    (it gives up on malformed YAML), composition still cannot recurse deeper
    than the cap.
    """

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self._source = source
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        self._nodes += 1
        if self._nodes > MAX_CHAIN_NODES:
            raise _too_many_nodes(self._source, event.start_mark)
        if isinstance(event, CollectionStartEvent) and self._depth >= MAX_CHAIN_DEPTH:
            raise _too_deep(self._source, event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
