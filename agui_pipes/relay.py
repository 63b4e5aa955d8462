"""Wire in, wire out: decode → chain → encode, a batch of payloads at a time.

A relay (the gateway, ``agui-pipes run``) receives events in network-sized
chunks and sends them on in chunks. Doing the per-event work synchronously
per chunk — instead of pushing every event through a stack of async
generators — removes the per-event scheduling cost and lets the transport
write one buffer per chunk. ``Relay`` is that loop, for chains of synchronous
stages (``chain.is_sync``); chains with async stages or operators run through
``TransformerChain.apply`` instead.

    relay = Relay(chain)                    # a fresh chain, for one stream
    for chunk in upstream:                  # bytes from the network
        out = relay.feed(decoder.feed(chunk))   # SSE frames for this chunk
        send(out)
    send(relay.finish())                    # what the stages flush at the end

Errors surface as raised exceptions, exactly as through ``chain.apply``: a
malformed event is a ``DecodeError``, a stage's refusal its ``StreamRejected``
subclass, a stage bug a ``StageError`` — each naming the event's index.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from ag_ui.core import BaseEvent

from ._chain import SyncSegment, TransformerChain, sync_segment
from ._fastpath._promises import conditions as _promised_conditions
from ._json import fast_loads, orjson_dumps
from .codecs import _COMPILED, _compile_common_shape, encode_ndjson, encode_sse
from .decode import (
    _BUILDER_LIMIT,
    _RELAY_ENTRIES,
    DecodeWarning,
    _compile_lane,
    _Lane,
    _relay_entry,
    _wire_shape,
    decode,
)

__all__ = ["Relay"]

_FRAMING: dict[Callable[[BaseEvent], bytes], tuple[bytes, bytes]] = {
    encode_sse: (b"data: ", b"\n\n"),
    encode_ndjson: (b"", b"\n"),
}
"""How the built-in encoders frame an event's JSON (for re-sending input bytes as they are)."""

_UNSEEN: Any = object()
"""Marks a key set the builder cache has not seen yet."""


def _pass_on(event: BaseEvent, index: int) -> tuple[BaseEvent]:
    """An empty chain's push."""
    return (event,)


def _writer_for(output: object) -> Any:
    """The common-shape writer of an output's class (compiled once), None for non-events."""
    cls = type(output)
    if not issubclass(cls, BaseEvent):
        return None  # the encoder reports it
    return _compile_common_shape(cls)


def _lane_for(
    segment: SyncSegment,
    watched: frozenset[type[BaseEvent]],
    type_name: str,
    keys: tuple[str, ...],
) -> _Lane | None:
    """Compile (once per route state and key set) the pass-through test, or None."""
    lane = None
    shape = _wire_shape(type_name, keys)
    if shape is not None and shape[0] not in watched:
        conditions = _promised_conditions(segment, *shape)
        if conditions is not None:
            lane = _compile_lane(type_name, keys, conditions)
    lanes = segment.state_cache
    # Key sets come from the wire. A lane needs a builder, so lanes are as
    # bounded as builders; the answers without one are kept up to a bound
    # and past it worked out again (cheaply) when they come back.
    if lane is not None or len(lanes) < _BUILDER_LIMIT:
        lanes[(type_name, keys)] = lane
    return lane


