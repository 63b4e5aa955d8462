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

This module holds the reference loop (``Relay._feed_reference``: decode →
chain → encode per event); its fast sibling, ``agui_pipes._fastpath.relay_loop``
(generated builders and writers, and the *bypass*, which sends a payload on
as its own bytes when every stage promises to pass it), gives the same
bytes. A relay picks one of the two at construction:
``Relay(chain, fast_path=False)`` (or ``AGUI_PIPES_FAST_PATH=0``) runs the
reference loop.

Errors surface as raised exceptions, exactly as through ``chain.apply``: a
malformed event is a ``DecodeError``, a stage's refusal its ``StreamRejected``
subclass, a stage bug a ``StageError`` — each naming the event's index.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable

from ag_ui.core import BaseEvent

from . import _fastpath
from ._fastpath import relay_loop
from ._foundation.framing import NDJSON_FRAMING, SSE_FRAMING
from ._lazy import public_dir
from ._pipeline.chain import TransformerChain, sync_segment
from ._protocol.decode import (
    DecodeError,
    DecodeWarning,
    as_object,
    decode_legacy_object,
    decode_object,
)
from ._protocol.legacy import reads_legacy
from .codecs import encode_ndjson, encode_sse

__all__ = ["Relay"]
__dir__ = public_dir(__all__)

_FRAMING: dict[Callable[[BaseEvent], bytes], tuple[bytes, bytes]] = {
    encode_sse: SSE_FRAMING,
    encode_ndjson: NDJSON_FRAMING,
}
"""How the built-in encoders frame an event's JSON (for re-sending input bytes as they are)."""

_REFERENCE_ENCODERS: dict[Callable[[BaseEvent], bytes], Callable[[BaseEvent], bytes]] = {
    encode_sse: functools.partial(encode_sse, fast_path=False),
    encode_ndjson: functools.partial(encode_ndjson, fast_path=False),
}
"""The built-in encoders held to the reference path (for ``Relay(fast_path=False)``)."""

_Loop = Callable[["Relay", Iterable[bytes | str]], list[bytes]]
"""One batch through decode, chain and encode: the output events' bytes, in order."""


def _pass_on(event: BaseEvent, index: int) -> tuple[BaseEvent]:
    """An empty chain's push."""
    return (event,)


