"""The JSON library on the per-event hot path: orjson, with the standard library as fallback.

Parsing and serialising dominate a relay's per-event cost, and orjson does
both several times faster than ``json``. Every use goes through these helpers
so the fallback (for platforms without an orjson wheel) is one place, and so
callers keep the standard library's exact error reporting: a failure in
orjson is retried with ``json``, which either succeeds (inputs orjson refuses
but JSON allows, such as escaped lone surrogates) or raises its usual,
well-located ``JSONDecodeError``.

Both parsers accept only what every JSON peer reads the same way, which is
what orjson accepts: no ``NaN`` / ``Infinity`` / ``-Infinity`` literals (they
are not JSON; ``JSON.parse`` refuses them), no number beyond the range of a
double (it would read as infinity and be written back as ``null``), and no
nesting deeper than :data:`MAX_DEPTH` levels of arrays and objects. The
fallback is told so through its hooks; its refusals, like orjson's depth
refusal, are a :class:`JSONValueError` naming the problem and, where the
document parsed, the path to the offending value.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from .limits import DEFAULT_LIMITS

__all__ = [
    "HAVE_ORJSON",
    "MAX_DEPTH",
    "JSONValueError",
    "dumps_plain",
    "dumps_text",
    "fast_loads",
    "leading_type",
    "loads",
    "orjson_dumps",
    "shown_path",
    "value_problem",
]

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a core dependency; kept for odd platforms
    _orjson = None  # type: ignore[assignment]

HAVE_ORJSON = _orjson is not None

MAX_DEPTH: Final = DEFAULT_LIMITS.max_depth
"""Deepest nesting of arrays and objects accepted: orjson's own parse depth (1024)."""

_ORJSON_TOO_DEEP: Final = "depth limit exceeded"
_INT_RANGE: Final = (-(2**63), 2**64 - 1)
"""Integers orjson reads as ints; beyond, it reads a double (as ``JSON.parse`` does)."""


class JSONValueError(ValueError):
    """Text that is JSON-shaped but not portable JSON: NaN/Infinity, an overflowing number, or
    nesting past :data:`MAX_DEPTH`.

    ``problem`` says what, in words that end a sentence; ``path`` is the
    position of the offending value in the document (keys and indexes) when
    the document could be read, else None; ``document`` is the parsed
    top-level value when there is one (so a caller can name the event type);
    ``position`` is the character offset when only that is known.
    """

    def __init__(
        self,
        problem: str,
        *,
        path: tuple[str | int, ...] | None = None,
        document: Any = None,
        position: int | None = None,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path = path
        self.document = document
        self.position = position


class _Refused:
    """What the fallback parser's hooks put where a refused value stood (found by a walk)."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _constant(name: str) -> _Refused:
    return _Refused(
        f"the literal {name} is not JSON (JSON has no NaN or Infinity); send a finite "
        "number, a string or null"
    )


def _shown(text: str) -> str:
    if len(text) <= 40:
        return text
    return f"{text[:20]}...{text[-10:]} ({len(text)} characters)"


def _overflow(text: str) -> _Refused:
    return _Refused(
        f"the number {_shown(text)} is beyond the range of a double (about 1.8e308), "
        "which JSON peers read as infinity; send it as a string"
    )


def _parse_float(text: str) -> float | _Refused:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        return _overflow(text)
    return value


def _parse_int(text: str) -> int | float | _Refused:
    # As orjson: an int within 64 bits, else a double; float() has no digit limit
    # (int() refuses 4,300+ digits with a ValueError of its own).
    if len(text) <= 21:
        value = int(text)
        if _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            return value
    return _parse_float(text)


def _too_deep(position: int | None = None) -> JSONValueError:
    where = f", at character {position}" if position is not None else ""
    return JSONValueError(
        f"arrays and objects nest deeper than the limit of {MAX_DEPTH} levels "
        f"(agui_pipes.Limits.max_depth){where}",
        position=position,
    )


def value_problem(
    value: Any, *, max_depth: int = MAX_DEPTH, start: int = 1
) -> tuple[tuple[str | int, ...], str] | None:
    """The first value that is not portable JSON, as (path, problem), or None.

    Walks iteratively (no recursion, whatever the depth): a non-finite float,
    a value nested deeper than ``max_depth`` (``start`` is the level of
    ``value`` itself), a fallback parser's refusal, or a value JSON cannot
    hold (keys that are not strings, sets, arbitrary objects).
    """
    stack: list[tuple[tuple[str | int, ...], Any, int]] = [((), value, start)]
    while stack:
        path, item, level = stack.pop()
        kind = item.__class__
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if item != item or item in (float("inf"), float("-inf")):
                return path, f"the float {item!r} is not JSON (JSON has no NaN or Infinity)"
            continue
        if kind is _Refused:
            return path, item.problem
        if isinstance(item, dict):
            if level > max_depth:
                return path, _too_deep().problem
            children: list[tuple[tuple[str | int, ...], Any, int]] = []
            for key, child in item.items():
                if not isinstance(key, str):
                    return path, f"the key {key!r} is not a string (JSON keys are strings)"
                children.append(((*path, key), child, level + 1))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            if level > max_depth:
                return path, _too_deep().problem
            stack.extend(
                ((*path, i), child, level + 1) for i, child in reversed(list(enumerate(item)))
            )
        elif isinstance(item, str | int):  # subclasses (enums): written as their value
            continue
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return path, f"the float {item!r} is not JSON (JSON has no NaN or Infinity)"
        else:
            return path, f"a {type(item).__name__} is not a JSON value"
    return None


def _stdlib_parse(text: str) -> Any:
    return json.loads(
        text, parse_constant=_constant, parse_float=_parse_float, parse_int=_parse_int
    )


def _stdlib_loads(text: str) -> Any:
    """``json.loads`` held to orjson's acceptance (see the module docstring)."""
    try:
        document = _stdlib_parse(text)
    except RecursionError:
        # Before Python 3.12 the C scanner counts against the interpreter's
        # recursion limit (1000 by default), below MAX_DEPTH: give it room for
        # MAX_DEPTH levels once, so both parsers accept the same depths.
        document = _with_room_for_depth(text)
    found = value_problem(document)
    if found is not None:
        path, problem = found
        raise JSONValueError(problem, path=path, document=document)
    return document


@contextmanager
def _room_for_depth() -> Iterator[None]:
    """Raise the recursion limit to just above this frame's depth plus MAX_DEPTH.

    Just enough for the standard library's recursive parser and writer to handle
    every value within the nesting limit; deeper values still fail, after a bounded
    amount of stack.
    """
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved, depth + MAX_DEPTH + 50))
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)


