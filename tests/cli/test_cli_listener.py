"""The CLI's listening socket: accepted connections send small writes at once.

Regression: ``serve`` and ``inspect`` bind their socket through uvicorn, which
leaves Nagle's algorithm on for the connections it accepts; each kept-alive
request then waited for the client's delayed ACK (~40 ms per ``/healthz``).
"""

from __future__ import annotations

import socket

import uvicorn

from agui_pipes._cli._listener import send_at_once


async def _app(scope: object, receive: object, send: object) -> None:  # pragma: no cover
    pass


def _accepted(listener: socket.socket) -> socket.socket:
    listener.listen(1)
    client = socket.create_connection(listener.getsockname()[:2])
    try:
        conn, _ = listener.accept()
    finally:
        client.close()
    return conn


def test_uvicorn_bound_socket_leaves_nagle_on_without_it() -> None:
    # The premise: if uvicorn ever sets the option itself, this helper can go.
    listener = uvicorn.Config(_app, host="127.0.0.1", port=0).bind_socket()
    with listener, _accepted(listener) as conn:
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0


def test_accepted_connections_have_nodelay() -> None:
    listener = uvicorn.Config(_app, host="127.0.0.1", port=0).bind_socket()
    send_at_once(listener)
    with listener, _accepted(listener) as conn:
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_unix_socket_is_left_alone() -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with listener:
        send_at_once(listener)  # no TCP option on a Unix socket: nothing raises
