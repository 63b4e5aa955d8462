"""``agui-pipes serve`` shutting down: real processes, real signals, a real SQLite log.

SIGINT and SIGTERM stop the live runs at once (each ends with a recorded
RUN_ERROR CANCELLED, its client gets it too), then the store is closed and
the process exits 0 — within ``--shutdown-timeout``; a second signal exits
at once with 128 + its number; no path prints a traceback.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import EventType, RunErrorEvent

from agui_pipes.codecs import SSEDecoder
from agui_pipes.store import RunStatus, open_store
from tests._servers import EVENT

SHUTDOWN_TIMEOUT = 10.0
EXITED_WITHIN = SHUTDOWN_TIMEOUT + 5.0
"""How long a test waits for the process to exit: the timeout, plus the interpreter's
own start-up and teardown on a loaded machine (a paced demo run lasts ~38 s)."""

NOISE = ("Traceback", "CancelledError", "is closed", "could not mark")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Served:
    """``agui-pipes serve ...`` in a subprocess; its stderr collected as it comes."""

    def __init__(self, *args: str) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agui_pipes",
                "serve",
                "--port",
                str(port),
                "--shutdown-timeout",
                str(SHUTDOWN_TIMEOUT),
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                self._reader.join(5)
                raise AssertionError(f"serve exited early: {self.stderr}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).text == "ok":
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.process.kill()
                raise AssertionError("serve did not come up")
            time.sleep(0.1)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._lines.append(line.decode(errors="replace"))

    @property
    def stderr(self) -> str:
        return "".join(self._lines)

    def wait_for_line(self, text: str) -> None:
        deadline = time.monotonic() + EXITED_WITHIN
        while text not in self.stderr:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} in the log:\n{self.stderr}")
            time.sleep(0.02)

    def exit_status(self) -> int:
        """Wait for the process to exit (at most ``EXITED_WITHIN``); its status."""
        try:
            status = self.process.wait(EXITED_WITHIN)
        except subprocess.TimeoutExpired as exc:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"serve did not exit within {EXITED_WITHIN} s:\n{self.stderr}"
            ) from exc
        self._reader.join(5)
        return status

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _events(lines: Iterator[bytes], count: int | None = None) -> list[Any]:
    """Decode SSE events from ``lines``: the first ``count``, or all until the stream ends
    (or is cut: a connection closed mid-response ends the list too)."""
    decoder = SSEDecoder()
    found: list[Any] = []
    try:
        for chunk in lines:
            found.extend(EVENT.validate_json(payload) for payload in decoder.feed(chunk))
            if count is not None and len(found) >= count:
                break
    except httpx.RemoteProtocolError:
        pass
    return found


def _body(run_id: str, thread_id: str = "t") -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": "u1", "role": "user", "content": "Plan a weekend in Porto"}],
    }


def _assert_cancelled(event: Any) -> None:
    assert isinstance(event, RunErrorEvent), event
    assert event.code == "CANCELLED"
    assert "shutting down" in event.message


def _stored(url: str, run_id: str) -> tuple[RunStatus, Any]:
    """The run's stored status and its last event, read from the log with the public API."""

    async def read() -> tuple[RunStatus, Any]:
        async with open_store(url) as store:
            record = await store.run(run_id)
            assert record is not None, f"run {run_id} is not in the log"
            entries = await store.read(run_id)
            return record.status, EVENT.validate_json(entries[-1][1])

    return anyio.run(read)


def _quiet(stderr: str) -> None:
    for noise in NOISE:
        assert noise not in stderr, stderr


def _signal_mid_run(served: Served, post_url: str, run_id: str, sig: int) -> list[Any]:
    """POST a run, read a few of its events, send ``sig``; the rest of the client's stream."""
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", post_url, json=_body(run_id)) as response,
    ):
        assert response.status_code == 200
        chunks = response.iter_raw()
        first = _events(chunks, 3)
        assert first[0].type is EventType.RUN_STARTED
        served.process.send_signal(sig)
        rest = _events(chunks)
    return first + rest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_live_run_with_a_recorded_cancel(tmp_path: Path, sig: int) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    served = Served("--demo", "--store", url, "--pace", "0.5")
    try:
        events = _signal_mid_run(served, served.url + "/", "live-1", sig)
        status = served.exit_status()
    finally:
        served.kill()
    _assert_cancelled(events[-1])
    assert status == 0, served.stderr
    _quiet(served.stderr)
    stored_status, last = _stored(url, "live-1")
    assert stored_status is RunStatus.CANCELLED
    _assert_cancelled(last)
    assert last == events[-1]


