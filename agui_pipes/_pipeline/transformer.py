"""The one extension point: a stage that rewrites the event stream.

Three shapes share one base, because stages differ in what they must wait for:

* ``StreamTransformer`` — synchronous, one event in, any number out. Almost
  every stage is this shape, and the chain fuses consecutive ones into a
  single loop, so a pass-through stage costs a method call.
* ``AsyncStreamTransformer`` — the same contract with ``await``, for stages
  that must do I/O per event (a moderation service, a lookup).
* ``StreamOperator`` — owns a stretch of the stream and may emit on its own
  schedule (heartbeats, throttling, idle timeouts). It runs as a task in a task
  group owned by ``async with chain.apply(...)``, never inside a generator,
  which is what keeps it correct under trio's structured concurrency.

``finish()`` runs only when the upstream ended normally. Cancellation, an
upstream error or the consumer closing the stream early never call it: a
stage flushing from ``finally`` would append events to a stream that was
abandoned mid-item.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Container,
    Hashable,
    Iterable,
    Mapping,
    Sized,
)
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ag_ui.core import BaseEvent, EventType

if TYPE_CHECKING:
    from .chain import TransformerChain

__all__ = [
    "AsyncStreamTransformer",
    "Condition",
    "FunctionTransformer",
    "Stage",
    "StreamOperator",
    "StreamTransformer",
    "Transform",
]
# Not in __all__ (internal to the package): ``route_watchers``, ``RouteWatchers``.

_S = TypeVar("_S", bound="Stage")


class Stage:
    """What every stage shape shares: a name, ``|`` composition and ``fresh()``.

    ``fresh()`` rebuilds the stage from the arguments it was constructed with,
    so a stage never needs to know how to reset itself: the constructor is the
    single definition of the initial state. Arguments are deep-copied so a
    mutable option (a list of names) cannot be shared between runs either.
    Stages whose constructor arguments cannot be deep-copied should override
    ``fresh()``.
    """

    __fresh_args: tuple[tuple[Any, ...], dict[str, Any]]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        self.__fresh_args = (args, kwargs)
        return self

    @property
    def name(self) -> str:
        """How the stage is named in errors, logs and reprs (its class name by default)."""
        return type(self).__name__

    def fresh(self: _S) -> _S:
        """A new instance in its initial state, configured like this one."""
        args, kwargs = copy.deepcopy(self.__fresh_args)
        return type(self)(*args, **kwargs)

    def __or__(self, other: Stage) -> TransformerChain:
        from .chain import TransformerChain

        if not isinstance(other, Stage):
            return NotImplemented
        return TransformerChain([self, other])

    def __repr__(self) -> str:
        args, kwargs = self.__fresh_args
        shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        return f"{self.name}({', '.join(shown)})"


class StreamTransformer(Stage):
    """A synchronous stage: ``transform`` maps one event to zero, one or several.

    Return an empty iterable to drop the event, ``(event,)`` to pass it, a
    rewritten copy to change it (events are immutable by contract: use
    ``event.model_copy(update=...)``), or several events to splice — they are
    emitted in order. The default implementation passes everything through.
    """

    event_types: Collection[EventType | str] | None = None
    """The event types this stage may change; ``None`` (default) means all.

    A declaration, not a filter the stage must apply itself: the chain never
    calls ``transform`` for other types and passes them through untouched, so
    a stage that touches three types costs nothing on the other twenty-eight.
    Set it as a class attribute, or on the instance in ``__init__`` when it
    depends on configuration (the chain reads it the first time it sees each
    event class; see ``route``).
    """

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        """Map one event to what goes downstream."""
        return (event,)

    def finish(self) -> Iterable[BaseEvent]:
        """Events to append when the upstream ended normally (never on cancel/close)."""
        return ()

    # -- optional hooks ---------------------------------------------------------
    # ``route``, ``route_key``, ``reroute`` and ``passes`` are optimisations that
    # let a stage cost less; a stage that leaves them alone is always correct
    # (the contract is ``transform``, ``finish`` and ``event_types``). Only the
    # fast path reads them: with ``AGUI_PIPES_FAST_PATH=0`` the chain calls
    # ``transform`` and no relay asks ``passes``. One that defines them must mean
    # exactly what ``transform`` means: same events out, same errors, same state
    # left behind (tests/transformers/test_optimisation_hooks.py holds every
    # built-in to it; docs/writing-transformers.md).

    route_key: Hashable = None
    """Names the current answers of ``route`` (see ``reroute``); constant by default."""

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        """The function the chain calls for events of ``event_class``, or None to skip them.

        Optional: the default answers from ``event_types``, which is all most
        stages need. The chain asks once per event class and remembers the answer, so a
        stage that dispatches on the event's class anyway can hand the chain
        the handler itself and save a call and a lookup on every event. None
        means "pass these events on untouched, without calling me". The
        function must behave exactly as ``transform`` does for that class
        (``transform`` is still what runs the stage on its own, and what the
        chain calls with the fast path switched off).

        A stage whose answers
        change with its state (it ignores most events until something opens)
        sets ``route_key`` to a hashable name of that state and calls
        ``reroute()`` whenever it changes; the chain then asks again, and
        reuses earlier answers when a state comes back.
        """
        declared = self.event_types
        if declared is None:
            return self.transform
        from ..events import EVENT_CLASS_BY_TYPE

        for name in declared:
            if issubclass(event_class, EVENT_CLASS_BY_TYPE[EventType(name)]):
                return self.transform
        return None

    def passes(
        self, event_class: type[BaseEvent], fields: frozenset[str]
    ) -> tuple[Condition, ...] | None:
        """When events of this class and shape go through this stage unchanged, or None.

        Optional: the default (None, "call me") is always correct. A promise
        lets a relay forward an event's wire bytes without building the event
        at all (see ``agui_pipes.relay``): it asks
        every stage that ``route`` does not skip for the class, and when each
        answers with conditions that all hold for an incoming event, the event
        goes out as it came in and no stage is called for it. That is the cost
        of most of a stream — the deltas of open messages and tool calls.

        ``fields`` are the attribute names the event carries (``type``
        excluded; absent ones hold their defaults). Return ``()`` when such an
        event always passes, a tuple of ``Condition`` that must all hold, or
        ``None`` (the default) when the stage must see it. ``Condition.drops``
        promises the event with one field unset instead (it passes otherwise
        unchanged); stages after it are asked about the shape without it. The
        promise covers the stage's state too: an event the conditions admit must leave the
        stage exactly as it was, so that not calling the stage is the same as
        calling it. Conditions test live containers the stage keeps, so the
        stage must mutate them in place, never rebind them; an answer that
        depends on anything else must be named by ``route_key`` (the relay
        asks again after ``reroute()``).
        """
        return None

    def reroute(self) -> None:
        """Tell the chains running this stage that ``route`` answers differently now."""
        route_watchers.notify(self)


class RouteWatchers:
    """Which running chains to tell when a stage calls ``reroute()``.

    Kept here rather than on the stage: a stage's attributes are its author's,
    and a chain writing into them would surprise a stage with ``__slots__``,
    one that compares its ``vars()``, or one that defines ``_route_listeners``
    itself. Keyed by ``id()`` because a stage need not be hashable; an entry
    goes when its stage is collected. The callbacks are held weakly, so a
    finished chain does not keep its stages alive through this table.
    """

    __slots__ = ("_by_stage", "_pruned")

    def __init__(self) -> None:
        self._by_stage: dict[int, list[weakref.WeakMethod[Callable[[], None]]]] = {}
        self._pruned: dict[int, int] = {}
        """Per stage, how many listeners were left at its last pruning."""

    def watch(self, stage: StreamTransformer, callback: Callable[[], None]) -> None:
        """Call ``callback`` (a bound method) whenever ``stage`` reroutes."""
        key = id(stage)
        listeners = self._by_stage.get(key)
        if listeners is None:
            listeners = self._by_stage[key] = []
            weakref.finalize(stage, self._forget, key)
        elif len(listeners) >= 2 * self._pruned.get(key, 4):
            # A stage reused in chain after chain (a gateway's shared stage, one
            # chain per concurrent run): forget the chains that are gone — only
            # once the list doubled since the last time, so a watch costs O(1)
            # amortized rather than a pass over every chain still running.
            listeners[:] = [ref for ref in listeners if ref() is not None]
            self._pruned[key] = max(len(listeners), 4)
        listeners.append(weakref.WeakMethod(callback))

    def _forget(self, key: int) -> None:
        self._by_stage.pop(key, None)
        self._pruned.pop(key, None)

    def notify(self, stage: StreamTransformer) -> None:
        """Run the callbacks of the chains still running ``stage``."""
        for ref in self._by_stage.get(id(stage), ()):
            callback = ref()
            if callback is not None:
                callback()


route_watchers = RouteWatchers()
"""The one table of who runs which stage (see ``RouteWatchers``)."""


class Condition(NamedTuple):
    """One test of ``StreamTransformer.passes``, on a field of the incoming event.

    Build them with the three constructors; the relay compiles them into
    plain membership tests, which is why they are data rather than code.
    """

    field: str | None
    container: Any
    """A ``Container`` (``in`` / ``not in``) or a ``Sized`` (``empty``), kept live by the stage."""
    kind: str

    @classmethod
    def member(cls, field: str, container: Container[Any]) -> Condition:
        """Holds while ``event.<field> in container`` (e.g. the ids of open messages)."""
        return cls(field, container, "in")

    @classmethod
    def not_member(cls, field: str, container: Container[Any]) -> Condition:
        """Holds while ``event.<field> not in container`` (e.g. the ids of blocked calls)."""
        return cls(field, container, "not in")

    @classmethod
    def empty(cls, container: Sized) -> Condition:
        """Holds while ``container`` is empty (e.g. no chunk stream is open)."""
        return cls(None, container, "empty")

    @classmethod
    def maps_to(cls, field: str, value_field: str, mapping: Mapping[Any, Any]) -> Condition:
        """Holds while ``mapping`` has no other value than ``event.<value_field>`` for
        ``event.<field>`` (e.g. an item's recorded owner agrees with the event's tag)."""
        return cls(field, (value_field, mapping), "maps to")

    @classmethod
    def drops(cls, field: str) -> Condition:
        """Not a test: the event passes with ``field`` unset (the one change a relay can
        make to the bytes itself, e.g. stripping a subagent tag). Only for optional
        fields that default to None, which the encoder omits when unset; any other
        field would be written as ``null``, so such events take the full path."""
        return cls(field, None, "drop")


Transform = Callable[[BaseEvent], Iterable[BaseEvent]]
"""What ``StreamTransformer.route`` returns: a function with ``transform``'s contract."""


