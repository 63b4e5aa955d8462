"""Compat: speak to peers of every protocol era (YAML ``compat``; guide: docs/compat.md).

Two directions, named by which way the stream is translated:

* ``up`` — the consumer side, facing an older *producer*. Pre-1.0 shapes are
  translated into 1.0 as the reference TypeScript client's always-on
  compatibility boundary does, whatever the producer's version (a legacy
  shape arriving is itself the proof the producer is old): ``THINKING_*``
  events become ``REASONING_*`` with generated ids, ``binary`` content parts
  become media parts (the decoder does that when it reads legacy shapes, which
  this stage asks of it). With ``peer`` at or below 0.0.57 the producer
  predates subagents, and the reference's ``BackwardCompatibility_0_0_57``
  normalisation applies too: ``SUBAGENT_*`` events dropped with a warning,
  ``subagentRunId`` removed everywhere else.
* ``down`` — the producer side, serving an older *client* (``peer`` is the
  client's version). The 1.0 stream is rewritten into what that client reads:
  at or below 0.0.57 the subagent material goes (as above); at or below
  0.0.45 ``REASONING_*`` is spelled ``THINKING_*`` again (the inverse of
  ``BackwardCompatibility_0_0_45``; what has no old spelling — an encrypted
  value, an unexpanded chunk — is dropped with a warning); at or below 0.0.39
  message content is one string (``BackwardCompatibility_0_0_39``: non-text
  parts dropped with a warning, ``parentRunId`` removed); below 1.0 the
  ``RUN_STARTED.protocolVersion`` declaration goes, as the reference client
  leaves it out of requests to a peer that predates the field.

:func:`request_for` is the same per-era knowledge for the request a client
sends, and :func:`down_for_request` picks the ``down`` stage for the version a
request declares (what ``agui-pipes serve --compat`` does per request).

Every change that loses something is a warning (code ``compat``, collected in
``Compat.warnings`` and logged on ``agui_pipes.compat``); a pure respelling is
announced once per legacy type and stream (the reference announces every
occurrence, which for the deltas of a long message floods a server's log).
"""

from __future__ import annotations

import copy
import logging
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ag_ui.core import (
    BaseEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
)

from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer, Transform
from .._protocol.decode import DecodeWarning
from .._protocol.legacy import upgrade_binary_parts
from .._stagekit.compat_eras import (
    CURRENT,
    FLAT_CONTENT,
    PRE_SUBAGENTS,
    THINKING_ERA,
    flatten_event,
    flatten_wire_content,
    parse_version,
    shown,
    strip_subagents,
)

if TYPE_CHECKING:
    from .._protocol.legacy_events import (
        LegacyEvent,
        LegacyEventType,
        ThinkingEndEvent,
        ThinkingStartEvent,
        ThinkingTextMessageContentEvent,
        ThinkingTextMessageEndEvent,
        ThinkingTextMessageStartEvent,
    )

__all__ = [
    "Compat",
    "LegacyEvent",
    "LegacyEventType",
    "ThinkingEndEvent",
    "ThinkingStartEvent",
    "ThinkingTextMessageContentEvent",
    "ThinkingTextMessageEndEvent",
    "ThinkingTextMessageStartEvent",
    "declared_version",
    "down_for_request",
    "request_for",
]
__dir__ = public_dir(__all__)

# The pre-1.0 event models (``THINKING_*``) are pydantic classes whose definition costs
# about as much as the rest of this stage's import; ``agui-pipes run`` puts this stage
# in front of every chain, so they are defined when something first needs them — the
# decoder reading a legacy shape, the down direction respelling one, or a reader of
# these names — not with the stage.
_LEGACY_EVENTS = "agui_pipes._protocol.legacy_events"
_LEGACY_NAMES = frozenset(
    {
        "LegacyEvent",
        "LegacyEventType",
        "ThinkingEndEvent",
        "ThinkingStartEvent",
        "ThinkingTextMessageContentEvent",
        "ThinkingTextMessageEndEvent",
        "ThinkingTextMessageStartEvent",
    }
)


