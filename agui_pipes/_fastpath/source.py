"""Compiling generated code so that it can be read: a named origin, source in ``linecache``.

Generated functions (builders, writers, bypasses) would otherwise run from
``"<string>"``: a traceback would stop at a line nobody can see. Each piece
is compiled with a file name that says what generated it and for which shape
(``<agui_pipes._fastpath: builder TEXT_MESSAGE_CONTENT (type,messageId,delta)>``),
and its text is registered with ``linecache`` under that name, so tracebacks,
``inspect.getsource`` and debuggers show the lines. The same text is kept per
name for ``generated_source`` (and ``python -m agui_pipes._fastpath show``).
"""

from __future__ import annotations

import linecache
from typing import Any, Final

__all__ = ["PREFIX", "compile_function", "origin", "source_of"]

PREFIX: Final = "<agui_pipes._fastpath: "

_SOURCES: dict[str, str] = {}
"""The generated text per origin name. As bounded as the caches whose code it
holds: every name is one shape of a builder, writer or bypass, and those are
compiled at most once per bounded table entry."""


def origin(kind: str, type_name: str, keys: tuple[str, ...] | None = None) -> str:
    """The file name generated code of ``kind`` for one shape is compiled under."""
    shape = "" if keys is None else f" ({','.join(keys)})"
    return f"{PREFIX}{kind} {type_name}{shape}>"


def compile_function(source: str, filename: str, namespace: dict[str, Any], name: str) -> Any:
    """Run ``source`` (one ``def``) compiled as ``filename``; return the function ``name``.

    The text goes into ``linecache`` first, with no modification time, so
    ``linecache.checkcache`` keeps it (it only revalidates real files).
    """
    text = source if source.endswith("\n") else source + "\n"
    _SOURCES[filename] = text
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)  # generated from the models' field names
    return namespace[name]


def source_of(filename: str) -> str | None:
    """The text compiled under ``filename``, or None when nothing was."""
    return _SOURCES.get(filename)
