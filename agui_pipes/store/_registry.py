"""Which class serves which store URL scheme: the entry-point group ``agui_pipes.stores``.

The backend contract, for built-ins and plugins alike: a backend is a class
registered under its URL scheme in the entry-point group ``agui_pipes.stores``
(``postgres = "acme_store:PostgresEventLog"``; one entry per scheme, several
schemes may name one class) whose classmethod ``from_url(url: StoreURL)``
returns the :class:`EventLog` the URL names, *not yet opened*: it reads and
checks ``url.parts`` and its own options (``url.number``, then
``url.no_more``), raises ValueError naming ``url.text`` for anything wrong,
and connects nothing. See :class:`StoreBackend` and docs/durable.md.

Why entry points, for the built-ins too: adding a backend — Postgres is
next — is a class and one registration, and ``memory``, ``sqlite`` and
``redis`` are registered and loaded exactly the way a plugin is, so the path
a plugin takes is the path every test takes.

Why the built-ins are listed once, in pyproject.toml: that table is where
they are registered; installed (normally or editable), it is the package
metadata. A source tree run without being installed has no metadata, so the
same table is read from the tree's pyproject.toml instead: the list is
never written twice.

Entry points are *discovered* (metadata only, once per process) when a URL is
first opened, and a backend is *imported* only when its scheme is opened: a
broken plugin breaks its own scheme, with a message naming its entry point,
never the others. The built-ins are read from agui_pipes' own distribution
alone (a tenth of the cost of scanning every installed one), so opening
``sqlite:`` never waits on the scan, and a plugin cannot take over a
built-in scheme; every other scheme is looked up among all distributions.
"""

from __future__ import annotations

import re
from importlib.metadata import EntryPoint, PackageNotFoundError, distribution, entry_points
from pathlib import Path
from typing import Protocol, cast

from ._base import EventLog
from ._url import StoreURL

__all__ = ["GROUP", "StoreBackend", "backend_for", "schemes"]

GROUP = "agui_pipes.stores"
"""The entry-point group store backends register under, one entry per URL scheme."""

_DISTRIBUTION = "agui-pipes"
_PYPROJECT = Path(__file__).resolve().parent.parent.parent / "pyproject.toml"
_TABLE = f'[project.entry-points."{GROUP}"]'
_ENTRY = re.compile(r'"?(?P<name>[\w.-]+)"?\s*=\s*"(?P<value>[^"]*)"\s*(#.*)?')


class StoreBackend(Protocol):
    """What a store backend class provides: ``from_url``, the one way a URL becomes a log."""

    @classmethod
    def from_url(cls, url: StoreURL) -> EventLog:
        """The event log ``url`` names, not connected yet; ValueError for a bad URL."""
        ...


_builtins: dict[str, EntryPoint] | None = None
_plugins: dict[str, list[EntryPoint]] | None = None
_loaded: dict[str, StoreBackend] = {}


def schemes() -> list[str]:
    """Every registered scheme, sorted (discovered, not imported)."""
    return sorted({*_builtin_entries(), *_plugin_entries()})


def backend_for(url: StoreURL) -> StoreBackend | None:
    """The backend registered for ``url.scheme`` (importing it), or None for no backend.

    Raises ValueError naming the entry point when the scheme is registered
    twice with different targets, or when its backend fails to import or is
    not a backend (no ``from_url``).
    """
    backend = _loaded.get(url.scheme)
    if backend is not None:
        return backend
    entry = _builtin_entries().get(url.scheme)
    if entry is None:
        found = _plugin_entries().get(url.scheme)
        if not found:
            return None
        if len(found) > 1:
            raise ValueError(
                f"store URL {url.text!r}: scheme {url.scheme!r} is registered by more than one "
                f"backend: {', '.join(map(_describe, found))}; uninstall all but one"
            )
        (entry,) = found
    try:
        loaded = entry.load()
    except Exception as exc:
        raise ValueError(
            f"store URL {url.text!r}: the backend for {url.scheme!r}, entry point "
            f"{_describe(entry)} in group {GROUP!r}, failed to import: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not callable(getattr(loaded, "from_url", None)):
        raise ValueError(
            f"store URL {url.text!r}: entry point {_describe(entry)} in group {GROUP!r} is "
            f"not a store backend: {loaded!r} has no from_url(url) classmethod"
        )
    backend = _loaded[url.scheme] = cast(StoreBackend, loaded)
    return backend


def _builtin_entries() -> dict[str, EntryPoint]:
    """Scheme -> entry point of agui_pipes' own backends: its metadata, else its pyproject.toml."""
    global _builtins
    if _builtins is None:
        try:
            own = list(distribution(_DISTRIBUTION).entry_points.select(group=GROUP))
        except PackageNotFoundError:
            own = []
        # No metadata of ours (a source tree run without installing it): the same table
        # from the tree's pyproject.toml.
        _builtins = {entry.name.lower(): entry for entry in own or _source_tree_entries()}
    return _builtins


def _plugin_entries() -> dict[str, list[EntryPoint]]:
    """Scheme -> its entry points in other distributions (one, unless two claim it)."""
    global _plugins
    if _plugins is None:
        builtins = _builtin_entries()
        by_scheme: dict[str, list[EntryPoint]] = {}
        for entry in entry_points(group=GROUP):
            scheme = entry.name.lower()
            if scheme in builtins or _distribution(entry) == _DISTRIBUTION:
                continue
            same = by_scheme.setdefault(scheme, [])
            # The same target twice (two copies of one plugin on the path) is one entry.
            if all(other.value != entry.value for other in same):
                same.append(entry)
        _plugins = by_scheme
    return _plugins


def _source_tree_entries() -> list[EntryPoint]:
    """The built-ins from the source tree's pyproject.toml (its ``agui_pipes.stores`` table)."""
    try:
        lines = _PYPROJECT.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    entries: list[EntryPoint] = []
    inside = False
    for line in map(str.strip, lines):
        if line.startswith("["):
            inside = line == _TABLE
        elif inside and (match := _ENTRY.fullmatch(line)):
            entries.append(EntryPoint(match["name"], match["value"], GROUP))
    return entries


def _distribution(entry: EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return "" if dist is None else re.sub(r"[-_.]+", "-", str(dist.name)).lower()


def _describe(entry: EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    origin = f", from {dist.name}" if dist is not None else ""
    return f"`{entry.name}` ({entry.value}{origin})"
