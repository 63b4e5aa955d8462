"""The listening socket the CLI's servers bind: small writes leave at once (no Nagle).

Why here: ``uvicorn.Config.bind_socket`` makes its socket with protocol 0, and
asyncio only turns Nagle's algorithm off (``TCP_NODELAY``) on connections
whose socket says ``IPPROTO_TCP``; the connections accepted from that
listener kept Nagle on. A response written in two sends (headers, then the
body — every short reply, every SSE frame after the first) then waited for
the client's delayed ACK: ~40 ms per request on a kept-alive connection
(``/healthz`` measured 42 ms median instead of 0.9 ms). Accepted sockets
inherit the option from the listener on Linux and the BSDs, so setting it once
here covers every connection.
"""

from __future__ import annotations

import contextlib
import socket

__all__ = ["send_at_once"]


def send_at_once(listener: socket.socket) -> None:
    """Turn Nagle's algorithm off for ``listener`` and the connections it accepts."""
    if listener.family not in (socket.AF_INET, socket.AF_INET6):
        return  # a Unix socket has no Nagle to turn off
    with contextlib.suppress(OSError):
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
