"""``agui-pipes mock``'s throughput: events/s it streams to its clients.

    python benchmarks/bench_mock.py [--events 20000] [--connections 1 4] [--rounds 3]

The mock runs as the command, in a subprocess (so the measuring client does not share
its interpreter), with ``--keepalive 0``. Two answers are measured:

* ``scripted``: a scenario whose script is one text of ``--events`` words with no
  pace — one TEXT_MESSAGE_CONTENT per word, through the run driver and the serving
  layer's framing, as every scripted run is;
* ``replay``: the same number of events of the deterministic realistic stream
  (benchmarks/streams.py: text, tool calls, reasoning, state, many runs), served by
  ``--replay FILE --speed inf`` (decoded once at start-up, framed per request).

For each, ``C`` clients (``--connections``) POST at once and read their answer to the
end; the script fails unless every client got every event and the body's last frame is
the stream's last event. Printed per round's median: events/s over all connections
(events delivered ÷ wall time from the first POST to the last byte), and the mock
process's CPU time per event (its utime + stime from /proc, so the figure does not
depend on what else the machine runs). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import orjson
from streams import generate

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Mock:
    """``agui-pipes mock ARGS --port N`` until closed."""

    def __init__(self, *args: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        command = [sys.executable, "-m", "agui_pipes", "mock", *args]
        command += ["--port", str(self.port), "--keepalive", "0", "--log-level", "warning"]
        self.process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(self.url + "healthz", timeout=1)
                return
            except httpx.TransportError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise SystemExit("agui-pipes mock did not start") from None
                time.sleep(0.05)

    def close(self) -> None:
        self.process.terminate()
        _, err = self.process.communicate(timeout=30)
        if "Traceback" in err:
            raise SystemExit(f"agui-pipes mock failed:\n{err[-3000:]}")


def _read_one(url: str, body: bytes, last: bytes, out: list[int]) -> None:
    """POST a run, read the body to its end; record its event count (checked)."""
    frames = 0
    carry = b"\n"  # the last 6 bytes read: b"\ndata: " (7) can straddle two chunks
    tail = b""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", url, content=body, headers=headers) as response,
    ):
        if response.status_code != 200:
            raise SystemExit(f"the mock answered {response.status_code}")
        for chunk in response.iter_bytes():
            frames += (carry + chunk).count(b"\ndata: ")
            carry = (carry + chunk)[-6:]
            tail = (tail + chunk)[-4096:]
    final = tail.rstrip(b"\n").rsplit(b"data: ", 1)[-1]
    if last not in final:
        raise SystemExit(f"the body ends with {final[-200:]!r}, not the stream's last event")
    out.append(frames)


def _round(mock: Mock, connections: int, expected: int, last: bytes) -> tuple[float, float]:
    body = orjson.dumps(
        {
            "threadId": "bench",
            "runId": "bench-run",
            "messages": [{"id": "u1", "role": "user", "content": "bench"}],
        }
    )
    counts: list[int] = []
    threads = [
        threading.Thread(target=_read_one, args=(mock.url, body, last, counts))
        for _ in range(connections)
    ]
    cpu = _cpu_seconds(mock.process.pid)
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    cpu = _cpu_seconds(mock.process.pid) - cpu
    if counts != [expected] * connections:
        raise SystemExit(f"expected {expected} events on each connection, got {counts}")
    return expected * connections / wall, cpu / (expected * connections) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scenarios = Path(tmp) / "scenarios.yaml"
        words = " ".join(f"w{n}" for n in range(args.events - 4))  # + the run's 4 events
        scenarios.write_text(f"scenarios:\n  - name: bench\n    script:\n      - text: {words}\n")
        recording = Path(tmp) / "recording.ndjson"
        events = list(generate(args.events))
        recording.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events))
        answers = {
            "scripted": ((str(scenarios),), args.events, b'"type":"RUN_FINISHED"'),
            "replay": (
                ("--replay", str(recording), "--speed", "inf"),
                len(events),
                b'"type":"' + str(events[-1]["type"]).encode() + b'"',
            ),
        }
        print(f"{'answer':9s} {'conns':>5s} {'events/s':>10s} {'mock CPU µs/event':>18s}")
        for name, (mock_args, expected, last) in answers.items():
            mock = Mock(*mock_args)
            try:
                _round(mock, 1, expected, last)  # warm-up
                for connections in args.connections:
                    rounds = [_round(mock, connections, expected, last) for _ in range(args.rounds)]
                    rate = statistics.median(r[0] for r in rounds)
                    cost = statistics.median(r[1] for r in rounds)
                    print(f"{name:9s} {connections:5d} {rate:10,.0f} {cost:18.1f}")
            finally:
                mock.close()


if __name__ == "__main__":
    main()
