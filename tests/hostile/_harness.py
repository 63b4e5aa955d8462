"""Drive the product as a user would, in a child process under a memory ceiling.

The hostile-input suite must show three things for every case: the process
ends (no hang), it ends the documented way (exit code or RUN_ERROR code, a
message naming what was wrong, no traceback), and it stays within a memory
budget. A subprocess gives all three honestly: ``RLIMIT_AS`` turns runaway
allocation into a failure instead of a swapped-out CI machine, the child
reports its own peak RSS, and stderr is exactly what a user sees.

Why the child reports its peak itself (``VmHWM`` of ``/proc/self/status``, read
at exit by a small bootstrap) rather than ``wait4``'s ``ru_maxrss``: Linux keeps
in ``ru_maxrss`` the high-water mark of the memory the process had *before*
``exec`` too — the forked copy of the test process, hundreds of MiB late in a
full suite run — so a case measured that way fails or passes by where it runs
in the suite. ``VmHWM`` belongs to the image after ``exec``. A child that dies
before its exit handlers run (a signal, the timeout) falls back to ``wait4``.

Timeouts here are a safety net against hangs, never an assertion on speed.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

import httpx

__all__ = [
    "DEFAULT_MEMORY_MIB",
    "Outcome",
    "assert_clean",
    "free_port",
    "run_cli",
    "run_python",
    "serve_bytes",
    "serve_gateway",
]

DEFAULT_MEMORY_MIB = 1024
"""Address-space ceiling for a child: Python with pydantic, orjson and anyio maps
~300 MiB of virtual memory before doing anything; a runaway case needs gigabytes."""

_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Outcome:
    """How a child process ended."""

    returncode: int
    stdout: bytes
    stderr: str
    peak_rss_mib: float
    timed_out: bool

    def describe(self) -> str:
        tail = self.stderr[-2000:]
        return (
            f"exit {self.returncode}, peak RSS {self.peak_rss_mib:.1f} MiB, "
            f"timed out: {self.timed_out}\n--- stderr (tail) ---\n{tail}"
        )


_PEAK_FILE_VAR = "AGUI_PIPES_TEST_PEAK_FILE"

# Runs as ``python -c _BOOT ARGV...``: registers the peak report, then runs ARGV
# the way ``python ARGV...`` would (``-m module``, ``-c code`` or a script).
_BOOT = f"""
import atexit, os, runpy, sys

def _report_peak():
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmHWM:'):
                with open(os.environ[{_PEAK_FILE_VAR!r}], 'w') as out:
                    out.write(line.split()[1])

atexit.register(_report_peak)
argv = sys.argv[1:]
if argv[0] == '-m':
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name='__main__', alter_sys=True)
elif argv[0] == '-c':
    sys.argv = ['-c', *argv[2:]]
    exec(compile(argv[1], '<string>', 'exec'), {{'__name__': '__main__'}})
else:
    sys.argv = argv
    runpy.run_path(argv[0], run_name='__main__')
"""


def _limit_memory(mib: int) -> None:
    limit = mib * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # The child must import this checkout, whichever install the venv points at.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("NO_COLOR", "1")
    return env


def run_cli(
    *args: str,
    stdin: bytes | None = None,
    memory_mib: int = DEFAULT_MEMORY_MIB,
    timeout: float = 120.0,
) -> Outcome:
    """Run ``python -m agui_pipes *args`` with ``stdin``; report how it ended."""
    return run_python(
        ["-m", "agui_pipes", *args], stdin=stdin, memory_mib=memory_mib, timeout=timeout
    )


def run_python(
    argv: Sequence[str],
    *,
    stdin: bytes | None = None,
    memory_mib: int = DEFAULT_MEMORY_MIB,
    timeout: float = 120.0,
) -> Outcome:
    """Run ``python *argv`` under the memory ceiling (see :func:`run_cli`)."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryFile() as inp,
        tempfile.TemporaryDirectory() as scratch,
    ):
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        peak_file = Path(scratch) / "peak-kib"
        env = _child_env()
        env[_PEAK_FILE_VAR] = str(peak_file)
        proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, *argv],
            stdin=inp,
            stdout=out,
            stderr=err,
            env=env,
            cwd=_ROOT,
            preexec_fn=lambda: _limit_memory(memory_mib),
        )
        timed_out = threading.Event()

        def _kill() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout, _kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        reported = peak_file.read_text() if peak_file.exists() else ""
        peak_kib = int(reported) if reported.isdigit() else usage.ru_maxrss  # both KiB
        return Outcome(
            returncode=proc.returncode,
            stdout=out.read(),
            stderr=err.read().decode("utf-8", "replace"),
            peak_rss_mib=peak_kib / 1024,
            timed_out=timed_out.is_set(),
        )


def assert_clean(
    outcome: Outcome,
    *,
    exit_code: int,
    message: str | None = None,
    max_rss_mib: float | None = None,
) -> None:
    """The case ended the documented way: exit code, message, no traceback, memory."""
    assert not outcome.timed_out, outcome.describe()
    assert outcome.returncode == exit_code, outcome.describe()
    assert "Traceback" not in outcome.stderr, outcome.describe()
    assert "Traceback" not in outcome.stdout.decode("utf-8", "replace"), outcome.describe()
    if message is not None:
        assert message in outcome.stderr, f"{message!r} not in stderr\n{outcome.describe()}"
    if max_rss_mib is not None:
        assert outcome.peak_rss_mib <= max_rss_mib, outcome.describe()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_bytes(body: bytes, content_type: str = "text/event-stream") -> Iterator[str]:
    """An upstream that answers every POST with ``body`` verbatim; yields its URL."""

    class _Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Gateway:
    """A running ``agui-pipes serve --upstream`` child."""

    url: str
    process: subprocess.Popen[bytes]


@contextmanager
def serve_gateway(
    upstream: str,
    *extra: str,
    memory_mib: int = DEFAULT_MEMORY_MIB,
    startup: float = 30.0,
) -> Iterator[Gateway]:
    """Start the gateway CLI in front of ``upstream`` under the memory ceiling."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        yield from _gateway(upstream, extra, port, log, memory_mib, startup)


def _gateway(
    upstream: str,
    extra: tuple[str, ...],
    port: int,
    log: IO[bytes],
    memory_mib: int,
    startup: float,
) -> Iterator[Gateway]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agui_pipes",
            "serve",
            "--upstream",
            upstream,
            "--port",
            str(port),
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=_child_env(),
        cwd=_ROOT,
        preexec_fn=lambda: _limit_memory(memory_mib),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"gateway exited at start:\n{log.read().decode()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gateway did not start")
            time.sleep(0.05)
        yield Gateway(url=url + "/", process=proc)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.seek(0)
        output = log.read().decode("utf-8", "replace")
        assert "Traceback" not in output, output[-4000:]
