"""SSE frames with the id each one carried, in bounded memory.

``SSEDecoder`` keeps one id for the whole chunk it was fed (the last frame's),
but the client must check *every* frame's id. So each chunk is fed to it one
line at a time: a line ends at most one frame, so after a feed that gave a
payload, ``dispatched_event_id`` is that payload's own id. The decoder's id
buffer is then cleared, so a later frame without an ``id:`` line shows as one
without an id instead of inheriting the previous frame's (what the spec's
last-event-id would do, and what would hide a server that stopped numbering).

The decoder's frame cap stays in force however the chunk is split: a frame
larger than the cap is refused once the cap's worth of it is buffered.
"""

from __future__ import annotations

from ..codecs import SSEDecoder

__all__ = ["FrameReader"]


class FrameReader:
    """``feed(chunk)`` → the ``(id, payload)`` of every frame the chunk completed."""

    def __init__(self, max_frame_bytes: int) -> None:
        self._decoder = SSEDecoder(max_frame_bytes=max_frame_bytes)

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        """Raises ``agui_pipes.codecs.FrameTooLarge`` for a frame over the cap."""
        decoder = self._decoder
        frames: list[tuple[str, bytes]] = []
        # bytes.splitlines breaks at LF, CRLF and CR only: SSE's line ends.
        for line in chunk.splitlines(keepends=True):
            for payload in decoder.feed_bytes(line):
                frames.append((decoder.dispatched_event_id, payload))
                decoder.last_event_id = decoder.dispatched_event_id = ""
        return frames

    def close(self) -> None:
        """End of stream: ``agui_pipes.codecs.TruncatedFrame`` if a frame was left unfinished."""
        self._decoder.close()