def _with_room_for_depth(text: str) -> Any:
    """Parse again with room for MAX_DEPTH levels (see :func:`_room_for_depth`)."""
    with _room_for_depth():
        try:
            return _stdlib_parse(text)
        except RecursionError:
            raise _too_deep() from None


def dumps_text(value: Any, **options: Any) -> str:
    """``json.dumps`` of a value within the nesting limit, however deep (CLI output).

    The standard library's writer recurses; at the default recursion limit it
    fails near 1000 levels, below what decode accepts.
    """
    with _room_for_depth():
        return json.dumps(value, **options)


def loads(data: str | bytes) -> Any:
    """Parse one JSON document (the standard library's semantics and errors, held to orjson's
    acceptance).

    Bytes are UTF-8 (RFC 8259), decoded strictly before the fallback: given
    bytes, ``json`` would also guess UTF-16/32 and skip a BOM, so the same
    event would parse as bytes but not as text. Raises ``JSONDecodeError``
    for text that is not JSON, :class:`JSONValueError` for NaN / Infinity, a
    number beyond a double or nesting past :data:`MAX_DEPTH`.
    """
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError as exc:
            if exc.msg.startswith(_ORJSON_TOO_DEEP):
                raise _too_deep(exc.pos) from None
    if isinstance(data, bytes | bytearray):
        data = bytes(data).decode("utf-8")
    return _stdlib_loads(data)


fast_loads = _orjson.loads if _orjson is not None else loads
"""The fastest parser available; raises a ValueError subclass on bad input (any wording).

Without orjson it is :func:`loads` itself, so both accept the same documents."""
orjson_dumps = _orjson.dumps if _orjson is not None else None

_LEADING_TYPE: Final = re.compile(rb'\s*\{\s*"type"\s*:\s*"([A-Za-z0-9_]{1,64})"')


def leading_type(data: str | bytes | bytearray) -> str | None:
    """The event type a document starts with (``{"type":"X"``), for naming an event that did
    not parse; None when it does not start that way."""
    head = data[:200].encode("utf-8", "replace") if isinstance(data, str) else bytes(data[:200])
    found = _LEADING_TYPE.match(head)
    return found.group(1).decode() if found is not None else None


def shown_path(path: tuple[str | int, ...]) -> str:
    """A dotted path for a message: the first steps and the count of the rest when long."""
    if len(path) <= 12:
        return ".".join(str(p) for p in path)
    head = ".".join(str(p) for p in path[:8])
    return f"{head}...({len(path) - 8} more levels)"


def dumps_plain(value: dict[str, Any]) -> bytes | None:
    """Compact UTF-8 JSON of a dict of plain values, or None when orjson cannot do it.

    Callers only pass values whose JSON text orjson and pydantic write
    identically (str, bool, ints in the interoperable range, None); None
    tells them to take the general path.
    """
    if _orjson is None:
        return None
    try:
        return _orjson.dumps(value)
    except (_orjson.JSONEncodeError, TypeError):
        return None
