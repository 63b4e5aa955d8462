"""Ordered composition of stages, and running it over an async source.

A chain is flattened on construction (a chain of chains is one list of
stages) and split into *segments*: maximal runs of synchronous stages, which
run fused in one plain loop, and single async stages or operators. Only the
segment boundaries cost an async generator; a chain of sync stages is one
generator however long it is. Inside a segment each stage is called through
what its ``route`` answered for the event's class, so stages cost nothing on
the events they skip (see ``SyncSegment``). ``route`` is an optional hook,
an optimisation: with the fast path switched off (``AGUI_PIPES_FAST_PATH=0``,
``agui_pipes._foundation.switch``) the chain routes by ``event_types`` alone and calls
each stage's ``transform``, the stage contract itself.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ag_ui.core import BaseEvent, EventType

from .._foundation import switch as _switch
from .._foundation.errors import StageError, StreamRejected
from .._foundation.loops import running_loop
from .transformer import (
    AsyncStreamTransformer,
    Stage,
    StreamOperator,
    StreamTransformer,
    route_watchers,
)

# anyio is imported where a chain runs asynchronously, not with the module:
# `agui-pipes run` relays a synchronous chain without an event loop (start-up).
if TYPE_CHECKING:
    import anyio.abc

__all__ = ["ChainFactory", "EventStream", "TransformerChain"]
# For in-package drivers (not in __all__): ``SyncSegment``, ``sync_segment``,
# ``apply_draining``, ``defining_class``, ``transform_replaced``.

logger = logging.getLogger("agui_pipes.chain")
logger.addHandler(logging.NullHandler())

ChainFactory = Callable[[], "TransformerChain"]
"""Builds a fresh chain per run (what the endpoint, gateway and YAML loader hand around)."""


class _Position:
    """Index of the source event currently being processed (for error messages).

    Shared by a stream's segments, so it also carries how a draining stream
    (``apply_draining``) fails: ``cut``, the failure it ends with.
    """

    __slots__ = ("cut", "drain", "index")

    def __init__(self, drain: bool = False) -> None:
        self.index = -1
        self.drain = drain
        self.cut: Exception | None = None

    def cut_by(self, exc: Exception) -> Exception:
        """The failure the stream ends with: the first one (``exc`` if it is)."""
        if self.cut is None:
            self.cut = exc
        return self.cut


def _annotate(
    exc: Exception, stage: Stage, event: BaseEvent | None, index: int, phase: str | None = None
) -> Exception:
    """Turn a stage's exception into what the caller sees."""
    if isinstance(exc, StreamRejected):
        if exc.stage is None:
            exc.stage = stage.name
        if exc.index is None:
            exc.index = index
        if exc.event is None:
            exc.event = event
        return exc
    if isinstance(exc, StageError):
        return exc
    return StageError(stage.name, event, index if index >= 0 else None, exc, phase)


_Transform = Callable[[BaseEvent], Iterable[BaseEvent]]
_UNROUTED: Any = object()
_MAX_ROUTE_STATES = 64
"""Bounds the plan tables a segment keeps (one per combination of its stages' route keys)."""

_Plans = dict[type[BaseEvent], tuple[_Transform, ...]]
_Routes = list[dict[type[BaseEvent], "_Transform | None"]]
_StateCache = dict[Any, Any]
"""Per route-key state, a table the segment's driver owns (a relay keeps what it compiled
for that state there); the segment only switches it with the state."""


_RETURN_HINT = "return an iterable of events: `(event,)` to pass it, `()` to drop it"


def _events_of(out: Any, what: str) -> Sequence[BaseEvent]:
    """A stage's output as a sequence, or a TypeError that says the fix.

    Off the hot path: the common one-event tuple never comes here. Without the
    check, a bare event returned by mistake is iterated as pydantic's
    ``(field, value)`` pairs and flows on as tuples — silently corrupt output.
    The items of a list or tuple are checked where they go next (a new class
    is planned once; a splice is checked as a whole), so a drop or a rewrite
    costs no loop here.
    """
    if type(out) is list or type(out) is tuple:
        return out
    if out is None:
        raise TypeError(f"{what} returned None; {_RETURN_HINT}")
    if isinstance(out, BaseEvent):
        raise TypeError(
            f"{what} returned a bare {out.type.value} event, not an iterable of events; "
            f"{_RETURN_HINT}"
        )
    if isinstance(out, str | bytes | dict):
        raise TypeError(f"{what} returned a {type(out).__name__}; {_RETURN_HINT}")
    batch = list(out)
    _check_events(batch, what)
    return batch


