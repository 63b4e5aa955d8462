"""The bytes that frame one event's JSON on the wire, spelled out once.

An SSE frame is ``data: <json>`` and a blank line, optionally after an
``id: <event id>`` line; an NDJSON line is ``<json>`` and a newline. The
encoders write these, the fast framing cuts them, the relay re-frames
payloads with them and the run store writes ``id:`` frames: all of them use
the names here, so the frame has one definition. No imports: any layer may
use it.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "NDJSON_END",
    "NDJSON_FRAMING",
    "SSE_DATA",
    "SSE_END",
    "SSE_FRAMING",
    "SSE_ID",
]

SSE_DATA: Final = b"data: "
"""What starts an SSE frame's one ``data`` line (the JSON follows)."""
SSE_END: Final = b"\n\n"
"""What ends an SSE frame: the ``data`` line's end and the blank line."""
SSE_ID: Final = b"id: "
"""What starts the ``id`` line a recorded frame carries before its ``data`` line."""
NDJSON_END: Final = b"\n"
"""What ends an NDJSON line."""

SSE_FRAMING: Final = (SSE_DATA, SSE_END)
"""The bytes before and after an event's JSON in an SSE frame without an id."""
NDJSON_FRAMING: Final = (b"", NDJSON_END)
"""The bytes before and after an event's JSON on an NDJSON line."""