class AsyncStreamTransformer(Stage):
    """A stage that may ``await`` per event. Same contract as ``StreamTransformer``."""

    async def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        """Map one event to what goes downstream."""
        return (event,)

    async def finish(self) -> Iterable[BaseEvent]:
        """Events to append when the upstream ended normally (never on cancel/close)."""
        return ()


Emit = Callable[[BaseEvent], Awaitable[None]]


class StreamOperator(Stage):
    """A stage that owns its stretch of the stream and its own timing.

    ``run`` pulls from ``source`` and calls ``await emit(event)`` whenever it
    wants to, including while the source is idle. It runs as a task inside
    the task group of ``async with chain.apply(source) as events``; a chain
    that contains an operator must be used in that form. Return from ``run``
    when ``source`` is exhausted (after emitting whatever the end of stream
    calls for); raising ends the stream with that exception.
    """

    async def run(self, source: AsyncIterator[BaseEvent], emit: Emit) -> None:
        """Drive the stage: read ``source``, ``await emit(...)`` outputs."""
        async for event in source:
            await emit(event)


class FunctionTransformer(StreamTransformer):
    """Wrap a plain function as a stateless stage.

    The function returns ``None`` (drop), one event (pass or rewrite) or an
    iterable of events (splice)::

        upper = FunctionTransformer(shout)          # def shout(event) -> event
    """

    def __init__(
        self,
        function: Callable[[BaseEvent], BaseEvent | Iterable[BaseEvent] | None],
        name: str | None = None,
    ) -> None:
        self._function = function
        self._name: str = name or str(getattr(function, "__name__", "function"))

    @property
    def name(self) -> str:
        return self._name

    def fresh(self) -> FunctionTransformer:
        return FunctionTransformer(self._function, self._name)

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        result = self._function(event)
        if result is None:
            return ()
        if isinstance(result, BaseEvent):
            return (result,)
        return result

    def __repr__(self) -> str:
        return f"FunctionTransformer({self._name})"