def _check_events(batch: Sequence[Any], what: str) -> None:
    for position, item in enumerate(batch):
        if not isinstance(item, BaseEvent):
            raise _not_an_event(type(item), what, position)


def _not_an_event(cls: type, what: str, position: int | None = None) -> TypeError:
    where = "an output item" if position is None else f"output item #{position}"
    return TypeError(
        f"{what} returned a {cls.__name__} as {where}, not an AG-UI event; {_RETURN_HINT}"
    )


def _router(
    stage: StreamTransformer, hooks: bool
) -> Callable[[type[BaseEvent]], _Transform | None]:
    """How the segment asks ``stage`` for its function per event class (decided once).

    ``hooks``: whether to take the stage's own ``route`` handlers (the fast
    path); otherwise, or when they are outdated, ``transform`` for the
    classes ``event_types`` declares (the reference path).
    """
    if getattr(stage, "route", None) is None:
        return lambda cls: stage.transform
    if not hooks or _route_outdated(stage):
        return functools.partial(StreamTransformer.route, stage)
    return stage.route


def _route_outdated(stage: StreamTransformer) -> bool:
    """True when ``transform`` was replaced after ``route`` was written for it.

    A subclass that overrides a built-in stage's ``transform`` (or an instance
    that assigns one) must not be bypassed by the parent's routes, which hand
    the chain the parent's handlers: such a stage is routed by ``event_types``
    alone, so its own ``transform`` sees every event it declared.
    """
    return "transform" in getattr(stage, "__dict__", {}) or transform_replaced(type(stage))


def defining_class(cls: type, name: str) -> type:
    """The class of ``cls``'s MRO that defines ``name``."""
    return next(k for k in cls.__mro__ if name in vars(k))


def transform_replaced(cls: type) -> bool:
    """True when a class below the one that wrote ``route`` replaced ``transform``."""
    route_owner, transform_owner = defining_class(cls, "route"), defining_class(cls, "transform")
    return transform_owner is not route_owner and issubclass(transform_owner, route_owner)


