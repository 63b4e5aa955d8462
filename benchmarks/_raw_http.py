"""The request head the benchmarks' bare asyncio upstreams read: one parse for all of them.

Why bare asyncio: the upstream of a gateway benchmark must cost as little as
possible, so its HTTP is a few lines over a stream, not a framework; reading
the head (the request line and headers, and the body's length) is the part
every such upstream needs alike.
"""

from __future__ import annotations

import asyncio

__all__ = ["read_head"]


async def read_head(reader: asyncio.StreamReader) -> tuple[bytes, int] | None:
    """The next request's head and its content-length (0 without one); None at the end."""
    try:
        headers = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in headers.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return headers, length
