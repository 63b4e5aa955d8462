"""A real ``redis-server`` on a free loopback port, for the event log tests.

No mock: the Redis backend's Lua scripts, stream ids and ``XREAD BLOCK``
are exactly what a fake would get wrong. When no ``redis-server`` binary
exists the tests skip with a loud reason (``.ci/run`` installs it).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

NO_REDIS = (
    "REDIS BACKEND NOT TESTED: no redis-server binary on PATH "
    "(apt-get install redis-server; .ci/run installs it)"
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """Start ``redis-server`` in ``directory``; yield its ``redis://`` URL; stop it."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(NO_REDIS)
    for _attempt in range(5):
        port = _free_port()
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                time.sleep(0.05)
        else:
            output = b""
            if process.poll() is not None and process.stdout is not None:
                output = process.stdout.read()
            process.kill()
            process.wait()
            if b"Address already in use" in output:
                continue  # the port was taken between our probe and its bind
            raise RuntimeError(f"redis-server did not start on port {port}: {output!r}")
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        return
    raise RuntimeError("could not find a free port for redis-server in 5 attempts")