class Relay:
    """Decode, transform and encode a stream in batches (one instance per stream).

    Hooks (each costs nothing when ``None``): ``on_warning`` gets each decode
    warning, ``on_input`` each decoded input event before the chain sees it
    (dropped unknown types excluded), ``on_event`` each output event before
    it is encoded. A hook that needs every event turns the bypass off (see
    ``StreamTransformer.passes``): limit it to the classes it cares about
    with ``input_types`` / ``output_types`` (exact classes) and the bypass
    stays on for the rest.

    ``fast_path=False`` runs the reference loop only (decode, chain, encode
    per event, the built-in encoders on their reference path too); ``None``
    follows ``AGUI_PIPES_FAST_PATH``. The output is the same bytes.
    """

    __slots__ = (
        "_chain",
        "_drained",
        "_encode",
        "_failure",
        "_finished",
        "_flushed",
        "_forwarded",
        "_framing",
        "_index",
        "_input_types",
        "_legacy",
        "_loop",
        "_on_event",
        "_on_input",
        "_on_warning",
        "_output_types",
        "_segment",
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
        fast_path: bool | None = None,
    ) -> None:
        if not chain.is_sync:
            raise TypeError(
                "Relay runs chains of synchronous stages; this chain has async stages or "
                "operators — run it with chain.apply(source)"
            )
        chain.claim()
        self._chain = chain
        # A chain with a ``compat`` (up) stage gets the pre-1.0 shapes from the decoder.
        self._legacy = reads_legacy(chain.stages)
        # The loop, chosen once: the reference, or its fast sibling (a function
        # called with the relay, not a bound method: no reference cycle keeps
        # the chain alive). ``_framing`` says what its items are: each event's
        # JSON, framed so in one join (the fast loop with a built-in encoder),
        # or None for whole frames.
        # The chain's loop follows the same choice: its stages' ``route``
        # handlers on the fast path, their ``transform`` on the reference one.
        self._loop: _Loop
        fast = _fastpath.ENABLED if fast_path is None else fast_path
        if fast:
            self._loop = relay_loop.feed
            self._framing = _FRAMING.get(encode)
        else:
            self._loop = Relay._feed_reference
            self._framing = None
            encode = _REFERENCE_ENCODERS.get(encode, encode)
        self._encode = encode
        self._segment = sync_segment(chain, hooks=fast)
        self._on_warning = on_warning
        self._on_event = on_event
        self._on_input = on_input
        self._output_types = None if output_types is None else frozenset(output_types)
        self._input_types = None if input_types is None else frozenset(input_types)
        watched: frozenset[type[BaseEvent]] | None = frozenset()
        for hook, types in ((on_event, self._output_types), (on_input, self._input_types)):
            if hook is not None:
                watched = None if types is None or watched is None else watched | types
        self._watched = watched  # None: a hook needs every event, no bypass
        self._index = 0
        self._forwarded = 0
        self._sent = 0
        self._unknown = 0
        self._unsent: list[bytes] = []  # the loop's items (see ``_framing``)
        self._finished = False
        self._drained = False
        self._failure: BaseException | None = None  # what a feed raised (for ``drain``)
        self._flushed: list[BaseEvent] = []  # what a finish that raised released first

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
        """How many input events went out through the bypass.

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
        return self._joined(self._fed(payloads))

    def _fed(self, payloads: Iterable[bytes | str]) -> list[bytes]:
        """One batch through the loop; what it raised is kept for ``drain``."""
        try:
            return self._loop(self, payloads)
        except BaseException as exc:
            self._failure = exc
            raise

    def feed_payloads(self, payloads: Iterable[bytes | str]) -> list[bytes]:
        """``feed``, but each output event's JSON apart, unframed (in order).

        For a caller that frames the events itself — the gateway recording a
        run gives every frame its ``id:`` line — and would otherwise split
        ``feed``'s bytes back into events. Only with the built-in SSE or
        NDJSON encoder, whose framing is known.
        """
        if self._framing is not None:
            return self._fed(payloads)  # the items are the events' JSON already
        self._known_framing()  # raises, before any payload is read, for a custom encoder
        return self._unframed(self._fed(payloads))

    def _unframed(self, frames: list[bytes]) -> list[bytes]:
        """Each frame's event JSON, the built-in encoder's framing taken off."""
        prefix, suffix = self._known_framing()
        start, end = len(prefix), -len(suffix)
        return [frame[start:end] for frame in frames]

    def _known_framing(self) -> tuple[bytes, bytes]:
        for encoder, framing in _FRAMING.items():
            if self._encode is encoder or self._encode is _REFERENCE_ENCODERS[encoder]:
                return framing
        raise TypeError(
            "Relay.feed_payloads() needs the built-in encode_sse or encode_ndjson encoder "
            "(their framing is known); with a custom encoder use Relay.feed()"
        )

    def _feed_reference(self, payloads: Iterable[bytes | str]) -> list[bytes]:
        """The reference loop: each payload decoded, pushed and encoded (frames).

        ``agui_pipes._fastpath.relay_loop.feed`` is its fast sibling.
        """
        segment = self._segment
        transform = _pass_on if segment is None else segment.push
        encode = self._encode
        on_warning = self._on_warning
        on_event = self._on_event
        on_input = self._on_input
        input_types = self._input_types
        output_types = self._output_types
        out: list[bytes] = []
        index = self._index
        try:
            decode_whole = decode_legacy_object if self._legacy else decode_object
            for payload in payloads:
                decoded = decode_whole(as_object(payload, index), index)
                if decoded.warnings and on_warning is not None:
                    for warning in decoded.warnings:
                        on_warning(warning)
                event = decoded.event
                index += 1
                if event is None:
                    self._unknown += 1
                    continue
                if on_input is not None and (input_types is None or event.__class__ in input_types):
                    on_input(event)
                for output in transform(event, index - 1):
                    self._sent += 1
                    if on_event is not None and (
                        output_types is None or output.__class__ in output_types
                    ):
                        on_event(output)
                    out.append(encode(output))
        except BaseException:
            self._unsent = out
            raise
        finally:
            self._index = index
        return out

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
        unsent, self._unsent = self._unsent, []
        return self._joined(unsent)

    def take_unsent_payloads(self) -> list[bytes]:
        """``take_unsent`` for ``feed_payloads``: each owed event's JSON apart."""
        unsent, self._unsent = self._unsent, []
        return unsent if self._framing is not None else self._unframed(unsent)

    def finish(self) -> bytes:
        """The stages' end-of-stream output, encoded (call once, after the last ``feed``)."""
        return b"".join(self._finish_frames())

    def finish_payloads(self) -> list[bytes]:
        """``finish``, each event's JSON apart and unframed (see ``feed_payloads``)."""
        self._known_framing()  # refuses a custom encoder before the stream is finished
        return self._unframed(self._finish_frames())

    def _finish_frames(self) -> list[bytes]:
        if self._finished:
            raise RuntimeError("Relay.finish() was already called for this stream")
        self._finished = True
        segment = self._segment
        if segment is None:
            return []
        flushed = self._flushed
        try:
            segment.finish(self._index - 1, flushed)
        except BaseException as exc:
            self._failure = exc  # ``drain`` sends what came before the failing stage
            raise
        self._flushed = []
        return self._encoded(flushed)

    def drain(self) -> bytes:
        """What the stages still hold, encoded, for a stream that stopped short of its end.

        Call it instead of ``finish()`` when the source failed or was cut off
        mid-run, or after ``feed``/``finish`` raised (after ``take_unsent``),
        before writing a terminal event of your own: the events a clean end
        would release (held text, coalesced deltas, pending closes) come
        first, through every stage after the one that holds them. Nothing
        passes through a stage that raised, and after an output event failed
        to encode (or a hook raised) nothing follows it: what the stages hold
        would come after an event the client never got. A terminal event a
        stage makes of the cut (``Repair`` ends a cut-off run) is left out:
        yours follows. Empty once the stream was finished or drained.
        """
        return b"".join(self._drain_frames())

    def drain_payloads(self) -> list[bytes]:
        """``drain``, each event's JSON apart and unframed (see ``feed_payloads``)."""
        self._known_framing()
        return self._unframed(self._drain_frames())

    def _drain_frames(self) -> list[bytes]:
        owed, self._flushed = self._flushed, []
        segment, failure = self._segment, self._failure
        if segment is None or self._drained or (self._finished and failure is None):
            return []  # nothing to drain, drained, or finished cleanly
        self._finished = self._drained = True
        if segment.failed is None and failure is not None and not isinstance(failure, DecodeError):
            # Not a stage and not the wire: the output failed to encode, or a hook raised.
            return []
        out: list[bytes] = []
        try:
            self._encoded(segment.drain(self._index - 1, owed), out)
        except Exception:  # the run's own failure is what gets reported
            # An event that does not encode: what comes after it would follow a hole.
            pass
        return out

    def _encoded(self, events: Iterable[BaseEvent], out: list[bytes] | None = None) -> list[bytes]:
        """``events`` counted, shown to ``on_event`` and encoded (frames, onto ``out``)."""
        out = [] if out is None else out
        types = self._output_types
        for output in events:
            self._sent += 1
            if self._on_event is not None and (types is None or output.__class__ in types):
                self._on_event(output)
            out.append(self._encode(output))
        return out