class SyncSegment:
    """Consecutive sync stages run as one loop, no generator per stage.

    Per event class the segment caches the *plan*: the functions that class
    goes through, as each stage's ``route`` answered — so a stage that ignores
    an event costs nothing at all, and one that dispatches on the class is
    entered at its handler. A plan table is kept per combination of the
    stages' ``route_key``; a stage's ``reroute()`` switches tables.
    """

    __slots__ = (
        "__weakref__",
        "_dups",
        "_routers",
        "_states",
        "failed",
        "hooks",
        "plans",
        "position_of",
        "push",
        "routes",
        "stages",
        "state_cache",
        "transforms",
    )

    def __init__(self, stages: Sequence[StreamTransformer], hooks: bool | None = None) -> None:
        self.stages = tuple(stages)
        # The stages' ``route`` handlers (the fast path), or ``transform`` only.
        self.hooks = _switch.ENABLED if hooks is None else hooks
        ids = [id(s) for s in self.stages]
        # The same instance at several positions: each position gets its own
        # function objects, so a function always names one position.
        self._dups = {i for i in ids if ids.count(i) > 1}
        self.transforms: tuple[_Transform, ...] = tuple(s.transform for s in self.stages)
        hooks = self.hooks
        self._routers = tuple(_router(s, hooks) for s in self.stages)
        self.position_of: dict[_Transform, int] = {}
        self._states: dict[tuple[Any, ...], tuple[_Plans, _Routes, _StateCache]] = {}
        self.plans: _Plans = {}
        self.routes: _Routes = []
        self.state_cache: _StateCache = {}
        self.failed: int | None = None
        """The position of the stage that raised (a push or a finish), for ``drain``."""
        self._switch()
        default = StreamTransformer.route
        plain = not self._dups and all(
            (not hooks or getattr(type(s), "route", default) is default)
            and getattr(s, "event_types", None) is None
            for s in self.stages
        )
        if plain:
            for i, transform in enumerate(self.transforms):
                self.position_of[transform] = i
        self.push: Callable[[BaseEvent, int], Sequence[BaseEvent]] = (
            self._push_all if plain else self._push_planned
        )
        # By identity: a stage may compare by value and have no hash.
        for stage in {id(s): s for s in self.stages}.values():
            route_watchers.watch(stage, self._switch)

    def _switch(self) -> None:
        """Use the plan table of the stages' current route keys."""
        key = tuple(getattr(s, "route_key", None) for s in self.stages)
        state = self._states.get(key)
        if state is None:
            if len(self._states) >= _MAX_ROUTE_STATES:
                self._states.clear()
            state = self._states[key] = ({}, [{} for _ in self.stages], {})
        self.plans, self.routes, self.state_cache = state

    def route_at(self, position: int, cls: type[BaseEvent]) -> _Transform | None:
        """What the stage at ``position`` runs for ``cls`` in the current route state."""
        cache = self.routes[position]
        function = cache.get(cls, _UNROUTED)
        if function is _UNROUTED:
            function = self._routers[position](cls)
            if function is not None:
                if id(self.stages[position]) in self._dups:
                    function = functools.partial(function)
                self.position_of[function] = position
            cache[cls] = function
        return function  # type: ignore[no-any-return]

    def _plan(self, cls: type[BaseEvent]) -> tuple[_Transform, ...]:
        if not issubclass(cls, BaseEvent):
            raise _not_an_event(cls, "transform()")
        routed = (self.route_at(i, cls) for i in range(len(self.stages)))
        plan = tuple(f for f in routed if f is not None)
        self.plans[cls] = plan
        return plan

    def _push_all(self, event: BaseEvent, index: int) -> Sequence[BaseEvent]:
        """``push`` when no stage routes: every stage sees every event."""
        transform = None
        try:
            for transform in self.transforms:
                out = transform(event)
                if type(out) is tuple and len(out) == 1:
                    event = out[0]
                else:
                    return self._push_rest(transform, out, index)
        except Exception as exc:
            if transform is None:  # pragma: no cover - the loop always binds it first
                raise
            raise self._annotated(exc, transform, event, index) from exc
        return (event,)

    def _push_planned(self, event: BaseEvent, index: int, start: int = 0) -> Sequence[BaseEvent]:
        """Run one event through every stage (from ``start``) that wants it.

        The common case — each stage returns exactly one event of the same class
        as a tuple — stays in this tight loop; drops, splices, class changes and
        other iterables continue in ``_push_from``. The stage that raised is the
        loop variable itself, so locating it costs nothing until something fails.
        """
        cls = type(event)
        if start:
            plan = self.plans.get((start, cls))  # type: ignore[call-overload]
            if plan is None:
                plan = self._plan_from(start, cls)
        else:
            plan = self.plans.get(cls)
            if plan is None:
                plan = self._plan(cls)
        transform = None
        try:
            for transform in plan:
                out = transform(event)
                if type(out) is tuple and len(out) == 1:
                    passed = out[0]
                    if passed is event or type(passed) is cls:
                        event = passed
                        continue
                return self._push_rest(transform, out, index)
        except Exception as exc:
            if transform is None:  # pragma: no cover - the loop always binds it first
                raise
            raise self._annotated(exc, transform, event, index) from exc
        return (event,)

    def _push_rest(self, transform: _Transform, out: Any, index: int) -> Sequence[BaseEvent]:
        """A push after ``transform`` returned anything but one event of the same class."""
        batch = out if type(out) is list or type(out) is tuple else _events_of(out, "transform()")
        if len(batch) > 1:  # one event is checked when its class is planned
            _check_events(batch, "transform()")
        return self._push_from(self.position_of[transform] + 1, batch, index)

    def _annotated(
        self, exc: Exception, transform: _Transform, event: BaseEvent, index: int
    ) -> Exception:
        """What the caller sees of ``exc``, raised by (or after) ``transform``."""
        if isinstance(exc, StageError | StreamRejected) and self.failed is not None:
            return exc  # raised by a later stage, annotated (and located) where it failed
        position = self.failed = self.position_of[transform]
        return _annotate(exc, self.stages[position], event, index)

    def _plan_from(self, start: int, cls: type[BaseEvent]) -> tuple[_Transform, ...]:
        if not issubclass(cls, BaseEvent):
            raise _not_an_event(cls, "transform()")
        routed = (self.route_at(i, cls) for i in range(start, len(self.stages)))
        plan = tuple(f for f in routed if f is not None)
        self.plans[(start, cls)] = plan  # type: ignore[index]
        return plan

    def _push_from(self, start: int, batch: Sequence[BaseEvent], index: int) -> Sequence[BaseEvent]:
        if len(batch) == 1:
            # One event (a rewrite such as an expanded chunk): the cached plan
            # of its class from this position.
            return self._push_planned(batch[0], index, start)
        i = start
        current: BaseEvent | None = None
        try:
            for i in range(start, len(self.stages)):
                if not batch:
                    break
                collected: list[BaseEvent] = []
                for current in batch:
                    function = self.route_at(i, type(current))
                    if function is None:
                        collected.append(current)
                    else:
                        produced = _events_of(function(current), "transform()")
                        _check_events(produced, "transform()")
                        collected.extend(produced)
                batch = collected
        except Exception as exc:
            self.failed = i
            raise _annotate(exc, self.stages[i], current, index) from exc
        return batch

    def finish(self, index: int, out: list[BaseEvent] | None = None) -> list[BaseEvent]:
        """Each stage's finish(), in order, each flowing through the stages after it.

        ``out`` (appended to, and returned) keeps what the stages before a
        failing one released when a stage raises: ``drain`` sends it.
        """
        if out is None:
            out = []
        self._finish_from(0, index, out)
        return out

    def drain(self, index: int, out: list[BaseEvent] | None = None) -> list[BaseEvent]:
        """What the stages still hold, for a stream that failed or was cut off mid-run.

        For a driver that ends the run itself (a server's RUN_ERROR): each
        stage's ``finish()`` runs, its output flowing through the stages after
        it, as at a clean end — except that nothing passes through a stage
        that raised (``failed``: what it would have done is unknown, and
        skipping it could leak what it removes), so only the stages after it
        are drained; a stage failing here becomes the new limit. A terminal
        event a stage makes of the cut (``Repair``'s RUN_ERROR, a ``Verify``
        whose policy is ``run_error``) and anything after it is left out:
        the caller's terminal says what happened. ``out``: events already
        owed (a ``finish`` that raised), kept in front.
        """
        out = [] if out is None else out
        start = 0 if self.failed is None else self.failed + 1
        while start < len(self.stages):
            try:
                self._finish_from(start, index, out)
                break
            except Exception as exc:
                # Its output (and what reached it) is dropped: the failure the
                # caller reports is the one that ended the stream, not this one.
                logger.debug("draining the chain: %s", exc)
                start = (start if self.failed is None else self.failed) + 1
        return _before_terminal(out)

    def _finish_from(self, start: int, index: int, out: list[BaseEvent]) -> None:
        for i in range(start, len(self.stages)):
            stage = self.stages[i]
            try:
                flushed = list(_events_of(stage.finish(), "finish()"))
                _check_events(flushed, "finish()")
            except Exception as exc:
                self.failed = i
                raise _annotate(exc, stage, None, index) from exc
            if flushed:
                self.failed = None  # a failure in there is located afresh (``_annotated``)
                out.extend(self._push_from(i + 1, flushed, index))