def test_a_second_signal_exits_at_once_and_quietly(tmp_path: Path) -> None:
    """While the first shutdown waits on a request that never completes, SIGINT again."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    served = Served("--demo", "--store", url, "--pace", "0.5")
    held = socket.create_connection(("127.0.0.1", int(served.url.rsplit(":", 1)[1])))
    try:
        # A POST whose body never finishes: it holds the first shutdown's drain.
        held.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{")
        events = _signal_mid_run(served, served.url + "/", "live-2", signal.SIGINT)
        _assert_cancelled(events[-1])  # the first signal stopped the run
        served.process.send_signal(signal.SIGINT)
        status = served.exit_status()
    finally:
        held.close()
        served.kill()
    assert status == 128 + signal.SIGINT, served.stderr
    assert "SIGINT during the shutdown: exiting at once" in served.stderr
    _quiet(served.stderr)
    stored_status, last = _stored(url, "live-2")  # recorded before the second signal
    assert stored_status is RunStatus.CANCELLED
    _assert_cancelled(last)


def test_two_signals_back_to_back_are_quiet(tmp_path: Path) -> None:
    """Whichever way the race goes (the first shutdown done, or cut short), no noise."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    served = Served("--demo", "--store", url, "--pace", "0.5")
    try:
        with (
            httpx.Client(timeout=30) as client,
            client.stream("POST", served.url + "/", json=_body("live-3")) as response,
        ):
            chunks = response.iter_raw()
            assert len(_events(chunks, 3)) >= 3
            served.process.send_signal(signal.SIGINT)
            served.process.send_signal(signal.SIGINT)
            _events(chunks)
        status = served.exit_status()
    finally:
        served.kill()
    assert status in (0, 128 + signal.SIGINT), served.stderr
    _quiet(served.stderr)
    if status == 0:  # the first shutdown finished: the run's end is recorded
        assert _stored(url, "live-3")[0] is RunStatus.CANCELLED


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_idle_server_shuts_down_quietly(tmp_path: Path, sig: int) -> None:
    served = Served("--demo", "--store", f"sqlite:///{tmp_path / 'x.db'}")
    try:
        served.process.send_signal(sig)
        status = served.exit_status()
    finally:
        served.kill()
    assert status == 0, served.stderr
    _quiet(served.stderr)


def test_a_run_without_a_store_is_cancelled_too() -> None:
    served = Served("--demo", "--pace", "0.5")
    try:
        events = _signal_mid_run(served, served.url + "/", "bare-1", signal.SIGINT)
        status = served.exit_status()
    finally:
        served.kill()
    _assert_cancelled(events[-1])
    assert status == 0, served.stderr
    _quiet(served.stderr)


@pytest.mark.parametrize("stored", [True, False], ids=["store", "no-store"])
def test_a_gateway_with_a_live_upstream_shuts_down(tmp_path: Path, stored: bool) -> None:
    upstream = Served("--demo", "--pace", "0.5")
    try:
        url = f"sqlite:///{tmp_path / 'gw.db'}"
        gateway = Served("--upstream", upstream.url + "/", *(("--store", url) if stored else ()))
        try:
            events = _signal_mid_run(gateway, gateway.url + "/", "gw-live", signal.SIGTERM)
            status = gateway.exit_status()
        finally:
            gateway.kill()
        assert status == 0, gateway.stderr
        _quiet(gateway.stderr)
        if stored:
            _assert_cancelled(events[-1])
            stored_status, last = _stored(url, "gw-live")
            assert stored_status is RunStatus.CANCELLED
            _assert_cancelled(last)
        else:
            # No store, no stop: the stream is cut at the drain's end, like a dropped
            # connection; the client has no terminal event.
            assert events[-1].type not in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
        # The upstream saw its client go and cancelled its run, quietly.
        upstream.process.send_signal(signal.SIGINT)
        assert upstream.exit_status() == 0, upstream.stderr
        _quiet(upstream.stderr)
        assert "run gw-live" in upstream.stderr
    finally:
        upstream.kill()


