"""``serve --agent module:attr``: the object at an import path, and how it is served.

Three kinds, told apart in this order:

* a framework's object an installed integration recognises (a pydantic-ai
  ``Agent``, a compiled LangGraph graph, an ADK agent, ...;
  ``agui_pipes.integrations``' registry) — served as that integration's
  producer, with its defaults; a producer an integration built
  (``adk_producer(agent, app_name=...)``: how options are given) is served as
  it is. Either way the integration's own stage, if it has one (ADK's
  ``adk_chain()``), runs first in the chain;
* a driver agent — ``async def agent(ctx)``, or an object with
  ``async def run(self, ctx)`` — served by the run driver;
* a producer — ``producer(run_input, principal)`` returning the run's events.

Anything else is a ``TargetError`` naming what is accepted (the command's
usage error, exit 2). The current directory is importable, as it is for
``python -m``, so a project's own ``app.agent:graph`` loads from its root.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._pipeline.transformer import Stage

__all__ = ["ServedAgent", "TargetError", "served_agent"]


class TargetError(Exception):
    """The ``--agent`` target cannot be loaded or served (the message says why and what to do)."""


@dataclass(frozen=True)
class ServedAgent:
    kind: Literal["agent", "producer"]
    """``build_app``'s keyword: ``agent`` (the run driver) or ``producer``."""
    value: Any
    described: str
    """What is served, for the start-up log line."""
    chain: Callable[[], Stage] | None = None
    """The integration's own stage, to run before the served chain (None: none)."""


def served_agent(target: str) -> ServedAgent:
    """The object ``module:attr`` names, as ``build_app`` serves it (``TargetError`` if not)."""
    obj = _load(target)
    from ..integrations import accepted_kinds
    from ..integrations._registry import served_by

    try:
        served = served_by(obj)
    except ImportError as exc:
        raise TargetError(
            f"{target} is a {type(obj).__name__}, whose integration needs a package that is "
            f"not installed: {exc} (pip install 'agui-pipes[producers]')"
        ) from None
    if served is not None:
        return ServedAgent(
            "producer",
            served.producer,
            f"{target} ({type(obj).__name__}, in-process)",
            served.chain,
        )
    arity = _positional(obj)
    if _async_of_one(obj) or _async_of_one(getattr(obj, "run", None)):
        return ServedAgent("agent", obj, f"the agent {target}")
    if arity == 2:
        return ServedAgent("producer", obj, f"the producer {target}")
    kinds = "; ".join(
        [
            *accepted_kinds(),
            "a driver agent (async def agent(ctx), or an object with async def run(self, ctx))",
            "a producer (producer(run_input, principal) returning an async iterable of events)",
        ]
    )
    raise TargetError(f"{target} is a {type(obj).__name__}, which cannot be served; give {kinds}")


def _load(target: str) -> Any:
    module_name, colon, attr = target.partition(":")
    if not colon or not module_name or not attr:
        raise TargetError(f"--agent takes module:attr (such as app.agents:graph), got {target!r}")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise TargetError(
                f"no module {exc.name!r} (from --agent {target}); run from the directory it is "
                "imported from, or install it"
            ) from None
        raise TargetError(f"importing {module_name} failed: {exc}") from None
    except Exception as exc:
        raise TargetError(f"importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"{module_name} has no attribute {attr!r}") from None
    return obj


def _async_of_one(function: object) -> bool:
    """Whether ``function`` is an ``async def`` of one positional argument (a driver agent)."""
    return inspect.iscoroutinefunction(function) and _positional(function) == 1


def _positional(function: object) -> int | None:
    """How many positional arguments ``function`` takes (None: not a function we can read)."""
    if function is None or not callable(function) or inspect.isclass(function):
        return None
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(
        1
        for parameter in signature.parameters.values()
        if parameter.kind in kinds and parameter.default is inspect.Parameter.empty
    )