def _before_terminal(events: list[BaseEvent]) -> list[BaseEvent]:
    """``events`` up to their first RUN_FINISHED or RUN_ERROR (excluded)."""
    for position, event in enumerate(events):
        if event.type is EventType.RUN_FINISHED or event.type is EventType.RUN_ERROR:
            return events[:position]
    return events


_Segment = SyncSegment | AsyncStreamTransformer | StreamOperator


def apply_draining(chain: TransformerChain, source: AsyncIterable[BaseEvent]) -> EventStream:
    """``chain.apply(source)`` for a server that writes the run's terminal event itself.

    When the source fails (an upstream cut off, a broken connection) or a
    stage raises, what the stages still hold comes out before the failure
    propagates, as ``SyncSegment.drain`` says: each sync segment's and async
    stage's ``finish()`` runs, its output flowing on through the stages after
    it, but never through (or from) a stage that raised, and without a
    terminal event a stage makes of the cut. The failure raised is the first
    one. A ``StreamOperator`` runs its own loop and is not drained.
    """
    return chain._apply_draining(source)


def sync_segment(chain: TransformerChain, hooks: bool | None = None) -> SyncSegment | None:
    """The fused loop of a chain of sync stages (None when it has no stages).

    For drivers inside the package that push events one at a time and read
    the route state (``Relay``); raises the usual TypeError for a chain with
    async stages or operators. ``hooks`` asks for a loop that does (True) or
    does not (False) take the stages' ``route`` handlers: the chain's own
    when it routes so (``None``: whichever it has), else one over the same
    stages (made once per chain), for a driver that then pushes only through
    it.
    """
    segment = chain._require_sync("a relay")
    if segment is None or hooks is None or segment.hooks is hooks:
        return segment
    other = chain._other_routing
    if other is None:
        other = chain._other_routing = SyncSegment(segment.stages, hooks)
    return other