def test_bad_shutdown_timeout_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from agui_pipes._cli import main

    assert main(["serve", "--demo", "--shutdown-timeout", "0"]) == 2
    assert "--shutdown-timeout must be a number of seconds > 0" in capsys.readouterr().err


STUBBORN_SERVER = """
import logging, sys
import anyio, uvicorn
from agui_pipes._cli._shutdown import GracefulServer
from agui_pipes.server import build_app

async def stubborn(ctx):
    with ctx.message() as message:
        message.delta("working ")
        with anyio.CancelScope(shield=True):  # deaf to the stop
            await anyio.sleep(3600)

logging.basicConfig(level=logging.INFO)
app = build_app(agent=stubborn, store=sys.argv[2], shutdown_timeout=2.0)
config = uvicorn.Config(app, port=int(sys.argv[1]), lifespan="on", log_level="info")
GracefulServer(config, app.state.agui_server.stop_runs, 2.0).run()
"""


def test_a_run_deaf_to_cancellation_is_abandoned_and_named(tmp_path: Path) -> None:
    """serve's shutdown with an agent that ignores the stop: logged, exit 3, in time."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", STUBBORN_SERVER, str(port), url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "the server exited early"
            try:
                if httpx.get(f"{base}/healthz", timeout=1).text == "ok":
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.1)
        with (
            httpx.Client(timeout=30) as client,
            client.stream("POST", base + "/", json=_body("deaf-1")) as response,
        ):
            chunks = response.iter_raw()
            assert len(_events(chunks, 3)) >= 3
            process.send_signal(signal.SIGTERM)
            _events(chunks)  # cut when the process exits
        status = process.wait(EXITED_WITHIN)
        _, err = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = err.decode()
    assert status == 3, stderr
    assert "run deaf-1 did not end within" in stderr
    assert "abandoned at shutdown: deaf-1" in stderr
    assert "Traceback" not in stderr and "could not mark" not in stderr

    async def read() -> tuple[RunStatus, list[Any]]:
        async with open_store(url) as store:
            record = await store.run("deaf-1")
            assert record is not None
            return record.status, [EVENT.validate_json(d) for _, d in await store.read("deaf-1")]

    status_in_log, stored = anyio.run(read)
    assert status_in_log is RunStatus.LIVE  # never ended: a follower finds it lost later
    assert stored[-1].type is EventType.TEXT_MESSAGE_CONTENT


def _installed(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(module) is not None for module in modules)


_STACKS = [
    pytest.param("uvicorn-h11", "uvicorn (h11, asyncio)", id="uvicorn-h11"),
    pytest.param(
        "uvicorn-fast",
        "uvicorn (httptools, uvloop)",
        id="uvicorn-fast",
        marks=pytest.mark.skipif(
            not _installed("httptools", "uvloop"),
            reason="the 'fast' extra (httptools, uvloop) is not installed",
        ),
    ),
]


@pytest.mark.parametrize(("server", "label"), _STACKS)
def test_every_server_stack_stops_a_live_run_and_exits_clean(
    tmp_path: Path, server: str, label: str
) -> None:
    """``--server NAME``: the stack the log names serves, and its shutdown is serve's."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    served = Served("--demo", "--store", url, "--pace", "0.5", "--server", server)
    try:
        served.wait_for_line(f"on {label}")
        events = _signal_mid_run(served, served.url + "/", "stack-1", signal.SIGTERM)
        status = served.exit_status()
    finally:
        served.kill()
    _assert_cancelled(events[-1])
    assert status == 0, served.stderr
    _quiet(served.stderr)
    stored_status, last = _stored(url, "stack-1")
    assert stored_status is RunStatus.CANCELLED
    assert last == events[-1]


@pytest.mark.parametrize(
    ("argv", "fast_line"),
    [
        ((), "on uvicorn (h11, asyncio)"),
        (("--server", "uvicorn"), "on uvicorn (httptools, uvloop)"),
    ],
    ids=["default", "uvicorn"],
)
def test_the_default_stack_is_pure_and_uvicorn_the_fastest_installed(
    argv: tuple[str, ...], fast_line: str
) -> None:
    served = Served("--demo", *argv)
    try:
        fast = _installed("httptools", "uvloop")
        served.wait_for_line(fast_line if fast else "on uvicorn (h11, asyncio)")
        served.process.send_signal(signal.SIGINT)
        assert served.exit_status() == 0, served.stderr
    finally:
        served.kill()
