"""CORS: a page on another origin, in real Chromium, runs an agent through ``serve`` and resumes it.

``agui-pipes serve --demo --store memory: --cors-origin http://127.0.0.1:A`` on
port B; a page served from ``http://127.0.0.1:A`` POSTs a run with ``fetch``,
reads the SSE body, then resumes the same run from the middle with a
``Last-Event-ID`` header (a non-simple header: the browser sends a preflight
first) and gets exactly the rest. A page on a third origin is refused by the
browser itself. Skipped, loudly, without a chromium binary.
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from agui_pipes.server._cors import check_origins
from tests._browser import find_chromium

CHROMIUM = find_chromium()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>app</title><p>an app on another origin</p>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def origins() -> Iterator[tuple[str, str]]:
    """Two page servers: an allowed origin and a refused one."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Page) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield tuple(f"http://127.0.0.1:{s.server_address[1]}" for s in servers)  # type: ignore[misc]
    for server in servers:
        server.shutdown()


@pytest.fixture(scope="module")
def served(origins: tuple[str, str]) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agui_pipes",
            "serve",
            "--demo",
            "--port",
            str(port),
            "--store",
            "memory:",
            "--cors-origin",
            origins[0],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise AssertionError(f"serve exited early: {process.communicate()[1].decode()}")
        try:
            if httpx.get(url + "/healthz", timeout=1).text == "ok":
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("serve did not come up")
        time.sleep(0.1)
    yield url
    process.send_signal(signal.SIGINT)
    try:
        process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


# Runs in the page: POST a run, read the SSE body, resume from the middle frame.
RUN_AND_RESUME = """
async ([server, runId]) => {
  const frames = (text) => text.split("\\n\\n").filter((f) => f.includes("data:")).map((f) => {
    const id = (f.match(/^id: ?(.*)$/m) || [])[1];
    const data = JSON.parse(f.match(/^data: ?(.*)$/m)[1]);
    return { id, data };
  });
  const body = { threadId: "cors-thread", runId, state: {}, tools: [], context: [],
    forwardedProps: {}, messages: [{ id: "u1", role: "user", content: "Porto" }] };
  const posted = await fetch(server + "/", { method: "POST",
    headers: { "content-type": "application/json", "accept": "text/event-stream" },
    body: JSON.stringify(body) });
  const all = frames(await posted.text());
  const middle = Math.floor(all.length / 2);
  const resumed = await fetch(server + "/runs/" + encodeURIComponent(runId), {
    headers: { "last-event-id": all[middle].id, "accept": "text/event-stream" } });
  const rest = frames(await resumed.text());
  return { status: posted.status, resumeStatus: resumed.status,
    contentType: posted.headers.get("content-type"),
    ids: all.map((f) => f.id), restIds: rest.map((f) => f.id),
    types: all.map((f) => f.data.type), middle };
}
"""

REFUSED = """
async (server) => {
  try {
    await fetch(server + "/", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ threadId: "t", runId: "refused", messages: [] }) });
    return "answered";
  } catch (error) {
    return "refused: " + error.name;
  }
}
"""


@pytest.mark.skipif(
    CHROMIUM is None,
    reason=(
        "CORS NOT TESTED IN A BROWSER: no chromium binary on PATH (apt-get install chromium, "
        "or AGUI_PIPES_CHROMIUM=/path/to/chrome; .ci/run installs it)"
    ),
)
def test_a_page_on_an_allowed_origin_runs_and_resumes(
    origins: tuple[str, str], served: str
) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(origins[0] + "/")
            result = page.evaluate(RUN_AND_RESUME, [served, "cors-run-1"])
            assert result["status"] == 200
            assert result["contentType"].startswith("text/event-stream")
            assert result["types"][0] == "RUN_STARTED" and result["types"][-1] == "RUN_FINISHED"
            assert result["resumeStatus"] == 200
            # Exactly the frames after the cursor, with the same ids.
            assert result["restIds"] == result["ids"][result["middle"] + 1 :]

            other = browser.new_page()
            other.goto(origins[1] + "/")
            assert other.evaluate(REFUSED, served) == "refused: TypeError"
        finally:
            browser.close()


def test_a_preflight_names_what_an_ag_ui_client_sends(
    origins: tuple[str, str], served: str
) -> None:
    allowed = httpx.options(
        served + "/runs/x",
        headers={
            "origin": origins[0],
            "access-control-request-method": "GET",
            "access-control-request-headers": "last-event-id, authorization, traceparent",
        },
    )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == origins[0]
    granted = allowed.headers["access-control-allow-headers"].lower()
    assert {"last-event-id", "authorization", "traceparent"} <= {
        h.strip() for h in granted.split(",")
    }
    refused = httpx.options(
        served + "/", headers={"origin": origins[1], "access-control-request-method": "POST"}
    )
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers


@pytest.mark.parametrize(
    "origin",
    [
        "app.example",
        "https://app.example/",
        "https://app.example/path",
        "ftp://x.example",
        "https://user@app.example",
    ],
)
def test_an_origin_that_is_not_one_fails_at_start_up(origin: str) -> None:
    with pytest.raises(ValueError, match="scheme://host"):
        check_origins([origin])


def test_serve_refuses_a_bad_origin_with_exit_2() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agui_pipes",
            "serve",
            "--demo",
            "--port",
            str(_free_port()),
            "--cors-origin",
            "https://app.example/",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "scheme://host[:port]" in done.stderr