async def _aclose(source: object) -> None:
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        await aclose()


async def _checked_source(
    source: AsyncIterable[Any], position: _Position
) -> AsyncIterator[BaseEvent]:
    """The root of every pipeline: checks each item is an event, counts positions."""
    iterator = source.__aiter__()
    try:
        async for item in iterator:
            position.index += 1
            if not isinstance(item, BaseEvent):
                raise TypeError(
                    f"source item #{position.index} is a {type(item).__name__}, not an AG-UI "
                    "event (an ag_ui.core event model); decode wire data first, e.g. with "
                    "agui_pipes.decode()"
                )
            yield item
    finally:
        await _aclose(iterator)


async def _run_sync(
    segment: SyncSegment, source: AsyncIterator[BaseEvent], position: _Position, root: bool
) -> AsyncIterator[BaseEvent]:
    push = segment.push
    try:
        if root:
            # Fast path: the type check and the stages in one loop, one generator.
            async for item in source:
                position.index += 1
                if not isinstance(item, BaseEvent):
                    raise TypeError(
                        f"source item #{position.index} is a {type(item).__name__}, not an "
                        "AG-UI event (an ag_ui.core event model); decode wire data first, "
                        "e.g. with agui_pipes.decode()"
                    )
                for out in push(item, position.index):
                    yield out
        else:
            async for event in source:
                for out in push(event, position.index):
                    yield out
    except Exception as exc:
        if not position.drain:
            raise
        # The source failed, or a stage here (or after a drain's output) raised:
        # what the stages hold goes first (see ``SyncSegment.drain``).
        cut = position.cut_by(exc)
        for out in segment.drain(position.index):
            yield out
        if cut is exc:
            raise
        raise cut from cut.__cause__  # the first failure, as it was raised
    finally:
        await _aclose(source)
    flushed: list[BaseEvent] = []
    try:
        segment.finish(position.index, flushed)
    except Exception as exc:
        if not position.drain:
            raise
        cut = position.cut_by(exc)
        for out in segment.drain(position.index, flushed):
            yield out
        if cut is exc:
            raise
        raise cut from cut.__cause__  # the first failure, as it was raised
    for out in flushed:
        yield out


