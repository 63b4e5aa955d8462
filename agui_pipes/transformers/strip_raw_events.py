"""StripRawEvents: remove provider payloads — RAW events and every ``rawEvent`` field.

``rawEvent`` carries the provider-native event an AG-UI event was translated
from, and RAW carries payloads the protocol does not model. Both are for
debugging; on the way to a browser they cost bandwidth and can leak prompts,
keys or internal ids. Neither drives behaviour (PROTOCOL.md §1: never drive
behaviour from ``rawEvent``), so removing them cannot change what a client
assembles.
"""

from __future__ import annotations

from collections.abc import Sequence

from ag_ui.core import BaseEvent, RawEvent

from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer
from .._protocol.construct import replace

__all__ = ["StripRawEvents"]
__dir__ = public_dir(__all__)


class StripRawEvents(StreamTransformer):
    """Drop RAW events and the ``rawEvent`` payload of every other event."""

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        if event.raw_event is None:
            if type(event) is RawEvent:
                return ()
            return (event,)
        if type(event) is RawEvent:
            return ()
        return (replace(event, "raw_event", None),)
