"""``MockServer``: the mock backend on a real port, for a frontend's tests.

::

    from agui_pipes.testing import MockServer

    with MockServer("scenarios.yaml") as mock:
        page.goto(f"http://localhost:3000/?agent={mock.url}")   # the frontend under test
        ...
        assert mock.requests[-1].messages[-1].role == "tool"

The server runs uvicorn with its own event loop in a background thread, so
the test around it may be synchronous or run on asyncio or trio, and the
frontend talks to it over real TCP. ``mock_app`` is the same app to mount
in your own ASGI server (``agui-pipes mock`` serves it).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ag_ui.core import RunAgentInput

from ...server._app import HEALTH_PATH
from ...server._streaming import Receive, Scope, Send
from .app import MockApp
from .faults import MockDrop
from .replay import read_recordings
from .scenarios import ScenarioFile, load_scenarios

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["MockServer", "ScenarioSource", "mock_app"]

ScenarioSource = str | Path | Mapping[str, Any] | ScenarioFile | None
"""A scenario file's path, its YAML text, a parsed mapping, a loaded file, or none."""


def _scenarios(source: ScenarioSource) -> ScenarioFile:
    if source is None:
        return ScenarioFile(())
    if isinstance(source, ScenarioFile):
        return source
    return load_scenarios(source)


class _QuietDrops(logging.Filter):
    """Keeps a planted ``drop-after`` out of the server's error log: it is no bug."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, MockDrop)


def quiet_planted_drops() -> None:
    """Install the filter on uvicorn's error logger (once)."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDrops) for f in logger.filters):
        logger.addFilter(_QuietDrops())


def mock_app(
    scenarios: ScenarioSource = None,
    *,
    replay: Sequence[str | Path] = (),
    speed: float = 1.0,
    seed: int | None = None,
    record: str | Path | None = None,
    upstream: str | None = None,
    path: str = "/",
    keepalive: float | None = 15.0,
    durable: bool = False,
) -> tuple[Starlette, MockApp]:
    """The mock's Starlette app (``POST path`` and ``GET /healthz``) and its ``MockApp``.

    ``scenarios`` as for ``MockServer``; ``replay`` recordings are served to
    requests no scenario matches; ``record`` with ``upstream`` relays every
    request to ``upstream`` and saves it under ``record``.
    ``durable`` gives every frame an SSE id and adds ``GET {path}runs/{runId}``
    (resume after ``Last-Event-ID``, or join from the start). Raises
    ``ConfigError`` for a bad scenario file, ``ReplayError`` for a bad
    recording, ``ValueError`` for bad options.
    """
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    if (record is None) != (upstream is None):
        raise ValueError("record mode needs both a directory (record=) and an upstream URL")
    if not speed > 0:
        raise ValueError(f"speed must be > 0 (inf: as fast as possible), got {speed}")
    recorder = None
    if record is not None and upstream is not None:
        from .record import Recorder

        recorder = Recorder(upstream, record)
    mock = MockApp(
        _scenarios(scenarios),
        replay=read_recordings(replay),
        speed=speed,
        seed=seed,
        keepalive=keepalive,
        recorder=recorder,
        durable=durable,
    )

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    @asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        try:
            if mock.runs is None:
                yield
            else:
                async with mock.runs.running():
                    yield
        finally:
            if recorder is not None:
                await recorder.aclose()

    routes = [Route(HEALTH_PATH, health, methods=["GET"]), Route(path, mock, methods=["POST"])]
    if durable:
        base = path if path.endswith("/") else path + "/"
        routes.append(Route(f"{base}runs/{{run_id:path}}", _Resume(mock), methods=["GET"]))
    return Starlette(routes=routes, lifespan=lifespan), mock


class _Resume:
    """``MockApp.resume`` as a plain ASGI app (a bound method would be taken for a
    request-response endpoint by Starlette)."""

    def __init__(self, mock: MockApp) -> None:
        self._mock = mock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._mock.resume(scope, receive, send)


class MockServer:
    """The mock backend served on ``host``:``port`` (0: a free one) in a background thread.

    Use it as a context manager, ``with`` or ``async with`` (or ``start()`` /
    ``stop()``). ``url`` is the
    endpoint to point the frontend at, ``requests`` the inputs it POSTed.
    ``use(scenarios)`` swaps the scenarios of a running server.
    """

    def __init__(
        self,
        scenarios: ScenarioSource = None,
        *,
        replay: Sequence[str | Path] = (),
        speed: float = 1.0,
        seed: int | None = None,
        record: str | Path | None = None,
        upstream: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/",
        keepalive: float | None = 15.0,
        durable: bool = False,
    ) -> None:
        self.app, self._mock = mock_app(
            scenarios,
            replay=replay,
            speed=speed,
            seed=seed,
            record=record,
            upstream=upstream,
            path=path,
            keepalive=keepalive,
            durable=durable,
        )
        self.host = host
        self.port = port
        self.path = path
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        """The run endpoint, e.g. ``http://127.0.0.1:54321/``."""
        return f"http://{self.host}:{self.port}{self.path}"

    @property
    def requests(self) -> list[RunAgentInput]:
        """Every valid request received so far, in order."""
        return self._mock.requests

    def use(self, scenarios: ScenarioSource) -> None:
        """Answer the next requests from ``scenarios`` instead."""
        self._mock.use(_scenarios(scenarios))

    def start(self) -> MockServer:
        import uvicorn

        quiet_planted_drops()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            loop="asyncio",
            http="h11",
            lifespan="on",
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="agui-mock"
        )
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise RuntimeError("the mock server did not start")
            time.sleep(0.01)
        self._server, self._thread, self._socket = server, thread, sock
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> MockServer:
        # Starting and stopping wait for the server's thread: off the event loop.
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.stop)