async def _run_async(
    stage: AsyncStreamTransformer, source: AsyncIterator[BaseEvent], position: _Position
) -> AsyncIterator[BaseEvent]:
    failed = False
    try:
        async for event in source:
            try:
                outputs = _events_of(await stage.transform(event), "transform()")
                _check_events(outputs, "transform()")
            except Exception as exc:
                failed = True
                raise _annotate(exc, stage, event, position.index) from exc
            for out in outputs:
                yield out
    except Exception as exc:
        if not position.drain:
            raise
        cut = position.cut_by(exc)
        if not failed:  # nothing passes through a stage that raised
            for out in await _drained(stage):
                yield out
        if cut is exc:
            raise
        raise cut from cut.__cause__  # the first failure, as it was raised
    finally:
        await _aclose(source)
    try:
        flushed = _events_of(await stage.finish(), "finish()")
        _check_events(flushed, "finish()")
    except Exception as exc:
        raise _annotate(exc, stage, None, position.index) from exc
    for out in flushed:
        yield out


async def _drained(stage: AsyncStreamTransformer) -> list[BaseEvent]:
    """An async stage's ``finish()`` for a draining stream (nothing if it raises)."""
    try:
        flushed = list(_events_of(await stage.finish(), "finish()"))
        _check_events(flushed, "finish()")
    except Exception as exc:
        logger.debug("draining the chain: stage %s: %s", stage.name, exc)
        return []
    return _before_terminal(flushed)


def _segments(stages: Sequence[Stage]) -> list[_Segment]:
    segments: list[_Segment] = []
    run: list[StreamTransformer] = []
    for stage in stages:
        if isinstance(stage, StreamTransformer):
            run.append(stage)
            continue
        if run:
            segments.append(SyncSegment(run))
            run = []
        assert isinstance(stage, AsyncStreamTransformer | StreamOperator)
        segments.append(stage)
    if run:
        segments.append(SyncSegment(run))
    return segments


