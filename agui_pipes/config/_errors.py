"""``ConfigError``: one exception for everything wrong with a chain declaration.

A chain file is written by a person, so every error has to answer three
questions without a debugger: *where* (file, line, column, and the key path
inside the document), *what* (the message), and *how to fix it* (the valid
choices, and a "did you mean" suggestion for near-misses). The fields are kept
separately, not only in the message, so tools (an editor plugin, the CLI) can
point at the spot themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .._foundation.errors import AguiPipesError

__all__ = ["ConfigError", "did_you_mean", "format_key"]

KeyPath = tuple[str | int, ...]


def format_key(path: Sequence[str | int]) -> str:
    """``("transformers", 1, "deny")`` -> ``transformers[1].deny``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest valid choice to a misspelt ``word``, if any is close enough."""
    import difflib  # only a failing load needs it: not on every start of the CLI

    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


class ConfigError(AguiPipesError):
    """A chain declaration is invalid.

    Attributes (all optional except ``message``):

    * ``source`` — the file name, or ``<string>`` / ``<mapping>`` for inline input;
    * ``line`` / ``column`` — 1-based position in the source (``None`` for mappings);
    * ``key`` — the offending key path, e.g. ``transformers[1].deny``;
    * ``choices`` — the valid values, when the error is "not one of these";
    * ``suggestion`` — the closest valid choice to what was written.

    ``str(error)`` renders all of it as ``file:line:col: key: message`` plus
    hint lines, the format compilers use, so editors can jump to the spot.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        column: int | None = None,
        key: str | None = None,
        choices: Sequence[str] | None = None,
        suggestion: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        self.key = key or None
        self.choices: tuple[str, ...] | None = tuple(choices) if choices is not None else None
        self.suggestion = suggestion
        super().__init__(self._render())

    @property
    def location(self) -> str:
        """``file:line:column`` as far as it is known (empty when nothing is)."""
        parts: list[str] = []
        if self.source is not None:
            parts.append(self.source)
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def _render(self) -> str:
        head = self.message
        if self.key:
            head = f"{self.key}: {head}"
        if self.location:
            head = f"{self.location}: {head}"
        lines = [head]
        if self.suggestion is not None:
            lines.append(f"  did you mean `{self.suggestion}`?")
        if self.choices:
            lines.append("  valid choices: " + ", ".join(f"`{c}`" for c in self.choices))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._render()
