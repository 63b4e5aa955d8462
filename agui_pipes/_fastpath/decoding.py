"""``decode()``'s fast path for bytes: the generated builder of the payload's key set.

``decode_bytes`` is the fast sibling of the reference
``decode_object(as_object(wire, index), index)`` (``agui_pipes._protocol.decode``):
the payload is parsed once, and a builder generated for its exact key set
(``builders``, or ``open_json`` for snapshots and deltas) builds the event;
whatever no builder takes — and every error — goes to the reference
decoder, with the payload already parsed. ``entry_for`` is the one builder
lookup: the decoder and the relay's loop (``relay_loop``) both use it.
"""

from __future__ import annotations

from typing import Any

from .._foundation.json import fast_loads
from .._protocol.decode import Decoded, as_object, decode_object
from .builders import RELAY_ENTRIES, RelayEntry, relay_entry
from .open_json import OPEN_BUILDERS, build_open

__all__ = ["decode_bytes", "entry_for"]


def entry_for(key: tuple[str, tuple[str, ...]]) -> RelayEntry:
    """The builder of a wire key set (type, keys in order) and its framing length, or None.

    Compiled the first time a key set is met (``builders.relay_entry``), then
    one dict lookup per event.
    """
    try:
        return RELAY_ENTRIES[key]
    except KeyError:
        return relay_entry(*key)


def decode_bytes(wire: bytes, index: int | None) -> Decoded:
    """One wire payload decoded, as the reference decoder does, by its key set's builder."""
    try:
        raw: Any = fast_loads(wire)
    except ValueError:  # malformed JSON or UTF-8: the reference path reports it
        return decode_object(as_object(wire, index), index)
    if raw.__class__ is dict:
        type_name = raw.get("type")
        if type_name.__class__ is str:
            key = (type_name, tuple(raw))
            entry = entry_for(key)
            event = (
                entry[0](raw)
                if entry is not None
                else build_open(raw, key)
                if type_name in OPEN_BUILDERS  # snapshots, deltas: open JSON values
                else None
            )
            if event is not None:
                return Decoded(event)
        return decode_object(raw, index)
    return decode_object(as_object(wire, index), index)