class TransformerChain(StreamTransformer):
    """Stages run in order, each on every output of the previous one.

    Build with ``TransformerChain([a, b, c])`` or ``a | b | c``. A chain is
    itself a stage: nesting flattens, and a chain of sync stages can be used
    wherever a ``StreamTransformer`` is expected (``transform``/``finish``).

    A chain holds per-run state (its stages'), so it processes one stream:
    applying it a second time raises. Build one per run from a factory, or
    call ``fresh()``.
    """

    def __init__(self, stages: Iterable[Stage] = ()) -> None:
        flat: list[Stage] = []
        for stage in stages:
            if isinstance(stage, TransformerChain):
                flat.extend(stage.stages)
            elif isinstance(stage, Stage):
                flat.append(stage)
            else:
                raise TypeError(
                    f"chain stages must be StreamTransformer, AsyncStreamTransformer or "
                    f"StreamOperator instances, got {type(stage).__name__}: {stage!r}"
                )
        self._stages: tuple[Stage, ...] = tuple(flat)
        self._segments = _segments(self._stages)
        self._sync_only = all(isinstance(s, SyncSegment) for s in self._segments)
        self._other_routing: SyncSegment | None = None  # see ``sync_segment``
        self._used = False

    # -- introspection ------------------------------------------------------

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The flattened stages, in order."""
        return self._stages

    @property
    def is_sync(self) -> bool:
        """True when every stage is a synchronous ``StreamTransformer``."""
        return self._sync_only

    def __len__(self) -> int:
        return len(self._stages)

    def __iter__(self) -> Any:
        return iter(self._stages)

    def __repr__(self) -> str:
        if not self._stages:
            return "TransformerChain([])"
        return " | ".join(repr(s) for s in self._stages)

    def fresh(self) -> TransformerChain:
        return TransformerChain([s.fresh() for s in self._stages])

    def __or__(self, other: Stage) -> TransformerChain:
        if not isinstance(other, Stage):
            return NotImplemented
        return TransformerChain([*self._stages, other])

    def __ror__(self, other: Stage) -> TransformerChain:
        if not isinstance(other, Stage):
            return NotImplemented
        return TransformerChain([other, *self._stages])

    # -- as a sync stage ----------------------------------------------------

    def _require_sync(self, what: str) -> SyncSegment | None:
        if not self._sync_only:
            raise TypeError(
                f"{what} needs a chain of synchronous stages; this chain has async stages or "
                "operators — run it with chain.apply(source)"
            )
        return self._segments[0] if self._segments else None  # type: ignore[return-value]

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        segment = self._require_sync("TransformerChain.transform()")
        return (event,) if segment is None else segment.push(event, -1)

    def transform_at(self, event: BaseEvent, index: int) -> Sequence[BaseEvent]:
        """``transform`` for a driver that knows the event's position in its source.

        Errors then name that index (``StageError.index``, ``StreamRejected.index``).
        """
        segment = self._require_sync("TransformerChain.transform_at()")
        return (event,) if segment is None else segment.push(event, index)

    def claim(self) -> None:
        """Mark the chain as processing a stream (what ``apply`` does); raises if it already did.

        For drivers that run a sync chain event by event (``transform_at``) rather
        than through ``apply``, so a chain still cannot serve two streams.
        """
        self._claim()

    def finish(self) -> Sequence[BaseEvent]:
        segment = self._require_sync("TransformerChain.finish()")
        return () if segment is None else segment.finish(-1)

    def finish_at(self, count: int) -> Sequence[BaseEvent]:
        """``finish`` for a driver that knows how many source events there were."""
        segment = self._require_sync("TransformerChain.finish_at()")
        return () if segment is None else segment.finish(count - 1)

    # -- running ------------------------------------------------------------

    def _claim(self) -> None:
        if self._used:
            raise RuntimeError(
                "this TransformerChain already processed a stream; its stages hold that run's "
                "state. Build a chain per run (from a factory) or call chain.fresh()"
            )
        self._used = True

    def apply(self, source: AsyncIterable[BaseEvent]) -> EventStream:
        """Run the chain over ``source``; returns an async iterator of the output.

        Use it as ``async for event in chain.apply(source)`` or, required when
        the chain contains a ``StreamOperator``::

            async with chain.apply(source) as events:
                async for event in events: ...

        Closing the output (``aclose()``, leaving the ``async with``) closes the
        source. Stage failures surface as ``StageError`` (or the stage's own
        ``StreamRejected`` subclass) naming the stage and the source event.
        """
        if not hasattr(source, "__aiter__"):
            hint = (
                "; for a list of events use apply_sync(events)"
                if isinstance(source, Iterable)
                else ""
            )
            raise TypeError(
                f"apply() takes an async iterable of events (an async generator, a "
                f"memory stream), got a {type(source).__name__}{hint}"
            )
        self._claim()
        return EventStream(self._segments, source)

    def _apply_draining(self, source: AsyncIterable[BaseEvent]) -> EventStream:
        """``apply``, draining the stages before a failure propagates (``apply_draining``)."""
        self._claim()
        return EventStream(self._segments, source, drain=True)

    def apply_sync(self, events: Iterable[BaseEvent]) -> list[BaseEvent]:
        """Run the chain over an in-memory sequence and return every output event.

        Synchronous chains run without an event loop; chains with async stages
        or operators are run on a private event loop, which cannot start inside
        a running one: from async code use ``apply`` (or a worker thread).
        """
        if not self._sync_only:
            loop = running_loop()
            if loop is not None:  # refused before the chain is claimed: it stays usable
                raise RuntimeError(
                    f"apply_sync() cannot run this chain inside a running {loop} event loop: "
                    "its async stages or operators need an event loop, and apply_sync() "
                    "would start a second one in this thread. In async code write "
                    "`async with chain.apply(source) as out: async for event in out: ...` "
                    "(source: an async iterable of events), or run apply_sync in a worker "
                    "thread: `await anyio.to_thread.run_sync(chain.apply_sync, events)`"
                )
        self._claim()
        if self._sync_only:
            segment = self._segments[0] if self._segments else None
            assert segment is None or isinstance(segment, SyncSegment)
            out: list[BaseEvent] = []
            index = -1
            for index, item in enumerate(events):
                if not isinstance(item, BaseEvent):
                    raise TypeError(
                        f"source item #{index} is a {type(item).__name__}, not an AG-UI event "
                        "(an ag_ui.core event model); decode wire data first, e.g. with "
                        "agui_pipes.decode()"
                    )
                if segment is None:
                    out.append(item)
                else:
                    out.extend(segment.push(item, index))
            if segment is not None:
                out.extend(segment.finish(index))
            return out

        items = list(events)

        async def collect() -> list[BaseEvent]:
            async def source() -> AsyncIterator[BaseEvent]:
                for item in items:
                    yield item

            async with EventStream(self._segments, source()) as stream:
                return [event async for event in stream]

        import anyio

        return anyio.run(collect)


class EventStream(AsyncIterator[BaseEvent]):
    """The output of ``TransformerChain.apply``: an async iterator and context manager."""

    def __init__(
        self, segments: Sequence[_Segment], source: AsyncIterable[BaseEvent], drain: bool = False
    ) -> None:
        self._segments = segments
        self._source = source
        self._drain = drain
        self._iterator: AsyncIterator[BaseEvent] | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._has_operators = any(isinstance(s, StreamOperator) for s in segments)
        self._closed = False

    def _build(self, task_group: anyio.abc.TaskGroup | None) -> AsyncIterator[BaseEvent]:
        position = _Position(self._drain)
        stream: AsyncIterator[BaseEvent]
        first = self._segments[0] if self._segments else None
        if isinstance(first, SyncSegment):
            stream = _run_sync(first, self._source.__aiter__(), position, root=True)
            rest = self._segments[1:]
        else:
            stream = _checked_source(self._source, position)
            rest = self._segments
        for segment in rest:
            if isinstance(segment, SyncSegment):
                stream = _run_sync(segment, stream, position, root=False)
            elif isinstance(segment, AsyncStreamTransformer):
                stream = _run_async(segment, stream, position)
            else:
                assert task_group is not None
                stream = _start_operator(task_group, segment, stream, position)
        return stream

    def __aiter__(self) -> AsyncIterator[BaseEvent]:
        # ``async for`` iterates the innermost generator directly, saving a
        # coroutine per event; ``__anext__`` stays for callers that step by hand.
        if self._iterator is None and not self._closed and not self._has_operators:
            self._iterator = self._build(None)
        if self._iterator is not None:
            return self._iterator
        return self

    async def __anext__(self) -> BaseEvent:
        if self._iterator is None:
            if self._closed:
                raise StopAsyncIteration
            if self._has_operators:
                raise RuntimeError(
                    "this chain contains a StreamOperator, which runs as a task: use "
                    "`async with chain.apply(source) as events: async for event in events`"
                )
            self._iterator = self._build(None)
        return await self._iterator.__anext__()

    async def aclose(self) -> None:
        """Stop early: closes every stage generator and the source."""
        self._closed = True
        if self._iterator is not None:
            await _aclose(self._iterator)
        else:
            await _aclose(self._source)

    async def __aenter__(self) -> EventStream:
        if self._has_operators:
            import anyio

            self._task_group = anyio.create_task_group()
            await self._task_group.__aenter__()
            self._iterator = self._build(self._task_group)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        task_group = self._task_group
        if task_group is None:
            await self.aclose()
            return None
        # Operators catch their own failures and hand them to the reader, so the
        # group only ever ends by our cancel; the body's exception (if any)
        # propagates as itself rather than wrapped in an exception group.
        task_group.cancel_scope.cancel()
        try:
            await self.aclose()
        finally:
            self._task_group = None
            await task_group.__aexit__(None, None, None)
        return None


def _start_operator(
    task_group: anyio.abc.TaskGroup,
    operator: StreamOperator,
    upstream: AsyncIterator[BaseEvent],
    position: _Position,
) -> AsyncIterator[BaseEvent]:
    import anyio

    send, receive = anyio.create_memory_object_stream[BaseEvent](0)
    failure: list[BaseException] = []

    async def drive() -> None:
        async with send:
            try:
                await operator.run(upstream, send.send)
            except anyio.BrokenResourceError:
                pass  # the consumer went away; nothing left to deliver to
            except Exception as exc:
                failure.append(_annotate(exc, operator, None, position.index, "run()"))
            finally:
                with anyio.CancelScope(shield=True):
                    await _aclose(upstream)

    task_group.start_soon(drive, name=f"agui_pipes operator {operator.name}")

    async def relay() -> AsyncIterator[BaseEvent]:
        async with receive:
            async for event in receive:
                yield event
        if failure:
            raise failure[0]

    return relay()
