"""What counts as an agent, and how the driver finds its state model.

An agent is either an object with ``async def run(self, ctx) -> RunOutcome``
or a plain ``async def agent(ctx) -> RunOutcome``. Its state model (a
pydantic model the input state is decoded into) is found, in order, from:

1. a ``state_model`` attribute on the agent;
2. the type argument of an ``Agent[Model]`` base class;
3. the annotation of the ``ctx`` parameter, ``ctx: RunContext[Model]``
   (resolved with ``typing.get_type_hints``, so the model must be importable
   from the agent's module — a class defined inside a function is not; use
   1 or 2 there).

No model means the agent has no typed state: ``ctx.state`` is the raw input
JSON.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeAlias

from pydantic import BaseModel
from typing_extensions import TypeVar

from ._context import RunContext
from ._outcome import RunOutcome

__all__ = ["Agent", "AgentFunction", "AgentLike", "AgentObject", "not_awaitable", "resolve_agent"]

S = TypeVar("S", default=Any)


class Agent(Generic[S]):
    """Optional base class: ``class Editor(Agent[Draft])`` declares the state model ``Draft``.

    Subclasses implement ``async def run(self, ctx: RunContext[Draft]) -> RunOutcome``.
    """

    async def run(self, ctx: RunContext[S]) -> RunOutcome | None:
        raise NotImplementedError(f"{type(self).__name__} must implement async def run(self, ctx)")


class AgentFunction(Protocol):
    """An ``async def agent(ctx)`` — or any callable whose call returns an awaitable.

    The awaitable return is what makes a type checker refuse a plain ``def``
    agent: the driver can only pace and cancel an agent at its awaits.
    """

    def __call__(self, ctx: RunContext[Any], /) -> Awaitable[RunOutcome | None]: ...


class AgentObject(Protocol):
    """An object with ``async def run(self, ctx)`` (an ``Agent`` subclass, or any class)."""

    def run(self, ctx: RunContext[Any], /) -> Awaitable[RunOutcome | None]: ...


AgentLike: TypeAlias = AgentObject | AgentFunction
"""What ``run()``, ``collect()`` and ``AgentEndpoint`` take as an agent."""

RunFunction = Callable[[RunContext[Any]], Awaitable[Any]]


def _model_from(candidate: Any) -> type[BaseModel] | None:
    if isinstance(candidate, type) and issubclass(candidate, BaseModel):
        return candidate
    return None


def _from_bases(agent: object) -> type[BaseModel] | None:
    for klass in type(agent).__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if typing.get_origin(base) is Agent:
                args = typing.get_args(base)
                if args:
                    return _model_from(args[0])
    return None


def _from_annotation(function: Callable[..., Any]) -> type[BaseModel] | None:
    try:
        hints = typing.get_type_hints(function)
        parameters = [
            p for p in inspect.signature(function).parameters.values() if p.name != "self"
        ]
    except Exception:  # unresolvable forward references, builtins without signatures
        return None
    if not parameters:
        return None
    hint = hints.get(parameters[0].name)
    if typing.get_origin(hint) is RunContext:
        args = typing.get_args(hint)
        if args:
            return _model_from(args[0])
    return None


def _name(function: object) -> str:
    return str(getattr(function, "__qualname__", None) or type(function).__name__)


def _generator(function: object) -> str:
    return (
        f"the agent {_name(function)} is a generator (it uses `yield`): an agent emits "
        "through its context (ctx.say(...), ctx.emit(event)) and returns a RunOutcome; "
        "replace each `yield` with an emit"
    )


def resolve_agent(agent: object) -> tuple[RunFunction, type[BaseModel] | None]:
    """The coroutine function to call with the context, and the state model (or ``None``)."""
    run_method = getattr(agent, "run", None)
    if run_method is not None and callable(run_method) and not inspect.isfunction(agent):
        function: RunFunction = run_method
    elif callable(agent):
        function = agent
    else:
        raise TypeError(
            f"run() needs an agent: an object with `async def run(self, ctx)` or an "
            f"`async def agent(ctx)` function, got {type(agent).__name__}: {agent!r}"
        )
    if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
        # Certain before the call, so refused before RUN_STARTED goes out.
        raise TypeError(_generator(function))
    explicit = getattr(agent, "state_model", None)
    if explicit is not None:
        model = _model_from(explicit)
        if model is None:
            raise TypeError(
                f"{type(agent).__name__}.state_model must be a pydantic BaseModel subclass, "
                f"got {explicit!r}"
            )
        return function, model
    return function, _from_bases(agent) or _from_annotation(function)


def not_awaitable(function: RunFunction, result: object) -> str:
    """Why an agent call that returned no awaitable failed, and the fix.

    A plain ``def`` agent cannot be told from a callable returning a
    coroutine until it is called, so this is said after the call — by then
    its body has run synchronously, outside the driver's pacing and
    cancellation.
    """
    if inspect.isasyncgen(result) or inspect.isgenerator(result):
        return _generator(function)
    return (
        f"the agent {_name(function)} is not async: calling it returned a "
        f"{type(result).__name__}, not an awaitable, so it ran synchronously outside the "
        f"driver; make it `async def`"
    )
