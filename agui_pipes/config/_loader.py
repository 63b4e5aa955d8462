"""``load_chain``: a chain declaration in, a factory of fresh chains out.

Everything is checked when the declaration is loaded — syntax, names, option
types, cross-field rules, and that each stage actually constructs — so a bad
file fails at startup with a pointed message, never on the first request.
The factory then rebuilds the stages from the validated options on every call:
a chain holds per-run state and must not be shared between runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .._pipeline.chain import TransformerChain
from .._pipeline.transformer import Stage
from ._bounds import MAX_CHAIN_BYTES, MAX_CHAIN_STAGES, check_size, stages_error
from ._errors import ConfigError, KeyPath, did_you_mean
from ._registry import Registry, TransformerSpec, default_registry, import_reference
from ._registry import spec_from_object as _spec_from_object
from ._source import Located, located_from_mapping, parse_text

__all__ = ["ChainSource", "LoadedChain", "StageDeclaration", "load_chain", "read_source"]

ChainSource = Union[str, "os.PathLike[str]", Mapping[str, Any]]
"""A path (``Path`` or a string ending in .yaml/.yml/.json), YAML/JSON text, or a mapping."""

_TOP_KEYS = ("version", "transformers")
_VERSION = 1
_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class StageDeclaration:
    """One validated entry of a chain declaration."""

    spec: TransformerSpec
    options: BaseModel
    key: str
    """Where it was declared (``transformers[2]``), for messages."""

    def build(self) -> Stage:
        """A new stage from the validated options."""
        return self.spec.build(self.options)


class LoadedChain:
    """A ``ChainFactory``: each call returns a new ``TransformerChain`` in its initial state."""

    def __init__(self, declarations: tuple[StageDeclaration, ...], source: str) -> None:
        self._declarations = declarations
        self.source = source

    @property
    def declarations(self) -> tuple[StageDeclaration, ...]:
        """The validated entries, in chain order."""
        return self._declarations

    @property
    def names(self) -> list[str]:
        """The transformer type names, in chain order."""
        return [d.spec.name for d in self._declarations]

    def __call__(self) -> TransformerChain:
        return TransformerChain([d.build() for d in self._declarations])

    def __len__(self) -> int:
        return len(self._declarations)

    def __repr__(self) -> str:
        return f"LoadedChain({self.source}: {' | '.join(self.names) or 'empty'})"


def _looks_like_path(text: str) -> bool:
    if "\n" in text or not text.strip():
        return False
    return text.lower().endswith(_SUFFIXES) or os.path.isfile(text)


def read_source(source: ChainSource, *, env: Mapping[str, str] | None = None) -> Located:
    """Parse ``source`` into values with positions (no validation of the content)."""
    environ: Mapping[str, str] = os.environ if env is None else env
    if isinstance(source, Mapping):
        return located_from_mapping(source, "<mapping>", environ)
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        try:
            text = _read_capped(path)
        except FileNotFoundError:
            raise ConfigError(
                f"config file not found (check the path, relative to {Path.cwd()})",
                source=str(path),
            ) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file is not UTF-8 text: {exc}", source=str(path)) from None
        except OSError as exc:
            raise ConfigError(
                f"cannot read config file: {exc.strerror or exc}", source=str(path)
            ) from None
        return parse_text(text, str(path), environ)
    if isinstance(source, str):
        return parse_text(source, "<string>", environ)
    raise TypeError(
        f"load_chain() takes a path, YAML/JSON text or a mapping, got {type(source).__name__}"
    )


def _read_capped(path: Path) -> str:
    """The file's text (universal newlines, like ``read_text``), refused past the byte cap.

    Reads at most one byte over the cap, so an endless file (``/dev/zero``, a
    FIFO) is refused instead of exhausting memory.
    """
    with path.open("rb") as file:
        data = file.read(MAX_CHAIN_BYTES + 1)
    check_size(len(data), str(path))
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def load_chain(
    source: ChainSource,
    *,
    allow_imports: bool = False,
    registry: Registry | None = None,
    env: Mapping[str, str] | None = None,
) -> LoadedChain:
    """Load a chain declaration and return a factory of fresh chains.

    ``source`` is a ``Path`` (or a string ending in .yaml/.yml/.json), YAML or
    JSON text, or an already parsed mapping. ``allow_imports`` permits
    ``type: package.module:attr`` entries — off by default, because loading a
    config file must not run code it names. ``env`` replaces ``os.environ``
    for ``${VAR}`` interpolation. Raises ``ConfigError`` pointing at the
    problem.
    """
    doc = read_source(source, env=env)
    return LoadedChain(
        tuple(_declarations(doc, registry or default_registry(), allow_imports)),
        doc.source,
    )


def _declarations(doc: Located, registry: Registry, allow_imports: bool) -> list[StageDeclaration]:
    top = doc.value
    if top is None:
        raise doc.error(
            "the chain declaration is empty; expected a mapping such as\n"
            "  version: 1\n  transformers:\n    - type: expand_chunks",
            (),
        )
    if isinstance(top, str) and doc.source == "<string>" and "\n" not in top.strip():
        raise doc.error(
            f"the chain declaration is the plain string {top!r}, not a mapping; if it is a "
            "file path, no such file exists (pass a pathlib.Path to load a file "
            "whatever its name)",
            (),
        )
    if not isinstance(top, Mapping):
        raise doc.error(
            f"the top level must be a mapping with a `transformers` list, got {_kind(top)}",
            (),
            choices=_TOP_KEYS,
        )
    for key in top:
        if key not in _TOP_KEYS:
            raise doc.error(
                f"unknown top-level key `{key}`",
                (key,),
                at_key=True,
                choices=_TOP_KEYS,
                suggestion=did_you_mean(str(key), _TOP_KEYS),
            )
    version = top.get("version", _VERSION)
    if version != _VERSION or isinstance(version, bool):
        raise doc.error(
            f"unsupported config version {version!r}: this agui-pipes reads `version: 1`",
            ("version",),
        )
    if "transformers" not in top:
        raise doc.error("missing `transformers`: the list of stages, in order", ())
    items = top["transformers"]
    if items is None:
        items = []
    if not isinstance(items, list):
        raise doc.error(
            f"`transformers` must be a list (one `- type: NAME` entry per stage), "
            f"got {_kind(items)}",
            ("transformers",),
        )
    if len(items) > MAX_CHAIN_STAGES:
        raise doc.error(stages_error(len(items)), ("transformers",))
    return [
        _declaration(doc, item, ("transformers", i), registry, allow_imports)
        for i, item in enumerate(items)
    ]


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"


def _split_entry(
    doc: Located, item: object, path: KeyPath
) -> tuple[str, Any, KeyPath, KeyPath, bool]:
    """(name, options, path of the name, base path of the options, name is a key)."""
    if isinstance(item, str):
        return item, {}, path, path, False
    if isinstance(item, Mapping):
        if "type" in item:
            name = item["type"]
            if not isinstance(name, str):
                raise doc.error(
                    f"`type` must be a transformer name, got {_kind(name)}", (*path, "type")
                )
            options = {k: v for k, v in item.items() if k != "type"}
            return name, options, (*path, "type"), path, False
        if len(item) == 1:
            ((name, options),) = item.items()
            if options is not None and not isinstance(options, Mapping):
                raise doc.error(
                    f"the options of `{name}` must be a mapping (`- {name}: {{option: "
                    f"value}}`), got {_kind(options)}",
                    (*path, name),
                )
            return str(name), options or {}, (*path, name), (*path, name), True
        near = next((k for k in item if did_you_mean(str(k), ["type"])), None)
        raise doc.error(
            "a transformer entry with several keys needs `type: NAME`",
            (*path, near) if near is not None else path,
            at_key=near is not None,
            suggestion="type" if near is not None else None,
        )
    raise doc.error(
        "each transformer is `- type: NAME` followed by its options, or the shorthand "
        f"`- NAME: {{options}}` / `- NAME`; got {_kind(item)}",
        path,
    )


def _declaration(
    doc: Located, item: object, path: KeyPath, registry: Registry, allow_imports: bool
) -> StageDeclaration:
    name, options, name_path, base, name_is_key = _split_entry(doc, item, path)
    spec = _resolve(doc, name, name_path, name_is_key, registry, allow_imports)
    try:
        validated = spec.validate(options)
    except ValidationError as exc:
        raise _translate(doc, exc, spec, base, name_path, name_is_key) from None
    declaration = StageDeclaration(spec, validated, _key(path))
    try:
        declaration.build()
    except Exception as exc:
        raise doc.error(
            f"`{name}` could not be created: {type(exc).__name__}: {exc}",
            name_path,
            at_key=name_is_key,
        ) from exc
    return declaration


def _key(path: KeyPath) -> str:
    return f"{path[0]}[{path[1]}]"


def _resolve(
    doc: Located,
    name: str,
    path: KeyPath,
    at_key: bool,
    registry: Registry,
    allow_imports: bool,
) -> TransformerSpec:
    if ":" in name:
        if not allow_imports:
            raise doc.error(
                f"`{name}` is an import reference (module:attribute); a config file may "
                "only name code to import when that is explicitly allowed — pass "
                "allow_imports=True (CLI: --allow-imports) if you trust this file, or "
                "install the transformer as a plugin",
                path,
                at_key=at_key,
            )
        try:
            return _spec_from_object(import_reference(name), name, origin=name)
        except Exception as exc:
            raise doc.error(
                f"cannot use `{name}`: {type(exc).__name__}: {exc}", path, at_key=at_key
            ) from None
    spec = registry.get(name)
    if spec is not None:
        return spec
    broken = registry.broken_reason(name)
    if broken is not None:
        raise doc.error(
            f"transformer `{name}` comes from a plugin that failed to load: {broken}",
            path,
            at_key=at_key,
        )
    names = registry.names()
    raise doc.error(
        f"unknown transformer type `{name}`",
        path,
        at_key=at_key,
        choices=names,
        suggestion=did_you_mean(name, names),
    )


def _literal_choices(model: type[BaseModel], field: object) -> list[str] | None:
    info = model.model_fields.get(str(field))
    if info is None:
        return None
    stack: list[Any] = [info.annotation]
    choices: list[str] = []
    while stack:
        annotation = stack.pop()
        if get_origin(annotation) is Literal:
            choices.extend(str(a) for a in get_args(annotation))
        else:
            stack.extend(a for a in get_args(annotation) if a is not type(None))
    return choices or None


def _translate(
    doc: Located,
    exc: ValidationError,
    spec: TransformerSpec,
    base: KeyPath,
    name_path: KeyPath,
    name_is_key: bool,
) -> ConfigError:
    """The first pydantic error as a ``ConfigError`` pointing into the document."""
    # A misspelt option shows up twice: as an unknown key and as a missing
    # required one. The unknown key is the cause (and gets the "did you mean").
    rank = {"extra_forbidden": 0, "missing": 2}
    errors = sorted(exc.errors(), key=lambda e: rank.get(e["type"], 1))
    err = errors[0]
    more = (
        f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} in this entry)"
        if len(errors) > 1
        else ""
    )
    loc = tuple(err["loc"])
    kind = err["type"]
    fields = list(spec.options.model_fields)
    if kind == "extra_forbidden" and loc:
        key = str(loc[0])
        if not fields:
            return doc.error(
                f"`{spec.name}` takes no options, got `{key}`", (*base, key), at_key=True
            )
        return doc.error(
            f"unknown option `{key}` for `{spec.name}`{more}",
            (*base, key),
            at_key=True,
            choices=fields,
            suggestion=did_you_mean(key, fields),
        )
    if kind == "missing" and loc:
        return doc.error(
            f"`{spec.name}` needs the option `{loc[0]}`{more}",
            name_path,
            at_key=name_is_key,
        )
    msg = str(err["msg"])
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    msg = msg[:1].lower() + msg[1:]
    if not loc:
        return doc.error(f"{msg}{more}", name_path, at_key=name_is_key)
    path = (*base, *loc)
    value = err.get("input")
    choices = _literal_choices(spec.options, loc[0]) if len(loc) == 1 else None
    if kind == "literal_error" and choices:
        return doc.error(
            f"{value!r} is not a valid `{loc[0]}` for `{spec.name}`{more}",
            path,
            choices=choices,
            suggestion=did_you_mean(str(value), choices),
        )
    shown = "" if kind in ("value_error", "assertion_error") else f", got {_kind(value)}"
    return doc.error(f"{msg}{shown}{more}", path, choices=choices)
