"""An agui_pipes gateway in front of a framework's own server, for benchmarks/bench_frameworks.py.

    python -m tests.integrations._gateway_app UPSTREAM_URL [--chain module:attr]

Serves ``build_app(upstream=UPSTREAM_URL, chain=<attr>)`` at ``/agent``
on a free port of 127.0.0.1 (uvicorn, h11 on asyncio, as the framework apps) and
prints ``PORT <n>`` once it listens. ``--chain`` names a stage class or factory
(the integration's repair, for the stream the in-process producer sends).
"""

from __future__ import annotations

import argparse
import importlib
import socket
from typing import Any

import uvicorn

from agui_pipes.server import build_app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("upstream")
    parser.add_argument("--chain")
    options = parser.parse_args()
    chain: Any = None
    if options.chain:
        module, _, attr = options.chain.partition(":")
        chain = getattr(importlib.import_module(module), attr)
    app = build_app(
        upstream=options.upstream, chain=chain, repair=True, path="/agent", keepalive=None
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", loop="asyncio", http="h11"))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
