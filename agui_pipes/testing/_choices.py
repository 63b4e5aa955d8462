"""Cheap, shrink-friendly random choices on top of a hypothesis ``draw``.

The stream generator makes thousands of small decisions per example. Building
a fresh strategy object for each one is the main cost of a naive composite, so
the strategies are built once and cached here. Every helper is written so that
hypothesis' shrinking (towards 0 / the first element / ``False``) lands on the
*simpler* stream: fewer features, the first option, the plainest form.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")

DrawFn = Callable[[st.SearchStrategy[Any]], Any]

# Ordinary words most of the time: they keep examples readable and cheap. A few
# entries exist to exercise encoders (quotes, escapes, non-BMP characters).
_WORDS: tuple[str, ...] = (
    "Hello",
    " world",
    ", ",
    "the ",
    "answer",
    " is",
    " 42",
    ".",
    "\n",
    "",
    "café",
    "naïve ",
    "日本語",
    "👋",
    '"quoted"',
    "back\\slash",
    "<b>tag</b>",
    "tab\there",
)
_KEYS: tuple[str, ...] = ("a", "b", "count", "items", "name", "done", "x", "y", "a/b", "t~1")
_TEXT = st.text(max_size=6)


@lru_cache(maxsize=512)
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


class _Chooser:
    """Decision helpers on top of one primitive: ``int(lo, hi)``."""

    __slots__ = ()

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def chance(self, percent: int) -> bool:
        """True with roughly ``percent``% probability; shrinks to ``False``."""
        if percent <= 0:
            return False
        if percent >= 100:
            return True
        return self.integer(0, 99) >= 100 - percent

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options`` (shrinks towards the first)."""
        return options[self.integer(0, len(options) - 1)]

    def word(self) -> str:
        """A short text fragment: usually a vocabulary word, sometimes arbitrary text."""
        return self.pick(_WORDS)

    def sentence(self, max_words: int = 4) -> str:
        return "".join(self.word() for _ in range(self.integer(1, max_words)))

    def key(self) -> str:
        """An object key; a couple of them need JSON-Pointer escaping (``/``, ``~``)."""
        return self.pick(_KEYS)

    def scalar(self) -> Any:
        kind = self.integer(0, 4)
        if kind == 0:
            return self.integer(-3, 100)
        if kind == 1:
            return self.word()
        if kind == 2:
            return self.chance(50)
        if kind == 3:
            return None
        return self.integer(-(2**40), 2**40)

    def json_value(self, depth: int = 2) -> Any:
        """A JSON value (no floats: they round-trip differently across languages)."""
        if depth <= 0 or self.chance(60):
            return self.scalar()
        if self.chance(50):
            return [self.json_value(depth - 1) for _ in range(self.integer(0, 3))]
        return self.json_object(depth - 1)

    def json_object(self, depth: int = 2, max_keys: int = 3) -> dict[str, Any]:
        return {self.key(): self.json_value(depth) for _ in range(self.integer(0, max_keys))}

    def args_json(self) -> str:
        """Tool-call arguments: a JSON object's text (occasionally not JSON at all)."""
        if self.chance(5):
            return self.sentence()
        return json.dumps(self.json_object(1), ensure_ascii=self.chance(50))

    def split(self, text: str, max_parts: int) -> list[str]:
        """Cut ``text`` into 1..max_parts consecutive pieces (empty pieces allowed)."""
        parts = self.integer(1, max_parts)
        cuts = sorted(self.integer(0, len(text)) for _ in range(parts - 1))
        out, start = [], 0
        for cut in cuts:
            out.append(text[start:cut])
            start = cut
        out.append(text[start:])
        return out


class _Seeded(_Chooser):
    """Content choices from a seeded PRNG: ~100x cheaper than a hypothesis draw."""

    __slots__ = ("_rng",)

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return lo if hi <= lo else self._rng.randint(lo, hi)


class Choices(_Chooser):
    """Structural decisions drawn from hypothesis; content from a drawn seed.

    The *shape* of a stream (which actor moves, how many items, which form an
    event takes) is drawn through hypothesis so it shrinks well. Cosmetic
    content (words, JSON values, argument text) comes from a PRNG seeded by
    one draw: drawing every character through hypothesis made generation
    several times slower without making failures any easier to read.
    """

    __slots__ = ("content", "draw")

    def __init__(self, draw: DrawFn) -> None:
        self.draw = draw
        self.content = _Seeded(self.integer(0, 2**32 - 1))

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` (shrinks towards ``lo``)."""
        if hi <= lo:
            return lo
        value: int = self.draw(_ints(lo, hi))
        return value

    def word(self) -> str:
        if self.content.chance(8):
            text: str = self.draw(_TEXT)
            return text
        return self.content.word()

    def sentence(self, max_words: int = 4) -> str:
        return self.content.sentence(max_words)

    def key(self) -> str:
        return self.content.key()

    def scalar(self) -> Any:
        return self.content.scalar()

    def json_value(self, depth: int = 2) -> Any:
        return self.content.json_value(depth)

    def json_object(self, depth: int = 2, max_keys: int = 3) -> dict[str, Any]:
        return self.content.json_object(depth, max_keys)

    def args_json(self) -> str:
        return self.content.args_json()

    def split(self, text: str, max_parts: int) -> list[str]:
        return self.content.split(text, max_parts)
