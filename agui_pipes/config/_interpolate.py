"""``${VAR}`` / ``${VAR:-default}`` substitution in config values.

Why our own few lines rather than ``os.path.expandvars``: that function leaves
an unknown variable in place silently, and a chain file that quietly keeps a
literal ``${REDACT_PATTERN}`` is a security bug waiting to happen. Here a
missing variable without a default is an error the loader can point at.

Syntax (a subset of the POSIX shell's, so it reads as expected):

* ``${NAME}`` — the variable's value; an error when it is not set;
* ``${NAME:-default}`` — the default when the variable is unset *or empty*;
* ``$$`` — a literal ``$``. Any other ``$`` is kept as is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["InterpolationError", "has_interpolation", "interpolate"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class InterpolationError(ValueError):
    """A ``${...}`` expression could not be substituted (the caller adds the location)."""

    def __init__(self, message: str, variable: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable


def has_interpolation(text: str) -> bool:
    """True when ``text`` contains something ``interpolate`` would change."""
    return "$" in text and ("${" in text or "$$" in text)


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """``text`` with every ``${...}`` expression replaced from ``env``."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        dollar = text.find("$", i)
        if dollar < 0 or dollar == n - 1:
            out.append(text[i:])
            break
        out.append(text[i:dollar])
        nxt = text[dollar + 1]
        if nxt == "$":
            out.append("$")
            i = dollar + 2
            continue
        if nxt != "{":
            out.append("$")
            i = dollar + 1
            continue
        close = text.find("}", dollar + 2)
        if close < 0:
            raise InterpolationError(
                f"unterminated `${{` in {text!r}: write `${{NAME}}` or `${{NAME:-default}}` "
                "(or `$$` for a literal `$`)"
            )
        out.append(_expand(text[dollar + 2 : close], env))
        i = close + 1
    return "".join(out)


def _expand(body: str, env: Mapping[str, str]) -> str:
    name, sep, default = body.partition(":-")
    if not _NAME.fullmatch(name):
        raise InterpolationError(
            f"`${{{body}}}` is not a valid variable reference: use `${{NAME}}` or "
            "`${NAME:-default}` with NAME made of letters, digits and `_`"
        )
    value = env.get(name)
    if sep:
        return value if value else default
    if value is None:
        raise InterpolationError(
            f"environment variable `{name}` is not set: set it, or give a default with "
            f"`${{{name}:-default}}`",
            variable=name,
        )
    return value
