"""A batch of appended events as one stored record: the payloads joined, plus their lengths.

Why: SQLite and Redis pay per row / per stream entry (an index insert, an
``XADD``, the client packing one more argument) far more than per byte. A
server appends in batches anyway, so storing each batch as *one* record — the
payloads concatenated, a little-endian uint32 length per payload — cuts the
store's cost per event several times, while a read still gets events one by
one: it finds the batches whose last seq is past the reader's position and
splits them, skipping what the reader already has.

Lengths, not a separator: a payload is arbitrary bytes (a pretty-printed
upstream JSON may hold line breaks), so no byte can be reserved.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ._errors import StoreError

__all__ = ["join_batch", "split_batch"]


def join_batch(payloads: Sequence[bytes]) -> tuple[bytes, bytes]:
    """``(data, lengths)`` of one stored batch."""
    return b"".join(payloads), struct.pack(f"<{len(payloads)}I", *map(len, payloads))


def split_batch(
    first_seq: int, data: bytes, lengths: bytes, after: int = 0
) -> list[tuple[int, bytes]]:
    """The ``(seq, payload)`` pairs of a stored batch with ``seq > after``."""
    sizes = struct.unpack(f"<{len(lengths) // 4}I", lengths)
    out: list[tuple[int, bytes]] = []
    position = 0
    seq = first_seq
    for size in sizes:
        end = position + size
        if seq > after:
            out.append((seq, data[position:end]))
        position = end
        seq += 1
    if position != len(data):
        raise StoreError(
            f"stored batch from seq {first_seq} is corrupt: its lengths cover {position} "
            f"bytes of {len(data)}"
        )
    return out
