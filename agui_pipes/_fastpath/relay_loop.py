"""The relay's fast loop: ``Relay._feed_reference``'s sibling, with generated code inlined.

``agui_pipes.relay.Relay`` picks one loop at construction: the reference
(decode, chain, encode per event) or ``feed`` here, which gives the same
output bytes, counts, hook calls and errors, faster:

* a payload is parsed once and built by its key set's generated builder
  (``decoding.entry_for``, the lookup ``decode()`` uses too);
* the *bypass* (``bypass``): a payload every stage promised to pass is sent
  on as its own bytes, without building the event;
* an event that leaves the chain as the very object built from its payload,
  when that payload is already the encoder's bytes, is sent as those bytes;
* anything else is written by the class's generated writer.

With the built-in SSE or NDJSON encoder the loop returns each event's JSON
unframed (the relay frames a batch in one join); with another encoder, the
encoder's frames. This runs once per event: the common cases stay inline in
``feed``, the rare ones (a payload no builder takes, an event without a
common-shape writer) are calls.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

from ag_ui.core import BaseEvent

from .._foundation.json import fast_loads, orjson_dumps
from .._pipeline.chain import SyncSegment
from .._protocol.decode import DecodeWarning, as_object, decode_legacy_object, decode_object
from .bypass import bypass_for
from .decoding import entry_for
from .open_json import OPEN_BUILDERS, build_open
from .writers import WRITERS, compile_common_shape
from .writers import encode_json as write_json

__all__ = ["feed"]

_UNSEEN: Any = object()
"""Marks a class the writer table has not seen yet."""


class _RelayState(Protocol):
    """What the loop reads and writes of a ``Relay`` (its configuration and counters)."""

    _segment: SyncSegment | None
    _encode: Callable[[BaseEvent], bytes]
    _framing: tuple[bytes, bytes] | None
    _legacy: bool
    _on_warning: Callable[[DecodeWarning], None] | None
    _on_event: Callable[[BaseEvent], None] | None
    _on_input: Callable[[BaseEvent], None] | None
    _input_types: Collection[type[BaseEvent]] | None
    _output_types: Collection[type[BaseEvent]] | None
    _watched: frozenset[type[BaseEvent]] | None
    _index: int
    _forwarded: int
    _sent: int
    _unknown: int
    _unsent: list[bytes]


def _pass_on(event: BaseEvent, index: int) -> tuple[BaseEvent]:
    """An empty chain's push."""
    return (event,)


class _Every:
    """The classes a hook without ``input_types`` / ``output_types`` is given: all."""

    __slots__ = ()

    def __contains__(self, item: object) -> bool:
        return True


_EVERY: Collection[Any] = _Every()  # type: ignore[assignment]


def feed(relay: _RelayState, payloads: Iterable[bytes | str]) -> list[bytes]:
    """Process wire payloads; each output event's bytes (JSON, or frames: see above)."""
    segment, transform, write, reuse, bypassing = _plan(relay)
    input_types, output_types = _watching(relay)
    watched = relay._watched
    on_warning = relay._on_warning
    on_event = relay._on_event
    on_input = relay._on_input
    legacy = relay._legacy
    out: list[bytes] = []
    append = out.append
    index = relay._index
    forwarded = relay._forwarded
    sent = relay._sent
    loads = fast_loads
    lookup = entry_for
    open_builders = OPEN_BUILDERS
    try:
        for payload in payloads:
            event: BaseEvent | None = None
            raw: Any = None
            framing_len: int | None = None
            if payload.__class__ is bytes:
                try:
                    raw = loads(payload)
                    type_name = raw["type"]
                except (ValueError, TypeError, KeyError):
                    # Not JSON, not an object, or no "type": the reference
                    # decoder below reports it precisely.
                    type_name = None
                if type_name.__class__ is str:
                    key = (type_name, tuple(raw))
                    if bypassing:
                        # Read per event: a stage's reroute() switches the table.
                        try:
                            bypass = segment.state_cache[key]  # type: ignore[union-attr]
                        except KeyError:
                            bypass = bypass_for(segment, watched, *key)  # type: ignore[arg-type]
                        if bypass is not None:
                            data = bypass(raw, payload)
                            if data is not None:
                                # Every stage passes it (or drops a field) and this
                                # is what encoding the output gives: send it without
                                # building any event.
                                append(data)
                                index += 1
                                forwarded += 1
                                continue
                    entry = lookup(key)
                    if entry is not None:
                        event = entry[0](raw)
                        if reuse and event is not None:
                            # Only a built event's values are all strings (which the
                            # length check below counts); one the builder refused,
                            # e.g. a legacy ``null``, is decoded below.
                            framing_len = entry[1]
                    elif type_name in open_builders:  # snapshots and deltas
                        event = build_open(raw, key)
            if event is None:
                event = _decoded(payload, raw, index, legacy, on_warning)
                if event is None:  # an unknown type, dropped (with its warning)
                    index += 1
                    relay._unknown += 1
                    continue
            index += 1
            if on_input is not None and event.__class__ in input_types:
                on_input(event)
            for output in transform(event, index - 1):
                sent += 1
                if on_event is not None and output.__class__ in output_types:
                    on_event(output)
                if output is not event or framing_len is None:
                    append(write(output))
                elif len(payload) == framing_len + sum(map(len, raw.values())):
                    # No stage replaced the event and its input bytes are exactly
                    # what encoding it gives (any whitespace, escape or non-ASCII
                    # character would make them longer): send them on as they are.
                    append(payload)  # type: ignore[arg-type]
                else:
                    append(_resent(payload, raw, output, write))  # type: ignore[arg-type]
    except BaseException:
        relay._unsent = out
        raise
    finally:
        relay._index = index
        relay._forwarded = forwarded
        relay._sent = sent
    return out


