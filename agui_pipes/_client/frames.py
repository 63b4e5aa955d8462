"""SSE frames with the id each one carried, in bounded memory.

``SSEDecoder`` keeps one id for the whole chunk it was fed (the last frame's),
but the client must check *every* frame's id. So each chunk is fed to it in
pieces that can each end at most one frame: after a feed that gave a payload,
``dispatched_event_id`` is that payload's own id. The decoder's id
buffer is then cleared, so a later frame without an ``id:`` line shows as one
without an id instead of inheriting the previous frame's (what the spec's
last-event-id would do, and what would hide a server that stopped numbering).

The decoder's frame cap stays in force however the chunk is split: a frame
larger than the cap is refused once the cap's worth of it is buffered.
"""

from __future__ import annotations

from ..codecs import SSEDecoder

__all__ = ["FrameReader"]


def _pieces(chunk: bytes, after_lf: bool) -> list[bytes]:
    """``chunk`` cut so that no piece can end two frames.

    A frame ends at a blank line. With CR line ends about, every line is its own
    piece (``bytes.splitlines`` breaks at LF, CRLF and CR only: SSE's line ends).
    With LF alone — what servers write — a blank line is an LF right after an
    LF (``after_lf``: the chunk before ended with one), so cutting after each
    such LF gives whole frames, cheaper than lines.
    """
    if b"\r" in chunk:
        return chunk.splitlines(keepends=True)
    pieces: list[bytes] = []
    start = 0
    if after_lf and chunk.startswith(b"\n"):
        pieces.append(b"\n")
        start = 1
    search = start
    while (at := chunk.find(b"\n\n", search)) >= 0:
        pieces.append(chunk[start : at + 2])
        start = search = at + 2
        if chunk.startswith(b"\n", start):  # "\n\n\n": one more blank line
            pieces.append(b"\n")
            start = search = start + 1
    if start < len(chunk):
        pieces.append(chunk[start:])
    return pieces


class FrameReader:
    """``feed(chunk)`` → the ``(id, payload)`` of every frame the chunk completed."""

    def __init__(self, max_frame_bytes: int) -> None:
        # The decoder's fast path takes only frames without an id line: not these.
        self._decoder = SSEDecoder(max_frame_bytes=max_frame_bytes, fast_path=False)
        self._after_lf = False

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        """Raises ``agui_pipes.codecs.FrameTooLarge`` for a frame over the cap."""
        decoder = self._decoder
        frames: list[tuple[str, bytes]] = []
        pieces = _pieces(chunk, self._after_lf)
        self._after_lf = chunk.endswith(b"\n")
        for piece in pieces:
            for payload in decoder.feed_bytes(piece):
                frames.append((decoder.dispatched_event_id, payload))
                decoder.last_event_id = decoder.dispatched_event_id = ""
        return frames

    def close(self) -> None:
        """End of stream: ``agui_pipes.codecs.TruncatedFrame`` if a frame was left unfinished."""
        self._decoder.close()
