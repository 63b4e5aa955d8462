"""Which YAML ``type`` names exist and how each one becomes a stage.

Built-ins come from the one list of them (``agui_pipes/_stagekit/builtins.py``)
with their options model and a *lazy* import path,
so loading a chain that uses two stages imports two modules, and ``agui-pipes
list`` works even where an optional stage dependency is missing.

Third-party transformers come from the entry-point group
``agui_pipes.transformers`` (the plugin protocol is documented in
docs/writing-transformers.md). Entry points are *discovered* (metadata only)
when a name is looked up that is not a built-in, and *loaded* (imported) only
when used, or when every transformer is listed. A plugin that fails to import
or breaks the protocol produces a ``PluginWarning`` naming it and is skipped:
one broken package on the machine must not take down every pipeline.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pydantic import BaseModel

from .._pipeline.transformer import Stage
from .._stagekit.builtins import BUILTINS
from ._no_options import NoOptions

__all__ = [
    "PLUGIN_GROUP",
    "PluginWarning",
    "Registry",
    "TransformerSpec",
    "default_registry",
    "import_reference",
    "spec_from_object",
]

PLUGIN_GROUP = "agui_pipes.transformers"
"""The entry-point group third-party transformers register under."""

_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")
"""snake_case, optionally dotted for namespacing (``acme.upper``); never ``:``."""


_IMMUTABLE = (str, int, float, bool, bytes)


class PluginWarning(UserWarning):
    """A transformer plugin could not be loaded (it is skipped, the rest keep working)."""


@dataclass(frozen=True)
class TransformerSpec:
    """How one YAML ``type`` becomes a stage.

    ``factory`` is called with the validated options as keyword arguments
    (options whose value is ``None`` are left out, so the factory's own
    default applies) and must return a ``Stage``. It may be given as a
    ``"module:attr"`` string, imported on first use. ``options`` is the
    pydantic model that declares and validates the options; its field names
    are the keyword arguments.
    """

    name: str
    factory: Callable[..., Stage] | str
    options: type[BaseModel] = NoOptions
    summary: str = ""
    origin: str = "built-in"

    def __post_init__(self) -> None:
        if not (isinstance(self.options, type) and issubclass(self.options, BaseModel)):
            raise TypeError(
                f"transformer `{self.name}`: options must be a pydantic BaseModel subclass, "
                f"got {self.options!r}"
            )
        if not self.summary and self.options is not NoOptions:
            own = _first_line_of(self.options.__dict__.get("__doc__"))
            object.__setattr__(self, "summary", own)

    def resolve_factory(self) -> Callable[..., Stage]:
        """The factory callable (importing it when it was given as a string, once)."""
        if not isinstance(self.factory, str):
            return self.factory
        resolved: Callable[..., Stage] | None = self.__dict__.get("_resolved")
        if resolved is None:
            resolved = import_reference(self.factory)
            object.__setattr__(self, "_resolved", resolved)
        assert resolved is not None
        return resolved

    def validate(self, options: Any) -> BaseModel:
        """Validate a mapping of options (raises ``pydantic.ValidationError``)."""
        return self.options.model_validate(options if options is not None else {})

    def build(self, options: BaseModel) -> Stage:
        """A new stage configured by validated ``options``."""
        # Mutable values are copied per build, so no two chains share a list.
        kwargs = {
            name: value if isinstance(value, _IMMUTABLE) else copy.deepcopy(value)
            for name in type(options).model_fields
            if (value := getattr(options, name)) is not None
        }
        stage = self.resolve_factory()(**kwargs)
        if not isinstance(stage, Stage):
            raise TypeError(
                f"the factory of transformer `{self.name}` returned "
                f"{type(stage).__name__}, not a stage (StreamTransformer, "
                "AsyncStreamTransformer or StreamOperator)"
            )
        return stage


def _first_line_of(doc: object) -> str:
    text = inspect.cleandoc(doc).strip() if isinstance(doc, str) else ""
    return text.splitlines()[0].strip() if text else ""


def import_reference(reference: str) -> Any:
    """Import ``"package.module:attr.path"`` and return the attribute."""
    module_name, sep, attr_path = reference.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"{reference!r} is not a `module:attribute` reference")
    target: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        target = getattr(target, part)
    return target


def spec_from_object(obj: object, name: str, origin: str) -> TransformerSpec:
    """Apply the plugin protocol to what an entry point (or reference) points at.

    * a ``TransformerSpec`` — used as is (renamed to ``name``);
    * a class or factory callable — called with the options as keyword
      arguments; its ``Options`` attribute, when present, is the pydantic
      options model (otherwise it takes no options); the summary is the first
      line of its docstring.
    """
    if isinstance(obj, TransformerSpec):
        return dataclasses.replace(obj, name=name, origin=origin)
    if not callable(obj):
        raise TypeError(
            f"expected a TransformerSpec, a Stage subclass or a factory callable, "
            f"got {type(obj).__name__}"
        )
    model = getattr(obj, "Options", None)
    if model is None:
        model = NoOptions
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"`Options` must be a pydantic BaseModel subclass, got {model!r}")
    # A class's *own* docstring only: an undocumented StreamTransformer subclass
    # must not be summarised with the base class's docstring.
    own_doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else obj.__doc__
    summary = _first_line_of(own_doc)
    return TransformerSpec(name, obj, model, summary=summary, origin=origin)


_BUILTINS: tuple[tuple[str, str, str], ...] = tuple(
    # (YAML name, stage class in agui_pipes.transformers, options model in .options),
    # from the one list of built-ins
    (builtin.name, builtin.stage, builtin.options)
    for builtin in BUILTINS
)


def _builtin_spec(name: str, cls: str, model: str) -> TransformerSpec:
    # The options models are imported here, when a built-in is first looked up,
    # not with the registry: a chain that names no built-in never defines them.
    from . import options

    return TransformerSpec(name, f"agui_pipes.transformers:{cls}", getattr(options, model))


def builtin_specs() -> list[TransformerSpec]:
    """The built-in transformers, in documentation order."""
    return [_builtin_spec(name, cls, model) for name, cls, model in _BUILTINS]


class Registry:
    """Name -> ``TransformerSpec``: built-ins, code registrations and plugins.

    ``Registry()`` is what ``load_chain`` uses by default (through
    ``default_registry()``); build your own to add transformers in code with
    ``register`` without touching the global one, or to turn plugin discovery
    off (``plugins=False``) for a locked-down deployment.
    """

    def __init__(
        self, *, builtins: bool = True, plugins: bool = True, group: str = PLUGIN_GROUP
    ) -> None:
        # A built-in is listed from the start (so names, collisions and order are
        # settled) but its spec is built on first use: None until then.
        self._specs: dict[str, TransformerSpec | None] = {}
        self._builtins: dict[str, tuple[str, str]] = {}
        self._plugins_enabled = plugins
        self._group = group
        self._pending: dict[str, EntryPoint] | None = None if plugins else {}
        self._broken: dict[str, str] = {}
        if builtins:
            for name, cls, model in _BUILTINS:
                self._specs[name] = None
                self._builtins[name] = (cls, model)

    def _spec(self, name: str) -> TransformerSpec | None:
        """The spec registered as ``name`` (building a listed built-in's on first use)."""
        spec = self._specs.get(name)
        if spec is None and name in self._specs:
            spec = _builtin_spec(name, *self._builtins[name])
            self._specs[name] = spec
        return spec

    # -- registration -------------------------------------------------------

    def register(self, spec: TransformerSpec, *, replace: bool = False) -> None:
        """Add a transformer under ``spec.name`` (``replace=True`` to override one)."""
        if not _NAME.fullmatch(spec.name):
            raise ValueError(
                f"transformer name {spec.name!r} must be snake_case "
                "(lowercase letters, digits, `_`; dots for a namespace)"
            )
        if spec.name in self._specs and not replace:
            raise ValueError(f"a transformer named `{spec.name}` is already registered")
        self._specs[spec.name] = spec
        self._builtins.pop(spec.name, None)

    # -- plugins --------------------------------------------------------------

    def _discover(self) -> dict[str, EntryPoint]:
        if self._pending is None:
            self._pending = {}
            found = sorted(
                entry_points(group=self._group),
                key=lambda ep: (ep.name, _dist_name(ep)),
            )
            for ep in found:
                self._consider(ep)
        return self._pending

    def _consider(self, ep: EntryPoint) -> None:
        assert self._pending is not None
        where = _describe(ep)
        if not _NAME.fullmatch(ep.name):
            _warn(f"transformer plugin {where} skipped: its name is not snake_case")
        elif ep.name in self._specs:
            known = self._specs[ep.name]
            origin = "built-in" if known is None else known.origin
            _warn(
                f"transformer plugin {where} skipped: `{ep.name}` is already a {origin} transformer"
            )
        elif ep.name in self._pending:
            _warn(
                f"transformer plugin {where} skipped: `{ep.name}` is also provided by "
                f"{_describe(self._pending[ep.name])}"
            )
        else:
            self._pending[ep.name] = ep

    def _load(self, name: str) -> TransformerSpec | None:
        pending = self._discover()
        ep = pending.pop(name, None)
        if ep is None:
            return None
        try:
            spec = spec_from_object(ep.load(), ep.name, origin=_dist_name(ep) or ep.value)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            self._broken[name] = reason
            _warn(f"transformer plugin {_describe(ep)} failed to load and is skipped: {reason}")
            return None
        self._specs[name] = spec
        return spec

    # -- lookup ---------------------------------------------------------------

    def get(self, name: str) -> TransformerSpec | None:
        """The transformer called ``name`` (loading its plugin if need be), or ``None``."""
        spec = self._spec(name)
        if spec is not None:
            return spec
        return self._load(name)

    def broken_reason(self, name: str) -> str | None:
        """Why the plugin providing ``name`` failed to load, if it did."""
        return self._broken.get(name)

    def names(self) -> list[str]:
        """Every known name: built-ins and registrations first, then plugins (not loaded)."""
        pending = self._discover()
        return [*self._specs, *sorted(n for n in pending if n not in self._specs)]

    def specs(self) -> list[TransformerSpec]:
        """Every transformer that loads (imports all plugins; broken ones warn)."""
        for name in list(self._discover()):
            self._load(name)
        specs = [self._spec(name) for name in list(self._specs)]
        return [spec for spec in specs if spec is not None]


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return str(dist.name) if dist is not None else ""


def _describe(ep: EntryPoint) -> str:
    dist = _dist_name(ep)
    return f"`{ep.name}` ({ep.value}{', from ' + dist if dist else ''})"


def _warn(message: str) -> None:
    warnings.warn(message, PluginWarning, stacklevel=4)


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    """The process-wide registry (built-ins + installed plugins), created on first use."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Registry()
    return _DEFAULT
