"""Lazy public namespaces (PEP 562) for ``agui_pipes`` and its public subpackages.

Why lazy: importing everything a package exports costs ``ag_ui.core`` and
pydantic, the config loader, the driver and every stage (~0.4 s), while
``agui-pipes --version`` or a script that only needs ``TransformerChain``
needs a fraction of it. Each public package declares which module holds each
of its names; that module is imported the first time the name is read.

Why ``__module__`` is rewritten: classes and functions are defined in private
modules (``agui_pipes._pipeline.chain``), which is not where users import them from.
Reprs, tracebacks and pickles should name the public home
(``agui_pipes.TransformerChain``), as httpx and trio do. The rewrite happens
when a name is first loaded through its package, in this one place. A name
exported both by a subpackage and re-exported by a package above it (``run``
in ``agui_pipes.driver`` and ``agui_pipes``) gets the shortest public path,
whichever package is read first.

Why ``__dir__`` is ``__all__``: a module's namespace also holds what it
imported (``annotations``, ``TYPE_CHECKING``, ``httpx``) and its private
helpers; ``dir()`` and tab completion should show what a user may import, the
names ``from module import *`` gives. Lazy packages get that from ``attach``;
plain public modules set ``__dir__ = public_dir(__all__)``.
"""

from __future__ import annotations

import importlib
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from types import FunctionType
from typing import Any

__all__ = ["attach", "public_dir", "publish"]

_EXPORTS: dict[str, dict[str, str]] = {}
"""Each lazy package (by name): its public names -> the absolute module holding each."""


def attach(
    package: str,
    exports: Mapping[str, str],
    *,
    extras: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a lazy package.

    ``exports`` maps each public name to the module holding it, relative to
    ``package`` (``"._chain"``, one leading dot) or absolute. ``extras`` maps a
    module needing an optional dependency to the install command that
    provides it, for the message when that dependency is missing. The
    ``__dir__`` lists the package's ``__all__``: the names of ``exports`` and
    whatever the package defines itself.
    """
    sources = {
        name: f"{package}{module}" if module.startswith(".") else module
        for name, module in exports.items()
    }
    _EXPORTS[package] = sources
    install = {
        f"{package}{module}" if module.startswith(".") else module: how
        for module, how in (extras or {}).items()
    }

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(source)
        except ImportError as exc:
            if source not in install:
                raise
            raise ImportError(
                f"{package}.{name} needs {exc.name or 'an optional dependency'}: {install[source]}"
            ) from exc
        value = getattr(module, name)
        if source not in _EXPORTS:  # not a re-export of another lazy package's name
            _publish(value, _home(package, name))
        # Cached in the package: later reads are plain attribute lookups.
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        # Read when asked: the package assigns __all__ after calling attach().
        return sorted(sys.modules[package].__all__)

    return __getattr__, __dir__


def public_dir(names: Sequence[str]) -> Callable[[], list[str]]:
    """The ``__dir__`` of a plain public module: ``__dir__ = public_dir(__all__)``."""

    def __dir__() -> list[str]:
        return sorted(names)

    return __dir__


def publish(module: str, *values: object) -> None:
    """Name ``module`` the home of what a plain public module re-exports from a private one."""
    for value in values:
        _publish(value, module)


def _home(package: str, name: str) -> str:
    """The shortest public path of ``package.name``: climb while a parent re-exports it."""
    home = package
    parent = home.rpartition(".")[0]
    while parent and _EXPORTS.get(parent, {}).get(name) == home:
        home = parent
        parent = home.rpartition(".")[0]
    return home


def _publish(value: object, home: str) -> None:
    """Name ``home`` as the module of a class or function defined in a private module."""
    if not isinstance(value, (type, FunctionType)):
        return  # constants, type aliases, module-level instances keep no module of their own
    module = value.__module__
    top = home.partition(".")[0]
    if module.partition(".")[0] == top and any(part.startswith("_") for part in module.split(".")):
        if isinstance(value, type):
            _resolve_annotations(value)
        value.__module__ = home


def _resolve_annotations(cls: type) -> None:
    """Evaluate ``cls``'s string annotations where they were written, before it moves.

    ``typing.get_type_hints`` (and pydantic, for a dataclass used as a model)
    evaluates a class's string annotations in the namespace of
    ``cls.__module__``; once that is the public package, names the defining
    module imported (``Any``, a sibling class) would no longer resolve.
    Functions are unaffected: they resolve in their own ``__globals__``.
    """
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # names imported only for type checking: unresolvable there too
        return
    import inspect  # not at import time: ``import agui_pipes`` stays light

    own = inspect.get_annotations(cls)
    if own:
        cls.__annotations__ = {name: hints[name] for name in own}
    for name, field in cls.__dict__.get("__dataclass_fields__", {}).items():
        if name in hints:
            field.type = hints[name]
