"""The client against hostile servers: how long each takes to end, and the peak memory.

    python benchmarks/bench_client_hostile.py                 # the defaults' bounds
    python benchmarks/bench_client_hostile.py --max-bytes 4000000 --json out.json

Each case runs in a child process of its own: a raw loopback server that
misbehaves (the same lies as tests/client/test_client_hostile.py) and an
``agui_pipes.client.Client`` reading it with its default bounds, except
where the option is given. The child reports the error the run ended in,
the seconds it took and its peak resident set (``VmHWM``), so the figures are
the client's own, not a test runner's. Time-bound cases (a drip, keep-alives
only) use ``--max-idle`` (2 s here; 300 s by default) so they finish.
Nothing is asserted: the figures go to docs/client.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream

CASES = (
    "endless-stream",
    "endless-big-deltas",
    "endless-history",
    "100-mb-frame",
    "drip",
    "keepalive-only",
)
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


def _frame(seq: int, event: dict[str, Any]) -> bytes:
    return f"id: e1:r:{seq}\ndata: ".encode() + json.dumps(event).encode() + b"\n\n"


def _delta(text: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": text}


_OPENING = _frame(1, {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}) + _frame(
    2, {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
)


async def _serve(case: str, stream: SocketStream) -> None:
    request = b""
    while b"\r\n\r\n" not in request:
        request += await stream.receive()
    await stream.send(HEAD + _OPENING)
    if case.startswith("endless"):
        seq, words = 3, "token " * (1000 if case == "endless-big-deltas" else 8)
        while True:
            await stream.send(b"".join(_frame(seq + n, _delta(words)) for n in range(200)))
            seq += 200
    elif case == "100-mb-frame":
        await stream.send(b'id: e1:r:3\ndata: {"type":"CUSTOM","name":"n","value":"')
        piece = b"x" * 65536
        for _ in range(100 * 1024 * 1024 // len(piece)):
            await stream.send(piece)
    elif case == "drip":
        for byte in _frame(3, _delta("drip")) * 100_000:
            await stream.send(bytes([byte]))
            await anyio.sleep(0.1)
    else:  # keepalive-only
        while True:
            await stream.send(b": keep-alive\n\n")
            await anyio.sleep(0.05)


async def _child(case: str, options: dict[str, Any]) -> dict[str, Any]:
    from agui_pipes.client import Client

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    url = f"http://127.0.0.1:{listener.extra(SocketAttribute.local_port)}/agent"

    async def handle(stream: SocketStream) -> None:
        async with stream:
            try:
                await _serve(case, stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                pass

    started = time.monotonic()
    error = "none"
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, handle)
        try:
            async with Client(backoff=0.01, **options) as client:
                if case == "endless-history":
                    await client.history(url, "t")
                else:
                    run_input = {"threadId": "t", "runId": "r", "messages": []}
                    async with client.run(url, run_input) as events:
                        async for _ in events:
                            pass
        except Exception as exc:
            error = type(exc).__name__
        group.cancel_scope.cancel()
    return {
        "case": case,
        "error": error,
        "seconds": round(time.monotonic() - started, 2),
        "peak_rss_mib": round(_peak_rss() / 1024, 1),
    }


def _peak_rss() -> int:
    """VmHWM in KiB (0 where /proc is not there)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=CASES, action="append", help="only these cases")
    parser.add_argument("--max-bytes", type=int, help="Client(max_bytes=...); default its own")
    parser.add_argument("--max-events", type=int, help="Client(max_events=...)")
    parser.add_argument("--max-frame-bytes", type=int, help="Client(max_frame_bytes=...)")
    parser.add_argument("--max-idle", type=float, default=2.0, help="Client(max_idle=...)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    options = {
        name: value
        for name, value in (
            ("max_bytes", args.max_bytes),
            ("max_events", args.max_events),
            ("max_frame_bytes", args.max_frame_bytes),
            ("max_idle", args.max_idle),
        )
        if value is not None
    }
    if args._child:
        print(json.dumps(anyio.run(_child, args._child, options)))
        return
    rows = []
    for case in args.case or CASES:
        command = [sys.executable, __file__, "--_child", case]
        for name, value in options.items():
            command += [f"--{name.replace('_', '-')}", str(value)]
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
        row = json.loads(done.stdout.splitlines()[-1])
        rows.append(row)
        print(
            f"{row['case']:<20} {row['error']:<22} {row['seconds']:>7.2f} s "
            f"{row['peak_rss_mib']:>8.1f} MiB peak RSS"
        )
    if args.json:
        args.json.write_text(json.dumps({"options": options, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