def _plan(
    relay: _RelayState,
) -> tuple[
    SyncSegment | None,
    Callable[[BaseEvent, int], Sequence[BaseEvent]],
    Callable[[BaseEvent], bytes],
    bool,
    bool,
]:
    """What one ``feed`` call works with: the chain's loop, how to write, what to reuse.

    ``reuse``: input bytes may be sent on as output (a built-in encoder's
    framing is known, orjson compares them); ``bypassing``: the bypass is
    on too (no hook needs every event itself).
    """
    segment = relay._segment
    transform = _pass_on if segment is None else segment.push
    framing = relay._framing
    write = relay._encode if framing is None else _json_writer(relay._encode, framing)
    reuse = framing is not None and orjson_dumps is not None
    bypassing = reuse and segment is not None and relay._watched is not None
    return segment, transform, write, reuse, bypassing


def _watching(relay: _RelayState) -> tuple[Collection[Any], Collection[Any]]:
    """The classes ``on_input`` and ``on_event`` are given (``_EVERY`` for no limit)."""
    inputs, outputs = relay._input_types, relay._output_types
    return (_EVERY if inputs is None else inputs, _EVERY if outputs is None else outputs)


def _resent(
    payload: bytes, raw: dict[str, Any], output: BaseEvent, write: Callable[[BaseEvent], bytes]
) -> bytes:
    """An unchanged event whose payload is not compact: its bytes if they are the encoder's."""
    dumps = orjson_dumps
    assert dumps is not None  # the loop reuses payloads only with orjson
    return payload if dumps(raw) == payload else write(output)


def _decoded(
    payload: bytes | str,
    raw: Any,
    index: int,
    legacy: bool,
    on_warning: Callable[[DecodeWarning], None] | None,
) -> BaseEvent | None:
    """A payload no builder took, decoded as ``decode()`` would (warnings to ``on_warning``).

    One already parsed goes straight to the reference decoder (``decode()``
    would parse it again and try the same builder first); any other payload
    is read by it too, which reports what is wrong with it.
    """
    whole = decode_legacy_object if legacy else decode_object
    decoded = whole(raw if raw.__class__ is dict else as_object(payload, index), index)
    if decoded.warnings and on_warning is not None:
        for warning in decoded.warnings:
            on_warning(warning)
    return decoded.event


def _json_writer(
    encode: Callable[[BaseEvent], bytes], framing: tuple[bytes, bytes]
) -> Callable[[BaseEvent], bytes]:
    """How the loop writes an output's JSON for a built-in encoder framing with ``framing``."""
    start, end = len(framing[0]), -len(framing[1])

    def write(output: BaseEvent) -> bytes:
        # The encoder's own first choice, without its two calls: the generated
        # writer for the class's common shape.
        writer = WRITERS.get(output.__class__, _UNSEEN)
        if writer is _UNSEEN:
            writer = _writer_for(output)
        data = None
        if writer is not None and not output.__pydantic_extra__:
            data = writer(output.__dict__)  # None: not the common shape
        if data is None:
            # The built-in encoders frame encode_json's bytes: with an event (it
            # has a writer), write those directly.
            data = write_json(output) if writer is not None else encode(output)[start:end]
        return data

    return write


def _writer_for(output: object) -> Any:
    """The common-shape writer of an output's class (compiled once), None for non-events."""
    cls = type(output)
    if not issubclass(cls, BaseEvent):
        return None  # the encoder reports it
    return compile_common_shape(cls)
