"""The HTTP stacks ``agui-pipes serve --server NAME`` can run, by name.

Every entry is uvicorn under ``GracefulServer`` (``_shutdown``), which is what gives
``serve`` its shutdown order (stop the runs, drain, close, exit status): the entries
differ in uvicorn's HTTP parser and event loop only. ``benchmarks/bench_servers.py``
measured granian and hypercorn beside them (docs/benchmarks.md): granian was the
cheapest per event on the agent endpoint, but the graceful shutdown needs the server's
view of its open connections (to drain them, then close the ones left) and a listening
socket of our own (``TCP_USER_TIMEOUT``), which neither exposes; they stay out of the
registry until that exists.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

__all__ = ["DEFAULT_SERVER", "SERVERS", "ServerStack", "UnavailableServer", "stack_of"]


class UnavailableServer(Exception):
    """The named stack needs packages that are not installed (the message says which)."""


@dataclass(frozen=True)
class ServerStack:
    """One way to serve: uvicorn's ``http`` implementation and ``loop``, and what they need."""

    name: str
    http: str
    loop: str
    description: str

    def label(self) -> str:
        """How the start-up log line names it: ``uvicorn (httptools, uvloop)``."""
        return f"uvicorn ({self.http}, {self.loop})"


_FAST = ("httptools", "uvloop")

SERVERS: dict[str, str] = {
    "uvicorn": "uvicorn with httptools and uvloop when both are installed, else h11 and asyncio",
    "uvicorn-fast": "uvicorn with httptools and uvloop (the 'fast' extra); refused without them",
    "uvicorn-h11": "uvicorn with h11 and the asyncio loop: pure Python, whatever is installed",
}
"""Every ``--server`` name and what it runs (the ``--help`` text lists them)."""

DEFAULT_SERVER = "uvicorn-h11"
"""``--server``'s default: the pure-Python stack. The faster httptools + uvloop stack
(``uvicorn``, ``uvicorn-fast``) is opt-in until it passes the stalled-client bound: with it
a gateway holding a client that reads nothing grew 5.5-6 MiB, over the 3 MiB the
backpressure test allows (tests/hostile/test_backpressure.py; h11 stays within it).
The cause is the upstream side, not the server's: anyio's socket stream (under the
gateway's HTTP client) resumes reading while a receive waits and pauses only once the
waiting task runs; the asyncio loop reads once per pass in between, but uvloop keeps
reading in one callback (up to 32 reads of 256,000 bytes while the kernel has data), so
one receive can queue megabytes of a fast upstream (docs/benchmarks.md)."""


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def stack_of(name: str) -> ServerStack:
    """The stack ``name`` stands for on this installation (UnavailableServer, KeyError)."""
    description = SERVERS[name]
    fast = all(_installed(module) for module in _FAST)
    if name == "uvicorn-h11" or (name == "uvicorn" and not fast):
        return ServerStack(name, "h11", "asyncio", description)
    if not fast:
        missing = ", ".join(module for module in _FAST if not _installed(module))
        raise UnavailableServer(
            f"--server {name} needs {missing}: pip install 'agui-pipes[fast]', "
            "or choose --server uvicorn (the fastest installed) or uvicorn-h11"
        )
    return ServerStack(name, "httptools", "uvloop", description)
