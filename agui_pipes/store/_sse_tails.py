"""The ``<seq>\ndata: `` tails of SSE frames, formatted once per process.

What follows a recorded run's ``id: <epoch>.<generation>:<runId>:`` prefix in each frame
is the seq and the start of the data line. Formatting a number per frame is
most of what numbering costs on the gateway's relay path, so the tails are
made in blocks and shared by every run.
"""

from __future__ import annotations

from .._foundation.framing import SSE_DATA

__all__ = ["id_tail", "id_tails"]

_BLOCK = 1024
_MAX_BLOCKS = 64
_tail_blocks: dict[int, list[bytes]] = {}


def id_tails(seq: int, count: int) -> list[bytes]:
    """``b"<n>\ndata: "`` for ``n`` in ``seq .. seq + count - 1``: what follows an id prefix.

    Why a table: formatting a number per frame is most of what numbering
    costs on the gateway's relay path; a seq is formatted once per process
    (in blocks of 1024, the most recent 64 blocks kept: a few MB at most)
    and every run's frames slice the same lists. Runs are mostly short, so
    the first blocks serve nearly all of them.
    """
    block, offset = divmod(seq, _BLOCK)
    tails = _tail_blocks.get(block)
    if tails is None:
        tails = _tail_block(block)
    end = offset + count
    if end <= _BLOCK:
        return tails[offset:end]
    out = tails[offset:]
    while len(out) < count:
        block += 1
        more = _tail_blocks.get(block)
        if more is None:
            more = _tail_block(block)
        out += more[: count - len(out)]
    return out


def id_tail(seq: int) -> bytes:
    block, offset = divmod(seq, _BLOCK)
    tails = _tail_blocks.get(block)
    if tails is None:
        tails = _tail_block(block)
    return tails[offset]


def _tail_block(block: int) -> list[bytes]:
    start = block * _BLOCK
    tails = list(map((b"%d\n" + SSE_DATA).__mod__, range(start, start + _BLOCK)))
    if len(_tail_blocks) >= _MAX_BLOCKS:
        # Keep the first blocks (every run starts there); drop the oldest of the rest.
        for key in list(_tail_blocks):
            if key >= 4:
                _tail_blocks.pop(key, None)
                break
    _tail_blocks[block] = tails
    return tails
