"""A client that reads nothing from the gateway CLI: the upstream is not read ahead.

The upstream is a real uvicorn serving a flooding agent in this process; the
gateway is ``agui-pipes serve --upstream`` in a child (its RSS is its own);
the client POSTs through the gateway and reads nothing. The gateway must
stop reading the upstream (so the upstream agent is held), stay within its
``--send-buffer`` plus a constant, and after ``--send-timeout`` close the
upstream request (cancelling the upstream agent) and drop the client's
connection even though the client still holds it.

The deltas are 100 KB, so that each upstream read the gateway makes is a full
batch: a bound counted in batches (what the gateway had before) then holds
megabytes where the byte bound holds one frame.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from ag_ui.core import RunAgentInput

from agui_pipes.server import AgentEndpoint
from tests._servers import Running, serve
from tests._slow_clients import KIB, Flood, poll, stalled_client, wait_until_held

from ._harness import assert_clean, run_cli, serve_gateway

SEND_BUFFER = 64 * KIB
SEND_TIMEOUT = 3.0
SLACK_MIB = 3.0
"""RSS a stalled run may add beside ``--send-buffer``: one 100 KB frame past the
bound, the upstream connection's read buffer (httpx reads 64 KiB at a time), the
transport buffer towards the client, and allocator noise (1.4 MiB measured; the
count-bounded queue it replaced grew by 8 MiB here)."""


class Upstream:
    """Floods runs whose id starts with ``flood``; answers others with a few deltas."""

    def __init__(self) -> None:
        self.flood = Flood(5_000, "y" * 100_000)

    def __call__(self, run_input: RunAgentInput) -> Any:
        return self.flood if run_input.run_id.startswith("flood") else Flood(10)


@pytest.fixture
def upstream() -> Iterator[tuple[Running, Upstream]]:
    agents = Upstream()
    app = AgentEndpoint(
        agent_factory=agents, keepalive=None, send_buffer=SEND_BUFFER, send_timeout=120
    )
    with serve(app) as server:
        yield server, agents


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")  # pragma: no cover


def _server_holds(server_port: int, client_port: int) -> bool:
    """Whether the server side of this loopback connection still exists (Linux)."""
    local, remote = f":{server_port:04X}", f":{client_port:04X}"
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1].endswith(local) and fields[2].endswith(remote):
                return True
    return False


def _warm_up(port: int) -> None:
    """A short run through the gateway, so first-run imports are not counted as growth."""
    with stalled_client(port, run_id="warm-up") as sock:
        sock.settimeout(30)
        received = b""
        while b"RUN_FINISHED" not in received:
            chunk = sock.recv(65536)
            assert chunk, "the warm-up run ended early"
            received += chunk


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads /proc (Linux)")
def test_a_stalled_client_stops_the_gateway_reading_its_upstream(
    upstream: tuple[Running, Upstream],
) -> None:
    server, agents = upstream
    agent = agents.flood
    args = ("--send-buffer", str(SEND_BUFFER), "--send-timeout", str(SEND_TIMEOUT))
    with serve_gateway(server.url + "/", *args, "--keepalive", "0") as gateway:
        port = int(gateway.url.rsplit(":", 1)[1].strip("/"))
        _warm_up(port)
        poll(lambda: server.open_tasks == 0, 10, "the warm-up run ended upstream")
        base = _rss_mib(gateway.process.pid)
        with stalled_client(port, run_id="flood") as client:
            poll(lambda: agent.emitted > 0, 10, "the upstream agent started")
            held_since = wait_until_held(lambda: agent.emitted)
            # The gateway stopped reading: the upstream agent is held with the
            # run far from done, and the gateway holds no more than its buffer.
            assert not agent.ended.is_set()
            assert agent.emitted < 1_000
            growth = _rss_mib(gateway.process.pid) - base
            assert growth < SEND_BUFFER / (1024 * KIB) + SLACK_MIB, f"grew {growth:.1f} MiB"
            # After the send timeout the upstream request is closed, which
            # cancels the upstream agent (it sees cancellation) ...
            assert agent.ended.wait(SEND_TIMEOUT + 8), "the upstream run was not cancelled"
            assert time.monotonic() - held_since < SEND_TIMEOUT + 8
            assert agent.ended_by == "CancelledError"
            poll(
                lambda: server.open_tasks == 0 and server.open_connections == 0,
                5,
                "the upstream connection closed",
            )
            # ... and the gateway drops the client's connection (its socket and
            # unsent bytes) although the client still holds its end.
            client_port = client.getsockname()[1]
            poll(
                lambda: not _server_holds(port, client_port),
                SEND_TIMEOUT + 8,
                "the gateway dropped the stalled client's connection",
            )
        assert gateway.process.poll() is None


@pytest.mark.parametrize(
    "args",
    [("--send-buffer", "0"), ("--send-buffer", "-5"), ("--send-timeout", "-1")],
)
def test_bad_send_limits_are_a_usage_error(args: tuple[str, str]) -> None:
    outcome = run_cli("serve", "--demo", *args)
    assert_clean(outcome, exit_code=2, message="--send-buffer must be a positive number of bytes")
