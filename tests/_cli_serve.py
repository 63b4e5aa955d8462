"""``agui-pipes serve`` run as a subprocess of a given python, on a free port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(*args: str, python: str | Path = sys.executable) -> Iterator[tuple[str, list[str]]]:
    """``python -m agui_pipes serve *args`` from the repository's root until the block ends.

    Yields its URL and a list that holds its whole output once the block is
    left (it is stopped with SIGTERM and must exit 0).
    """
    port = _free_port()
    server = subprocess.Popen(
        [str(python), "-m", "agui_pipes", "serve", *args, "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    url = f"http://127.0.0.1:{port}"
    output: list[str] = []
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, server.stdout.read().decode()  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        yield url, output
    finally:
        server.send_signal(signal.SIGTERM)
        output.append(server.communicate(timeout=30)[0].decode())
    assert server.returncode == 0, output[0]


def post_run(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST one run and read its whole SSE answer: the events' JSON objects."""
    answer = httpx.post(url, json=body, headers={"accept": "text/event-stream"}, timeout=60)
    assert answer.status_code == 200, answer.text
    return [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")]