class Relay:
    """Decode, transform and encode a stream in batches (one instance per stream).

    Hooks (each costs nothing when ``None``): ``on_warning`` gets each decode
    warning, ``on_input`` each decoded input event before the chain sees it
    (dropped unknown types excluded), ``on_event`` each output event before
    it is encoded. A hook that needs every event turns the pass-through lane
    off (see ``StreamTransformer.passes``): limit it to the classes it cares
    about with ``input_types`` / ``output_types`` (exact classes) and the lane
    stays on for the rest.
    """

    __slots__ = (
        "_chain",
        "_encode",
        "_finished",
        "_forwarded",
        "_framing",
        "_index",
        "_input_types",
        "_on_event",
        "_on_input",
        "_on_warning",
        "_output_types",
        "_sent",
        "_unknown",
        "_unsent",
        "_watched",
    )

    def __init__(
        self,
        chain: TransformerChain,
        *,
        encode: Callable[[BaseEvent], bytes] = encode_sse,
        on_warning: Callable[[DecodeWarning], None] | None = None,
        on_event: Callable[[BaseEvent], None] | None = None,
        on_input: Callable[[BaseEvent], None] | None = None,
        output_types: Collection[type[BaseEvent]] | None = None,
        input_types: Collection[type[BaseEvent]] | None = None,
    ) -> None:
        if not chain.is_sync:
            raise TypeError(
                "Relay runs chains of synchronous stages; this chain has async stages or "
                "operators — run it with chain.apply(source)"
            )
        chain.claim()
        self._chain = chain
        self._encode = encode
        self._framing = _FRAMING.get(encode)
        self._on_warning = on_warning
        self._on_event = on_event
        self._on_input = on_input
        self._output_types = None if output_types is None else frozenset(output_types)
        self._input_types = None if input_types is None else frozenset(input_types)
        watched: frozenset[type[BaseEvent]] | None = frozenset()
        for hook, types in ((on_event, self._output_types), (on_input, self._input_types)):
            if hook is not None:
                watched = None if types is None or watched is None else watched | types
        self._watched = watched  # None: a hook needs every event, no lane
        self._index = 0
        self._forwarded = 0
        self._sent = 0
        self._unknown = 0
        self._unsent = b""
        self._finished = False

    @property
    def events_in(self) -> int:
        """How many wire events were decoded so far (dropped unknown types included)."""
        return self._index

    @property
    def events_unknown(self) -> int:
        """How many of them were dropped as unknown event types (each with a warning)."""
        return self._unknown

    @property
    def events_out(self) -> int:
        """How many events were sent (encoded or forwarded), ``finish()`` included."""
        return self._sent + self._forwarded

    @property
    def events_forwarded(self) -> int:
        """How many input events went out through the pass-through lane.

        Those were neither built as events nor seen by any stage, because every
        stage promised (``StreamTransformer.passes``) to pass them on (unchanged,
        or with a field dropped).
        """
        return self._forwarded

    def feed(self, payloads: Iterable[bytes | str]) -> bytes:
        """Process wire payloads (one JSON event each); returns the encoded output.

        An event that comes out of the chain as the very object decoded from its
        payload, when that payload is already byte-for-byte the encoder's output,
        is sent as those bytes without re-encoding (tests prove the output is
        identical to encoding every event).
        """
        segment = sync_segment(self._chain)
        transform = _pass_on if segment is None else segment.push
        encode = self._encode
        on_warning = self._on_warning
        on_event = self._on_event
        on_input = self._on_input
        input_types = self._input_types
        output_types = self._output_types
        out: list[bytes] = []
        append = out.append
        index = self._index
        forwarded = self._forwarded
        sent = self._sent
        framing = self._framing
        prefix, suffix = framing if framing is not None else (b"", b"")
        dumps = orjson_dumps
        reuse = framing is not None and dumps is not None
        loads = fast_loads
        entries = _RELAY_ENTRIES
        writers = _COMPILED
        # The pass-through lane (see ``StreamTransformer.passes``): only when no
        # hook needs the events themselves and input bytes can be re-sent.
        watched = self._watched
        lanes = (
            segment.state_cache
            if reuse and segment is not None and watched is not None
            else None
        )
        try:
            for payload in payloads:
                # decode()'s fast path, inlined: this loop runs once per event.
                event: BaseEvent | None = None
                raw: Any = None
                framing_len: int | None = None
                if payload.__class__ is bytes:
                    try:
                        raw = loads(payload)
                        type_name = raw["type"]
                    except (ValueError, TypeError, KeyError):
                        # Not JSON, not an object, or no "type": decode() below
                        # reports it precisely.
                        type_name = None
                    if type_name.__class__ is str:
                        key = (type_name, tuple(raw))
                        if lanes is not None:
                            try:
                                lane = lanes[key]
                            except KeyError:
                                lane = _lane_for(segment, watched, *key)  # type: ignore[arg-type]
                            if lane is not None:
                                data = lane(raw, payload)
                                if data is not None:
                                    # Every stage passes it (or drops a field) and
                                    # this is what encoding the output gives: send
                                    # it without building any event.
                                    append(data)
                                    index += 1
                                    forwarded += 1
                                    continue
                        try:
                            entry = entries[key]
                        except KeyError:
                            entry = _relay_entry(*key)
                        if entry is not None:
                            event = entry[0](raw)
                            if reuse and event is not None:
                                # Only a built event's values are all strings (which
                                # the length check below counts); one the builder
                                # refused, e.g. a legacy ``null``, is decoded below.
                                framing_len = entry[1]
                if event is None:
                    decoded = decode(payload, index=index)
                    if decoded.warnings and on_warning is not None:
                        for warning in decoded.warnings:
                            on_warning(warning)
                    event = decoded.event
                    if event is None:
                        index += 1
                        self._unknown += 1
                        continue
                index += 1
                if on_input is not None and (
                    input_types is None or event.__class__ in input_types
                ):
                    on_input(event)
                for output in transform(event, index - 1):
                    sent += 1
                    if on_event is not None and (
                        output_types is None or output.__class__ in output_types
                    ):
                        on_event(output)
                    if output is event and framing_len is not None and (
                        # Any whitespace, escape or non-ASCII character makes a
                        # payload longer than this; then compare it exactly.
                        len(payload) == framing_len + sum(map(len, raw.values()))
                        or dumps(raw) == payload
                    ):
                        # No stage replaced the event and its input bytes are
                        # exactly what encoding it gives: send them on as they are.
                        append(payload)  # type: ignore[arg-type]
                    elif framing is None:
                        append(encode(output))
                    else:
                        # The encoder's own first choice, without its two calls: the
                        # generated writer for the class's common shape.
                        writer = writers.get(output.__class__, _UNSEEN)
                        if writer is _UNSEEN:
                            writer = _writer_for(output)
                        data = None
                        if writer is not None and not output.__pydantic_extra__:
                            data = writer(output.__dict__)  # None: not the common shape
                        if data is None:
                            data = encode(output)[len(prefix) : -len(suffix)]
                        append(data)
                if lanes is not None:
                    lanes = segment.state_cache  # type: ignore[union-attr]  # a stage may have rerouted
        except BaseException:
            self._unsent = self._joined(out)
            raise
        finally:
            self._index = index
            self._forwarded = forwarded
            self._sent = sent
        return self._joined(out)

    def _joined(self, out: list[bytes]) -> bytes:
        if self._framing is None or not out:
            return b"".join(out)
        # Every item is one event's JSON: frame them all in one join.
        prefix, suffix = self._framing
        return b"".join((prefix, (suffix + prefix).join(out), suffix))

    def take_unsent(self) -> bytes:
        """After ``feed`` raised: the output of that batch's events before the failing one.

        A relay that stops on an error still owes the client what the chain
        produced up to it (exactly what ``chain.apply`` would have yielded):
        send this before reporting the error. Empty when nothing is owed.
        """
        unsent, self._unsent = self._unsent, b""
        return unsent

    def finish(self) -> bytes:
        """The stages' end-of-stream output, encoded (call once, after the last ``feed``)."""
        if self._finished:
            raise RuntimeError("Relay.finish() was already called for this stream")
        self._finished = True
        out = []
        types = self._output_types
        for output in self._chain.finish_at(self._index):
            self._sent += 1
            if self._on_event is not None and (types is None or output.__class__ in types):
                self._on_event(output)
            out.append(self._encode(output))
        return b"".join(out)
