"""Stage promises: when every stage of a fused loop passes an event unchanged.

A relay that can tell, from an event's wire form alone, that no stage would
change it forwards the bytes without building the event (see
``agui_pipes.relay``). What lets it tell is the optional
``StreamTransformer.passes`` promise a stage may make (the built-ins do);
this module joins those promises for one event shape and decides which of
them to trust. A stage that makes none is simply always run: nothing here
is needed for a chain to be correct, and the chain loop never imports it.
"""

from __future__ import annotations

import logging
import weakref

from ag_ui.core import BaseEvent

from .._pipeline.chain import SyncSegment, defining_class, transform_replaced
from .._pipeline.transformer import Condition, StreamTransformer

__all__ = ["conditions"]

logger = logging.getLogger("agui_pipes.chain")
logger.addHandler(logging.NullHandler())

_CONDITION_KINDS = frozenset({"in", "not in", "empty", "maps to", "drop"})
"""What ``Condition``'s constructors build (a relay compiles nothing else)."""


def conditions(
    segment: SyncSegment, cls: type[BaseEvent], fields: frozenset[str]
) -> tuple[Condition, ...] | None:
    """What must hold for an event of ``cls`` with ``fields`` to pass every stage unchanged.

    The stages' ``passes`` answers in the current route state, joined; None
    as soon as one stage must see such events (or cannot promise: its
    ``transform`` was replaced, or it is not a routing stage).
    """
    joined: list[Condition] = []
    for position, stage in enumerate(segment.stages):
        try:
            routed = segment.route_at(position, cls)
        except Exception:
            # A failing route(): no bypass, and the full path raises it, at the
            # event it belongs to (and counted as such).
            return None
        if routed is None:
            continue  # the chain skips this stage for the class
        if not _passes_trusted(stage):
            return None
        try:
            answer = stage.passes(cls, fields)
            if answer is None:
                return None
            answer = tuple(answer)
            for condition in answer:
                if condition.kind not in _CONDITION_KINDS:
                    raise ValueError(f"unknown condition kind {condition.kind!r}")
        except Exception:
            # The bypass must not change what the chain does, and without it
            # ``passes`` is never called: a failing promise is no promise.
            logger.warning(
                "%s.passes(%s, ...) failed; such events go through the stage (fix "
                "passes() to return None, () or a tuple of Condition)",
                stage.name,
                cls.__name__,
                exc_info=True,
            )
            return None
        for condition in answer:
            if condition.kind == "drop":
                if condition.field not in fields:
                    continue  # unset already: nothing to change
                fields = fields - {condition.field}
            elif (condition.field is not None and condition.field not in fields) or (
                condition.kind == "maps to" and condition.container[0] not in fields
            ):
                # A test of a field the event does not carry (any more): the
                # bypass only tests values as they came in, so such events take
                # the full path.
                return None
            joined.append(condition)
    return tuple(joined)


_OUTSIDE_PROMISE = frozenset({"finish", "fresh"})
"""Methods a relay calls whichever path an event takes: overriding them keeps a promise."""


def _passes_trusted(stage: StreamTransformer) -> bool:
    """True when ``stage.passes`` speaks for what the chain runs for it.

    The promise must come from the class that wrote what runs (``route``'s
    handlers, or ``transform`` when routing falls back to ``event_types``) or
    from a subclass of it: a subclass that replaces either without restating
    ``passes`` voids its parent's promise, and so does an instance attribute
    replacing any of the three. So does replacing any other method of the
    promising class (``finish`` and ``fresh`` aside), since its handlers may
    call it. The class part is worked out once per class (a gateway builds a
    chain per run).
    """
    if getattr(stage, "route", None) is None or getattr(stage, "passes", None) is None:
        return False
    replaced = getattr(stage, "__dict__", {})
    if "transform" in replaced or "route" in replaced or "passes" in replaced:
        return False
    cls = type(stage)
    try:
        methods = _PROMISE_METHODS[cls]
    except KeyError:
        methods = _PROMISE_METHODS[cls] = _promise_methods(cls)
    # An instance attribute replacing one of the promiser's methods voids it too.
    return methods is not None and not any(name in methods for name in replaced)


_PROMISE_METHODS: weakref.WeakKeyDictionary[type, frozenset[str] | None] = (
    weakref.WeakKeyDictionary()
)


def _promise_methods(cls: type) -> frozenset[str] | None:
    """The methods ``cls``'s promise relies on, or None when it makes none it can keep."""
    mro = cls.__mro__
    runs = defining_class(cls, "transform" if transform_replaced(cls) else "route")
    promiser = defining_class(cls, "passes")
    if not issubclass(promiser, runs):
        return None
    # The handlers ``route`` hands out call the promiser's helpers (such as
    # FilterToolCalls._subagent_blocked): a subclass below it overriding any of
    # its methods voids the promise.
    methods = frozenset(
        name
        for k in promiser.__mro__
        for name, value in vars(k).items()
        if callable(value) and name not in _OUTSIDE_PROMISE and not name.startswith("__")
    )
    below = mro[: mro.index(promiser)]
    if any(name in methods for k in below for name in vars(k)):
        return None
    return methods
