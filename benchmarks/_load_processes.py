"""The processes the load check runs: ``agui-pipes serve`` / ``mock`` and redis-server.

Each is a real OS process on a free loopback port, its output in a file under
the check's temporary directory, so the server's own tracebacks can be counted
and quoted, and its resident set read from ``/proc``.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Process:
    """A child process whose stdout and stderr go to ``directory/name.log``."""

    def __init__(self, name: str, argv: list[str], directory: Path) -> None:
        self.name = name
        self.log_path = directory / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text("utf-8", "replace")

    def rss_mib(self) -> float:
        """The process's resident set now (``VmRSS``), in MiB."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        if found is None:
            raise RuntimeError(f"{self.name}: no VmRSS in /proc/{self.pid}/status")
        return int(found.group(1)) / 1024

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


class HTTPProcess(Process):
    """An agui-pipes command serving HTTP; started once its ``/healthz`` answers."""

    def __init__(self, name: str, command: list[str], directory: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        argv = [sys.executable, "-m", "agui_pipes", *command, "--port", str(self.port)]
        super().__init__(name, argv, directory)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{name} exited at start:\n{self.output()[-2000:]}")
            try:
                if httpx.get(self.url + "healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{name} did not answer /healthz within 60 s:\n{self.output()[-2000:]}")


def start_redis(directory: Path) -> tuple[Process, str]:
    """redis-server on a free port, nothing persisted; its process and ``redis://`` URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("--start-redis: no redis-server on PATH")
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    argv += ["--appendonly", "no", "--dir", str(directory), "--loglevel", "warning"]
    server = Process("redis", argv, directory)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return server, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise SystemExit(f"redis-server did not start on port {port}:\n{server.output()}")


TRACEBACK = "Traceback (most recent call last)"
_LEVEL = re.compile(r"^\S+ \S+ (ERROR|WARNING|CRITICAL) (\S+): (.*)$")
_NUMBERS = re.compile(r"\b[0-9a-f]{6,}\b|\b\d+(\.\d+)?\b")


def scan_log(text: str) -> dict[str, object]:
    """Tracebacks and error/warning lines in a server's output, grouped by shape."""
    lines = text.splitlines()
    shapes: Counter[str] = Counter()
    for line in lines:
        found = _LEVEL.match(line)
        if found:
            # Numbers and ids vary per run; grouping by the rest shows each kind once.
            shapes[f"{found.group(1)} {found.group(2)}: {_NUMBERS.sub('N', found.group(3))}"] += 1
    tracebacks = [n for n, line in enumerate(lines) if TRACEBACK in line]
    excerpts = []
    for start in tracebacks[:3]:
        block = lines[start : start + 40]
        end = next((n for n, line in enumerate(block[1:], 1) if not line.startswith(" ")), 1)
        excerpts.append("\n".join(block[: end + 1]))
    return {
        "tracebacks": len(tracebacks),
        "errors": sum(count for shape, count in shapes.items() if not shape.startswith("WARN")),
        "warnings": sum(count for shape, count in shapes.items() if shape.startswith("WARN")),
        "kinds": shapes.most_common(8),
        "traceback_excerpts": excerpts,
    }