def __getattr__(name: str) -> Any:
    if name in _LEGACY_NAMES:
        from .._protocol import legacy_events

        return getattr(legacy_events, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


logger = logging.getLogger("agui_pipes.compat")
logger.addHandler(logging.NullHandler())

Direction = Literal["up", "down"]

_LIFECYCLE = (SubagentStartedEvent, SubagentFinishedEvent, SubagentErrorEvent)

_legacy_classes: frozenset[type[BaseEvent]] | None = None
_to_thinking_table: dict[type[BaseEvent], type[LegacyEvent]] | None = None


def _is_legacy(event_class: type[BaseEvent]) -> bool:
    """Whether ``event_class`` is one of the pre-1.0 event models (exactly)."""
    global _legacy_classes
    if _legacy_classes is None:
        module = sys.modules.get(_LEGACY_EVENTS)
        if module is None:
            return False  # the models are not defined yet, so no event is one of them
        _legacy_classes = frozenset(module.LEGACY_EVENT_CLASSES)
    return event_class in _legacy_classes


def _thinking_spelling() -> dict[type[BaseEvent], type[LegacyEvent]]:
    """Each ``REASONING_*`` class and its ``THINKING_*`` spelling (defining those models)."""
    global _to_thinking_table
    if _to_thinking_table is None:
        from .._protocol import legacy_events as old

        _to_thinking_table = {
            ReasoningStartEvent: old.ThinkingStartEvent,
            ReasoningMessageStartEvent: old.ThinkingTextMessageStartEvent,
            ReasoningMessageContentEvent: old.ThinkingTextMessageContentEvent,
            ReasoningMessageEndEvent: old.ThinkingTextMessageEndEvent,
            ReasoningEndEvent: old.ThinkingEndEvent,
        }
    return _to_thinking_table


def _base_fields(event: BaseEvent) -> dict[str, Any]:
    """The fields every event has, carried over a respelling."""
    return {"timestamp": event.timestamp, "raw_event": event.raw_event, "metadata": event.metadata}


class Compat(StreamTransformer):
    """Translate between AG-UI 1.0 and an older peer (see the module doc).

    ``direction``: ``"up"`` (default; the consumer side: legacy shapes in,
    1.0 out) or ``"down"`` (the serving side: 1.0 in, what an older client
    reads out). ``peer``: the other party's protocol version (``"0.0.45"``,
    ``"1.0"``); None means a current (1.0) peer. ``ids`` makes the ids given to
    translated ``THINKING_*`` events (default: random UUIDs).
    """

    def __init__(
        self,
        *,
        direction: Direction = "up",
        peer: str | None = None,
        ids: Callable[[], str] | None = None,
    ) -> None:
        if direction not in ("up", "down"):
            raise ValueError(
                f"compat direction must be 'up' (translate an older producer's stream into "
                f"1.0) or 'down' (serve an older client), got {direction!r}"
            )
        self.direction: Direction = direction
        self.peer = CURRENT if peer is None else parse_version(peer, "compat peer")
        self.warnings: list[DecodeWarning] = []
        """Every warning so far (code ``compat``), in order."""
        self._ids = ids or (lambda: str(uuid.uuid4()))
        old = self.peer < CURRENT
        self._pre_subagents = self.peer <= PRE_SUBAGENTS
        self._thinking = direction == "down" and self.peer <= THINKING_ERA
        self._flat = direction == "down" and self.peer <= FLAT_CONTENT
        self._undeclared = direction == "down" and old
        self._acts_on_all = self._pre_subagents or self._undeclared
        self._reasoning_id: str | None = None
        self._message_id: str | None = None
        self._announced: set[str] = set()
        # down, 0.0.45: the spans / messages open, by id (THINKING_* hold one of each)
        self._spans: dict[str, None] = {}
        self._messages: dict[str, None] = {}

    def fresh(self) -> Compat:
        direction = self.direction
        peer = None if self.peer == CURRENT else shown(self.peer)
        ids = self._ids
        return Compat(direction=direction, peer=peer, ids=ids)

    @property
    def reads_legacy(self) -> bool:
        """Whether the decoder before this stage should read pre-1.0 shapes (``up`` only)."""
        return self.direction == "up"

    def __repr__(self) -> str:
        return f"Compat(direction={self.direction!r}, peer={shown(self.peer)!r})"

    def route(self, event_class: type[BaseEvent]) -> Transform | None:
        if self._acts_on_all or event_class is RunStartedEvent or _is_legacy(event_class):
            return self.transform
        return None  # a 1.0 event for a 1.0 peer: nothing to translate

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.__class__ is RunStartedEvent:
            # Per run, as the reference resets its boundary: nothing left open by an
            # earlier run names a THINKING_* id of this one.
            self._reasoning_id = self._message_id = None
            self._spans.clear()
            self._messages.clear()
        if self.direction == "up":
            return self._up(event)
        return self._down(event)

    # -- warnings ------------------------------------------------------------

    def _warn(self, message: str) -> None:
        warning = DecodeWarning("compat", message)
        self.warnings.append(warning)
        logger.warning("%s", warning)

    def _drop_lifecycle(self, event: BaseEvent, who: str) -> None:
        self._warn(
            f"dropping {event.type.value} because the {who} (protocol {shown(self.peer)}) "
            "predates subagent support; the subagent's messages and tool calls stay, "
            "attributed to the parent"
        )

    # -- up ------------------------------------------------------------------

    def _up(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if _is_legacy(event.__class__):
            event = self._from_thinking(event)
        if self._pre_subagents:
            if isinstance(event, _LIFECYCLE):
                self._drop_lifecycle(event, "producer")
                return ()
            event = strip_subagents(event)
        return (event,)

    def _minted(self, established: str | None, legacy: str) -> str:
        if established is not None:
            return established
        minted = self._ids()
        self._warn(
            f"minting the id {minted!r} for {legacy}: no THINKING opener preceded it, so "
            "there was no id to continue; verification will reject the translated event "
            "for naming something nothing opened"
        )
        return minted

    def _from_thinking(self, event: BaseEvent) -> BaseEvent:
        from .._protocol.legacy_events import (
            ThinkingEndEvent,
            ThinkingStartEvent,
            ThinkingTextMessageContentEvent,
            ThinkingTextMessageEndEvent,
            ThinkingTextMessageStartEvent,
        )

        legacy = event.type.value
        base = _base_fields(event)
        out: BaseEvent
        if isinstance(event, ThinkingStartEvent):
            self._reasoning_id = self._ids()
            out = ReasoningStartEvent(message_id=self._reasoning_id, **base)
            if event.title is not None:
                self._warn(
                    f"dropping THINKING_START.title {event.title!r}: REASONING_START has no "
                    "title field, so the span's label cannot be carried"
                )
        elif isinstance(event, ThinkingTextMessageStartEvent):
            self._message_id = self._ids()
            out = ReasoningMessageStartEvent(message_id=self._message_id, role="reasoning", **base)
        elif isinstance(event, ThinkingTextMessageContentEvent):
            message_id = self._minted(self._message_id, legacy)
            out = ReasoningMessageContentEvent(message_id=message_id, delta=event.delta, **base)
        elif isinstance(event, ThinkingTextMessageEndEvent):
            message_id = self._minted(self._message_id, legacy)
            self._message_id = None
            out = ReasoningMessageEndEvent(message_id=message_id, **base)
        else:
            assert isinstance(event, ThinkingEndEvent)
            reasoning_id = self._minted(self._reasoning_id, legacy)
            self._reasoning_id = None
            out = ReasoningEndEvent(message_id=reasoning_id, **base)
        if legacy not in self._announced:
            # Once per type: a delta's conversion said every time would flood a server's log.
            self._announced.add(legacy)
            self._warn(
                f"converting the pre-1.0 {legacy} to {out.type.value} (said once per type "
                "and stream); the old shape left the protocol with 1.0: upgrade the "
                "producer's AG-UI integration"
            )
        return out

    # -- down ----------------------------------------------------------------

    def _down(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if _is_legacy(event.__class__):
            return (event,)  # already in the old spelling
        if self._pre_subagents:
            if isinstance(event, _LIFECYCLE):
                self._drop_lifecycle(event, "client")
                return ()
            event = strip_subagents(event)
        if self._thinking:
            respelt = self._to_thinking(event)
            if respelt is None:
                return ()
            event = respelt
        if self._flat:
            event = flatten_event(event, self._warn)
        if self._undeclared and isinstance(event, RunStartedEvent):
            event = _undeclared(event)
        return (event,)

    def _to_thinking(self, event: BaseEvent) -> BaseEvent | None:
        legacy = _thinking_spelling().get(event.__class__)
        if legacy is not None and not self._one_at_a_time(event):
            return None
        if legacy is not None:
            fields = _base_fields(event)
            if isinstance(event, ReasoningMessageContentEvent):
                fields["delta"] = event.delta
            return legacy(**fields)
        if isinstance(event, ReasoningEncryptedValueEvent | ReasoningMessageChunkEvent):
            why = (
                "a client of that era has no encrypted reasoning"
                if isinstance(event, ReasoningEncryptedValueEvent)
                else "expand chunks before this stage (the gateway does) to keep its content"
            )
            self._warn(
                f"dropping {event.type.value} for a client of protocol {shown(self.peer)}: {why}"
            )
            return None
        return event

    def _one_at_a_time(self, event: BaseEvent) -> bool:
        """Whether ``event`` gets its THINKING_* spelling (False: merged into the open one).

        THINKING_* name no ids, so an old client holds one span and one message at a
        time. A span or message opened while another is open is merged into it: its
        START and END go (with a warning, once each kind), its content joins the open
        message. A stream that never overlaps them is unchanged by this.
        """
        if isinstance(event, ReasoningStartEvent | ReasoningMessageStartEvent):
            table = self._spans if isinstance(event, ReasoningStartEvent) else self._messages
            merged = bool(table)
            table[event.message_id] = None
            if merged:
                kind = "span" if table is self._spans else "message"
                if f"merged-{kind}" not in self._announced:
                    self._announced.add(f"merged-{kind}")
                    self._warn(
                        f"merging the reasoning {kind} {event.message_id!r} into the one "
                        f"already open for a client of protocol {shown(self.peer)}: "
                        "THINKING_* carry no ids, so that era has one at a time"
                    )
            return not merged
        if isinstance(event, ReasoningEndEvent | ReasoningMessageEndEvent):
            table = self._spans if isinstance(event, ReasoningEndEvent) else self._messages
            if event.message_id not in table:
                return True  # nothing of ours open: passed on as it came
            del table[event.message_id]
            return not table
        return True


def _undeclared(event: RunStartedEvent) -> RunStartedEvent:
    """RUN_STARTED without the 1.0 ``protocolVersion`` declaration (nor in its input echo)."""
    update: dict[str, Any] = {}
    if event.protocol_version is not None:
        update["protocol_version"] = None
    echo = event.input
    if echo is not None and echo.protocol_version is not None:
        update["input"] = echo.model_copy(update={"protocol_version": None})
    return event.model_copy(update=update) if update else event


# -- requests --------------------------------------------------------------


def _wire(run_input: RunAgentInput | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(run_input, RunAgentInput):
        dumped: dict[str, Any] = run_input.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped
    if not isinstance(run_input, Mapping):
        raise TypeError(
            f"request_for() takes a RunAgentInput or its wire dict (camelCase keys), got "
            f"{type(run_input).__name__}"
        )
    return copy.deepcopy(dict(run_input))


def request_for(
    peer: str | None,
    run_input: RunAgentInput | Mapping[str, Any],
    *,
    warnings: list[DecodeWarning] | None = None,
) -> dict[str, Any]:
    """The request body (a wire dict) to send to an agent of protocol ``peer``.

    What the reference client does to its outgoing ``RunAgentInput`` for a
    peer whose ``maxProtocolVersion`` is ``peer`` (None: a current peer):

    * always: legacy ``binary`` content parts upgraded to media parts;
    * ``protocolVersion: "1.0"`` declared for a current peer, left out for an
      older one (it predates the field, and a strict old parser may reject it);
    * at or below 0.0.57: ``subagentRunId`` removed from every message;
    * at or below 0.0.39: ``parentRunId`` removed and message content
      flattened to one string (see ``flatten_wire_content``), with warnings.

    ``run_input`` is not changed. Warnings (code ``compat``) are logged on
    ``agui_pipes.compat`` and appended to ``warnings`` when given.
    """
    version = CURRENT if peer is None else parse_version(peer, "request_for peer")
    wire = _wire(run_input)

    def warn(message: str) -> None:
        warning = DecodeWarning("compat", message)
        logger.warning("%s", warning)
        if warnings is not None:
            warnings.append(warning)

    if version >= CURRENT:
        wire["protocolVersion"] = shown(CURRENT)
    else:
        wire.pop("protocolVersion", None)
    messages = wire.get("messages")
    if isinstance(messages, list):
        out: list[Any] = []
        for message in messages:
            if isinstance(message, dict):
                if version <= PRE_SUBAGENTS:
                    message = {k: v for k, v in message.items() if k != "subagentRunId"}
                if version <= FLAT_CONTENT:
                    message = flatten_wire_content(message, warn)
                content, notes = upgrade_binary_parts(message.get("content"))
                if content is not message.get("content"):
                    message = {**message, "content": content}
                for note in notes:
                    warn(f"message {message.get('id')!r}: {note}")
            out.append(message)
        wire["messages"] = out
    if version <= FLAT_CONTENT:
        wire.pop("parentRunId", None)
    return wire


def declared_version(run_input: RunAgentInput | Mapping[str, Any]) -> str | None:
    """The protocol version a request declares (``protocolVersion``), or None when absent.

    The reference client declares ``protocolVersion`` exactly when its peer is
    current, so its absence means a client of an earlier version (or one
    talking down to an older agent): the field itself is 1.0's.
    """
    if isinstance(run_input, RunAgentInput):
        return run_input.protocol_version
    value = run_input.get("protocolVersion")
    return value if isinstance(value, str) else None


def down_for_request(
    run_input: RunAgentInput | Mapping[str, Any], *, undeclared: str = "0.0.57"
) -> Compat | None:
    """The ``down`` stage for the client that sent ``run_input``, or None for a current one.

    A declared version of 1.0 or later needs none; a declared version the
    grammar cannot read is treated as a newer one (the versioning rules' way
    with an uninterpretable declaration), so it gets none either; a declared
    older version gets its era's stage. No declaration means a pre-1.0 client
    of an unknown era: ``undeclared`` names the era to serve it (default
    0.0.57, the last before 1.0 in the reference's shims: only the subagent
    material goes).
    """
    declared = declared_version(run_input)
    if declared is None:
        return Compat(direction="down", peer=undeclared)
    try:
        version = parse_version(declared, "protocolVersion")
    except ValueError:
        return None
    if version >= CURRENT:
        return None
    return Compat(direction="down", peer=declared)
