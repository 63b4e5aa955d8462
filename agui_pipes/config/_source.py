"""Parse chain text into plain values while remembering where each one was written.

``yaml.safe_load`` returns values without positions, and pointed error
messages are the point of this package, so we compose the YAML node graph
(which carries marks) and construct the values ourselves, recording for every
key path the position of the key and of its value. Construction of scalars is
delegated to PyYAML's ``SafeConstructor`` — the same scalar rules as
``safe_load`` — and only the safe core tags are accepted: anything else (notably
``!!python/...``) is refused with the position of the tag.

JSON is valid YAML, so JSON files go through the same path.

Interpolation happens here too, because only here do we know whether a scalar
was quoted: an unquoted value that used ``${...}`` is re-typed after
substitution the way YAML would type it, so ``max_chars: ${MAX:-200}`` is a
number while ``"${MAX:-200}"`` stays a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ._bounds import MAX_CHAIN_DEPTH, BoundedLoader, check_shape, check_text_size
from ._errors import ConfigError, KeyPath, format_key
from ._interpolate import InterpolationError, has_interpolation, interpolate

__all__ = ["Located", "Mark", "located_from_mapping", "parse_text"]

_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = frozenset(_CORE + t for t in ("str", "int", "float", "bool", "null"))
_KEPT_AS_TEXT = frozenset({_CORE + "timestamp"})
"""Implicitly typed scalars that JSON has no type for: kept as the written text."""


@dataclass(frozen=True, slots=True)
class Mark:
    """A 1-based position in the source text."""

    line: int
    column: int


@dataclass(slots=True)
class Located:
    """A parsed document plus the positions of its keys and values."""

    value: Any
    source: str
    keys: dict[KeyPath, Mark] = field(default_factory=dict)
    values: dict[KeyPath, Mark] = field(default_factory=dict)

    def mark(self, path: KeyPath, *, at_key: bool = False) -> Mark | None:
        """Position of ``path`` (its key when ``at_key``), else of its nearest ancestor."""
        probe = tuple(path)
        if at_key and probe in self.keys:
            return self.keys[probe]
        while True:
            if probe in self.values:
                return self.values[probe]
            if probe in self.keys:
                return self.keys[probe]
            if not probe:
                return None
            probe = probe[:-1]

    def error(
        self,
        message: str,
        path: KeyPath,
        *,
        at_key: bool = False,
        choices: list[str] | tuple[str, ...] | None = None,
        suggestion: str | None = None,
    ) -> ConfigError:
        """A ``ConfigError`` located at ``path`` in this document."""
        mark = self.mark(path, at_key=at_key)
        return ConfigError(
            message,
            source=self.source,
            line=mark.line if mark else None,
            column=mark.column if mark else None,
            key=format_key(path),
            choices=choices,
            suggestion=suggestion,
        )


def _mark_of(node: Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag


class _Builder:
    def __init__(self, loader: yaml.SafeLoader, doc: Located, env: Mapping[str, str]) -> None:
        self.loader = loader
        self.doc = doc
        self.env = env
        self.active: set[int] = set()
        # An alias is the same node again: build it once and share the value, as
        # PyYAML does, so nested aliases ("billion laughs") cannot blow up.
        self.built: dict[int, Any] = {}

    def fail(self, message: str, node: Node, path: KeyPath) -> ConfigError:
        mark = _mark_of(node)
        return ConfigError(
            message,
            source=self.doc.source,
            line=mark.line,
            column=mark.column,
            key=format_key(path),
        )

    def build(self, node: Node, path: KeyPath) -> Any:
        self.doc.values.setdefault(path, _mark_of(node))
        if id(node) in self.built:
            return self.built[id(node)]
        if id(node) in self.active:
            raise self.fail("a YAML alias refers to itself (recursive structure)", node, path)
        self.active.add(id(node))
        try:
            value: Any
            if isinstance(node, ScalarNode):
                value = self.scalar(node, path)
            elif isinstance(node, SequenceNode):
                self.expect_tag(node, _CORE + "seq", path)
                value = [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            else:
                assert isinstance(node, MappingNode)
                self.expect_tag(node, _CORE + "map", path)
                value = self.mapping(node, path)
        finally:
            self.active.discard(id(node))
        self.built[id(node)] = value
        return value

    def expect_tag(self, node: Node, tag: str, path: KeyPath) -> None:
        if node.tag != tag:
            raise self.unsafe(node, path)

    def unsafe(self, node: Node, path: KeyPath) -> ConfigError:
        return self.fail(
            f"YAML tag `{_short_tag(node.tag)}` is not allowed: chain files are loaded "
            "safely, as plain mappings, lists, strings, numbers, booleans and null — "
            "remove the tag",
            node,
            path,
        )

    def mapping(self, node: MappingNode, path: KeyPath) -> dict[str, Any]:
        own = {id(pair[0]) for pair in node.value if pair[0].tag != _CORE + "merge"}
        self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        out: dict[str, Any] = {}
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag not in _SCALAR_TAGS:
                raise self.fail("mapping keys must be plain names", key_node, path)
            key = self.loader.construct_object(key_node)
            if not isinstance(key, str):
                raise self.fail(
                    f"mapping keys must be names (strings), got {key!r}", key_node, path
                )
            child = (*path, key)
            if id(key_node) not in own:  # merged in: explicit keys may override it
                self.doc.keys.setdefault(child, _mark_of(key_node))
                out[key] = self.build(value_node, child)
                continue
            if key in seen:
                raise self.fail(
                    f"duplicate key `{key}` (first given at line {self.doc.keys[child].line})",
                    key_node,
                    child,
                )
            seen.add(key)
            self.doc.keys[child] = _mark_of(key_node)
            self.doc.values.pop(child, None)
            out[key] = self.build(value_node, child)
        return out

    def scalar(self, node: ScalarNode, path: KeyPath) -> Any:
        if node.tag in _KEPT_AS_TEXT:
            return node.value
        if node.tag not in _SCALAR_TAGS:
            raise self.unsafe(node, path)
        value = self.loader.construct_object(node)
        if not isinstance(value, str) or not has_interpolation(value):
            return value
        try:
            text = interpolate(value, self.env)
        except InterpolationError as exc:
            raise self.fail(str(exc), node, path) from None
        if node.style is None:  # unquoted: type the result like YAML would
            return _retype(self.loader, text)
        return text


def _retype(loader: yaml.SafeLoader, text: str) -> Any:
    tag = loader.resolve(ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag not in _SCALAR_TAGS:
        return text
    return loader.construct_object(ScalarNode(tag, text))


def parse_text(text: str, source: str, env: Mapping[str, str]) -> Located:
    """Parse YAML (or JSON) ``text``; errors are ``ConfigError`` located in ``source``.

    The caps of ``_bounds`` (size, depth, values, stages) are checked first.
    """
    check_text_size(text, source)
    check_shape(text, source)
    doc = Located(None, source)
    loader = BoundedLoader(text, source)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            raise _malformed(exc, source) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"malformed YAML: {exc}", source=source) from None
        if node is not None:
            doc.value = _Builder(loader, doc, env).build(node, ())
    finally:
        loader.dispose()
    return doc


def _malformed(exc: yaml.MarkedYAMLError, source: str) -> ConfigError:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or "could not parse"
    if exc.context:
        problem = f"{problem} ({exc.context}"
        if exc.context_mark is not None and exc.context_mark is not mark:
            problem += f" at line {exc.context_mark.line + 1}"
        problem += ")"
    return ConfigError(
        f"malformed YAML: {problem}",
        source=source,
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
    )


def located_from_mapping(value: Mapping[str, Any], source: str, env: Mapping[str, str]) -> Located:
    """A ``Located`` for a mapping built in code: no positions, same interpolation.

    Nesting is capped like a file's (``MAX_CHAIN_DEPTH``): the walk recurses.
    """
    yaml_loader = yaml.SafeLoader("")
    try:
        return Located(_interpolate_tree(value, yaml_loader, env, (), source), source)
    finally:
        yaml_loader.dispose()


def _interpolate_tree(
    value: Any, loader: yaml.SafeLoader, env: Mapping[str, str], path: KeyPath, source: str
) -> Any:
    if isinstance(value, str):
        if not has_interpolation(value):
            return value
        try:
            return _retype(loader, interpolate(value, env))
        except InterpolationError as exc:
            raise ConfigError(str(exc), source=source, key=format_key(path)) from None
    if isinstance(value, Mapping | list | tuple) and len(path) >= MAX_CHAIN_DEPTH:
        raise ConfigError(
            f"lists and mappings nest deeper than {MAX_CHAIN_DEPTH} levels "
            "(agui_pipes.config.MAX_CHAIN_DEPTH); a chain declaration is shallow",
            source=source,
            key=format_key(path),
        )
    if isinstance(value, Mapping):
        return {k: _interpolate_tree(v, loader, env, (*path, k), source) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_interpolate_tree(v, loader, env, (*path, i), source) for i, v in enumerate(value)]
    return value
